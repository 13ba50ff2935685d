/**
 * `up`'s autoscaler (DESIGN §10): per workload and location, how many replicas to run, decided by
 * `decideScale` (./autoscale.ts, pure) once a second from what the data plane sees: requests in
 * flight to the replicas (their `outstanding`), requests held for a replica, and when the last
 * request was answered (the workload's request count moving). A request that finds nothing to serve
 * it wakes a workload scaled to zero at once (`wake`), in its location or, for a geo-routed host,
 * the first location of its GVC that can run it. When a count changes the supervisor applies the
 * snapshot again with the new counts; scaling never changes `SVC_WORKLOAD_VERSION`. Suspended,
 * `maxScale: 0` and ignored workloads are never woken. Time comes from the injected clock.
 */
import type { Logger } from 'pino';
import type { Snapshot, WorkloadModel, WorkloadOptionsModel } from '../config/model.js';
import type { Clock, Timer } from '../deps.js';
import type { ReplicaRegistry } from '../routing/replicas.js';
import { INITIAL_SCALE_STATE, decideScale, type ScaleState } from './autoscale.js';
import { upRuns } from './plan.js';

export interface ScalerOptions {
  readonly snapshot: () => Snapshot;
  readonly registry: ReplicaRegistry;
  /** Requests of a workload held for a replica: anywhere, and per fixed location. */
  readonly held: (workload: string) => { readonly anywhere: number; readonly byLocation: ReadonlyMap<string, number> };
  /** Requests answered for a workload so far (any location). */
  readonly requests: (workload: string) => number;
  /** Apply the current counts (the supervisor starts and stops replicas). */
  readonly apply: () => void;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Decision period (default 1 s). */
  readonly tickMs?: number;
  /** The scale-down stabilization window (tests shorten it; default the decision function's). */
  readonly scaleDownWindowMs?: number;
}

const key = (workload: string, location: string): string => `${workload}\u0000${location}`;

export class Scaler {
  private readonly states = new Map<string, ScaleState>();
  private readonly seen = new Map<string, number>();
  private readonly lastRequestAt = new Map<string, number>();
  private timer: Timer | undefined;
  private stopped = false;

  constructor(private readonly opts: ScalerOptions) {}

  /** The count for the supervisor's plan; undefined before the first decision (then `minScale`). */
  readonly desired = (workload: string, location: string): number | undefined => this.states.get(key(workload, location))?.desired;

  start(): void {
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    this.opts.clock.clearTimeout(this.timer);
  }

  /**
   * A request found no replica ready or starting: start one when the workload can run here. True
   * when one is being started (the request may wait for it).
   */
  wake(workload: string, location: string | undefined): boolean {
    const snapshot = this.opts.snapshot();
    const model = snapshot.workloads.get(workload);
    if (!model || !this.runnable(model, snapshot)) return false;
    const gvcLocations = snapshot.gvcs.get(model.gvc)?.locations ?? [];
    const where = location ?? gvcLocations.find((l) => this.canRun(this.optionsOf(model, l)));
    if (where === undefined || !gvcLocations.includes(where) || !this.canRun(this.optionsOf(model, where))) return false;
    const k = key(workload, where);
    const state = this.states.get(k) ?? INITIAL_SCALE_STATE(this.optionsOf(model, where).minScale);
    // A replica is wanted now; the next decision carries it on (the waiting request counts as traffic).
    if (state.desired < 1) {
      this.states.set(k, { ...state, desired: 1, lowSince: undefined });
      this.lastRequestAt.set(workload, this.opts.clock.now());
      this.opts.logger.info({ workload, location: where }, 'scaling from zero: a request is waiting');
      this.opts.apply();
    }
    return true;
  }

  /** One decision for every workload and location `up` runs; applies when a count changed. */
  tick(): void {
    const snapshot = this.opts.snapshot();
    const now = this.opts.clock.now();
    let changed = false;
    const live = new Set<string>();
    for (const model of snapshot.workloads.values()) {
      if (!this.runnable(model, snapshot)) continue;
      const served = this.opts.requests(model.key);
      if (served !== this.seen.get(model.key)) {
        if (this.seen.has(model.key)) this.lastRequestAt.set(model.key, now);
        this.seen.set(model.key, served);
      }
      const held = this.opts.held(model.key);
      const gvcLocations = snapshot.gvcs.get(model.gvc)?.locations ?? [];
      const first = gvcLocations.find((l) => this.canRun(this.optionsOf(model, l)));
      for (const location of gvcLocations) {
        const options = this.optionsOf(model, location);
        if (!this.canRun(options)) continue;
        const k = key(model.key, location);
        live.add(k);
        let inFlight = 0;
        for (const r of this.opts.registry.list(model.key, location)) inFlight += r.outstanding;
        const waiting = (held.byLocation.get(location) ?? 0) + (location === first ? held.anywhere : 0);
        const before = this.states.get(k) ?? INITIAL_SCALE_STATE(options.minScale);
        const after = decideScale(before, {
          minScale: options.minScale,
          maxScale: options.maxScale,
          metric: options.metric,
          target: options.target,
          maxConcurrency: options.maxConcurrency,
          scaleToZeroDelayMs: options.scaleToZeroDelaySeconds === undefined ? undefined : options.scaleToZeroDelaySeconds * 1000,
          ...(this.opts.scaleDownWindowMs !== undefined ? { scaleDownWindowMs: this.opts.scaleDownWindowMs } : {}),
          now,
          inFlight,
          waiting,
          lastRequestAt: this.lastRequestAt.get(model.key),
        });
        this.states.set(k, after);
        if (after.desired !== before.desired) {
          changed = true;
          this.opts.logger.info({ workload: model.key, location, from: before.desired, to: after.desired, inFlight, waiting }, 'scaling');
        }
      }
    }
    for (const k of [...this.states.keys()]) if (!live.has(k)) this.states.delete(k);
    if (changed) this.opts.apply();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = this.opts.clock.setTimeout(() => {
      this.tick();
      this.schedule();
    }, this.opts.tickMs ?? 1000);
    this.timer.unref?.();
  }

  private optionsOf(model: WorkloadModel, location: string): WorkloadOptionsModel {
    return model.locationOptions.get(location) ?? model.defaultOptions;
  }

  private canRun(options: WorkloadOptionsModel): boolean {
    return !options.suspend && options.maxScale > 0;
  }

  /** A workload `up` runs processes for and may scale (the plan's rule). */
  private runnable(model: WorkloadModel, snapshot: Snapshot): boolean {
    return upRuns(model, snapshot.settings.vendor);
  }
}
