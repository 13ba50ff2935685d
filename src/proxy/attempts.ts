/**
 * The attempts of one request (DESIGN §7), Envoy's router filter: each attempt is sent to the replica
 * chosen (its sidecar, the app, or over mTLS to a mesh peer) and streamed by forward.ts; an answer or
 * failure the workload's `retryOn` names is retried after a jittered backoff (or the upstream's
 * `Retry-After`) on another replica, in another location when the host is geo-routed, while the
 * attempts, the retry budget, the timeout and the replay buffer allow, and never once the answer's
 * headers went out. Answers feed outlier detection. A request whose workload does not retry keeps
 * its plan and nothing else. Also the connection pools the attempts go through, kept across reloads.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { chooseLocation, geoCandidates, pickReplica, type HostPort, type Replica } from '../routing/index.js';
import { hasBody } from '../filter/index.js';
import type { FailureKind, RetryPolicy } from '../retry/policy.js';
import { backoffMs, retryAfterMs } from '../retry/backoff.js';
import { RetryBudgets, type RetryBudget } from '../retry/budget.js';
import { ReplayableBody } from '../retry/replay.js';
import { OutlierDetector } from '../routing/outlier.js';
import type { DataPlaneOptions, Plane } from './dataplane-options.js';
import type { Exchange } from './exchange.js';
import { forwardHttp1, forwardHttp2, type ForwardHooks } from './forward.js';
import type { MeshTlsClient } from './mesh-tls.js';
import type { Hop } from './mesh-peer.js';
import { appAddress, noLatency, type Route, type RouteTable } from './routes.js';
import { Upstreams } from './upstreams.js';

/** What every attempt of one request sends. */
export interface AttemptPlan {
  table: RouteTable;
  route: Route;
  protocol: string;
  headers: OutgoingHttpHeaders;
  path: string;
  hop: Hop;
}

/** Retry bookkeeping of one request whose workload retries. */
interface AttemptState {
  plan: AttemptPlan;
  policy: RetryPolicy;
  budget: RetryBudget;
  retries: number;
  tried: Replica[];
  triedLocations: string[];
  body: ReplayableBody | undefined;
}

export class Attempts {
  readonly upstreams = new Upstreams();
  private readonly budgets = new RetryBudgets();
  private readonly outlier: OutlierDetector;
  private readonly forwardHooks: ForwardHooks;
  /** Each mesh caller's mTLS upstreams. */
  private readonly meshUpstreams = new Map<MeshTlsClient, Upstreams>();

  private readonly opts: DataPlaneOptions;

  constructor(private readonly plane: Plane) {
    const opts = (this.opts = plane.opts);
    this.forwardHooks = {
      responseHeaders: (ex) => plane.debugHeaders(ex),
      onResponse: (ex, status, headers) => this.onAttemptResponse(ex, status, headers),
      onFailure: (ex, kind) => this.onAttemptFailure(ex, kind),
    };
    this.outlier = new OutlierDetector(opts.replicas, opts.deps.clock, opts.deps.logger.child({ component: 'outlier' }), {
      onEject: (replica) => opts.metrics.ejections.labels(replica.workload, replica.location).inc(),
    });
  }

  async close(): Promise<void> {
    await Promise.all([this.upstreams.close(), ...[...this.meshUpstreams.values()].map((u) => u.close())]);
    this.meshUpstreams.clear();
  }

  /** A mesh listener went away (a replica that stopped): drop every caller's connections to it. */
  forgetMesh(address: HostPort): void {
    for (const upstreams of this.meshUpstreams.values()) upstreams.forget(address);
  }

  /** A mesh caller went away (a replica `up` stopped): close its mTLS connections. */
  releaseCaller(tls: MeshTlsClient): void {
    const upstreams = this.meshUpstreams.get(tls);
    this.meshUpstreams.delete(tls);
    void upstreams?.close();
  }

  private upstreamsOf(tls: MeshTlsClient): Upstreams {
    let upstreams = this.meshUpstreams.get(tls);
    if (!upstreams) this.meshUpstreams.set(tls, (upstreams = new Upstreams(tls)));
    return upstreams;
  }

  /** The first attempt of a request routed to a replica (`ex.replica`), under its workload's retry policy. */
  start(ex: Exchange, plan: AttemptPlan): void {
    if (ex.isFinished) return;
    const policy = plan.table.retryPolicies.get(plan.route.workload.key);
    if (policy && policy.retries > 0) {
      const budget = this.budgets.for(plan.route.workload.key);
      budget.active++;
      const state: AttemptState = {
        plan,
        policy,
        budget,
        retries: 0,
        tried: [],
        triedLocations: [],
        body: hasBody(ex) ? new ReplayableBody(ex.bodyOverride ?? (ex.req as Readable)) : undefined,
      };
      ex.attemptState = state;
    } else {
      ex.attemptState = plan;
    }
    this.sendAttempt(ex);
  }

  private sendAttempt(ex: Exchange): void {
    if (ex.isFinished) return;
    const state = ex.attemptState as AttemptState | AttemptPlan;
    const plan = 'plan' in state ? state.plan : state;
    ex.attempts++;
    plan.headers['x-envoy-attempt-count'] = String(ex.attempts);
    if ('plan' in state && state.body) {
      const body = state.body.attempt();
      if (!body) return ex.reply({ code: 'UPSTREAM_RESET' });
      ex.bodyOverride = body;
    }
    const replica = ex.replica!;
    ex.debugInfo?.attemptStarted(replica.name, ex.location ?? '', this.opts.deps.clock.now());
    // A retry lands on a replica reached the same way (a filter chain skipped for a sidecar that
    // runs it must not be skipped for one that does not), or not at all.
    if (this.plane.hopOf(ex, replica, plan.route.port, plan.route.internal === true) !== plan.hop) return ex.reply({ code: 'NO_HEALTHY_UPSTREAM' });
    if (plan.hop === 'mesh') {
      const upstreams = this.upstreamsOf(ex.meshCaller!.tls!);
      return this.forward(ex, replica.mesh!, plan.protocol, plan.path, plan.headers, upstreams, ex.destinationPrincipal);
    }
    const target = plan.hop === 'sidecar' ? replica.sidecar : appAddress(replica, plan.route.port);
    if (!target) return ex.reply({ code: 'NO_HEALTHY_UPSTREAM' });
    this.forward(ex, target, plan.protocol, plan.path, plan.headers);
  }

  private onAttemptResponse(ex: Exchange, status: number, headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
    const replica = ex.replica;
    if (replica && ex.attemptState !== undefined) {
      if (status >= 500) this.outlier.failure(replica);
      else this.outlier.success(replica);
    }
    const state = ex.attemptState as AttemptState | AttemptPlan | undefined;
    const retried =
      state !== undefined &&
      'policy' in state &&
      this.mayRetry(ex, state) &&
      state.policy.shouldRetry({ kind: 'response', status, headers }) &&
      this.retry(ex, state, retryAfterMs(headers['retry-after'], this.opts.deps.clock.wallNow()));
    ex.debugInfo?.attemptEnded(String(status), retried, this.opts.deps.clock.now());
    this.opts.telemetry?.attemptEnd(ex, { status, retried });
    return !retried;
  }

  private onAttemptFailure(ex: Exchange, kind: FailureKind): boolean {
    if (ex.replica && ex.attemptState !== undefined) this.outlier.failure(ex.replica);
    const state = ex.attemptState as AttemptState | AttemptPlan | undefined;
    const retried =
      state !== undefined &&
      'policy' in state &&
      this.mayRetry(ex, state) &&
      state.policy.shouldRetry({ kind: 'failure', failure: kind }) &&
      this.retry(ex, state, undefined);
    ex.debugInfo?.attemptEnded(kind, retried, this.opts.deps.clock.now());
    this.opts.telemetry?.attemptEnd(ex, { failure: kind, retried });
    return retried;
  }

  private mayRetry(ex: Exchange, state: AttemptState): boolean {
    return (
      state.retries < state.policy.retries &&
      !ex.timedOut &&
      !ex.isFinished &&
      !ex.res.headersSent &&
      (state.body === undefined || state.body.replayable) &&
      state.budget.allows()
    );
  }

  /** Schedule the next attempt on another replica (or location) after a jittered backoff. */
  private retry(ex: Exchange, state: AttemptState, retryAfter: number | undefined): boolean {
    const next = this.nextReplica(ex, state);
    if (!next) return false;
    state.retries++;
    state.budget.retrying++;
    this.opts.metrics.retries.labels(state.plan.route.workload.key).inc();
    const previous = ex.replica!;
    previous.outstanding--;
    next.replica.outstanding++;
    ex.replica = next.replica;
    ex.location = next.location;
    ex.abortUpstream = undefined;
    const { clock, random } = this.opts.deps;
    const delay = retryAfter ?? backoffMs(state.retries, random);
    clock.setTimeout(() => {
      state.budget.retrying--;
      this.sendAttempt(ex);
    }, delay);
    return true;
  }

  /**
   * Another ready, non-ejected replica of the same location when there is one; otherwise, for
   * geo-routed hosts, the best other location; otherwise the same replica again.
   */
  private nextReplica(ex: Exchange, state: AttemptState): { replica: Replica; location: string } | undefined {
    const current = ex.replica;
    const location = ex.location;
    if (!current || location === undefined) return undefined;
    state.tried.push(current);
    const { route, table } = state.plan;
    if (route.fixedReplica !== undefined) return { replica: current, location };
    const { replicas, deps } = this.opts;
    const now = deps.clock.now();
    const opts = route.includeNotReady ? { includeNotReady: true, exclude: current } : { exclude: current };
    const fresh = (r: Replica | undefined): r is Replica => r !== undefined && !state.tried.includes(r);
    const same = pickReplica(replicas.list(route.workload.key, location), deps.random, now, opts);
    if (fresh(same)) return { replica: same, location };
    if (route.fixedLocation === undefined) {
      if (!state.triedLocations.includes(location)) state.triedLocations.push(location);
      const candidates = geoCandidates(table.snapshot, route.workload, route.includeNotReady ? this.plane.anyReplica : replicas, this.opts.latencyOf ?? noLatency)
        .filter((c) => !state.triedLocations.includes(c.name));
      const other = chooseLocation(candidates);
      if (other !== undefined) {
        const r = pickReplica(replicas.list(route.workload.key, other), deps.random, now, route.includeNotReady ? { includeNotReady: true } : undefined);
        if (r) return { replica: r, location: other };
      }
    }
    // Nowhere else to go: Envoy retries the same host.
    return same ? { replica: same, location } : current.ready ? { replica: current, location } : undefined;
  }

  /** One attempt to `target` in `protocol`, streamed by forward.ts (HTTP/2 and gRPC on a session, else the HTTP/1.1 pool). */
  forward(ex: Exchange, target: HostPort, protocol: string, path: string, headers: OutgoingHttpHeaders, upstreams = this.upstreams, serverUri?: string): void {
    if (ex.isFinished) return;
    this.opts.telemetry?.attemptStart(ex, target, headers);
    try {
      if (protocol === 'grpc' || protocol === 'http2') forwardHttp2(ex, upstreams.session(target, serverUri), path, headers, this.forwardHooks);
      else forwardHttp1(ex, upstreams.pool(target, serverUri), path, headers, this.forwardHooks);
    } catch (err) {
      this.opts.deps.logger.error({ err, requestId: ex.requestId }, 'forwarding failed');
      if (!ex.isFinished) ex.reply({ code: 'UPSTREAM_RESET' });
    }
  }

  /** An exchange is over: its workload's retry budget has one request less in flight. */
  finished(ex: Exchange): void {
    const state = ex.attemptState as AttemptState | AttemptPlan | undefined;
    if (state && 'budget' in state) state.budget.active--;
  }
}
