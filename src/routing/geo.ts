/**
 * Geo routing for canonical endpoints (DESIGN §5, the GVC's `locationOptions`): choose the
 * location a request goes to. Unavailable candidates (no ready replica, or suspended there) are
 * dropped; so are those whose measured latency exceeds their `latencyToleranceMs`, unless that
 * would drop every available one. Of the rest, the lowest `routingTier` group wins (a location
 * without a tier ranks after every tiered one), and within it the lowest measured latency plus
 * `latencyOffsetMs`. A location whose latency is not yet known ranks after every measured one of
 * its tier (traffic prefers locations this router has seen answer); unknown ones compare by their
 * offset alone. Remaining ties go to the earliest candidate, which `geoCandidates` lists in the
 * GVC's location order. `undefined` when no candidate is available (503 `no healthy upstream`).
 * One pass, no allocation.
 */
import type { Snapshot, WorkloadModel } from '../config/model.js';
import type { ReplicaRegistry } from './replicas.js';

export interface GeoCandidate {
  readonly name: string;
  /** Has a ready replica and is not suspended in this location. */
  readonly available: boolean;
  /** EWMA of probe round trips, or the location's pinned `latencyMs`; undefined while unknown. */
  readonly measuredLatencyMs?: number;
  readonly routingTier?: number;
  readonly latencyOffsetMs: number;
  readonly latencyToleranceMs?: number;
}

function known(latency: number | undefined): latency is number {
  return latency !== undefined && Number.isFinite(latency);
}

function withinTolerance(c: GeoCandidate): boolean {
  return !known(c.measuredLatencyMs) || c.latencyToleranceMs === undefined || c.measuredLatencyMs <= c.latencyToleranceMs;
}

export function chooseLocation(candidates: readonly GeoCandidate[]): string | undefined {
  let anyWithin = false;
  for (const c of candidates) {
    if (c.available && withinTolerance(c)) {
      anyWithin = true;
      break;
    }
  }

  let best: GeoCandidate | undefined;
  let bestTier = 0;
  let bestUnknown = false;
  let bestScore = 0;
  for (const c of candidates) {
    if (!c.available) continue;
    if (anyWithin && !withinTolerance(c)) continue;
    const tier = c.routingTier ?? Number.POSITIVE_INFINITY;
    const latency = c.measuredLatencyMs;
    const unknown = !known(latency);
    const score = (unknown ? 0 : latency) + c.latencyOffsetMs;
    // Lexicographic (tier, unknown, score); strict `<` keeps the earliest candidate on ties.
    if (
      best === undefined ||
      tier < bestTier ||
      (tier === bestTier && (unknown !== bestUnknown ? !unknown : score < bestScore))
    ) {
      best = c;
      bestTier = tier;
      bestUnknown = unknown;
      bestScore = score;
    }
  }
  return best?.name;
}

/**
 * Candidates for one workload, in the GVC's location order. A location is available when the
 * workload is not suspended there (globally, or by its `localOptions`: `suspend` or `maxScale` 0)
 * and has a ready replica. A location's pinned `status.latencyMs` wins over `latencyOf`.
 */
export function geoCandidates(
  snapshot: Snapshot,
  workload: WorkloadModel,
  replicas: Pick<ReplicaRegistry, 'hasReady'>,
  latencyOf: (location: string) => number | undefined,
): GeoCandidate[] {
  const gvc = snapshot.gvcs.get(workload.gvc);
  if (!gvc) return [];
  const out: GeoCandidate[] = [];
  for (const name of gvc.locations) {
    const options = workload.locationOptions.get(name) ?? workload.defaultOptions;
    const suspended = workload.globallySuspended || options.suspend || options.maxScale === 0;
    const placement = gvc.locationOptions.get(name);
    out.push({
      name,
      available: !suspended && replicas.hasReady(workload.key, name),
      measuredLatencyMs: snapshot.locations.get(name)?.latencyMs ?? latencyOf(name),
      routingTier: placement?.routingTier,
      latencyOffsetMs: placement?.latencyOffsetMs ?? 0,
      latencyToleranceMs: placement?.latencyToleranceMs,
    });
  }
  return out;
}
