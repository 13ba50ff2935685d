/**
 * What the platform API shows of the records `up` holds (platform spec, Resources): each record as
 * read, with the read-only common fields a platform record has and a file's record may leave out
 * (`id`, `version`, `created`, `lastModified`, `links`) filled in, a GVC's `alias` as routed, and a
 * secret reduced to its common fields and `type`: its `data` (the sensitive content) is never shown,
 * nor any member not on that list, so a secret shape the spec does not show cannot leak either. Lists
 * in the spec's list shape. The index of a snapshot's records is built once per snapshot (a WeakMap),
 * so a request costs a lookup. Pure apart from that cache; never throws.
 */
import { createHash } from 'node:crypto';
import type { Snapshot } from '../../config/model.js';
import { workloadGvc, type RawRecord } from '../../config/records.js';

export interface Link {
  readonly rel: string;
  readonly href: string;
}

/** The spec's list response; `kind` is the items' kind (the spec's kind values have no `list`). */
export interface ListResponse {
  readonly kind: string;
  /** The same kind again, for clients written against the platform's `{kind: 'list', itemKind}` form. */
  readonly itemKind: string;
  readonly items: readonly Record<string, unknown>[];
  readonly links: readonly Link[];
}

/** The records of one snapshot by kind and key (`name`, or `gvc/name` for GVC-scoped kinds). */
export interface RecordIndex {
  readonly org: string;
  readonly orgRecord: RawRecord | undefined;
  of(kind: string): ReadonlyMap<string, RawRecord>;
}

/** Kinds addressed under a GVC (`/org/O/gvc/G/KIND/NAME`). */
const GVC_SCOPED = new Set(['workload', 'identity', 'volumeset']);

const indexes = new WeakMap<Snapshot, RecordIndex>();

export function indexOf(snapshot: Snapshot, org: string): RecordIndex {
  const known = indexes.get(snapshot);
  if (known && known.org === org) return known;
  const byKind = new Map<string, Map<string, RawRecord>>();
  let orgRecord: RawRecord | undefined;
  for (const record of snapshot.records) {
    const kind = record.kind;
    if (typeof kind !== 'string' || typeof record.name !== 'string') continue;
    if (kind === 'org') orgRecord = record;
    const gvc = GVC_SCOPED.has(kind) ? workloadGvc(record) : undefined;
    if (GVC_SCOPED.has(kind) && gvc === undefined) continue;
    const key = gvc === undefined ? record.name : `${gvc}/${record.name}`;
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

/** A stable id for a record that has none: UUID-shaped, from its self link (the same every run). */
export function stableId(self: string): string {
  const h = createHash('sha256').update(`id\0${self}`).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-${((parseInt(h[16]!, 16) & 3) | 8).toString(16)}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

/** The members of a secret that are shown: the common fields and its type, never `data`. */
const SECRET_SHOWN = ['id', 'name', 'kind', 'version', 'description', 'tags', 'created', 'lastModified', 'type'];

/**
 * `record` as the API shows it: the read-only common fields filled in where the record has none
 * (`created`: `since`, when `up` started or the record was POSTed), `links` made from where it is.
 */
export function recordView(record: RawRecord, org: string, since: string, gvc?: string): Record<string, unknown> {
  const kind = String(record.kind);
  const name = String(record.name);
  const self = selfLink(org, kind, name, gvc);
  const links: Link[] = [{ rel: 'self', href: self }];
  if (kind !== 'org') links.push({ rel: 'org', href: selfLink(org, 'org', org) });
  if (gvc !== undefined) links.push({ rel: 'gvc', href: selfLink(org, 'gvc', gvc) });
  const shown: Record<string, unknown> = {};
  if (kind === 'secret') {
    for (const key of SECRET_SHOWN) if (record[key] !== undefined) shown[key] = record[key];
  } else {
    Object.assign(shown, record);
  }
  const created = typeof record.created === 'string' ? record.created : since;
  return {
    ...shown,
    id: typeof record.id === 'string' ? record.id : stableId(self),
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

export function listOf(itemKind: string, items: readonly Record<string, unknown>[], self: string): ListResponse {
  return { kind: itemKind, itemKind, items, links: [{ rel: 'self', href: self }] };
}
