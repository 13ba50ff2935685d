/**
 * What the platform API shows of the records `up` holds (platform spec, Resources): each record as
 * in force, with the read-only common fields (`id`, `version`, `created`, `lastModified`: the config
 * store's meta, filled in here for records that have none) and `links`, and a secret reduced to its
 * common fields and `type`: its `data` (the sensitive content) is never shown, nor any member not on
 * that list, so a secret shape the spec does not show cannot leak either (`reveal` shows it whole).
 * Lists in the platform's list shape, `{kind: 'list', itemKind, items, links}`. The index of a
 * snapshot's records is built once per snapshot (a WeakMap), so a request costs a lookup. Pure apart
 * from that cache; never throws.
 */
import type { Snapshot } from '../../config/model.js';
import type { RawRecord } from '../../config/records.js';
import { recordKey, stableId } from '../../config/record-meta.js';

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

const indexes = new WeakMap<Snapshot, RecordIndex>();

export function indexOf(snapshot: Snapshot, org: string): RecordIndex {
  const known = indexes.get(snapshot);
  if (known && known.org === org) return known;
  const byKind = new Map<string, Map<string, RawRecord>>();
  let orgRecord: RawRecord | undefined;
  for (const record of snapshot.records) {
    const full = recordKey(record);
    if (full === undefined) continue;
    const kind = record.kind as string;
    if (kind === 'org') orgRecord = record;
    // `kind/name` or `kind/gvc/name`: the index is per kind.
    const key = full.slice(kind.length + 1);
    let map = byKind.get(kind);
    if (!map) byKind.set(kind, (map = new Map()));
    if (!map.has(key)) map.set(key, record);
  }
  const empty = new Map<string, RawRecord>();
  const index: RecordIndex = { org, orgRecord, of: (kind) => byKind.get(kind) ?? empty };
  indexes.set(snapshot, index);
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
