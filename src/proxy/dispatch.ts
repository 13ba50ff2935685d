/**
 * Routing a request to a replica of its workload (DESIGN §5), once its entry resolved the route and
 * the ingress filters let it through: suspended? → the location (fixed by the host name, the GVC's
 * only one, or geo routing) → a ready replica (least outstanding requests of two random choices,
 * under `autoscaling.maxConcurrency`) → the upstream request's headers → the sidecar filters, run
 * here unless the replica's own sidecar runs them → the attempts. No replica to take it: the
 * activator holds the request while there is one to wait for, else 503.
 */
import { timeoutMsIn } from '../config/compile-workload.js';
import { workloadUri } from '../mesh/index.js';
import { pickReplica, routeTo, type Replica } from '../routing/index.js';
import type { Activator } from './activator.js';
import type { AttemptPlan, Attempts } from './attempts.js';
import { traceForDebug } from './debug-answers.js';
import type { DataPlaneOptions, Plane } from './dataplane-options.js';
import type { Exchange } from './exchange.js';
import { EMPTY_CHAIN, runChain } from './filters.js';
import { upstreamHeaders } from './headers.js';
import { applyMutations, withQueryMutations } from './mutations.js';
import { locateRoute, noLatency, NO_LOCATION, protocolOf, type Route, type RouteTable } from './routes.js';

export class Dispatcher {
  private readonly opts: DataPlaneOptions;

  constructor(private readonly plane: Plane, private readonly activator: Activator, private readonly attempts: Attempts) {
    this.opts = plane.opts;
  }

  /** Suspended? → location → replica → sidecar filters → attempts. `waited`: routed again after waiting (activator.ts). */
  dispatch(ex: Exchange, table: RouteTable, route: Route, tls: boolean, waited = false): void {
    if (ex.isFinished) return;
    const { workload } = route;
    const { replicas, deps } = this.opts;
    if (waited) ex.debugInfo?.dequeued(deps.clock.now());
    const located = locateRoute(table.snapshot, route, route.includeNotReady ? this.plane.anyReplica : replicas, this.opts.latencyOf ?? noLatency);
    if (typeof located !== 'string') {
      if (located === NO_LOCATION) {
        if (!waited && this.activator.awaitFirstChecks(ex, table, route, tls)) return;
        if (this.activator.holdForStarting(ex, table, route, tls)) return;
      }
      return ex.reply(located.code === 'NO_HEALTHY_UPSTREAM' ? this.activator.noHealthyUpstream(workload.key) : { code: located.code });
    }
    const location = located;
    ex.location = location;
    const list = replicas.list(workload.key, location);
    let replica: Replica | undefined;
    if (route.fixedReplica !== undefined) {
      const r = list.find((x) => x.index === route.fixedReplica);
      replica = r && (r.ready || route.includeNotReady) ? r : undefined;
    } else {
      replica = pickReplica(list, deps.random, deps.clock.now(), route.includeNotReady ? { includeNotReady: true } : undefined);
    }
    if (!replica) {
      if (!waited && this.activator.awaitFirstChecks(ex, table, route, tls)) return;
      if (this.activator.holdForStarting(ex, table, route, tls)) return;
      return ex.reply(this.activator.noHealthyUpstream(workload.key));
    }
    // `autoscaling.maxConcurrency`: a replica takes at most that many requests at once; the rest
    // wait for one to finish (or for a new replica). An idle replica is under any cap: no lookup.
    if (replica.outstanding > 0 && route.fixedReplica === undefined) {
      const cap = workload.locationOptions.get(location)?.maxConcurrency ?? 0;
      if (cap > 0 && replica.outstanding >= cap) {
        replica = underCap(list, cap, deps.clock.now(), route.includeNotReady);
        if (!replica) return void this.activator.hold(ex, table, route, tls);
      }
    }
    ex.replica = replica;
    routeTo(replica);
    ex.startTimeout(timeoutMsIn(workload, location));
    const serverless = workload.type === 'serverless';
    const headers = upstreamHeaders(ex.req.headers, {
      host: serverless ? workload.canonicalHost : ex.host,
      peer: ex.peer,
      proto: tls ? 'https' : 'http',
      requestId: ex.requestId,
      stripPrefixes: table.headers.strip,
      keepTeTrailers: true,
      ...(serverless ? { forwardedHost: ex.host } : {}),
      ...(route.setHeaders && route.setHeaders.length > 0 ? { set: route.setHeaders } : {}),
    });
    if (ex.debugInfo?.trace) traceForDebug(ex, headers, this.opts.telemetry);
    ex.targetPort = route.port?.number;
    const hop = this.plane.hopOf(ex, replica, route.port, route.internal === true);
    const plan: AttemptPlan = { table, route, protocol: protocolOf(route.port), headers, path: route.upstreamPath, hop };
    if (hop === 'mesh') ex.destinationPrincipal = workloadUri(this.plane.org, workload.gvc, workload.name);
    // A replica with its own sidecar applies the workload's filters there.
    const chain = hop !== 'app' ? EMPTY_CHAIN : table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.attempts.start(ex, plan);
    runChain(chain, ex, (result) => {
      if (result) return ex.reply(result);
      plan.path = withQueryMutations(ex, plan.path);
      plan.headers = applyMutations(ex, headers);
      this.attempts.start(ex, plan);
    });
  }
}

/** The ready, not ejected replica with the fewest requests in flight, if it is under `cap`. */
function underCap(list: readonly Replica[], cap: number, now: number, includeNotReady: boolean): Replica | undefined {
  let best: Replica | undefined;
  for (const r of list) {
    if (!(r.ready || includeNotReady) || r.ejectedUntil > now || r.outstanding >= cap) continue;
    if (best === undefined || r.outstanding < best.outstanding) best = r;
  }
  return best;
}
