/**
 * Compiles one validated `workload` record into a `WorkloadModel`: tags to strings, containers with
 * their port protocols (`ports[].protocol`, else the deprecated `svc/protocol` tag, else `http`) and
 * probes (Kubernetes defaults), options per GVC location (`localOptions` merged member by member over
 * `defaultOptions`, `autoscaling` too), the request timeout, the retry policy and the canonical host.
 * Defaults, stated once here: type `serverless`; `timeoutSeconds` 5; `minScale` 1 (0 when `maxScale`
 * is 0); `maxScale` 5, or `minScale` when that is higher; retry attempts 2 with the platform's
 * `retryOn`; `terminationGracePeriodSeconds` 90. Expects a record that passed validation: it does not
 * re-check, and may throw on what validation rejects.
 */
import type {
  MeshOptionsModel,
  ContainerModel, GvcModel, OrgModel, PortModel, ProbeModel, Protocol, RetryPolicyModel, RolloutModel, Settings, WorkloadModel,
  WorkloadOptionsModel,
} from './model.js';
import { deepFreeze, frozen } from './frozen.js';
import { locationName } from './links.js';
import type { ContainerRecord, ProbeRecord, WorkloadOptionsRecord, WorkloadRecord } from './records.js';
import { tagStrings } from './tags.js';
import { canonicalHostName, parsePort, parseReplicaAmount, parseSeconds } from './values.js';

export const DEFAULT_TIMEOUT_SECONDS = 5;
export const DEFAULT_RETRY_POLICY: RetryPolicyModel = Object.freeze({
  attempts: 2,
  retryOn: Object.freeze(['connect-failure', 'refused-stream', 'unavailable', 'cancelled', 'resource-exhausted', 'retriable-status-codes']),
});
export const DEFAULT_TERMINATION_GRACE_SECONDS = 90;

/** `W-ALIAS.APP_DOMAIN`, `W-ALIAS.ORGPREFIX.APP_DOMAIN` (format `org`) or `W-GVCNAME.APP_DOMAIN` (format `legacy`). */
export function canonicalHost(workload: string, gvc: GvcModel, org: OrgModel | undefined, settings: Settings): string {
  const appDomain = canonicalHostName(settings.appDomain);
  switch (gvc.endpointNamingFormat) {
    case 'legacy':
      return `${workload}-${gvc.name}.${appDomain}`;
    case 'org':
      // Validation guarantees the prefix; without one the default form is the only sensible answer.
      if (org?.endpointPrefix) return `${workload}-${gvc.alias}.${org.endpointPrefix}.${appDomain}`;
      return `${workload}-${gvc.alias}.${appDomain}`;
    default:
      return `${workload}-${gvc.alias}.${appDomain}`;
  }
}

function compileProbe(probe: ProbeRecord | undefined, firstPort: number | undefined): ProbeModel | undefined {
  if (!probe) return undefined;
  const timing = {
    initialDelaySeconds: probe.initialDelaySeconds ?? 0,
    periodSeconds: probe.periodSeconds ?? 10,
    timeoutSeconds: probe.timeoutSeconds ?? 1,
    successThreshold: probe.successThreshold ?? 1,
    failureThreshold: probe.failureThreshold ?? 3,
  };
  const port = (p: number | undefined): { port?: number } => {
    const n = p ?? firstPort;
    return n === undefined ? {} : { port: n };
  };
  if (probe.httpGet) {
    const http = probe.httpGet;
    const httpHeaders = (http.httpHeaders ?? []).map((h) => ({ name: h.name.toLowerCase(), value: String(h.value) }));
    return deepFreeze({ kind: 'http', path: http.path ?? '/', ...port(http.port), scheme: http.scheme ?? 'HTTP', httpHeaders, ...timing });
  }
  if (probe.exec) return deepFreeze({ kind: 'exec', command: [...probe.exec.command], httpHeaders: [], ...timing });
  if (probe.grpc) return deepFreeze({ kind: 'grpc', ...port(probe.grpc.port), httpHeaders: [], ...timing });
  return deepFreeze({ kind: 'tcp', ...port(probe.tcpSocket?.port), httpHeaders: [], ...timing });
}

function compileContainer(c: ContainerRecord, tagProtocol: Protocol | undefined): ContainerModel {
  const declared = c.ports ?? (c.port === undefined ? [] : [{ number: c.port }]);
  const ports: PortModel[] = declared.map((p) => ({ number: p.number, protocol: p.protocol ?? tagProtocol ?? 'http' }));
  const firstPort = ports[0]?.number;
  const readinessProbe = compileProbe(c.readinessProbe, firstPort);
  const livenessProbe = compileProbe(c.livenessProbe, firstPort);
  return deepFreeze({
    name: c.name,
    ...(c.image === undefined ? {} : { image: c.image }),
    ...(c.command === undefined ? {} : { command: c.command }),
    args: [...(c.args ?? [])],
    env: (c.env ?? []).map((e) => ({ name: e.name, value: e.value === undefined || e.value === null ? '' : String(e.value) })),
    ports,
    ...(readinessProbe ? { readinessProbe } : {}),
    ...(livenessProbe ? { livenessProbe } : {}),
    volumes: (c.volumes ?? []).map((v) => ({ path: v.path, uri: v.uri })),
  });
}

/** `over` (a `localOptions` entry) merged member by member over `base` (`defaultOptions`). */
export function workloadOptions(base: WorkloadOptionsRecord, over: WorkloadOptionsRecord = {}): WorkloadOptionsModel {
  const autoscaling = { ...base.autoscaling, ...over.autoscaling };
  const minScale = autoscaling.minScale ?? (autoscaling.maxScale === 0 ? 0 : 1);
  return Object.freeze({
    suspend: over.suspend ?? base.suspend ?? false,
    timeoutSeconds: over.timeoutSeconds ?? base.timeoutSeconds ?? DEFAULT_TIMEOUT_SECONDS,
    minScale,
    maxScale: autoscaling.maxScale ?? Math.max(5, minScale),
    debug: over.debug ?? base.debug ?? false,
    ...(autoscaling.metric !== undefined ? { metric: autoscaling.metric } : {}),
    ...(autoscaling.target !== undefined ? { target: autoscaling.target } : {}),
    ...(autoscaling.maxConcurrency !== undefined ? { maxConcurrency: autoscaling.maxConcurrency } : {}),
    ...(autoscaling.scaleToZeroDelay !== undefined ? { scaleToZeroDelaySeconds: autoscaling.scaleToZeroDelay } : {}),
  });
}

/** A request timeout and where it comes from, as `svcproxy explain` names it. */
export interface TimeoutModel {
  readonly ms: number;
  /** `tag svc/timeoutSecondsOverride`, `spec.defaultOptions.timeoutSeconds`, `spec.localOptions[N].timeoutSeconds` or `the default`. */
  readonly source: string;
}

/**
 * The request timeout: the `svc/timeoutSecondsOverride` tag in every location, else
 * `defaultOptions.timeoutSeconds`, else 5 s; in a location whose `localOptions` entry sets
 * `timeoutSeconds` (and no tag overrides it), that entry's (the last entry naming the location wins,
 * as for every other member). `locations` holds only the locations whose timeout differs in value or
 * source from the workload's; none: absent, so the request path looks nothing up.
 */
function requestTimeouts(
  spec: NonNullable<WorkloadRecord['spec']>,
  tag: { readonly name: string; readonly seconds: number | undefined },
  gvcLocations: readonly string[],
): { readonly timeout: TimeoutModel; readonly locations?: ReadonlyMap<string, TimeoutModel> } {
  if (tag.seconds !== undefined) return { timeout: Object.freeze({ ms: tag.seconds * 1000, source: `tag ${tag.name}` }) };
  const base = spec.defaultOptions?.timeoutSeconds;
  const timeout = Object.freeze(base !== undefined
    ? { ms: base * 1000, source: 'spec.defaultOptions.timeoutSeconds' }
    : { ms: DEFAULT_TIMEOUT_SECONDS * 1000, source: 'the default' });
  const locations = new Map<string, TimeoutModel>();
  (spec.localOptions ?? []).forEach((l, i) => {
    const name = locationName(l.location) ?? l.location;
    if (l.timeoutSeconds === undefined || !gvcLocations.includes(name)) return;
    locations.set(name, Object.freeze({ ms: l.timeoutSeconds * 1000, source: `spec.localOptions[${i}].timeoutSeconds` }));
  });
  return locations.size > 0 ? { timeout, locations } : { timeout };
}

/** A workload's request timeout in `location` (the workload's own when the location is unknown), in ms. */
export function timeoutMsIn(workload: WorkloadModel, location: string | undefined): number {
  const local = workload.locationTimeouts;
  if (local === undefined || location === undefined) return workload.timeoutMs;
  return local.get(location)?.ms ?? workload.timeoutMs;
}

/** The same with where it comes from (what `svcproxy explain` prints). */
export function timeoutIn(workload: WorkloadModel, location: string | undefined): TimeoutModel {
  return (location !== undefined ? workload.locationTimeouts?.get(location) : undefined) ?? { ms: workload.timeoutMs, source: workload.timeoutSource };
}

export function compileWorkload(record: WorkloadRecord, gvc: GvcModel, org: OrgModel | undefined, settings: Settings): WorkloadModel {
  const spec = record.spec ?? {};
  const tags = tagStrings(record.tags);
  const tag = (name: string): string | undefined => tags[`${settings.vendor}/${name}`];
  const containers = (spec.containers ?? []).map((c) => compileContainer(c, tag('protocol') as Protocol | undefined));

  const base = spec.defaultOptions ?? {};
  const locals = new Map((spec.localOptions ?? []).map((l) => [locationName(l.location) ?? l.location, l]));
  const locationOptions = new Map(gvc.locations.map((loc) => [loc, workloadOptions(base, locals.get(loc))]));

  const override = tag('timeoutSecondsOverride');
  const timeouts = requestTimeouts(spec, { name: `${settings.vendor}/timeoutSecondsOverride`, seconds: override === undefined ? undefined : parseSeconds(override) }, gvc.locations);
  const retry = spec.requestRetryPolicy;
  const primaryPort = containers[0]?.ports[0];

  return Object.freeze({
    key: `${gvc.name}/${record.name}`,
    name: record.name,
    gvc: gvc.name,
    type: spec.type ?? 'serverless',
    tags,
    containers: Object.freeze(containers),
    defaultOptions: workloadOptions(base),
    locationOptions,
    globallySuspended: base.suspend === true || base.autoscaling?.maxScale === 0,
    timeoutMs: timeouts.timeout.ms,
    timeoutSource: timeouts.timeout.source,
    ...(timeouts.locations ? { locationTimeouts: timeouts.locations } : {}),
    replicaDirect: spec.loadBalancer?.replicaDirect === true,
    publishNotReadyAddresses: tag('publishNotReadyAddresses') === 'true',
    retryPolicy: retry
      ? Object.freeze({
        attempts: retry.attempts ?? DEFAULT_RETRY_POLICY.attempts,
        retryOn: Object.freeze(retry.retryOn ? retry.retryOn.map(String) : [...DEFAULT_RETRY_POLICY.retryOn]),
      })
      : DEFAULT_RETRY_POLICY,
    ...(spec.firewallConfig ? { firewallConfig: frozen(spec.firewallConfig) } : {}),
    ...(spec.sidecar?.envoy ? { sidecarEnvoy: frozen(spec.sidecar.envoy) } : {}),
    terminationGracePeriodSeconds: spec.rolloutOptions?.terminationGracePeriodSeconds ?? DEFAULT_TERMINATION_GRACE_SECONDS,
    canonicalHost: canonicalHost(record.name, gvc, org, settings),
    ...(primaryPort ? { primaryPort } : {}),
    mesh: meshOptions(tags, settings.vendor),
    ...(spec.rolloutOptions ? { rollout: compileRollout(spec.rolloutOptions) } : {}),
  });
}

/** `spec.rolloutOptions` with its counts read as numbers (`'1'` is 1, as the platform reads it). */
function compileRollout(rollout: NonNullable<WorkloadRecord['spec']>['rolloutOptions'] & object): RolloutModel {
  const surge = parseReplicaAmount(rollout.maxSurgeReplicas);
  const unavailable = parseReplicaAmount(rollout.maxUnavailableReplicas);
  return Object.freeze({
    ...(surge === undefined ? {} : { maxSurgeReplicas: surge }),
    ...(unavailable === undefined ? {} : { maxUnavailableReplicas: unavailable }),
    ...(rollout.minReadySeconds === undefined ? {} : { minReadySeconds: rollout.minReadySeconds }),
    ...(rollout.scalingPolicy === undefined ? {} : { scalingPolicy: rollout.scalingPolicy }),
  });
}

/**
 * `svc/ignore: true` (the platform's scheduler ignores the workload): `up` starts no replica of it and
 * no host name routes to it. Read from the compiled tags, so the vendor prefix follows the settings.
 */
export function isIgnored(workload: Pick<WorkloadModel, 'tags'>, vendor: string): boolean {
  return workload.tags[`${vendor}/ignore`] === 'true';
}

/** The mesh tags of a workload (`tags` as strings, full names with the vendor prefix). */
export function meshOptions(tags: Readonly<Record<string, string>>, vendor: string): MeshOptionsModel {
  const tag = (name: string): string | undefined => tags[`${vendor}/${name}`];
  const inbound = parsePort(tag('disableServiceMeshInboundPort') ?? '');
  const outbound = parsePort(tag('disableServiceMeshOutboundPort') ?? '');
  return Object.freeze({
    bypassOutbound: tag('bypassProxyOutbound') === 'true',
    ...(inbound === undefined ? {} : { inboundDisabledPort: inbound }),
    ...(outbound === undefined ? {} : { outboundDisabledPort: outbound }),
    discoverCrossGvcReplicas: tag('discoverCrossGvcReplicas') === 'true',
  });
}
