/**
 * Requests that wait for a replica (Knative's activator, DESIGN §10). When routing finds no replica
 * ready, a request waits instead of getting 503 while there is one to wait for: replicas whose first
 * readiness check has not run yet (a router that just started), a replica `up` is starting, or one
 * the scale-from-zero hook (`activate`) starts for it; also for a replica under its
 * `autoscaling.maxConcurrency` cap. A woken request is routed again (`resume`), so a replica that
 * turned ready elsewhere serves it just the same. The workload's timeout covers the wait; past
 * `maxHeldPerWorkload` waiting requests, 503 `overloaded`; nothing to wait for, 503 `no healthy
 * upstream` with why nothing runs the workload when `notRun` knows.
 */
import { timeoutMsIn } from '../config/compile-workload.js';
import { ERRORS, type LocalReply } from '../filter/index.js';
import { whenFirstChecked, type Replica } from '../routing/index.js';
import type { DataPlaneOptions } from './dataplane-options.js';
import type { Exchange } from './exchange.js';
import type { Route, RouteTable } from './routes.js';

/** Requests of one workload that may wait for a starting replica at once (DESIGN §10). */
export const MAX_HELD_PER_WORKLOAD = 1000;

/** A request waiting for a replica to turn ready. */
interface HeldRequest {
  readonly location: string | undefined;
  wake(): void;
}

/** Route a request that waited again (the pipeline's dispatch, with `waited` set). */
export type Resume = (ex: Exchange, table: RouteTable, route: Route, tls: boolean) => void;

export class Activator {
  /**
   * Asked when a request finds no replica ready or starting: true when a replica of the workload
   * (in `location`, when fixed) is being started for it (`up`'s scaler, scale from zero).
   */
  activate: ((workload: string, location: string | undefined) => boolean) | undefined = undefined;
  /**
   * Asked when a request finds no replica and none to wait for: why nothing runs the workload (`up`:
   * src/local/not-run.ts), said after `no healthy upstream: ` so clients matching the message still
   * match; undefined: the plain answer. Off the request path: only a refused request asks.
   */
  notRun: ((workload: string) => string | undefined) | undefined = undefined;
  /** Requests waiting for a starting replica, per workload (see holdForStarting). */
  private readonly held = new Map<string, Set<HeldRequest>>();

  constructor(private readonly opts: DataPlaneOptions, private readonly resume: Resume) {
    opts.replicas.on('ready', (replica: Replica) => this.wakeHeld(replica));
  }

  /**
   * None of the workload's replicas is ready. When some have not completed a first readiness check
   * (a router that just started: deployment replicas' first checks are spread over its first
   * seconds), run those checks now and route again once one made a replica ready, all are done, or
   * `FIRST_CHECK_WAIT_MS` passed, instead of answering 503 before a replica was ever checked.
   * Returns false when there is nothing to wait for.
   */
  awaitFirstChecks(ex: Exchange, table: RouteTable, route: Route, tls: boolean): boolean {
    const checked = whenFirstChecked(this.opts.replicas, route.workload.key, this.opts.deps.clock);
    if (checked === undefined) return false;
    ex.debugInfo?.queued(this.opts.deps.clock.now());
    void checked.then(() => this.resume(ex, table, route, tls));
    return true;
  }

  /**
   * No replica is ready, but one is starting (`up` just started its process): the request waits for
   * a replica of its workload (in its location, when fixed) to turn ready, then is routed again; the
   * workload's timeout covers the wait (504 `upstream request timeout`). At most `maxHeld` requests
   * of one workload wait; past that, 503 `overloaded`. False when there is nothing to wait for.
   */
  holdForStarting(ex: Exchange, table: RouteTable, route: Route, tls: boolean): boolean {
    const key = route.workload.key;
    if (ex.isFinished) return false;
    // Nothing starting: a workload scaled to zero may be woken (`up`'s scaler starts a replica).
    if (!this.opts.replicas.hasStarting(key, route.fixedLocation) && !this.activate?.(key, route.fixedLocation)) return false;
    this.hold(ex, table, route, tls);
    return true;
  }

  /** Holds the request until a replica of its workload turns ready or finishes a request (see holdForStarting). */
  hold(ex: Exchange, table: RouteTable, route: Route, tls: boolean): void {
    const key = route.workload.key;
    let waiting = this.held.get(key);
    if (!waiting) this.held.set(key, (waiting = new Set()));
    if (waiting.size >= (this.opts.maxHeldPerWorkload ?? MAX_HELD_PER_WORKLOAD)) {
      ex.reply({ code: 'OVERLOADED' });
      return;
    }
    ex.startTimeout(timeoutMsIn(route.workload, route.fixedLocation));
    ex.debugInfo?.queued(this.opts.deps.clock.now());
    const set = waiting;
    const release = (): void => {
      set.delete(waiter);
      if (set.size === 0 && this.held.get(key) === set) this.held.delete(key);
      if (ex.abortUpstream === release) ex.abortUpstream = undefined;
    };
    const waiter: HeldRequest = {
      location: route.fixedLocation,
      wake: () => {
        release();
        this.resume(ex, table, route, tls);
      },
    };
    set.add(waiter);
    // The timeout or the client going away ends the wait.
    ex.abortUpstream = release;
  }

  /** Requests of a workload waiting for a replica: in `location` (fixed there), or anywhere (location undefined). */
  heldCount(workload: string): { readonly anywhere: number; readonly byLocation: ReadonlyMap<string, number> } {
    let anywhere = 0;
    const byLocation = new Map<string, number>();
    for (const waiter of this.held.get(workload) ?? []) {
      if (waiter.location === undefined) anywhere++;
      else byLocation.set(waiter.location, (byLocation.get(waiter.location) ?? 0) + 1);
    }
    return { anywhere, byLocation };
  }

  /** The oldest request waiting for `replica`'s workload (in its location, or anywhere) is routed. */
  private wakeOldest(replica: Replica): void {
    const waiting = this.held.get(replica.workload);
    if (!waiting) return;
    for (const waiter of waiting) {
      if (waiter.location !== undefined && waiter.location !== replica.location) continue;
      waiter.wake();
      return;
    }
  }

  /** 503 `no healthy upstream`, with why nothing runs the workload when `notRun` knows. */
  noHealthyUpstream(workload: string): LocalReply {
    const why = this.notRun?.(workload);
    return why === undefined ? { code: 'NO_HEALTHY_UPSTREAM' } : { code: 'NO_HEALTHY_UPSTREAM', message: `${ERRORS.NO_HEALTHY_UPSTREAM.message}: ${why}` };
  }

  /** A replica turned ready: the requests waiting for its workload (and location) are routed. */
  private wakeHeld(replica: Replica): void {
    if (!replica.ready) return;
    const waiting = this.held.get(replica.workload);
    if (!waiting) return;
    for (const waiter of [...waiting]) if (waiter.location === undefined || waiter.location === replica.location) waiter.wake();
  }

  /** An exchange is over: a replica at its concurrency cap took one request less, so the oldest request waiting goes. */
  finished(ex: Exchange): void {
    if (this.held.size > 0 && ex.replica !== undefined) this.wakeOldest(ex.replica);
  }
}
