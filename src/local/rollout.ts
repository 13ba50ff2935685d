/**
 * How fast `up` replaces a workload's replicas when a reload changes what they run (DESIGN §10), as
 * Kubernetes' RollingUpdate does: `rolloutOptions.maxSurgeReplicas` replicas may run above the
 * wanted count (a number, or a percentage of it rounded up) and `maxUnavailableReplicas` may be
 * missing from it (rounded down); when both come to 0, one may surge, so a rollout always moves.
 * Defaults are Kubernetes' 25% and 25%. A replacement counts as available once it has been ready
 * for `minReadySeconds`. Pure functions; the supervisor applies them (src/local/supervisor.ts).
 */

import type { RolloutModel } from '../config/model.js';

const DEFAULT_PERCENT = '25%';

/** A count or `N%` of `total`, rounded up or down; anything unreadable is the default percentage. */
function amount(value: number | string | undefined, total: number, roundUp: boolean): number {
  const v = value ?? DEFAULT_PERCENT;
  if (typeof v === 'number') return Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
  const m = /^(\d+)%$/.exec(v.trim());
  if (!m) return amount(DEFAULT_PERCENT, total, roundUp);
  const exact = (Number(m[1]) / 100) * total;
  return roundUp ? Math.ceil(exact) : Math.floor(exact);
}

/** Replicas a rollout of `desired` may add above it (`surge`) and take away below it (`unavailable`). */
export function rolloutLimits(rollout: RolloutModel | undefined, desired: number): { surge: number; unavailable: number } {
  const n = Math.max(0, Math.floor(desired));
  let surge = amount(rollout?.maxSurgeReplicas, n, true);
  const unavailable = Math.min(n, amount(rollout?.maxUnavailableReplicas, n, false));
  if (surge === 0 && unavailable === 0) surge = 1;
  return { surge, unavailable };
}

/** What one step of a rollout in a workload's location may do now. */
export interface RolloutStep {
  /** Start a replacement while the old replica keeps serving (surge). */
  readonly surge: boolean;
  /** Stop the old replica now and start its replacement in its place (an unavailable slot). */
  readonly replaceInPlace: boolean;
}

/**
 * For the next outdated replica: `total` replicas run (old, new and surging), `available` are ready
 * (replacements only after `minReadySeconds`), `oldReady` whether that one is ready.
 */
export function rolloutStep(limits: { surge: number; unavailable: number }, desired: number, total: number, available: number, oldReady: boolean): RolloutStep {
  if (total < desired + limits.surge) return { surge: true, replaceInPlace: false };
  // An old replica that is not ready serves nothing: replacing it costs no availability.
  if (!oldReady || available - 1 >= desired - limits.unavailable) return { surge: false, replaceInPlace: true };
  return { surge: false, replaceInPlace: false };
}
