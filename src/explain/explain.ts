/**
 * `svcproxy explain`: how the data plane would treat one request, decided without sending anything
 * by the data plane's own code. The RouteTable is built as DataPlane builds it (buildRouteTable with
 * the default filter factories: their clients connect on first use only, and nothing here uses
 * them); the host is resolved by `resolveHost`, routed by `routeTarget`, the location chosen by
 * `locateRoute` (geo routing's `geoCandidates`/`chooseLocation` inside), the hop by `replicaHop`, the
 * debug answers by `debugAsked`, the firewalls by their compiled checks, and each sidecar filter by
 * its own matchers (filters.ts). What explain cannot know it states instead of guessing: replicas'
 * readiness and latencies are not probed (a listed replica counts as ready; a location's latency is
 * its pinned `latencyMs`, 0 for `--location`, else unknown), and services' answers are not asked.
 * Steps run in the ingress's order (DESIGN §5) and the first refusal is the verdict. Never throws
 * for a request; the caller parsed it (request.ts).
 */
import pino from 'pino';
import type { Snapshot, WorkloadModel } from '../config/model.js';
import { timeoutIn } from '../config/compile-workload.js';
import { resolveHost, type GeoCandidate, type HostTarget, type Listener } from '../routing/index.js';
import { matchDomainRoute } from '../routing/domain-routes.js';
import { buildRouteTable, debugAsked, locateRoute, protocolOf, replicaHop, routeTarget, type LocationReason, type Route } from '../proxy/routes.js';
import { defaultFactories } from '../proxy/policy.js';
import { MAX_URL_LENGTH, normalizePath } from '../proxy/path.js';
import { clientAddress } from '../proxy/headers.js';
import { EMPTY_CHAIN } from '../proxy/filters.js';
import { Metrics } from '../admin/metrics.js';
import { ERRORS, SharedResources, type ErrorCode } from '../filter/index.js';
import { externalFirewall, internalFirewall } from '../firewall/index.js';
import { systemClock } from '../deps.js';
import { compileRetryPolicy } from '../retry/policy.js';
import { BACKOFF_CAP_MS, backoffMs } from '../retry/backoff.js';
import { compileTracingPlan } from '../tracing/config.js';
import { extract } from '../tracing/propagation.js';
import { explainFilter, type FilterExplanation } from './filters.js';
import { knownReplicas, listedReplicas, type KnownReplica } from './replicas.js';
import { notRunNotes } from '../local/not-run.js';
import type { ExplainRequest } from './request.js';

export interface ExplainOptions {
  /** The router's own location (`--location`): 0 ms away, as an ingress there counts it. */
  readonly location?: string;
}

export interface Verdict {
  /** True when the request would be forwarded to a replica (the services' answers aside). */
  readonly routes: boolean;
  /** The status the proxy would answer itself when it refuses; absent when it routes. */
  readonly status?: number;
  readonly code?: ErrorCode;
  readonly reason: string;
}

export interface CandidateExplanation {
  readonly name: string;
  readonly available: boolean;
  readonly tier: number | null;
  readonly latencyMs: number | null;
  /** `pinned`: the location's `status.latencyMs`; `own`: `--location`; `unknown`: not probed. */
  readonly latencySource: 'pinned' | 'own' | 'unknown';
  readonly offsetMs: number;
  readonly toleranceMs: number | null;
  readonly suspended: boolean;
  readonly replicas: number;
}

export interface ReplicaExplanation extends KnownReplica {
  /** How the request reaches it (src/proxy/mesh-peer.ts Hop): `app` runs the sidecar filters in the router. */
  readonly hop: 'mesh' | 'sidecar' | 'app' | 'bare';
  readonly ready: 'unknown' | false;
}

export interface Explanation {
  readonly request: {
    readonly method: string;
    readonly url: string;
    readonly host: string;
    readonly path: string | null;
    readonly query: string;
    readonly listenerPort: number;
    readonly from: string;
  };
  readonly verdict: Verdict;
  readonly host: { readonly kind: HostTarget['kind']; readonly listener: Listener; readonly note?: string } | null;
  readonly route: {
    readonly workload: string;
    readonly gvc: string;
    readonly name: string;
    readonly port: number | null;
    readonly protocol: string;
    readonly upstreamPath: string;
    readonly fixedLocation: string | null;
    readonly fixedReplica: number | null;
    readonly geo: boolean;
    readonly rule?: { readonly domain: string; readonly domainPort: number; readonly prefix?: string; readonly regex?: string; readonly replacePrefix?: string; readonly workloadLink: string; readonly port?: number; readonly replica?: number; readonly setHeaders: readonly (readonly [string, string])[] };
  } | null;
  readonly firewall: {
    readonly kind: 'external' | 'internal';
    readonly allowed: boolean;
    readonly reason?: string;
    readonly clientAddress: string;
    readonly trustedProxies: number;
    readonly header: string;
    readonly rules: string;
  } | null;
  readonly suspended: boolean;
  readonly location: {
    readonly reason: LocationReason | null;
    readonly chosen: string | null;
    readonly candidates: readonly CandidateExplanation[];
    readonly latencies: string;
  } | null;
  readonly replicas: readonly ReplicaExplanation[];
  readonly replica: { readonly fixed: number | null; readonly readiness: string } | null;
  readonly filters: {
    readonly ingress: readonly string[];
    /** Where the sidecar filters run: `router` (in this process), `replica-sidecar`, or `none` (a bare port). */
    readonly runsAt: 'router' | 'replica-sidecar' | 'none';
    readonly sidecar: readonly FilterExplanation[];
  } | null;
  readonly timeoutMs: number | null;
  /**
   * Where the timeout comes from: `tag svc/timeoutSecondsOverride`, `spec.defaultOptions.timeoutSeconds`,
   * `spec.localOptions[N].timeoutSeconds` (the chosen location's) or `the default`.
   */
  readonly timeoutSource: string | null;
  readonly retry: {
    readonly attempts: number;
    readonly retryOn: readonly string[];
    readonly perTryTimeoutMs: null;
    readonly backoffCeilingsMs: readonly number[];
    readonly note: string;
  } | null;
  readonly debug: { readonly header: string; readonly asked: string | null; readonly applies: boolean; readonly why: string } | null;
  readonly tracing: { readonly traced: boolean; readonly sampled: string } | null;
  /** What the filters' and firewalls' compilers reported about this configuration. */
  readonly notes: readonly string[];
}

function refuse(code: ErrorCode, reason: string, status?: number): Verdict {
  return { routes: false, status: status ?? ERRORS[code].status, code, reason };
}

/** Explain `request` over `snapshot`. Closes what building the filters made (no client ever connected). */
export async function explain(snapshot: Snapshot, request: ExplainRequest, opts: ExplainOptions = {}): Promise<Explanation> {
  const notes: string[] = [];
  const logger = pino({ level: 'warn' }, { write: (line: string) => void notes.push(String((JSON.parse(line) as { msg?: unknown }).msg)) });
  const shared = new SharedResources();
  try {
    const table = buildRouteTable(snapshot, defaultFactories(), { deps: { clock: systemClock, random: Math.random, logger }, metrics: new Metrics(), shared });
    return explainWith(snapshot, table, request, opts, notes);
  } finally {
    await shared.close();
  }
}

type Table = ReturnType<typeof buildRouteTable>;

function explainWith(snapshot: Snapshot, table: Table, request: ExplainRequest, opts: ExplainOptions, notes: string[]): Explanation {
  const norm = normalizePath(request.target);
  const base = {
    request: {
      method: request.method, url: request.url, host: request.host, path: norm.ok ? norm.path : null, query: norm.ok ? norm.query : '',
      listenerPort: request.listenerPort, from: request.from,
    },
    host: null, route: null, firewall: null, suspended: false, location: null, replicas: [], replica: null, filters: null,
    timeoutMs: null, timeoutSource: null, retry: null, debug: null, tracing: null, notes,
  };
  // The order of DataPlane.start: a CONNECT, a long URL, a path that does not normalize.
  if (request.method === 'CONNECT') return { ...base, verdict: refuse('NO_ROUTE', 'a CONNECT is a tunnel, never a routed request: tunnels are HTTP/1.1 CONNECTs to tcp ports') };
  if (request.target.length > MAX_URL_LENGTH) return { ...base, verdict: refuse('URI_TOO_LONG', `the request target is longer than ${MAX_URL_LENGTH} bytes`) };
  if (!norm.ok) return { ...base, verdict: refuse('BAD_REQUEST', `bad request: ${norm.reason}`) };
  const at = { path: norm.path, query: norm.query, pathWithQuery: norm.path + norm.query };

  // The external listener first; an internal name only the mesh listener answers.
  let listener: Listener = 'external';
  let target = resolveHost(table.hosts, request.host, 'external', request.listenerPort);
  if (!target) {
    target = resolveHost(table.hosts, request.host, 'mesh', request.listenerPort);
    if (target) listener = 'mesh';
  }
  if (!target) return { ...base, verdict: refuse('NO_ROUTE', `no host name of the configuration is ${JSON.stringify(request.host)}`) };
  const host = {
    kind: target.kind,
    listener,
    ...(listener === 'mesh' ? { note: 'an internal name: answered by the mesh listener (a workload\'s outbound proxy, up\'s --mesh); the external listener answers 404' } : {}),
  };
  const route = routeTarget(snapshot, target, at);
  if (!route) {
    const why = target.kind === 'domain' ? `no route of domain ${target.domain.host} port ${target.port.number} matches ${at.path}` : 'the name routes nowhere';
    return { ...base, host, verdict: refuse('NO_ROUTE', why) };
  }
  const workload = route.workload;
  const gvc = snapshot.gvcs.get(workload.gvc);
  const routeOut = describeRoute(target, route, at.path);

  // Ingress filters, then suspended → location → replica, as DataPlane.onIngressRequest/toReplica.
  const peer = request.from;
  const trustedProxies = gvc?.trustedProxies ?? 0;
  const client = clientAddress(peer, request.headers['x-forwarded-for'], trustedProxies);
  const firewall = describeFirewall(workload, listener, client, trustedProxies, request.rawHeaders);
  const ingressChain = table.ingressChains.get(workload.key) ?? EMPTY_CHAIN;

  const known = knownReplicas(snapshot, workload);
  const latencyOf = (name: string): number | undefined => (name === opts.location ? 0 : undefined);
  let reason: LocationReason | null = null;
  let geo: readonly GeoCandidate[] | undefined;
  const located = locateRoute(snapshot, route, listedReplicas(known, route.includeNotReady), latencyOf, (why, candidates) => {
    reason = why;
    geo = candidates;
  });
  const chosen = typeof located === 'string' ? located : null;
  const candidates = (geo ?? []).map((c) => describeCandidate(snapshot, workload, c, opts.location, known));
  const location = {
    reason,
    chosen,
    candidates,
    latencies: opts.location === undefined
      ? 'not probed: a location\'s latency is its status.latencyMs when pinned, else unknown (--location NAME counts that one as 0 ms, as the router there does)'
      : `not probed: ${opts.location} (--location) is 0 ms away, others their status.latencyMs when pinned, else unknown`,
  };
  const inLocation = chosen === null ? [] : known.filter((r) => r.location === chosen);
  const replicas: ReplicaExplanation[] = inLocation.map((r) => ({
    ...r,
    hop: replicaHop(snapshot, workload, r, route.port, route.internal === true, undefined),
    ready: r.forcedNotReady ? false : 'unknown',
  }));
  const usable = replicas.filter((r) => (route.fixedReplica === undefined || r.index === route.fixedReplica) && (r.ready !== false || route.includeNotReady));

  const sidecarChain = table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
  const example = usable[0];
  const hop = example?.hop ?? replicaHop(snapshot, workload, {}, route.port, route.internal === true, undefined);
  const runsAt = hop === 'app' ? 'router' : hop === 'bare' ? 'none' : 'replica-sidecar';
  const sidecarPort = example?.sidecar !== undefined ? Number(example.sidecar.slice(example.sidecar.lastIndexOf(':') + 1)) : undefined;
  const input = {
    method: request.method, host: request.host, path: at.path, query: at.query, rawHeaders: request.rawHeaders, headers: request.headers,
    // Behind the replica's own sidecar the client address is read with one more trusted hop (the router).
    clientAddress: client,
    listenerPort: runsAt === 'replica-sidecar' && sidecarPort !== undefined ? sidecarPort : request.listenerPort,
    targetPort: route.port?.number,
  };
  const filters = {
    ingress: ingressChain.map((f) => f.name),
    runsAt,
    sidecar: runsAt === 'none' ? [] : sidecarChain.map((f) => explainFilter(f, input)),
  } as const;

  const asked = request.headers[table.headers.debug];
  const debugMode = debugAsked(route, asked);
  const debug = {
    header: table.headers.debug,
    asked: asked ?? null,
    applies: debugMode !== undefined,
    why: debugMode !== undefined
      ? `answers carry ${table.headers.route}, ${table.headers.attempts}, server-timing, x-envoy-upstream-service-time${debugMode === 'trace' ? `, ${table.headers.traceId} (and the request is sampled)` : ''}`
      : !route.canonical ? 'debug answers are given on canonical and alias names (and domain routes) only'
        : !workload.defaultOptions.debug ? 'the workload\'s defaultOptions.debug is off'
          : `the request carries no ${table.headers.debug}: true or trace`,
  };
  const verdict = decide(listener, firewall, located, route, usable, replicas, chosen, notRunNotes(snapshot).get(route.workload.key)?.reason);
  // The chosen location's, as the data plane starts the request's timeout once it has one.
  const timeout = timeoutIn(workload, chosen ?? undefined);
  return {
    ...base,
    verdict,
    host,
    route: routeOut,
    firewall,
    suspended: typeof located !== 'string' && located.code === 'SUSPENDED',
    location,
    replicas,
    replica: chosen === null ? null : { fixed: route.fixedReplica ?? null, readiness: 'unknown: replicas are not probed (a replica listed counts as ready here)' },
    filters,
    timeoutMs: timeout.ms,
    timeoutSource: timeout.source,
    retry: describeRetry(workload),
    debug,
    tracing: describeTracing(snapshot, workload, request, debugMode === 'trace'),
  };
}

function decide(
  listener: Listener,
  firewall: NonNullable<Explanation['firewall']>,
  located: ReturnType<typeof locateRoute>,
  route: Route,
  usable: readonly ReplicaExplanation[],
  replicas: readonly ReplicaExplanation[],
  chosen: string | null,
  notRun: string | undefined,
): Verdict {
  if (!firewall.allowed) return refuse('FIREWALL_BLOCKED', `the ${firewall.kind} firewall blocks it: ${firewall.reason}`);
  if (typeof located !== 'string') {
    if (located.code === 'SUSPENDED') return refuse('SUSPENDED', 'the workload is suspended (globally, or in every location it could go to)');
    return refuse('NO_HEALTHY_UPSTREAM', notRun === undefined
      ? 'no location lists a replica of the workload (deployment records, or a container with a command that up runs)'
      : `no location lists a replica of the workload: ${notRun}`);
  }
  if (usable.length === 0) {
    const what = route.fixedReplica !== undefined ? `replica ${route.fixedReplica}` : 'replica';
    return refuse('NO_HEALTHY_UPSTREAM', replicas.length === 0 ? `${chosen} lists no replica of the workload` : `${chosen} lists no ${what} that may take it (forced not ready, or not there)`);
  }
  return { routes: true, reason: `to ${route.workload.key} in ${chosen}${listener === 'mesh' ? ' (mesh listener)' : ''}` };
}

function describeRoute(target: HostTarget, route: Route, path: string): NonNullable<Explanation['route']> {
  const w = route.workload;
  let rule: NonNullable<Explanation['route']>['rule'];
  if (target.kind === 'domain') {
    // The route that matched, for its description: the same matcher routeTarget ran.
    const r = matchDomainRoute(target.port, path)!.route;
    rule = {
      domain: target.domain.host,
      domainPort: target.port.number,
      ...(r.prefix !== undefined ? { prefix: r.prefix } : {}),
      ...(r.regex !== undefined ? { regex: r.regex.source } : {}),
      ...(r.replacePrefix !== undefined ? { replacePrefix: r.replacePrefix } : {}),
      workloadLink: `//gvc/${w.gvc}/workload/${w.name}`,
      ...(r.port !== undefined ? { port: r.port } : {}),
      ...(r.replica !== undefined ? { replica: r.replica } : {}),
      setHeaders: r.setHeaders,
    };
  }
  return {
    workload: w.key,
    gvc: w.gvc,
    name: w.name,
    port: route.port?.number ?? null,
    protocol: protocolOf(route.port),
    upstreamPath: route.upstreamPath,
    fixedLocation: route.fixedLocation ?? null,
    fixedReplica: route.fixedReplica ?? null,
    geo: route.fixedLocation === undefined,
    ...(rule ? { rule } : {}),
  };
}

function describeFirewall(workload: WorkloadModel, listener: Listener, client: string, trustedProxies: number, rawHeaders: readonly string[]): NonNullable<Explanation['firewall']> {
  if (listener === 'mesh') {
    const type = (workload.firewallConfig?.internal as { inboundAllowType?: unknown } | undefined)?.inboundAllowType ?? 'none';
    // The caller's identity is its certificate's; explain has none, as a mesh listener without one.
    const allowed = internalFirewall(workload)({});
    return {
      kind: 'internal', allowed, ...(allowed ? {} : { reason: `inboundAllowType ${String(type)} admits no caller without a workload identity` }),
      clientAddress: client, trustedProxies, header: 'none (the caller\'s mesh identity decides)', rules: `inboundAllowType: ${String(type)}`,
    };
  }
  const external = (workload.firewallConfig?.external ?? {}) as Record<string, unknown>;
  const compiled = externalFirewall(workload);
  const reason = compiled.check?.(client, rawHeaders);
  const list = (v: unknown): string => (Array.isArray(v) && v.length > 0 ? v.join(', ') : 'none');
  const filters = (external.http as { inboundHeaderFilter?: unknown[] } | undefined)?.inboundHeaderFilter;
  return {
    kind: 'external',
    allowed: reason === undefined,
    ...(reason !== undefined ? { reason: { blocked_cidr: `${client} is in inboundBlockedCIDR`, not_allowed: `${client} is in no inboundAllowCIDR range`, header_filter: 'http.inboundHeaderFilter rejects a header', invalid_config: 'its configuration cannot be read (every request is blocked)' }[reason] } : {}),
    clientAddress: client,
    trustedProxies,
    header: trustedProxies > 0 ? `x-forwarded-for (the GVC trusts ${trustedProxies} proxy hop${trustedProxies === 1 ? '' : 's'})` : 'none: the connection\'s peer (the GVC trusts no proxy: loadBalancer.trustedProxies 0)',
    rules: `inboundAllowCIDR: ${list(external.inboundAllowCIDR)}; inboundBlockedCIDR: ${list(external.inboundBlockedCIDR)}; header filters: ${Array.isArray(filters) ? filters.length : 0}`,
  };
}

function describeCandidate(snapshot: Snapshot, workload: WorkloadModel, c: GeoCandidate, own: string | undefined, known: readonly KnownReplica[]): CandidateExplanation {
  const options = workload.locationOptions.get(c.name) ?? workload.defaultOptions;
  const pinned = snapshot.locations.get(c.name)?.latencyMs;
  return {
    name: c.name,
    available: c.available,
    tier: c.routingTier ?? null,
    latencyMs: c.measuredLatencyMs ?? null,
    latencySource: pinned !== undefined ? 'pinned' : c.name === own ? 'own' : 'unknown',
    offsetMs: c.latencyOffsetMs,
    toleranceMs: c.latencyToleranceMs ?? null,
    suspended: workload.globallySuspended || options.suspend || options.maxScale === 0,
    replicas: known.filter((r) => r.location === c.name).length,
  };
}

function describeRetry(workload: WorkloadModel): NonNullable<Explanation['retry']> {
  const policy = compileRetryPolicy(workload.retryPolicy);
  // A random source of 1 gives each retry's ceiling: the jittered wait is below it.
  const ceilings = Array.from({ length: policy.retries }, (_, i) => backoffMs(i + 1, () => 1));
  return {
    attempts: policy.retries,
    retryOn: policy.retries > 0 ? workload.retryPolicy.retryOn : [],
    perTryTimeoutMs: null,
    backoffCeilingsMs: ceilings,
    note: policy.retries > 0
      ? `each retry waits a random time below its ceiling (Retry-After wins, at most ${BACKOFF_CAP_MS} ms), on another ready replica of the location, else the best other location (geo-routed names), else the same; no per-try timeout: the workload's timeout covers every attempt; a retry budget caps retries under load`
      : 'no retries (requestRetryPolicy.attempts 0)',
  };
}

function describeTracing(snapshot: Snapshot, workload: WorkloadModel, request: ExplainRequest, forced: boolean): NonNullable<Explanation['tracing']> {
  const plan = compileTracingPlan(snapshot);
  const traced = plan.workloads.get(workload.key);
  if (!traced) return { traced: false, sampled: 'no: the workload is not traced (no tracing on its GVC or org, or svc/tracingDisabled)' };
  const ratio = plan.exporters.get(traced.exporter)?.ratio ?? 1;
  if (forced) return { traced: true, sampled: 'yes: x-svc-debug: trace samples it whatever the sampling says' };
  const incoming = extract(request.headers);
  if (incoming?.sampled === true) return { traced: true, sampled: `yes: the caller's ${incoming.format} header says sampled` };
  if (incoming?.sampled === false) return { traced: true, sampled: `no: the caller's ${incoming.format} header says not sampled` };
  return { traced: true, sampled: ratio >= 1 ? 'yes: sampling 100%' : `with probability ${ratio} (sampling ${ratio * 100}% by trace id)` };
}
