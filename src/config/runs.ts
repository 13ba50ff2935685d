/**
 * Where a list differs from an earlier one, by identity: what an index kept by a long-lived process
 * (catalog.ts, the platform API's record index) changes instead of building again. Pure.
 */
import { LayeredMap } from '../layered-map.js';

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

/**
 * The index by key of `after` (each key's only item), made from `index`, that of `before`, when
 * `after` replaces a run of at most `few` of its items (`replacedRun`) and no key comes twice:
 * layered over it (layered-map.ts) rather than every item keyed again. Undefined otherwise: the
 * caller indexes `after` in full. Items `keyOf` gives no key are left out.
 */
export function keyedAfter<T>(index: ReadonlyMap<string, T>, before: readonly T[], after: readonly T[], keyOf: (item: T) => string | undefined, few: number): LayeredMap<string, T> | undefined {
  const { removed, added } = replacedRun(before, after);
  if (removed.length + added.length > few) return undefined;
  const next = LayeredMap.next(index);
  for (const item of removed) {
    const key = keyOf(item);
    if (key === undefined) continue;
    if (next.get(key) !== item) return undefined;
    next.delete(key);
  }
  for (const item of added) {
    const key = keyOf(item);
    if (key === undefined) continue;
    if (next.has(key)) return undefined;
    next.set(key, item);
  }
  return next;
}
