/**
 * A workload's health in one location, as a pure function of what its replicas are doing: one of the
 * platform spec's values `Loading`, `Healthy`, `Unhealthy`, `Deleting`, `Unknown` (DESIGN §10). The
 * spec names the values but not the rule; this is the rule `svcproxy up` uses (README states it):
 *
 * - `Deleting`: the workload, or this location of its GVC, was removed from the configuration or
 *   suspended, and some of its replicas are still there (stopping).
 * - `Healthy`: at least one replica is ready (it serves requests; `ready` and `replicas` in
 *   `/workloads` say how many of how many), or none is wanted (scaled to zero: the first request
 *   starts one).
 * - `Loading`: replicas are starting (or about to be, or replacing stopped ones), none has been
 *   ready since it was started, none has restarted `MAX_LOADING_RESTARTS` times, and the oldest
 *   started less than the loading deadline ago (the readiness probe's own failure budget,
 *   `initialDelaySeconds + periodSeconds × failureThreshold`, at least `MIN_LOADING_DEADLINE_MS`).
 * - `Unhealthy`: replicas exist, none is ready, and one was ready since its start and is not now
 *   (its probe fails or it crashed), or one crashed `MAX_LOADING_RESTARTS` times, or the deadline
 *   passed; and a replica svcproxy does not run (`deployment`) that was checked and is not ready.
 * - `Unknown`: nothing to judge: a suspended workload with nothing running, a location without
 *   replicas that nothing starts, or `deployment` replicas not probed yet.
 *
 * Nothing here reads a clock: `nowMs` comes in, so the deadline is table-tested.
 */
import type { ProbeModel } from '../config/model.js';

export const HEALTH_VALUES = ['Loading', 'Healthy', 'Unhealthy', 'Deleting', 'Unknown'] as const;
export type Health = (typeof HEALTH_VALUES)[number];

/** Crash restarts (since a replica was started) that end `Loading`: a crash loop is not loading. */
export const MAX_LOADING_RESTARTS = 3;

/** The least time a starting replica may take to turn ready before its workload is `Unhealthy`. */
export const MIN_LOADING_DEADLINE_MS = 30_000;

export interface ReplicaFacts {
  readonly ready: boolean;
  /** Its processes are being stopped (the replica was removed, replaced or scaled down). */
  readonly stopping: boolean;
  /** It has been ready at least once since it was started (a crash restart does not reset this). */
  readonly wasReady: boolean;
  /** Crash restarts of its processes since it was started. */
  readonly restarts: number;
  /** When svcproxy started it (clock ms); absent for a replica it does not run (`deployment`). */
  readonly startedAtMs?: number;
  /** Its readiness was checked at least once (false: a `deployment` replica awaiting its first probe). */
  readonly checked: boolean;
}

export interface HealthInput {
  /** The workload and this location of its GVC are in the configuration. */
  readonly configured: boolean;
  readonly suspended: boolean;
  /** Replicas `up` runs here; undefined when nothing starts them (`deployment` records, no command). */
  readonly wanted: number | undefined;
  readonly replicas: readonly ReplicaFacts[];
  readonly nowMs: number;
  /** See `loadingDeadlineMs`. */
  readonly loadingDeadlineMs: number;
}

/** How long a starting replica may stay not ready: its probe's failure budget, at least 30 s. */
export function loadingDeadlineMs(probe: ProbeModel | undefined): number {
  if (probe === undefined) return MIN_LOADING_DEADLINE_MS;
  const budget = (probe.initialDelaySeconds + probe.periodSeconds * probe.failureThreshold) * 1000;
  return Math.max(MIN_LOADING_DEADLINE_MS, budget);
}

export function workloadHealth(input: HealthInput): Health {
  if (!input.configured || input.suspended) return input.replicas.length > 0 ? 'Deleting' : 'Unknown';
  const live = input.replicas.filter((r) => !r.stopping);
  if (live.some((r) => r.ready)) return 'Healthy';
  if (live.length === 0) {
    if (input.wanted === undefined) return 'Unknown';
    // None wanted: scaled to zero. Wanted: being launched, or replacing replicas still stopping.
    return input.wanted === 0 ? 'Healthy' : 'Loading';
  }
  if (live.every((r) => !r.checked)) return 'Unknown';
  let oldest = Number.POSITIVE_INFINITY;
  for (const r of live) {
    if (r.wasReady || r.restarts >= MAX_LOADING_RESTARTS) return 'Unhealthy';
    // A checked replica svcproxy does not run has no start to wait for: not ready is failing.
    if (r.startedAtMs === undefined) {
      if (r.checked) return 'Unhealthy';
    } else {
      oldest = Math.min(oldest, r.startedAtMs);
    }
  }
  return input.nowMs - oldest >= input.loadingDeadlineMs ? 'Unhealthy' : 'Loading';
}
