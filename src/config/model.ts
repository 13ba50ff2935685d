/**
 * The compiled, immutable configuration every other module reads: records parsed, validated,
 * defaulted and resolved (links to names, tags to strings, durations to milliseconds, regexes
 * compiled, host names lower-cased). A snapshot is built once per (re)load by `compile()` and
 * never mutated afterwards; per-request code only reads it. Runtime state (replica readiness,
 * outstanding requests) lives elsewhere (`src/routing/replicas.ts`).
 */

/** How the proxy talks to a container port. */
export type Protocol = 'http' | 'http2' | 'grpc' | 'tcp';

export type NamingFormat = 'default' | 'legacy' | 'org';

/** Process-wide settings that are flags, not records (DESIGN §2). */
export interface Settings {
  /** Tag/header/env prefix: `svc` gives `svc/…`, `x-svc-…`, `SVC_…`. */
  readonly vendor: string;
  readonly appDomain: string;
  readonly directDomain: string;
  readonly internalDomain: string;
  /**
   * `--gvc`: the GVC of records that name none (a workload as `cpln apply --gvc` sends it); absent:
   * the records' only GVC (src/config/applied.ts).
   */
  readonly gvc?: string;
}

export interface OrgModel {
  readonly name: string;
  /** `status.endpointPrefix`, used by the `org` naming format. */
  readonly endpointPrefix?: string;
  readonly tracing?: TracingModel;
}

export interface LocationModel {
  readonly name: string;
  readonly provider: string;
  readonly region: string;
  /** `status.latencyMs`: pins the measured latency of this location. */
  readonly latencyMs?: number;
}

/** `spec.staticPlacement.locationOptions[]` of a GVC, keyed by location name. */
export interface LocationOptionModel {
  readonly routingTier?: number;
  readonly latencyOffsetMs: number;
  readonly latencyToleranceMs?: number;
}

export interface TracingModel {
  /** Percentage, 0–100. */
  readonly sampling: number;
  readonly customTags: Readonly<Record<string, string>>;
  readonly otelEndpoint?: string;
  readonly controlplane: boolean;
  /** The raw `spec.tracing` object, for anything not compiled above. */
  readonly raw: unknown;
}

/** `spec.sidecar.envoy` (GVC or workload), kept raw here; the filters compile what they use. */
export type SidecarEnvoyModel = Readonly<Record<string, unknown>>;

export interface GvcModel {
  readonly name: string;
  /** 13 lowercase alphanumerics. */
  readonly alias: string;
  readonly endpointNamingFormat: NamingFormat;
  /** Location names in the order of `spec.staticPlacement.locationLinks`. */
  readonly locations: readonly string[];
  readonly locationOptions: ReadonlyMap<string, LocationOptionModel>;
  /** Workload name of `spec.aliasWorkloadLink`, when set. */
  readonly aliasWorkload?: string;
  readonly tracing?: TracingModel;
  /** `spec.loadBalancer.trustedProxies` (0 when unset). */
  readonly trustedProxies: number;
  readonly sidecarEnvoy?: SidecarEnvoyModel;
  readonly tags: Readonly<Record<string, string>>;
}

export interface PortModel {
  readonly number: number;
  readonly protocol: Protocol;
}

export interface ProbeModel {
  readonly kind: 'http' | 'tcp' | 'exec' | 'grpc';
  /** http: path (default `/`); tcp/http/grpc: port (default: the container's first port). */
  readonly path?: string;
  readonly port?: number;
  readonly scheme?: 'HTTP' | 'HTTPS';
  readonly httpHeaders: readonly { readonly name: string; readonly value: string }[];
  readonly command?: readonly string[];
  readonly initialDelaySeconds: number;
  readonly periodSeconds: number;
  readonly timeoutSeconds: number;
  readonly successThreshold: number;
  readonly failureThreshold: number;
}

export interface ContainerModel {
  readonly name: string;
  readonly image?: string;
  readonly command?: string;
  readonly args: readonly string[];
  readonly env: readonly { readonly name: string; readonly value: string }[];
  /** Declared ports; the protocol is `ports[].protocol`, else the `svc/protocol` tag, else http. */
  readonly ports: readonly PortModel[];
  readonly readinessProbe?: ProbeModel;
  readonly livenessProbe?: ProbeModel;
  /** `volumes[]`: where each is mounted and from what; `up` mounts none and says so. */
  readonly volumes: readonly { readonly path: string; readonly uri: string }[];
}

/** `defaultOptions`, or one `localOptions[]` entry merged over it. */
export interface WorkloadOptionsModel {
  readonly suspend: boolean;
  readonly timeoutSeconds: number;
  readonly minScale: number;
  readonly maxScale: number;
  readonly debug: boolean;
  /** `autoscaling.metric`, `target`, `maxConcurrency` (0: no cap) and `scaleToZeroDelay` (seconds), as written. */
  readonly metric?: string;
  readonly target?: number;
  readonly maxConcurrency?: number;
  readonly scaleToZeroDelaySeconds?: number;
}

export interface RetryPolicyModel {
  readonly attempts: number;
  readonly retryOn: readonly string[];
}

export interface WorkloadModel {
  /** `gvc/name`: the key of every per-workload map. */
  readonly key: string;
  readonly name: string;
  readonly gvc: string;
  /** `serverless`, `standard`, `stateful`, `cron`; serverless targets get the canonical Host. */
  readonly type: string;
  /** Every tag with its value as a string (`true` and `"true"` agree). */
  readonly tags: Readonly<Record<string, string>>;
  readonly containers: readonly ContainerModel[];
  readonly defaultOptions: WorkloadOptionsModel;
  /** Options per location: `localOptions` merged over `defaultOptions` (every GVC location present). */
  readonly locationOptions: ReadonlyMap<string, WorkloadOptionsModel>;
  /** `suspend: true` or `maxScale: 0` in `defaultOptions`. */
  readonly globallySuspended: boolean;
  /** The request timeout: `svc/timeoutSecondsOverride`, else `timeoutSeconds`, else 5 s. */
  readonly timeoutMs: number;
  /**
   * Where `timeoutMs` comes from, as `svcproxy explain` says it: `tag svc/timeoutSecondsOverride`,
   * `spec.defaultOptions.timeoutSeconds` or `the default`.
   */
  readonly timeoutSource: string;
  /**
   * Locations whose `localOptions[].timeoutSeconds` sets the timeout there (absent: none does, or the
   * tag overrides it everywhere). The data plane reads it through `timeoutMsIn` (compile-workload.ts).
   */
  readonly locationTimeouts?: ReadonlyMap<string, { readonly ms: number; readonly source: string }>;
  readonly replicaDirect: boolean;
  /** `svc/publishNotReadyAddresses`. */
  readonly publishNotReadyAddresses: boolean;
  readonly retryPolicy: RetryPolicyModel;
  /** `spec.firewallConfig`, raw; the firewall compiles it. */
  readonly firewallConfig?: Readonly<Record<string, unknown>>;
  readonly sidecarEnvoy?: SidecarEnvoyModel;
  readonly terminationGracePeriodSeconds: number;
  /** `W-ALIAS.APP_DOMAIN` (or the org / legacy form): the host serverless targets receive. */
  readonly canonicalHost: string;
  /** First port of the first container: where canonical endpoints route. */
  readonly primaryPort?: PortModel;
  /** The mesh tags (DESIGN §9). */
  readonly mesh: MeshOptionsModel;
  /** `spec.rolloutOptions` (src/local/rollout.ts reads it); absent: the defaults. */
  readonly rollout?: RolloutModel;
}

/**
 * `spec.rolloutOptions`: how `up` replaces replicas when what they run changes. A count is a number
 * (the platform's `'1'` read as 1), a percentage the `N%` string.
 */
export interface RolloutModel {
  readonly maxSurgeReplicas?: number | `${number}%`;
  readonly maxUnavailableReplicas?: number | `${number}%`;
  readonly minReadySeconds?: number;
  readonly scalingPolicy?: string;
}

/** A workload's mesh tags, parsed. */
export interface MeshOptionsModel {
  /** `svc/bypassProxyOutbound`: its processes get no proxy variables; outbound goes direct. */
  readonly bypassOutbound: boolean;
  /** `svc/disableServiceMeshInboundPort`: that container port is reached without the sidecar (no mTLS, no filters). */
  readonly inboundDisabledPort?: number;
  /** `svc/disableServiceMeshOutboundPort`: its calls to that port skip the mesh (no mTLS, no caller identity). */
  readonly outboundDisabledPort?: number;
  /** `svc/discoverCrossGvcReplicas`: replica-direct internal names of other GVCs resolve for its calls. */
  readonly discoverCrossGvcReplicas: boolean;
}

export interface DomainRouteModel {
  readonly prefix?: string;
  readonly regex?: RegExp;
  readonly replacePrefix?: string;
  /** Workload key `gvc/name`. */
  readonly workload: string;
  readonly port?: number;
  readonly replica?: number;
  readonly setHeaders: readonly (readonly [name: string, value: string])[];
}

export interface DomainPortModel {
  readonly number: number;
  /**
   * Routes in match order: longest prefix first (`/` last) when every route is a prefix route;
   * written order when any route is a regex.
   */
  readonly routes: readonly DomainRouteModel[];
}

export interface DomainModel {
  /** Lower-cased host, no trailing dot. */
  readonly host: string;
  readonly gvc?: string;
  readonly ports: readonly DomainPortModel[];
}

/** A replica listed in a `deployment` record (runs outside `svcproxy up`). */
export interface DeploymentReplicaModel {
  readonly name: string;
  readonly index: number;
  readonly location: string;
  /** The app, `host:port`. */
  readonly address: string;
  /** The replica's sidecar, `host:port`; absent: dialled through an in-process sidecar. */
  readonly sidecar?: string;
  /** The replica's sidecar's mTLS listener (`--mesh-inbound`), `host:port`: mesh callers dial it. */
  readonly mesh?: string;
  /** `false` forces not-ready; otherwise readiness is probed. */
  readonly forcedNotReady: boolean;
}

export interface Snapshot {
  readonly settings: Settings;
  readonly org?: OrgModel;
  readonly locations: ReadonlyMap<string, LocationModel>;
  readonly gvcs: ReadonlyMap<string, GvcModel>;
  /** Keyed by `gvc/name`. */
  readonly workloads: ReadonlyMap<string, WorkloadModel>;
  /** Keyed by lower-cased host. */
  readonly domains: ReadonlyMap<string, DomainModel>;
  /** Workload key → replicas listed in deployment records. */
  readonly deployments: ReadonlyMap<string, readonly DeploymentReplicaModel[]>;
  /** The records as read (for `/config`, secrets redacted there). */
  readonly records: readonly Readonly<Record<string, unknown>>[];
  /** Non-fatal findings: unknown `svc/` tags, workloads with no external firewall, ... */
  readonly warnings: readonly string[];
  /** Increases with each successful load. */
  readonly generation: number;
}
