/**
 * What the routes of a kind do (router.ts; DESIGN §13). Reads: a list (sorted by name, or GVC and
 * name, in pages of `limit`, default the API's page size, with a `rel: next` link carrying a cursor,
 * the last key of the page, as the platform's CLI follows), an item, 404 for one that is not there.
 * Writes go through the config store (`ConfigStore.write`), so they are validated and put in force
 * exactly as a reload is: `PUT` on a collection or an item creates or replaces (201 + `Location`, or
 * 200), `POST` creates (409 `already_exists` when the name is taken), `PATCH` merges (patch.ts),
 * `DELETE` removes (204, or 202 for a workload, whose replicas drain after the answer). A body's
 * `version` other than the record's current one is 409 `version_conflict` (checked in the store's
 * queue, so of writers that read the same version exactly one wins); its other read-only members
 * are dropped (a replaced record keeps the values it had of its kind's, such as a GVC's `alias`). A
 * body whose kind, name or GVC is not its path's is 400. Strings that read as the number or boolean
 * a member takes are converted (convert.ts: what `cpln workload update --set` sends). Refused
 * records: 400 `invalid_record` with every finding in `details.errors`. Throws `ApiError` only.
 */
import { gvcName } from '../../config/links.js';
import { convertScalars } from '../../config/convert.js';
import { keyOf, withoutBookkeeping } from '../../config/record-meta.js';
import type { RawRecord } from '../../config/records.js';
import { isObject, numberText } from '../../config/schema.js';
import type { WriteDecision } from '../../config/store.js';
import { bodyFormat, parseBody, readBody } from './body.js';
import type { Answer, ApiContext } from './context.js';
import { ApiError } from './errors.js';
import { COMMON_READ_ONLY, type KindRow } from './row.js';
import { quotaCheck } from './quota.js';
import type { Snapshot } from '../../config/model.js';
import { PatchError, applyPatch } from './patch.js';
import { listOf, selfLink } from './views.js';

const MAX_LIMIT = 1000;

function gvcOf(ctx: ApiContext, row: KindRow): string | undefined {
  if (row.scope !== 'gvc') return undefined;
  const gvc = ctx.params.gvc!;
  if (!ctx.index.of('gvc').has(gvc)) throw new ApiError('not_found', `gvc ${gvc} not found`, { kind: 'gvc', name: gvc });
  return gvc;
}

function notFound(row: KindRow, name: string, gvc: string | undefined): ApiError {
  return new ApiError('not_found', `${row.kind} ${name} not found${gvc === undefined ? '' : ` in gvc ${gvc}`}`, { kind: row.kind, name });
}

/** The record a path names (its GVC checked first); 404 when there is none. */
export function itemOf(ctx: ApiContext, row: KindRow, name: string): RawRecord {
  if (row.scope === 'root') return ctx.index.orgRecord ?? { kind: 'org', name: ctx.org };
  const gvc = gvcOf(ctx, row);
  const record = row.lookup ? row.lookup(ctx, name) : ctx.index.of(row.kind).get(gvc === undefined ? name : `${gvc}/${name}`);
  if (record === undefined) throw notFound(row, name, gvc);
  return record;
}

/** An item of a list: its key (`name`, or `gvc/name`), its record, its GVC (of a GVC-scoped kind). */
export interface Item {
  readonly key: string;
  readonly record: RawRecord;
  readonly gvc: string | undefined;
}

/** Items of a kind in key order, per snapshot (and GVC): paging a list of 10,000 sorts it once. */
const sortedItems = new WeakMap<Snapshot, Map<string, readonly Item[]>>();

/** The items of a kind (of one GVC, when `gvc` is given), in key order. */
export function itemsOf(ctx: ApiContext, row: KindRow, gvc: string | undefined): readonly Item[] {
  let bySnapshot = sortedItems.get(ctx.snapshot);
  if (bySnapshot === undefined) sortedItems.set(ctx.snapshot, (bySnapshot = new Map()));
  const cacheKey = `${row.kind}\0${gvc ?? ''}\0${ctx.org}`;
  const known = bySnapshot.get(cacheKey);
  if (known !== undefined) return known;
  let items: Item[];
  if (row.entries) {
    items = row.entries(ctx).map(([key, record]) => ({ key, record, gvc: undefined }));
  } else if (row.scope === 'root') {
    items = [{ key: ctx.org, record: itemOf(ctx, row, ctx.org), gvc: undefined }];
  } else {
    items = [];
    for (const [key, record] of ctx.index.of(row.kind)) {
      if (row.scope !== 'gvc') {
        items.push({ key, record, gvc: undefined });
        continue;
      }
      const g = key.slice(0, key.indexOf('/'));
      if (gvc === undefined || g === gvc) items.push({ key, record, gvc: g });
    }
    items.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }
  bySnapshot.set(cacheKey, items);
  return items;
}

/** The index of the first item after `cursor` (a key), by binary search over the sorted items. */
export function after(items: readonly Item[], cursor: string | null): number {
  if (cursor === null) return 0;
  let lo = 0;
  let hi = items.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (items[mid]!.key <= cursor) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** The path of a kind's collection (of one GVC, or across GVCs): a list's `self`. */
export function collectionLink(ctx: ApiContext, row: KindRow, gvc: string | undefined): string {
  if (row.scope === 'root') return '/org';
  return row.scope === 'gvc' && gvc !== undefined ? `${selfLink(ctx.org, 'gvc', gvc)}/${row.kind}` : `${selfLink(ctx.org, 'org', ctx.org)}/${row.kind}`;
}

export function getItem(ctx: ApiContext, row: KindRow, name: string): Answer {
  const record = itemOf(ctx, row, name);
  return { status: 200, body: row.view(ctx, record, row.scope === 'gvc' ? ctx.params.gvc : undefined) };
}

export function limitOf(ctx: ApiContext): number {
  const text = ctx.query.get('limit');
  if (text === null) return ctx.deps.pageSize;
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > MAX_LIMIT) throw new ApiError('bad_request', `limit must be a whole number from 1 to ${MAX_LIMIT}`, { limit: text });
  return n;
}

/** A list of the kind's records (of one GVC, when `gvc` is given), one page of it. */
export function listRecords(ctx: ApiContext, row: KindRow, gvc: string | undefined): Answer {
  if (gvc !== undefined) gvcOf(ctx, row);
  const limit = limitOf(ctx);
  const self = collectionLink(ctx, row, gvc);
  const items = itemsOf(ctx, row, gvc);
  const from = after(items, ctx.query.get('cursor'));
  const page = items.slice(from, from + limit);
  const next = from + limit < items.length ? `${self}?limit=${limit}&cursor=${encodeURIComponent(page[page.length - 1]!.key)}` : undefined;
  return { status: 200, body: listOf(row.kind, page.map((i) => row.view(ctx, i.record, i.gvc)), self, next) };
}

/** The request's body, one object (an empty body, of any type, is `{}` when `empty` allows it: a query without terms). */
export async function bodyObject(ctx: ApiContext, empty = false): Promise<Record<string, unknown>> {
  const type = ctx.req.headers['content-type'];
  // An empty body may come with any type (axios sends `cpln org query`'s none as a form).
  const format = empty ? undefined : bodyFormat(type);
  const text = await readBody(ctx.req, ctx.deps.body);
  if (empty && text.trim() === '') return {};
  const value = parseBody(text, format ?? bodyFormat(type));
  if (!isObject(value)) throw new ApiError('bad_request', `the body must be an object (a ${'record'}), not ${Array.isArray(value) ? 'an array' : typeof value}`);
  return value;
}

/** The body's `version`, when it has one: an integer (or a string of one). */
export function versionOf(body: Record<string, unknown>): number | undefined {
  const v = body.version;
  if (v === undefined || v === null) return undefined;
  const n = typeof v === 'number' ? v : numberText(v);
  if (n === undefined || !Number.isSafeInteger(n)) throw new ApiError('bad_request', 'version must be an integer (the version the change was made from)');
  return n;
}

/** 409 `version_conflict` unless `given` (the body's version, when it has one) is `version`, the item's. */
export function checkVersion(kind: string, name: string, version: unknown, given: number | undefined): void {
  if (given === undefined || given === version) return;
  throw new ApiError('version_conflict', `${kind} ${name} is at version ${String(version)}, not ${given}: it changed since it was read`, {
    kind, name, version, given,
  });
}

/** Checks that a body's kind, name and GVC, where given, are its path's. */
function checkIdentity(row: KindRow, body: Record<string, unknown>, name: string | undefined, gvc: string | undefined): void {
  if (body.kind !== undefined && body.kind !== row.kind) {
    throw new ApiError('bad_request', `the body is a ${JSON.stringify(body.kind)} record; this path takes ${row.kind}`, { kind: body.kind, expected: row.kind });
  }
  if (name !== undefined && body.name !== undefined && body.name !== name) {
    throw new ApiError('bad_request', `the body names ${row.kind} ${JSON.stringify(body.name)}; this path is ${row.kind} ${name}`, { name: body.name, expected: name });
  }
  if (gvc !== undefined && body.gvc !== undefined && body.gvc !== null && gvcName(String(body.gvc)) !== gvc) {
    throw new ApiError('bad_request', `the body's gvc is ${JSON.stringify(body.gvc)}; this path is in gvc ${gvc}`, { gvc: body.gvc, expected: gvc });
  }
}

/** `body` without the read-only members (kept from `current` for the kind's own, on a replace). */
function writable(row: KindRow, body: Record<string, unknown>, current: RawRecord | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (!COMMON_READ_ONLY.includes(k) && !row.readOnly.includes(k)) out[k] = v;
  if (current !== undefined) for (const k of row.readOnly) if (current[k] !== undefined) out[k] = current[k];
  return out;
}

/**
 * Writes through the store; 400 with the findings when the result is refused, 429 (403 to a PUT)
 * when it would take a quota past its max (quota.ts, checked against the snapshot in force in the
 * store's queue).
 */
export async function write(ctx: ApiContext, key: string, decide: (current: RawRecord | undefined) => WriteDecision) {
  let result;
  try {
    result = await ctx.deps.store.write(key, decide, quotaCheck(ctx.org, key));
  } catch (e) {
    // cpln retries any 429 to a PUT (errors.ts `withStatus`): 403 answers it at once.
    if (e instanceof ApiError && e.code === 'quota_exceeded' && ctx.req.method === 'PUT') throw e.withStatus(403);
    throw e;
  }
  if (!result.ok) {
    const n = result.errors.length;
    throw new ApiError('invalid_record', `the change is refused: ${n} error${n === 1 ? '' : 's'}, first: ${result.errors[0] ?? ''}`, { errors: result.errors });
  }
  return result;
}

export function converted(ctx: ApiContext, record: Record<string, unknown>): RawRecord {
  return convertScalars(record, ctx.snapshot.settings).record;
}

/** `POST` (create) or `PUT` (create or replace) of a record: on the collection, or on the item `itemName`. */
export async function putRecord(ctx: ApiContext, row: KindRow, mode: 'create' | 'upsert', itemName?: string): Promise<Answer> {
  const gvc = gvcOf(ctx, row);
  const body = await bodyObject(ctx);
  checkIdentity(row, body, itemName, gvc);
  const name = itemName ?? body.name;
  if (typeof name !== 'string' || name === '') throw new ApiError('bad_request', `the body must name the ${row.kind} (name)`);
  const version = versionOf(body);
  const key = keyOf(row.kind, name, gvc);
  const result = await write(ctx, key, (current) => {
    if (current !== undefined && mode === 'create') throw new ApiError('already_exists', `${row.kind} ${name} already exists${gvc === undefined ? '' : ` in gvc ${gvc}`}`, { kind: row.kind, name });
    if (current !== undefined) checkVersion(row.kind, name, current.version, version);
    const record = { ...writable(row, body, current), kind: row.kind, name, ...(gvc !== undefined ? { gvc } : {}) };
    return { put: converted(ctx, record) };
  });
  const self = selfLink(ctx.org, row.kind, name, gvc);
  const view = row.view({ ...ctx, snapshot: result.snapshot }, result.record!, gvc);
  return result.created ? { status: 201, body: view, headers: { location: self } } : { status: 200, body: view };
}

/** `PATCH` of an item: the body merged into the record (patch.ts). */
export async function patchRecord(ctx: ApiContext, row: KindRow, name: string): Promise<Answer> {
  const gvc = gvcOf(ctx, row);
  const body = await bodyObject(ctx);
  checkIdentity(row, body, name, gvc);
  const version = versionOf(body);
  const patch: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (!COMMON_READ_ONLY.includes(k) && !row.readOnly.includes(k) && k !== 'kind' && k !== 'name' && k !== 'gvc') patch[k] = v;
  const result = await write(ctx, keyOf(row.kind, name, gvc), (current) => {
    if (current === undefined) throw notFound(row, name, gvc);
    checkVersion(row.kind, name, current.version, version);
    let merged: unknown;
    try {
      merged = applyPatch(withoutBookkeeping(current), patch);
    } catch (e) {
      if (e instanceof PatchError) throw new ApiError('bad_request', `the patch does not apply: ${e.message}`, { path: e.path });
      throw e;
    }
    return { put: converted(ctx, { ...(merged as Record<string, unknown>), kind: row.kind, name, ...(gvc !== undefined ? { gvc } : {}) }) };
  });
  return { status: 200, body: row.view({ ...ctx, snapshot: result.snapshot }, result.record!, gvc) };
}

export async function deleteRecord(ctx: ApiContext, row: KindRow, name: string): Promise<Answer> {
  const gvc = gvcOf(ctx, row);
  let before: RawRecord | undefined;
  await write(ctx, keyOf(row.kind, name, gvc), (current) => {
    if (current === undefined) throw notFound(row, name, gvc);
    before = current;
    return { delete: true };
  });
  if (row.deleteStatus === 202) return { status: 202, body: row.view(ctx, before!, gvc) };
  return { status: 204 };
}
