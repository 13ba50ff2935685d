/**
 * Test fixtures: `buildSnapshot` makes a `Snapshot` (src/config/model.ts) by hand, with a sensible
 * default for every field, so a test states only what it is about:
 *
 *   const snap = buildSnapshot({
 *     gvcs: [{ name: 'shop', alias: 'abcdefghijklm', locations: ['aws-us-west-2', 'gcp-us-east1'] }],
 *     workloads: [{ name: 'my-api-v2', ports: [8080, { number: 9090, protocol: 'grpc' }] }],
 *     domains: [{ host: 'api.example.com', routes: [{ prefix: '/v1', workload: 'my-api-v2' }] }],
 *   });
 *
 * Defaults: settings as the CLI's defaults (`svc`, `app.localhost`, `direct.localhost`,
 * `internal.localhost`); org `acme` without endpoint prefix; one GVC `demo` in `aws-us-west-2`
 * when `gvcs` is omitted; a GVC alias derived deterministically from its name; workloads in the
 * first GVC, `standard`, one container `main` on port 8080 (http), minScale 1, maxScale 3, 5 s
 * timeout; location records for every location a GVC names (`provider-region` split on the first
 * `-`). Derived fields (`key`, `globallySuspended`, `timeoutMs`, `canonicalHost`, `primaryPort`,
 * per-location options, domain route order) are computed as the config compiler does. Workload
 * references (`aliasWorkload`, route `workload`, deployment keys) take `name` or `gvc/name`.
 * Objects are frozen, so code that mutates a snapshot fails its tests.
 */
import type {
  ContainerModel,
  DeploymentReplicaModel,
  DomainModel,
  DomainPortModel,
  DomainRouteModel,
  GvcModel,
  LocationModel,
  LocationOptionModel,
  NamingFormat,
  OrgModel,
  PortModel,
  ProbeModel,
  Protocol,
  RetryPolicyModel,
  Settings,
  SidecarEnvoyModel,
  Snapshot,
  TracingModel,
  WorkloadModel,
  WorkloadOptionsModel,
} from '../../src/config/model.js';
import type { HostPort, Replica } from '../../src/routing/replicas.js';
import { canonicalHostFor } from '../../src/routing/hosts.js';
import { meshOptions } from '../../src/config/compile-workload.js';

export const DEFAULT_SETTINGS: Settings = Object.freeze({
  vendor: 'svc',
  appDomain: 'app.localhost',
  directDomain: 'direct.localhost',
  internalDomain: 'internal.localhost',
});

export const DEFAULT_LOCATION = 'aws-us-west-2';

export type PortInput = number | { number: number; protocol?: Protocol };

export interface ContainerInput {
  name?: string;
  image?: string;
  command?: string;
  args?: string[];
  env?: Record<string, string>;
  ports?: PortInput[];
  readinessProbe?: ProbeModel;
  livenessProbe?: ProbeModel;
}

export interface GvcInput {
  name: string;
  alias?: string;
  endpointNamingFormat?: NamingFormat;
  locations?: string[];
  locationOptions?: Record<string, Partial<LocationOptionModel>>;
  aliasWorkload?: string;
  tracing?: TracingModel;
  trustedProxies?: number;
  sidecarEnvoy?: SidecarEnvoyModel;
  tags?: Record<string, string>;
}

export interface WorkloadInput {
  name: string;
  /** Default: the first GVC. */
  gvc?: string;
  type?: string;
  tags?: Record<string, string>;
  /** Default: one container `main` with `ports` (default `[8080]`). */
  containers?: ContainerInput[];
  /** Shorthand for the ports of the default container. */
  ports?: PortInput[];
  defaultOptions?: Partial<WorkloadOptionsModel>;
  /** Per-location overrides merged over `defaultOptions`. */
  localOptions?: Record<string, Partial<WorkloadOptionsModel>>;
  replicaDirect?: boolean;
  /** Default: the `svc/publishNotReadyAddresses` tag. */
  publishNotReadyAddresses?: boolean;
  retryPolicy?: Partial<RetryPolicyModel>;
  firewallConfig?: Record<string, unknown>;
  sidecarEnvoy?: SidecarEnvoyModel;
  terminationGracePeriodSeconds?: number;
  /** Default: `svc/timeoutSecondsOverride`, else `timeoutSeconds`. */
  timeoutMs?: number;
}

export interface RouteInput {
  prefix?: string;
  regex?: string | RegExp;
  replacePrefix?: string;
  /** `name` (in the domain's GVC, else the first GVC) or `gvc/name`. */
  workload: string;
  port?: number;
  replica?: number;
  setHeaders?: Record<string, string> | [string, string][];
}

export interface DomainInput {
  host: string;
  gvc?: string;
  /** Shorthand for one port 443 with these routes. */
  routes?: RouteInput[];
  ports?: { number?: number; routes: RouteInput[] }[];
}

export interface DeploymentReplicaInput {
  location?: string;
  name?: string;
  index?: number;
  address?: string;
  sidecar?: string;
  forcedNotReady?: boolean;
}

export interface SnapshotInput {
  settings?: Partial<Settings>;
  /** `null`: no org record. */
  org?: Partial<OrgModel> | null;
  /** Extra or overriding location records; every GVC location gets one anyway. */
  locations?: (string | (Partial<LocationModel> & { name: string }))[];
  gvcs?: GvcInput[];
  workloads?: WorkloadInput[];
  domains?: DomainInput[];
  /** Workload (`name` or `gvc/name`) → its replicas in deployment records. */
  deployments?: Record<string, DeploymentReplicaInput[]>;
  records?: Record<string, unknown>[];
  warnings?: string[];
  generation?: number;
}

const ALIAS_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789';

/** A deterministic 13-character alias for a GVC name (FNV-1a, re-hashed per character). */
export function aliasFor(name: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x01000193) >>> 0;
  let out = '';
  for (let i = 0; i < 13; i++) {
    h = Math.imul(h ^ (i + 0x9e), 0x01000193) >>> 0;
    out += ALIAS_CHARS[h % ALIAS_CHARS.length];
  }
  return out;
}

function port(p: PortInput): PortModel {
  return Object.freeze(typeof p === 'number' ? { number: p, protocol: 'http' } : { number: p.number, protocol: p.protocol ?? 'http' });
}

function container(c: ContainerInput, i: number): ContainerModel {
  return Object.freeze({
    name: c.name ?? (i === 0 ? 'main' : `c${i}`),
    image: c.image,
    command: c.command,
    args: c.args ?? [],
    env: Object.entries(c.env ?? {}).map(([name, value]) => ({ name, value })),
    ports: (c.ports ?? []).map(port),
    volumes: [],
    readinessProbe: c.readinessProbe,
    livenessProbe: c.livenessProbe,
  });
}

function locationRecord(name: string): LocationModel {
  const dash = name.indexOf('-');
  return {
    name,
    provider: dash > 0 ? name.slice(0, dash) : name,
    region: dash > 0 ? name.slice(dash + 1) : name,
  };
}

const DEFAULT_OPTIONS: WorkloadOptionsModel = Object.freeze({
  suspend: false,
  timeoutSeconds: 5,
  minScale: 1,
  maxScale: 3,
  debug: false,
});

export function buildSnapshot(input: SnapshotInput = {}): Snapshot {
  const settings: Settings = Object.freeze({ ...DEFAULT_SETTINGS, ...input.settings });
  const org: OrgModel | undefined =
    input.org === null ? undefined : Object.freeze({ name: 'acme', ...input.org });

  const gvcInputs = input.gvcs ?? [{ name: 'demo' }];
  const firstGvc = gvcInputs[0]?.name ?? 'demo';
  const keyOf = (ref: string, gvc: string = firstGvc): string => (ref.includes('/') ? ref : `${gvc}/${ref}`);

  const gvcs = new Map<string, GvcModel>();
  const locations = new Map<string, LocationModel>();
  for (const g of gvcInputs) {
    const names = g.locations ?? [DEFAULT_LOCATION];
    for (const l of names) if (!locations.has(l)) locations.set(l, locationRecord(l));
    const locationOptions = new Map<string, LocationOptionModel>();
    for (const [l, o] of Object.entries(g.locationOptions ?? {})) {
      locationOptions.set(l, Object.freeze({ latencyOffsetMs: 0, ...o }));
    }
    gvcs.set(
      g.name,
      Object.freeze({
        name: g.name,
        alias: g.alias ?? aliasFor(g.name),
        endpointNamingFormat: g.endpointNamingFormat ?? 'default',
        locations: Object.freeze([...names]),
        locationOptions,
        aliasWorkload: g.aliasWorkload,
        tracing: g.tracing,
        trustedProxies: g.trustedProxies ?? 0,
        sidecarEnvoy: g.sidecarEnvoy,
        tags: Object.freeze({ ...g.tags }),
      }),
    );
  }
  for (const l of input.locations ?? []) {
    const record = typeof l === 'string' ? locationRecord(l) : { ...locationRecord(l.name), ...l };
    locations.set(record.name, Object.freeze(record));
  }

  const workloads = new Map<string, WorkloadModel>();
  for (const w of input.workloads ?? []) {
    const gvcName = w.gvc ?? firstGvc;
    const gvc = gvcs.get(gvcName);
    if (!gvc) throw new Error(`buildSnapshot: workload ${w.name} names unknown gvc ${gvcName}`);
    const vendor = settings.vendor;
    const tags = Object.freeze({ ...w.tags });
    const containers = (w.containers ?? [{ ports: w.ports ?? [8080] }]).map(container);
    const defaultOptions: WorkloadOptionsModel = Object.freeze({ ...DEFAULT_OPTIONS, ...w.defaultOptions });
    const locationOptions = new Map<string, WorkloadOptionsModel>();
    for (const l of gvc.locations) {
      locationOptions.set(l, Object.freeze({ ...defaultOptions, ...w.localOptions?.[l] }));
    }
    const override = tags[`${vendor}/timeoutSecondsOverride`];
    const primaryPort = containers.find((c) => c.ports.length > 0)?.ports[0];
    workloads.set(
      `${gvcName}/${w.name}`,
      Object.freeze({
        key: `${gvcName}/${w.name}`,
        name: w.name,
        gvc: gvcName,
        mesh: meshOptions(tags, vendor),
        type: w.type ?? 'standard',
        tags,
        containers: Object.freeze(containers),
        defaultOptions,
        locationOptions,
        globallySuspended: defaultOptions.suspend || defaultOptions.maxScale === 0,
        timeoutMs: w.timeoutMs ?? (override !== undefined ? Number(override) : defaultOptions.timeoutSeconds) * 1000,
        timeoutSource: w.timeoutMs !== undefined ? 'test' : override !== undefined ? `tag ${vendor}/timeoutSecondsOverride` : 'spec.defaultOptions.timeoutSeconds',
        replicaDirect: w.replicaDirect ?? false,
        publishNotReadyAddresses: w.publishNotReadyAddresses ?? tags[`${vendor}/publishNotReadyAddresses`] === 'true',
        retryPolicy: Object.freeze({
          attempts: w.retryPolicy?.attempts ?? 2,
          retryOn: w.retryPolicy?.retryOn ?? [
            'connect-failure',
            'refused-stream',
            'unavailable',
            'cancelled',
            'resource-exhausted',
            'retriable-status-codes',
          ],
        }),
        firewallConfig: w.firewallConfig,
        sidecarEnvoy: w.sidecarEnvoy,
        terminationGracePeriodSeconds: w.terminationGracePeriodSeconds ?? 90,
        canonicalHost: canonicalHostFor(settings, org, gvc, w.name),
        primaryPort,
      }),
    );
  }

  const domains = new Map<string, DomainModel>();
  for (const d of input.domains ?? []) {
    const host = d.host.toLowerCase().replace(/\.$/, '');
    const gvc = d.gvc ?? firstGvc;
    const portInputs = d.ports ?? [{ number: 443, routes: d.routes ?? [] }];
    const ports: DomainPortModel[] = portInputs.map((p) =>
      Object.freeze({ number: p.number ?? 443, routes: Object.freeze(orderRoutes(p.routes.map((r) => route(r, gvc, keyOf)))) }),
    );
    domains.set(host, Object.freeze({ host, gvc: d.gvc, ports: Object.freeze(ports) }));
  }

  const deployments = new Map<string, readonly DeploymentReplicaModel[]>();
  for (const [ref, list] of Object.entries(input.deployments ?? {})) {
    const key = keyOf(ref);
    const name = key.slice(key.indexOf('/') + 1);
    const gvcLocations = gvcs.get(key.slice(0, key.indexOf('/')))?.locations ?? [DEFAULT_LOCATION];
    const perLocation = new Map<string, number>();
    deployments.set(
      key,
      Object.freeze(
        list.map((r, i) => {
          const location = r.location ?? gvcLocations[0]!;
          const position = perLocation.get(location) ?? 0;
          perLocation.set(location, position + 1);
          const index = r.index ?? position;
          return Object.freeze({
            name: r.name ?? `${name}-${index}`,
            index,
            location,
            address: r.address ?? `127.0.0.1:${10000 + i}`,
            sidecar: r.sidecar,
            forcedNotReady: r.forcedNotReady ?? false,
          });
        }),
      ),
    );
  }

  return Object.freeze({
    settings,
    org,
    locations,
    gvcs,
    workloads,
    domains,
    deployments,
    records: Object.freeze(input.records ?? []),
    warnings: Object.freeze(input.warnings ?? []),
    generation: input.generation ?? 1,
  });
}

function route(r: RouteInput, gvc: string, keyOf: (ref: string, gvc?: string) => string): DomainRouteModel {
  const setHeaders = Array.isArray(r.setHeaders) ? r.setHeaders : Object.entries(r.setHeaders ?? {});
  return Object.freeze({
    prefix: r.regex === undefined ? (r.prefix ?? '/') : undefined,
    // Anchored as the config compiler stores it (a RegExp passed in is used as given).
    regex: typeof r.regex === 'string' ? new RegExp(`^(?:${r.regex})$`) : r.regex,
    replacePrefix: r.replacePrefix,
    workload: keyOf(r.workload, gvc),
    port: r.port,
    replica: r.replica,
    setHeaders: Object.freeze(setHeaders.map(([n, v]) => Object.freeze([n.toLowerCase(), v] as const))),
  });
}

/** Match order, as the config compiler stores it: longest prefix first, unless any route is a regex. */
function orderRoutes(routes: DomainRouteModel[]): DomainRouteModel[] {
  if (routes.some((r) => r.regex !== undefined)) return routes;
  return [...routes].sort((a, b) => (b.prefix ?? '/').length - (a.prefix ?? '/').length);
}

/** The workload model for `name` or `gvc/name`; throws when absent (a broken test, not a case). */
export function workloadOf(snapshot: Snapshot, ref: string): WorkloadModel {
  const key = ref.includes('/') ? ref : `${snapshot.gvcs.keys().next().value}/${ref}`;
  const w = snapshot.workloads.get(key);
  if (!w) throw new Error(`workloadOf: no workload ${key}`);
  return w;
}

export interface ReplicaInput {
  /** Workload key `gvc/name`. */
  workload?: string;
  location?: string;
  index?: number;
  name?: string;
  ready?: boolean;
  outstanding?: number;
  ejectedUntil?: number;
  /** Container port → where it listens; default `8080 → 127.0.0.1:(20000 + index)`. */
  ports?: Record<number, HostPort>;
  sidecar?: HostPort;
}

/** A mutable `Replica` for the registry and the balancer; ready, idle and not ejected by default. */
export function buildReplica(r: ReplicaInput = {}): Replica {
  const workload = r.workload ?? 'demo/app';
  const index = r.index ?? 0;
  const ports = new Map<number, HostPort>(
    Object.entries(r.ports ?? { 8080: { host: '127.0.0.1', port: 20000 + index } }).map(([k, v]) => [Number(k), v]),
  );
  return {
    workload,
    location: r.location ?? DEFAULT_LOCATION,
    name: r.name ?? `${workload.slice(workload.indexOf('/') + 1)}-${index}`,
    index,
    ports,
    sidecar: r.sidecar,
    ready: r.ready ?? true,
    outstanding: r.outstanding ?? 0,
    ejectedUntil: r.ejectedUntil ?? 0,
  };
}
