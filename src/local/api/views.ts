/**
 * What the platform API shows of the records `up` holds (platform spec, Resources): each record as
 * in force, with the read-only common fields (`id`, `version`, `created`, `lastModified`: the config
 * store's meta, filled in here for records that have none) and `links`, and a secret reduced to its
 * common fields and `type`: its `data` (the sensitive content) is never shown, nor any member not on
 * that list, so a secret shape the spec does not show cannot leak either (`reveal` shows it whole).
 * Lists in the platform's list shape, `{kind: 'list', itemKind, items, links}`. The index of a
 * snapshot's records is built once per snapshot (a WeakMap), so a request costs a lookup, and made
 * from the one made before when a write changed a few records (`changedIndex`). Pure apart from
 * those caches; never throws.
 */
import type { Snapshot } from '../../config/model.js';
import type { RawRecord } from '../../config/records.js';
import { recordKey, stableId } from '../../config/record-meta.js';
import { replacedRun } from '../../config/runs.js';
import { LayeredMap } from '../../layered-map.js';

export { stableId };

export interface Link {
  readonly rel: string;
  readonly href: string;
}

/** The platform's list response (its CLI reads `kind: 'list'` and `itemKind` to pick its table). */
export interface ListResponse {
  readonly kind: 'list';
  readonly itemKind: string;
  readonly items: readonly Record<string, unknown>[];
  readonly links: readonly Link[];
}

/** The records of one snapshot by kind and key (`name`, or `gvc/name` for GVC-scoped kinds and per-GVC quotas). */
export interface RecordIndex {
  readonly org: string;
  readonly orgRecord: RawRecord | undefined;
  of(kind: string): ReadonlyMap<string, RawRecord>;
}

interface Indexed {
  readonly index: RecordIndex;
  readonly records: readonly RawRecord[];
  readonly byKind: ReadonlyMap<string, ReadonlyMap<string, RawRecord>>;
  /** Some key has several records (the first is indexed). */
  readonly duplicates: boolean;
}

const indexes = new WeakMap<Snapshot, Indexed>();
/** The index made last: the next snapshot's is made from it when a write changed a few records. */
let last: Indexed | undefined;

/** Changes beyond this many records are indexed again in full. */
const FEW = 16;

/** `kind` and the index's key (`name`, or `gvc/name`) of a record; undefined for one without a key. */
function kindKey(record: RawRecord): [kind: string, key: string] | undefined {
  const full = recordKey(record);
  if (full === undefined) return undefined;
  const kind = record.kind as string;
  // `kind/name` or `kind/gvc/name`: the index is per kind.
  return [kind, full.slice(kind.length + 1)];
}

/** The index of `records` built in full (exported for the tests that hold `indexOf` to it). */
export function fullIndex(records: readonly RawRecord[]): { byKind: Map<string, Map<string, RawRecord>>; duplicates: boolean } {
  const byKind = new Map<string, Map<string, RawRecord>>();
  let duplicates = false;
  for (const record of records) {
    const k = kindKey(record);
    if (k === undefined) continue;
    let map = byKind.get(k[0]);
    if (!map) byKind.set(k[0], (map = new Map()));
    if (!map.has(k[1])) map.set(k[1], record);
    else duplicates = true;
  }
  return { byKind, duplicates };
}

/**
 * The index of `records` made from `before`'s (the records of an earlier snapshot), when they differ
 * in a few records (a write: one record replaced in its place, removed, or added after the others; a
 * file edit: a few replaced in their places) whose keys are each one record's: the maps of their
 * kinds layered over those before and changed, the others shared.
 * Undefined otherwise (an index in full then: a full build's order, first record of a key winning).
 */
function changedIndex(before: Indexed, records: readonly RawRecord[]): { byKind: Map<string, ReadonlyMap<string, RawRecord>>; keys: { added: string[]; removed: string[] } } | undefined {
  if (before.duplicates) return undefined;
  const { removed, added, tail } = replacedRun(before.records, records);
  if (removed.length + added.length > FEW) return undefined;
  const byKind = new Map(before.byKind);
  const copied = new Map<string, LayeredMap<string, RawRecord>>();
  const mapOf = (kind: string): LayeredMap<string, RawRecord> => {
    let map = copied.get(kind);
    if (map === undefined) {
      // Layered over the map of before (layered-map.ts: a `Map`'s order), not a copy of 10,000.
      copied.set(kind, (map = LayeredMap.next(before.byKind.get(kind) ?? new Map<string, RawRecord>())));
      byKind.set(kind, map);
    }
    return map;
  };
  const gone = new Set<string>();
  for (const record of removed) {
    const k = kindKey(record);
    if (k === undefined) continue;
    // Only the record of its key (a later duplicate would take its place in a full build).
    if (before.byKind.get(k[0])?.get(k[1]) !== record || gone.has(`${k[0]}/${k[1]}`)) return undefined;
    gone.add(`${k[0]}/${k[1]}`);
  }
  // Keys replaced keep their place while they come in the order they went (a write of one record, a
  // file edit of a few: the records between the same before and after); new keys go after every
  // other record, so only at the end of the records and after the replaced ones.
  const order = [...gone];
  let replaced = 0;
  let grown = false;
  const put = new Set<string>();
  for (const record of added) {
    const k = kindKey(record);
    if (k === undefined) continue;
    const id = `${k[0]}/${k[1]}`;
    if (put.has(id)) return undefined;
    put.add(id);
    if (gone.has(id)) {
      if (grown || order[replaced++] !== id) return undefined;
    } else {
      if (tail > 0 || before.byKind.get(k[0])?.has(k[1]) === true) return undefined;
      grown = true;
    }
    mapOf(k[0]).set(k[1], record);
  }
  for (const id of gone) {
    if (put.has(id)) continue;
    const slash = id.indexOf('/');
    mapOf(id.slice(0, slash)).delete(id.slice(slash + 1));
  }
  for (const [kind, map] of copied) if (map.size === 0) byKind.delete(kind);
  // The keys that came and went (`kind/key`), for what counts them (quota.ts) to follow.
  const keys = { added: [...put].filter((id) => !gone.has(id)), removed: [...gone].filter((id) => !put.has(id)) };
  return { byKind, keys };
}

/** What `indexOf` changed of the index before to make one (held weakly), by `kind/key`. */
export interface IndexChange {
  readonly from: WeakRef<RecordIndex>;
  readonly added: readonly string[];
  readonly removed: readonly string[];
}

const indexChanges = new WeakMap<RecordIndex, IndexChange>();

/** The keys `index` has and the index it was made from had not, and the other way, when it was made from it. */
export function indexChange(index: RecordIndex): IndexChange | undefined {
  return indexChanges.get(index);
}

export function indexOf(snapshot: Snapshot, org: string): RecordIndex {
  const known = indexes.get(snapshot);
  if (known && known.index.org === org) return known.index;
  const records = snapshot.records;
  const changed = last !== undefined && last.index.org === org ? changedIndex(last, records) : undefined;
  const { byKind, duplicates } = changed !== undefined ? { byKind: changed.byKind, duplicates: false } : fullIndex(records);
  const empty = new Map<string, RawRecord>();
  // The org record (only one is valid: the last, were there several).
  const orgRecord = [...byKind.get('org')?.values() ?? []].pop();
  const index: RecordIndex = { org, orgRecord, of: (kind) => byKind.get(kind) ?? empty };
  if (changed !== undefined) indexChanges.set(index, { from: new WeakRef(last!.index), ...changed.keys });
  const made = { index, records, byKind, duplicates };
  indexes.set(snapshot, made);
  last = made;
  return index;
}

/** The path of a record: `/org/O/KIND/NAME` or `/org/O/gvc/G/KIND/NAME`. */
export function selfLink(org: string, kind: string, name: string, gvc?: string): string {
  const o = `/org/${encodeURIComponent(org)}`;
  if (kind === 'org') return o;
  const scope = gvc === undefined ? o : `${o}/gvc/${encodeURIComponent(gvc)}`;
  return `${scope}/${kind}/${encodeURIComponent(name)}`;
}

/** The members of a secret that are shown: the common fields and its type, never `data`. */
const SECRET_SHOWN = ['id', 'name', 'kind', 'version', 'description', 'tags', 'created', 'lastModified', 'type'];

/**
 * `record` as the API shows it: the read-only common fields filled in where the record has none
 * (`created`: `since`, when `up` started or the record was POSTed), `links` made from where it is.
 */
export function recordView(record: RawRecord, org: string, since: string, gvc?: string, reveal = false): Record<string, unknown> {
  const kind = String(record.kind);
  const name = String(record.name);
  const self = selfLink(org, kind, name, gvc);
  const links: Link[] = [{ rel: 'self', href: self }];
  if (kind !== 'org') links.push({ rel: 'org', href: selfLink(org, 'org', org) });
  if (gvc !== undefined) links.push({ rel: 'gvc', href: selfLink(org, 'gvc', gvc) });
  const shown: Record<string, unknown> = {};
  if (kind === 'secret' && !reveal) {
    for (const key of SECRET_SHOWN) if (record[key] !== undefined) shown[key] = record[key];
  } else {
    Object.assign(shown, record);
  }
  const created = typeof record.created === 'string' ? record.created : since;
  return {
    ...shown,
    id: typeof record.id === 'string' ? record.id : stableId(gvc === undefined ? `${kind}/${name}` : `${kind}/${gvc}/${name}`),
    kind,
    name,
    version: Number.isInteger(record.version) ? record.version : 1,
    created,
    lastModified: typeof record.lastModified === 'string' ? record.lastModified : created,
    links,
  };
}

/** A GVC as routed: its alias is the one in force (given or generated). */
export function gvcView(record: RawRecord, snapshot: Snapshot, org: string, since: string): Record<string, unknown> {
  const view = recordView(record, org, since);
  const alias = snapshot.gvcs.get(String(record.name))?.alias;
  return alias === undefined ? view : { ...view, alias };
}

export function listOf(itemKind: string, items: readonly Record<string, unknown>[], self: string, next?: string): ListResponse {
  const links: Link[] = [{ rel: 'self', href: self }];
  if (next !== undefined) links.push({ rel: 'next', href: next });
  return { kind: 'list', itemKind, items, links };
}
