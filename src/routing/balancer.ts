/**
 * Replica choice inside one location: least outstanding requests of two random choices (Envoy's
 * LEAST_REQUEST with `choice_count: 2`). Eligible replicas are ready (or any, with
 * `includeNotReady`, for `svc/publishNotReadyAddresses` internal endpoints) and not ejected
 * (`ejectedUntil <= now`); an ejected replica is never chosen, so capping ejections is the
 * outlier detector's job. `exclude` (the replica a retry just failed on) is avoided whenever
 * another eligible replica exists. The two choices are distinct; on equal load the first wins.
 * `undefined` when nothing is eligible (503 `no healthy upstream`). Scans the list in place and
 * allocates nothing.
 */
import type { Replica } from './replicas.js';

export interface PickOptions {
  readonly includeNotReady?: boolean;
  readonly exclude?: Replica;
}

function eligible(r: Replica, now: number, includeNotReady: boolean, exclude: Replica | undefined): boolean {
  return r !== exclude && (includeNotReady || r.ready) && r.ejectedUntil <= now;
}

/** The `k`-th (0-based) eligible replica; the caller guarantees it exists. */
function nth(
  replicas: readonly Replica[],
  k: number,
  now: number,
  includeNotReady: boolean,
  exclude: Replica | undefined,
): Replica {
  for (const r of replicas) {
    if (eligible(r, now, includeNotReady, exclude) && k-- === 0) return r;
  }
  throw new Error('unreachable: fewer eligible replicas than counted');
}

function randomBelow(random: () => number, n: number): number {
  const i = Math.floor(random() * n);
  return i >= n ? n - 1 : i < 0 ? 0 : i;
}

export function pickReplica(
  replicas: readonly Replica[],
  random: () => number,
  now: number,
  opts?: PickOptions,
): Replica | undefined {
  const includeNotReady = opts?.includeNotReady === true;
  const exclude = opts?.exclude;
  let count = 0;
  for (const r of replicas) if (eligible(r, now, includeNotReady, exclude)) count++;
  if (count === 0 && exclude !== undefined && eligible(exclude, now, includeNotReady, undefined)) {
    // The excluded replica is the only eligible one: a retry on it beats no retry.
    return replicas.includes(exclude) ? exclude : undefined;
  }
  if (count === 0) return undefined;
  if (count === 1) return nth(replicas, 0, now, includeNotReady, exclude);

  const i = randomBelow(random, count);
  let j = randomBelow(random, count - 1);
  if (j >= i) j++;
  const a = nth(replicas, i, now, includeNotReady, exclude);
  const b = nth(replicas, j, now, includeNotReady, exclude);
  return b.outstanding < a.outstanding ? b : a;
}
