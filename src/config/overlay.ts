/**
 * The records in force under a config store that also takes changes through an API (DESIGN §13):
 * the base records (config files, then records given in memory) with the API's overlay on top, each
 * record stamped with its meta (record-meta.ts). Per record the later change wins: an overlay entry
 * remembers the content hash of the files' version of its record when it was made (`base`); when the
 * files' version no longer has that hash (the file was edited after the API's change, or the record
 * was added to or removed from the files), the file wins and the entry is dropped (`reconcile`).
 * This needs no clocks and holds across restarts. Pure functions; never throw.
 */
import { deepFreeze, frozen } from './frozen.js';
import { INLINE } from './findings.js';
import { contentHash, firstMeta, nextMeta, recordKey, withMeta, type RecordMeta } from './record-meta.js';
import type { SourcedRecord } from './records.js';
import type { OverlayEntry } from './record-state.js';
import { LayeredMap } from '../layered-map.js';

/** The content hash of the first record of each key among the base records. */
export function baseHashes(base: readonly SourcedRecord[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const s of base) {
    const key = recordKey(s.record);
    if (key !== undefined && !out.has(key)) out.set(key, contentHash(s.record));
  }
  return out;
}

/** The overlay entries that still apply over `hashes` (baseHashes), and the keys of those dropped. */
export function reconcile(hashes: ReadonlyMap<string, string>, overlay: ReadonlyMap<string, OverlayEntry>): { kept: Map<string, OverlayEntry>; dropped: string[] } {
  const kept = new Map<string, OverlayEntry>();
  const dropped: string[] = [];
  for (const [key, entry] of overlay) {
    if ((hashes.get(key) ?? null) === entry.base) kept.set(key, entry);
    else dropped.push(key);
  }
  return { kept, dropped };
}

/**
 * The base records with the overlay applied: an entry's record takes the place of the first base
 * record of its key (later ones stay, so a duplicate in the files is still reported), a deletion
 * removes it, and records only the overlay has come after the base ones, in the overlay's order.
 * The overlay's records have `source` as their place (what validation's findings name).
 */
export function compose(base: readonly SourcedRecord[], overlay: ReadonlyMap<string, OverlayEntry>, source = INLINE): SourcedRecord[] {
  if (overlay.size === 0) return [...base];
  const out: SourcedRecord[] = [];
  const placed = new Set<string>();
  for (const s of base) {
    const key = recordKey(s.record);
    const entry = key === undefined || placed.has(key) ? undefined : overlay.get(key);
    if (entry === undefined) {
      out.push(s);
      continue;
    }
    placed.add(key!);
    if (entry.record !== undefined) out.push({ record: entry.record, source });
  }
  for (const [key, entry] of overlay) {
    if (!placed.has(key) && entry.record !== undefined) out.push({ record: entry.record, source });
  }
  return out;
}

export interface Stamped {
  /** The records, each with its meta in its read-only members (records without a key as they were). */
  readonly records: SourcedRecord[];
  /** Meta of every key in `records`. */
  readonly meta: ReadonlyMap<string, RecordMeta>;
  /** Keys whose meta is new or changed since `previous`, and keys of `previous` no record has now. */
  readonly changed: Set<string>;
}

/**
 * The stamped copy of each frozen record, with the meta it was stamped with and its place: a write
 * stamps the same 20,000 base records again, and a record whose meta did not move gets the copy it
 * had (no copy, no freeze, and the same object downstream, where compile.ts reuses its model).
 */
const stampedCopies = new WeakMap<object, { readonly meta: RecordMeta; readonly sourced: SourcedRecord }>();

/**
 * Meta for `records`: kept from `previous` while the content is the same, bumped when it changed
 * (`now` as `lastModified`), first-sight meta for new keys (`newId(key)` for their id, when given).
 */
export function stamp(records: readonly SourcedRecord[], previous: ReadonlyMap<string, RecordMeta>, now: string, newId?: (key: string) => string | undefined): Stamped {
  const meta = new Map<string, RecordMeta>();
  const changed = new Set<string>();
  const out: SourcedRecord[] = [];
  for (const s of records) {
    const key = recordKey(s.record);
    if (key === undefined) {
      out.push(s);
      continue;
    }
    let m = meta.get(key);
    if (m === undefined) {
      const before = previous.get(key);
      m = before === undefined ? firstMeta(s.record, key, now, newId?.(key)) : nextMeta(before, contentHash(s.record), now);
      if (m !== before) changed.add(key);
      meta.set(key, m);
    }
    const copy = stampedCopies.get(s.record);
    if (copy !== undefined && copy.meta === m && copy.sourced.source === s.source && copy.sourced.line === s.line) {
      out.push(copy.sourced);
      continue;
    }
    // A record parsed from a file is frozen already: freezing the copy costs one object. Others
    // (records given in memory) are copied first, so the caller's objects stay theirs.
    const record = withMeta(s.record, m);
    const sourced = { ...s, record: Object.isFrozen(s.record) ? deepFreeze(record) : frozen(record) };
    if (Object.isFrozen(s.record)) stampedCopies.set(s.record, { meta: m, sourced });
    out.push(sourced);
  }
  for (const key of previous.keys()) if (!meta.has(key)) changed.add(key);
  return { records: out, meta, changed };
}

/** Where each key's record is in a composed list; -1 for a key that has several. */
export function positionsOf(records: readonly SourcedRecord[]): Map<string, number> {
  const out = new Map<string, number>();
  records.forEach((s, i) => {
    const key = recordKey(s.record);
    if (key !== undefined) out.set(key, out.has(key) ? -1 : i);
  });
  return out;
}

/** A composed and stamped list with where each key's record is in it. */
export interface Recomposed extends Stamped {
  /** `positionsOf(records)`, when it was kept or made along. */
  readonly positions: ReadonlyMap<string, number> | undefined;
  /** Where the record of the key changed is in `records`; undefined when it was removed. */
  readonly at: number | undefined;
}

/**
 * What `stamp(compose(base, overlay))` makes (with the overlay's records placed as a write's, at
 * `INLINE`) when the overlay differs at `key` alone, from what it made of the overlay before
 * (`previous`, its `positions`): the record of `key` replaced, removed, or added after the others,
 * and every other record and its meta as they were. Undefined where that is not what a composition
 * does: the key has several records (in force or in the files: the API's record takes the first's
 * place), or none while the files have one (an API deletion of a file's record written again goes
 * back to that record's place).
 */
export function recomposed(
  previous: { readonly records: readonly SourcedRecord[]; readonly meta: ReadonlyMap<string, RecordMeta> },
  positions: ReadonlyMap<string, number>,
  /** `positionsOf` the base records. */
  basePositions: ReadonlyMap<string, number>,
  key: string,
  entry: OverlayEntry | undefined,
  inBase: boolean,
  now: string,
  newId?: (key: string) => string | undefined,
): Recomposed | undefined {
  const at = positions.get(key);
  if (at === -1 || basePositions.get(key) === -1 || (at === undefined && inBase)) return undefined;
  // Layered over the meta before (layered-map.ts), not a copy of 20,000 entries.
  const meta = LayeredMap.next(previous.meta);
  const records = [...previous.records];
  if (entry?.record === undefined) {
    if (at === undefined) return { records, meta, changed: new Set(), positions, at: undefined };
    records.splice(at, 1);
    meta.delete(key);
    return { records, meta, changed: new Set([key]), positions: undefined, at: undefined };
  }
  const before = previous.meta.get(key);
  const one = stamp([{ record: entry.record, source: INLINE }], before === undefined ? new Map() : new Map([[key, before]]), now, newId);
  meta.set(key, one.meta.get(key)!);
  if (at !== undefined) {
    records[at] = one.records[0]!;
    return { records, meta, changed: one.changed, positions, at };
  }
  records.push(one.records[0]!);
  const grown = new Map(positions);
  grown.set(key, records.length - 1);
  return { records, meta, changed: one.changed, positions: grown, at: records.length - 1 };
}
