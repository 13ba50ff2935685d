/**
 * What the platform keeps about a record besides its content (platform spec, Common record fields):
 * a read-only `id`, `version`, `created` and `lastModified`, here `RecordMeta`. A record is known by
 * its key, `kind/name` or `kind/gvc/name` for the kinds addressed under a GVC (and a per-GVC quota), and its content by a
 * hash of its canonical JSON without those four members, so that key order, or bookkeeping copied
 * from an API answer into a file, changes nothing. The first time a key is seen its meta comes from
 * the record where it has them (a file saved from the API), else `id` is derived from the key (the
 * same every run), `version` is 1 and `created` is now; each later change of content bumps `version`
 * and sets `lastModified` (`nextMeta`). Pure; never throws.
 */
import { createHash } from 'node:crypto';
import { sortedJson } from './canonical.js';
import { workloadGvc, type RawRecord } from './records.js';
/** Kinds addressed under a GVC (`/org/O/gvc/G/KIND/NAME`) are keyed `kind/gvc/name`. */
import { GVC_SCOPED } from './links.js';
import { quotaGvc } from './quotas.js';

/** The read-only members the platform sets on every record; not part of its content. */
export const BOOKKEEPING: readonly string[] = ['id', 'version', 'created', 'lastModified'];


export interface RecordMeta {
  readonly id: string;
  readonly version: number;
  readonly created: string;
  readonly lastModified: string;
  /** `contentHash` of the content this meta describes. */
  readonly hash: string;
}

export function keyOf(kind: string, name: string, gvc?: string): string {
  return gvc === undefined ? `${kind}/${name}` : `${kind}/${gvc}/${name}`;
}

/**
 * The record's key; undefined when it has no kind or name, or a GVC-scoped one names no GVC. A
 * per-GVC quota's record (quotas.ts) is keyed under the GVC of its `dimensions.gvcLink`.
 */
export function recordKey(record: RawRecord): string | undefined {
  const { kind, name } = record;
  if (typeof kind !== 'string' || kind === '' || typeof name !== 'string' || name === '') return undefined;
  if (kind === 'quota') return keyOf(kind, name, quotaGvc(record));
  if (!GVC_SCOPED.has(kind)) return keyOf(kind, name);
  const gvc = workloadGvc(record);
  return gvc === undefined ? undefined : keyOf(kind, name, gvc);
}

/** Hashes of records already hashed (records are frozen once read: their content cannot change). */
const hashes = new WeakMap<object, string>();

/** A hash of what the record says, bookkeeping and key order aside. */
export function contentHash(record: RawRecord): string {
  const known = hashes.get(record);
  if (known !== undefined) return known;
  const keys = Object.keys(record).filter((k) => !BOOKKEEPING.includes(k)).sort();
  let text = '{';
  for (let i = 0; i < keys.length; i++) text += `${i === 0 ? '' : ','}${JSON.stringify(keys[i])}:${sortedJson(record[keys[i]!])}`;
  const hash = createHash('sha256').update(`${text}}`).digest('base64url');
  if (Object.isFrozen(record)) hashes.set(record, hash);
  return hash;
}

/** A UUID-shaped id derived from `seed` (the same every run). */
export function stableId(seed: string): string {
  const h = createHash('sha256').update(`id\0${seed}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

function isTime(v: unknown): v is string {
  return typeof v === 'string' && !Number.isNaN(Date.parse(v));
}

/** Meta of a record seen for the first time: its own members where it has them (a file saved from the API). */
export function firstMeta(record: RawRecord, key: string, now: string, id?: string): RecordMeta {
  const created = isTime(record.created) ? record.created : now;
  return {
    id: id ?? (typeof record.id === 'string' && record.id !== '' ? record.id : stableId(key)),
    version: Number.isSafeInteger(record.version) && (record.version as number) >= 1 ? (record.version as number) : 1,
    created,
    lastModified: isTime(record.lastModified) ? record.lastModified : created,
    hash: contentHash(record),
  };
}

/** Meta after the content changed to `hash` (the same meta when it did not). */
export function nextMeta(meta: RecordMeta, hash: string, now: string): RecordMeta {
  return meta.hash === hash ? meta : { ...meta, version: meta.version + 1, lastModified: now, hash };
}

/** `record` with its meta in its read-only members (what the snapshot and the API hold). */
export function withMeta(record: RawRecord, meta: RecordMeta): RawRecord {
  return { ...record, id: meta.id, version: meta.version, created: meta.created, lastModified: meta.lastModified };
}

/** `record` without its read-only bookkeeping (what an overlay keeps). */
export function withoutBookkeeping(record: RawRecord): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(record)) if (!BOOKKEEPING.includes(k)) out[k] = v;
  return out;
}
