/**
 * Everything the request path reads, compiled from one configuration snapshot and swapped whole on
 * reload: the host index, each workload's ingress and sidecar filter chains, the header names of the
 * configured vendor. Requests in flight keep the table they started with. Also the routing decisions
 * the data plane and `svcproxy explain` share (one implementation, pure): a host target to a workload,
 * port and upstream path (`routeTarget`), the location a route goes to (`locateRoute`), and whether a
 * request asked for debug answers (`debugAsked`).
 */
import type { PortModel, Protocol, Snapshot, WorkloadModel } from '../config/model.js';
import type { Deps } from '../deps.js';
import { buildHostIndex, nextHostIndex, chooseLocation, geoCandidates, matchDomainRoute, type GeoCandidate, type HostIndex, type HostPort, type HostTarget, type Replica, type ReplicaRegistry } from '../routing/index.js';
import { isIgnored } from '../config/compile-workload.js';
import { changedWorkloads } from '../config/changed.js';
import { LayeredMap } from '../layered-map.js';
import type { Hop, OutboundCaller } from './mesh-peer.js';
import { buildChain, type Chain } from './filters.js';
import { vendorHeaders, type FilterFactory, type SharedResources, type VendorHeaders } from '../filter/index.js';
import type { Metrics } from '../admin/metrics.js';
import { compileRetryPolicy, type RetryPolicy } from '../retry/policy.js';

export interface RouteTable {
  readonly snapshot: Snapshot;
  readonly hosts: HostIndex;
  readonly ingressChains: ReadonlyMap<string, Chain>;
  readonly sidecarChains: ReadonlyMap<string, Chain>;
  /** Compiled `requestRetryPolicy` per workload. */
  readonly retryPolicies: ReadonlyMap<string, RetryPolicy>;
  readonly headers: VendorHeaders;
}

export interface FilterFactories {
  readonly ingress: readonly FilterFactory[];
  readonly sidecar: readonly FilterFactory[];
}

export interface RouteTableDeps {
  readonly deps: Deps;
  readonly metrics: Metrics;
  readonly shared: SharedResources;
  /** A standalone sidecar's workload: the only one whose sidecar chain is built. */
  readonly sidecarOf?: string;
}

/**
 * The table of `snapshot`. Given the table in force (`previous`), what a workload's change did not
 * touch is kept: the filter chains and retry policy of a workload whose model, GVC model and vendor
 * are the objects they were built from (compile.ts reuses the models of unchanged records, and a
 * chain reads nothing else of the snapshot), and the host names of the unchanged workloads
 * (hosts.ts `nextHostIndex`). A file reload reads new records, so everything is built again.
 */
export function buildRouteTable(snapshot: Snapshot, factories: FilterFactories, env: RouteTableDeps, previous?: RouteTable): RouteTable {
  const before = previous?.snapshot.settings.vendor === snapshot.settings.vendor ? previous : undefined;
  // Layered over the maps in force (layered-map.ts), which the requests still reading them keep
  // as they are; the workloads whose models changed are put again.
  const ingressChains = before === undefined ? new Map<string, Chain>() : LayeredMap.next(before.ingressChains);
  const sidecarChains = before === undefined ? new Map<string, Chain>() : LayeredMap.next(before.sidecarChains);
  const retryPolicies = before === undefined ? new Map<string, RetryPolicy>() : LayeredMap.next(before.retryPolicies);
  const put = (workload: WorkloadModel): void => {
    const key = workload.key;
    const gvc = snapshot.gvcs.get(workload.gvc);
    retryPolicies.set(key, compileRetryPolicy(workload.retryPolicy));
    const ctx = { snapshot, workload, gvc, ...env };
    ingressChains.set(key, buildChain(factories.ingress, ctx));
    if (env.sidecarOf === undefined || env.sidecarOf === key) sidecarChains.set(key, buildChain(factories.sidecar, ctx));
    else sidecarChains.delete(key);
  };
  const drop = (key: string): void => {
    ingressChains.delete(key);
    sidecarChains.delete(key);
    retryPolicies.delete(key);
  };
  if (before === undefined) {
    for (const workload of snapshot.workloads.values()) put(workload);
  } else if (sameGvcs(before.snapshot, snapshot)) {
    // Only the workloads whose models changed (changed.ts, worked out once per pair of snapshots).
    for (const key of changedWorkloads(before.snapshot, snapshot)) {
      const workload = snapshot.workloads.get(key);
      if (workload !== undefined) put(workload);
      else drop(key);
    }
  } else {
    for (const key of before.snapshot.workloads.keys()) if (!snapshot.workloads.has(key)) drop(key);
    for (const workload of snapshot.workloads.values()) {
      if (before.snapshot.workloads.get(workload.key) === workload && before.snapshot.gvcs.get(workload.gvc) === snapshot.gvcs.get(workload.gvc)) continue;
      put(workload);
    }
  }
  return {
    snapshot,
    hosts: previous === undefined ? buildHostIndex(snapshot) : nextHostIndex(previous.hosts, previous.snapshot, snapshot),
    ingressChains,
    sidecarChains,
    retryPolicies,
    headers: vendorHeaders(snapshot.settings.vendor),
  };
}

/** Whether both snapshots have the same GVC models (a workload's chain reads its GVC's). */
function sameGvcs(a: Snapshot, b: Snapshot): boolean {
  if (a.gvcs.size !== b.gvcs.size) return false;
  for (const [name, gvc] of a.gvcs) if (b.gvcs.get(name) !== gvc) return false;
  return true;
}

/** The declared port (of any container) with this number; the primary port when none is given. */
export function findPort(workload: WorkloadModel, number: number | undefined): PortModel | undefined {
  if (number === undefined) return workload.primaryPort;
  for (const c of workload.containers) for (const p of c.ports) if (p.number === number) return p;
  return undefined;
}

/** The config layer already resolved `ports[].protocol` over the deprecated `svc/protocol` tag. */
export function protocolOf(port: PortModel | undefined): Protocol {
  return port ? port.protocol : 'http';
}

/** The app's address in `replica` for `port`; without a port, its first. */
export function appAddress(replica: Replica, port: PortModel | undefined): HostPort | undefined {
  if (port) return replica.ports.get(port.number);
  for (const address of replica.ports.values()) return address;
  return undefined;
}

/** Measured latency when a data plane has none to offer (geo routing then reads `location.status`). */
export function noLatency(): undefined {
  return undefined;
}

/** An internal name (a workload's, or one replica's): the mesh carries it, and the target's internal firewall judges the caller. */
export function isInternal(target: HostTarget | undefined): target is Extract<HostTarget, { kind: 'internal' | 'internal-replica' }> {
  return target?.kind === 'internal' || target?.kind === 'internal-replica';
}

/** Where one request goes after routing. */
export interface Route {
  readonly workload: WorkloadModel;
  readonly port: PortModel | undefined;
  /** Path (with query) sent upstream. */
  readonly upstreamPath: string;
  readonly fixedLocation?: string;
  readonly fixedReplica?: number;
  readonly setHeaders?: readonly (readonly [string, string])[];
  /** Canonical or alias host (or a domain route): geo routing and debug answers apply. */
  readonly canonical: boolean;
  readonly includeNotReady: boolean;
  /** An internal name: the mesh carries it (mTLS to the replica's sidecar, when it has one). */
  readonly internal?: boolean;
}

/** The normalized path, the query as sent (from its `?`, or ''), and both together. */
export interface RequestPath {
  readonly path: string;
  readonly query: string;
  readonly pathWithQuery: string;
}

/**
 * Host target → workload, port and upstream path (a domain route rewrites its prefix). `undefined`:
 * no domain route matches, or the route's workload is missing or ignored (404 `no route`).
 */
export function routeTarget(snapshot: Snapshot, target: HostTarget, at: RequestPath): Route | undefined {
  const pathWithQuery = at.pathWithQuery;
  switch (target.kind) {
    case 'canonical':
    case 'alias':
      return { workload: target.workload, port: target.workload.primaryPort, upstreamPath: pathWithQuery, canonical: true, includeNotReady: false };
    case 'location':
      return { workload: target.workload, port: target.workload.primaryPort, upstreamPath: pathWithQuery, fixedLocation: target.location, canonical: false, includeNotReady: false };
    case 'replica':
      return { workload: target.workload, port: target.workload.primaryPort, upstreamPath: pathWithQuery, fixedLocation: target.location, fixedReplica: target.index, canonical: false, includeNotReady: false };
    case 'internal':
      return { workload: target.workload, port: findPort(target.workload, target.port), upstreamPath: pathWithQuery, canonical: false, includeNotReady: target.workload.publishNotReadyAddresses, internal: true };
    case 'internal-replica':
      return {
        workload: target.workload, port: findPort(target.workload, target.port), upstreamPath: pathWithQuery,
        fixedLocation: target.location, fixedReplica: target.index, canonical: false, includeNotReady: target.workload.publishNotReadyAddresses, internal: true,
      };
    case 'domain': {
      const match = matchDomainRoute(target.port, at.path);
      if (!match) return undefined;
      const workload = snapshot.workloads.get(match.route.workload);
      // A route to an ignored workload (`svc/ignore`) routes nowhere, as its own names do.
      if (!workload || isIgnored(workload, snapshot.settings.vendor)) return undefined;
      const port = findPort(workload, match.route.port);
      return {
        workload, port,
        upstreamPath: at.query ? match.upstreamPath + at.query : match.upstreamPath,
        ...(match.route.replica !== undefined ? { fixedReplica: match.route.replica } : {}),
        setHeaders: match.route.setHeaders,
        canonical: true,
        includeNotReady: false,
      };
    }
  }
}

/** Why `locateRoute` chose its location: fixed by the host name, the GVC's only one, or geo routing. */
export type LocationReason = 'fixed' | 'only' | 'geo';

/** `locateRoute`'s refusals: frozen constants, so the request path allocates nothing for them. */
export interface LocationRefusal {
  readonly code: 'SUSPENDED' | 'NO_HEALTHY_UPSTREAM';
}
export const LOCATION_SUSPENDED: LocationRefusal = Object.freeze({ code: 'SUSPENDED' });
export const NO_LOCATION: LocationRefusal = Object.freeze({ code: 'NO_HEALTHY_UPSTREAM' });

/** Told how `locateRoute` decided (explain); the request path passes none. */
export type LocationObserver = (reason: LocationReason, candidates: readonly GeoCandidate[] | undefined) => void;

/**
 * The location a route goes to (DESIGN §5): a globally suspended workload goes nowhere; a fixed
 * location (location and replica names) or the GVC's only location is taken unless the workload is
 * suspended there; otherwise geo routing chooses among the available candidates. `NO_LOCATION`
 * when no candidate is available and not all are suspended: the caller may wait for a replica.
 */
export function locateRoute(
  snapshot: Snapshot,
  route: Route,
  replicas: Pick<ReplicaRegistry, 'hasReady'>,
  latencyOf: (location: string) => number | undefined,
  observe?: LocationObserver,
): string | LocationRefusal {
  const { workload } = route;
  if (workload.globallySuspended) return LOCATION_SUSPENDED;
  let location = route.fixedLocation;
  const gvcLocations = snapshot.gvcs.get(workload.gvc)?.locations;
  if (location === undefined && gvcLocations?.length === 1) {
    // One location: nothing to choose, so no candidate list is built (the common case).
    location = gvcLocations[0]!;
    observe?.('only', undefined);
    const options = workload.locationOptions.get(location);
    if (options?.suspend || options?.maxScale === 0) return LOCATION_SUSPENDED;
  } else if (location !== undefined) {
    observe?.('fixed', undefined);
  }
  if (location !== undefined) return workload.locationOptions.get(location)?.suspend ? LOCATION_SUSPENDED : location;
  const candidates = geoCandidates(snapshot, workload, replicas, latencyOf);
  observe?.('geo', candidates);
  const chosen = chooseLocation(candidates);
  if (chosen !== undefined) return chosen;
  const allSuspended = candidates.length > 0 && candidates.every((c) => workload.locationOptions.get(c.name)?.suspend);
  return allSuspended ? LOCATION_SUSPENDED : NO_LOCATION;
}

/**
 * `x-svc-debug: true` or `trace` (the vendor's header name) on a canonical or alias name (or a domain
 * route) of a workload with debug on (DESIGN §11); `undefined` otherwise, and then nothing is added.
 */
export function debugAsked(route: Route, value: unknown): 'true' | 'trace' | undefined {
  if (!route.canonical || !route.workload.defaultOptions.debug) return undefined;
  return value === 'true' || value === 'trace' ? value : undefined;
}

/**
 * How a request reaches `replica` of `target` on `port` (see Hop): a port the workload keeps out of
 * its sidecar goes bare; an internal name from a caller with mesh credentials goes over mTLS to the
 * replica's sidecar (bare when the caller keeps that port out of its own); otherwise through the
 * replica's own sidecar when it has one, else to the app with the sidecar filters run in-process.
 */
export function replicaHop(snapshot: Snapshot, target: WorkloadModel, replica: { readonly sidecar?: unknown; readonly mesh?: unknown }, port: PortModel | undefined, internal: boolean, caller: OutboundCaller | undefined): Hop {
  const number = port?.number ?? target.primaryPort?.number;
  if (number !== undefined && number === target.mesh.inboundDisabledPort) return 'bare';
  if (internal && caller?.tls && replica.mesh) {
    const own = caller.workload === undefined ? undefined : snapshot.workloads.get(caller.workload);
    if (number === undefined || number !== own?.mesh.outboundDisabledPort) return 'mesh';
    return 'bare';
  }
  return replica.sidecar ? 'sidecar' : 'app';
}
