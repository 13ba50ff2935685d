/**
 * Where a list differs from an earlier one, by identity: what an index kept by a long-lived process
 * (catalog.ts, the platform API's record index) changes instead of building again. Pure.
 */

/** The run of `before` that `after` replaced (the same objects at both ends), the run that took its place, and how many follow. */
export interface Replaced<T> {
  readonly removed: readonly T[];
  readonly added: readonly T[];
  /** Items after the runs (the same in both). */
  readonly tail: number;
}

export function replacedRun<T>(before: readonly T[], after: readonly T[]): Replaced<T> {
  let head = 0;
  while (head < before.length && head < after.length && before[head] === after[head]) head++;
  let tail = 0;
  while (tail < before.length - head && tail < after.length - head && before[before.length - 1 - tail] === after[after.length - 1 - tail]) tail++;
  return { removed: before.slice(head, before.length - tail), added: after.slice(head, after.length - tail), tail };
}
