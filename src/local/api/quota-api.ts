/**
 * The quota routes of the platform API (DESIGN §13; the platform CLI's `quota` commands, map.js):
 * a quota read by its id (its self link), or by its name when only one quota has it; `PATCH` of a
 * quota's `max` (and `description`, `tags`) by the operator key (`PUT`: all three, as given), kept as the quota's record
 * (config/quotas.ts) in the record state like every API change; and the increase requests (spec,
 * Quota), `POST /org/O/quota/-request {quota, requestedMax}`, `GET /org/O/quota/-request[?status=S]`,
 * `GET` and `PATCH /org/O/quota/-request/ID`, kept in their quota's record.
 *
 * The local rule that decides a request when it is made (documented in docs/platform-api.md):
 * below the quota's CURRENT usage it is `denied` (it would refuse what exists), at or below the
 * current MAX `denied` (nothing to raise), up to twice the current MAX `approved` (the max is raised
 * to it at once, in the same write), above that `pending`, until the operator key decides it with
 * `PATCH .../-request/ID {status: approved|denied}` (approving raises the max to it, unless it is
 * higher already). A decided request stays as it is (409 `already_decided`). A quota's version is 1
 * while it has no record, and moves on with each change of its record. Throws `ApiError` only.
 */
import { randomUUID } from 'node:crypto';
import { withoutBookkeeping } from '../../config/record-meta.js';
import type { RawRecord } from '../../config/records.js';
import { QUOTA_DEFAULTS, REQUEST_STATUSES, quotaKey, type QuotaRequest, type RequestStatus } from '../../config/quotas.js';
import { numberText } from '../../config/schema.js';
import type { Answer, ApiContext } from './context.js';
import { ApiError } from './errors.js';
import { PatchError, applyPatch } from './patch.js';
import { findQuota, quotaId, quotaRows, quotaView, type QuotaRow } from './quota.js';
import type { KindRoute } from './row.js';
import { bodyObject, checkVersion, converted, versionOf, write } from './writes.js';
import { indexOf, listOf, selfLink } from './views.js';

/** What a PATCH of a quota changes; anything else a body holds (`current`, `unit`, ...) is read-only. */
const QUOTA_WRITABLE = ['max', 'description', 'tags'];

function rowsOf(ctx: ApiContext): QuotaRow[] {
  return quotaRows(ctx.snapshot, ctx.index);
}

/** Every quota as the list shows it, keyed in the spec's order. */
export function quotaEntries(ctx: ApiContext): [string, RawRecord][] {
  return rowsOf(ctx).map((r, i) => [String(i).padStart(4, '0'), quotaView(r, ctx.org, ctx.deps.since)]);
}

/** The quota a path names (by id, or by a name one quota has). */
export function quotaLookup(ctx: ApiContext, ref: string): RawRecord | undefined {
  const row = findQuota(rowsOf(ctx), ctx.org, ref);
  return row === undefined ? undefined : quotaView(row, ctx.org, ctx.deps.since);
}

function quotaOf(ctx: ApiContext, ref: string): QuotaRow {
  const row = findQuota(rowsOf(ctx), ctx.org, ref);
  if (row === undefined) throw new ApiError('not_found', `quota ${ref} not found`, { kind: 'quota', name: ref });
  return row;
}

/** The quota's version as shown: 1 while it has no record, then one more than its record's. */
function versionShown(record: RawRecord | undefined): number {
  return record === undefined ? 1 : Number(record.version ?? 1) + 1;
}

/** The quota record of `row` before a change: its own, or a new one that names it. */
function baseRecord(row: QuotaRow, current: RawRecord | undefined): Record<string, unknown> {
  if (current !== undefined) return withoutBookkeeping(current);
  return { kind: 'quota', name: row.name, ...(row.gvc !== undefined ? { dimensions: { gvcLink: `//gvc/${row.gvc}` } } : {}) };
}

/** The quota `row` as it is in `ctx`'s snapshot after a write. */
function shown(ctx: ApiContext, row: QuotaRow): Record<string, unknown> {
  const index = indexOf(ctx.snapshot, ctx.org);
  const now = quotaRows(ctx.snapshot, index).find((r) => r.name === row.name && r.gvc === row.gvc) ?? row;
  return { ...quotaView(now, ctx.org, ctx.deps.since), version: versionShown(now.record) };
}

/** Writes `row`'s record as `change` makes it from the one in force (undefined: none yet). */
async function writeQuota(ctx: ApiContext, row: QuotaRow, change: (base: Record<string, unknown>, current: RawRecord | undefined) => Record<string, unknown>) {
  const result = await write(ctx, quotaKey(row.name, row.gvc), (current) => ({
    put: converted(ctx, { ...change(baseRecord(row, current), current), kind: 'quota', name: row.name }),
  }));
  return { ...ctx, snapshot: result.snapshot, index: indexOf(result.snapshot, ctx.org) };
}

/** `GET /org/O/quota/:quota`. */
function getQuota(ctx: ApiContext): Answer {
  const row = quotaOf(ctx, ctx.params.quota!);
  return { status: 200, body: { ...quotaView(row, ctx.org, ctx.deps.since), version: versionShown(row.record) } };
}

/** `PATCH /org/O/quota/:quota`: a merge patch of `max`, `description` and `tags`. */
function patchQuota(ctx: ApiContext): Promise<Answer> {
  return changeQuota(ctx, (body, k) => (k in body ? { value: body[k] } : undefined));
}

/**
 * `PUT /org/O/quota/:quota` (`cpln quota edit --replace`, `svcproxy quota edit -r`): the body is the
 * quota's `max`, `description` and `tags`; one it leaves out goes back to its default (no description,
 * no tags, the built-in max).
 */
function putQuota(ctx: ApiContext): Promise<Answer> {
  return changeQuota(ctx, (body, k) => ({ value: k in body ? body[k] : null }));
}

/** A write of a quota's writable members: `member` says what the body sets each to (undefined: left as it is). */
async function changeQuota(ctx: ApiContext, member: (body: Record<string, unknown>, k: string) => { value: unknown } | undefined): Promise<Answer> {
  const row = quotaOf(ctx, ctx.params.quota!);
  const body = await bodyObject(ctx);
  const given = versionOf(body);
  const patch: Record<string, unknown> = {};
  for (const k of QUOTA_WRITABLE) {
    const set = member(body, k);
    if (set !== undefined) patch[k] = set.value;
  }
  const after = await writeQuota(ctx, row, (base, current) => {
    checkVersion('quota', quotaId(ctx.org, row.name, row.gvc), versionShown(current), given);
    try {
      return applyPatch(base, patch) as Record<string, unknown>;
    } catch (e) {
      if (e instanceof PatchError) throw new ApiError('bad_request', `the patch does not apply: ${e.message}`, { path: e.path });
      throw e;
    }
  });
  return { status: 200, body: shown(after, row) };
}

// ---- increase requests ----------------------------------------------------------------------------

const REQUESTS = '-request';

function requestsOf(record: RawRecord | undefined): QuotaRequest[] {
  return Array.isArray(record?.requests) ? (record.requests as QuotaRequest[]) : [];
}

/** The local rule (see the module comment): the status and reason of a request for `requestedMax`. */
export function decide(requestedMax: number, current: number, max: number): { status: RequestStatus; reason: string } {
  if (requestedMax < current) return { status: 'denied', reason: `below the current usage of ${current}` };
  if (requestedMax <= max) return { status: 'denied', reason: `not above the current max of ${max}` };
  if (requestedMax <= 2 * max) return { status: 'approved', reason: `at most twice the max of ${max}: approved at once` };
  return { status: 'pending', reason: `more than twice the max of ${max}: waits for the operator` };
}

function requestView(ctx: ApiContext, row: QuotaRow, request: QuotaRequest): Record<string, unknown> {
  const base = `${selfLink(ctx.org, 'org', ctx.org)}/quota`;
  return {
    kind: 'quotarequest',
    id: request.id,
    quota: row.name,
    ...(row.gvc !== undefined ? { dimensions: { gvcLink: selfLink(ctx.org, 'gvc', row.gvc) } } : {}),
    requestedMax: request.requestedMax,
    status: request.status,
    ...(request.reason !== undefined ? { reason: request.reason } : {}),
    created: request.created,
    lastModified: request.lastModified ?? request.created,
    links: [
      { rel: 'self', href: `${base}/${REQUESTS}/${encodeURIComponent(request.id)}` },
      { rel: 'quota', href: `${base}/${quotaId(ctx.org, row.name, row.gvc)}` },
    ],
  };
}

/** Every request with its quota, oldest first. */
function allRequests(ctx: ApiContext): { row: QuotaRow; request: QuotaRequest }[] {
  const out = rowsOf(ctx).flatMap((row) => requestsOf(row.record).map((request) => ({ row, request })));
  return out.sort((a, b) => (a.request.created < b.request.created ? -1 : a.request.created > b.request.created ? 1 : 0));
}

function findRequest(ctx: ApiContext, id: string): { row: QuotaRow; request: QuotaRequest } {
  const found = allRequests(ctx).find((r) => r.request.id === id);
  if (found === undefined) throw new ApiError('not_found', `quota increase request ${id} not found`, { kind: 'quotarequest', name: id });
  return found;
}

function requestedMaxOf(body: Record<string, unknown>): number {
  const v = body.requestedMax;
  const n = typeof v === 'number' ? v : numberText(v);
  if (n === undefined || !Number.isSafeInteger(n) || n < 0) throw new ApiError('bad_request', 'requestedMax must be a whole number of at least 0', { requestedMax: v ?? null });
  return n;
}

/** The quota a request names: `quota` (an id, or a name), and `gvc` for a per-GVC one named by name. */
function requestedQuota(ctx: ApiContext, body: Record<string, unknown>): QuotaRow {
  if (typeof body.quota !== 'string' || body.quota === '') throw new ApiError('bad_request', 'quota must name the quota (its name, or its id)');
  if (typeof body.gvc === 'string' && body.gvc !== '') {
    const row = rowsOf(ctx).find((r) => r.name === body.quota && r.gvc === body.gvc);
    if (row === undefined) throw new ApiError('not_found', `quota ${body.quota} of gvc ${body.gvc} not found`, { kind: 'quota', name: body.quota, gvc: body.gvc });
    return row;
  }
  return quotaOf(ctx, body.quota);
}

/** `POST /org/O/quota/-request {quota, requestedMax}`: made and decided at once by the local rule. */
async function createRequest(ctx: ApiContext): Promise<Answer> {
  const body = await bodyObject(ctx);
  const row = requestedQuota(ctx, body);
  const requestedMax = requestedMaxOf(body);
  const id = randomUUID();
  const now = ctx.deps.now();
  let made: QuotaRequest | undefined;
  const after = await writeQuota(ctx, row, (base, current) => {
    // Decided against the quota as it is when the write runs (others may have changed it since the read).
    const index = indexOf(ctx.deps.store.current, ctx.org);
    const live = quotaRows(ctx.deps.store.current, index).find((r) => r.name === row.name && r.gvc === row.gvc) ?? row;
    const { status, reason } = decide(requestedMax, live.current, live.max);
    made = { id, requestedMax, status, reason, created: now };
    return { ...base, ...(status === 'approved' ? { max: requestedMax } : {}), requests: [...requestsOf(current), made] };
  });
  const self = `${selfLink(ctx.org, 'org', ctx.org)}/quota/${REQUESTS}/${id}`;
  return { status: 201, body: requestView(after, row, made!), headers: { location: self } };
}

/** `GET /org/O/quota/-request[?status=S]`. */
function listRequests(ctx: ApiContext): Answer {
  const status = ctx.query.get('status');
  if (status !== null && !(REQUEST_STATUSES as readonly string[]).includes(status)) {
    throw new ApiError('bad_request', `status must be one of ${REQUEST_STATUSES.join(', ')}`, { status });
  }
  const items = allRequests(ctx).filter((r) => status === null || r.request.status === status).map((r) => requestView(ctx, r.row, r.request));
  const self = `${selfLink(ctx.org, 'org', ctx.org)}/quota/${REQUESTS}${status === null ? '' : `?status=${status}`}`;
  return { status: 200, body: listOf('quotarequest', items, self) };
}

function getRequest(ctx: ApiContext): Answer {
  const { row, request } = findRequest(ctx, ctx.params.id!);
  return { status: 200, body: requestView(ctx, row, request) };
}

/** `PATCH /org/O/quota/-request/ID {status: approved|denied, reason?}`: the operator decides a pending request. */
async function decideRequest(ctx: ApiContext): Promise<Answer> {
  const id = ctx.params.id!;
  const { row } = findRequest(ctx, id);
  const body = await bodyObject(ctx);
  const status = body.status;
  if (status !== 'approved' && status !== 'denied') throw new ApiError('bad_request', 'status must be approved or denied', { status: status ?? null });
  if (body.reason !== undefined && typeof body.reason !== 'string') throw new ApiError('bad_request', 'reason must be a string');
  const now = ctx.deps.now();
  let decided: QuotaRequest | undefined;
  const after = await writeQuota(ctx, row, (base, current) => {
    const requests = requestsOf(current);
    const request = requests.find((r) => r.id === id);
    if (request === undefined) throw new ApiError('not_found', `quota increase request ${id} not found`, { kind: 'quotarequest', name: id });
    if (request.status !== 'pending') {
      throw new ApiError('already_decided', `quota increase request ${id} was ${request.status} already`, { id, status: request.status });
    }
    decided = { ...request, status, reason: typeof body.reason === 'string' ? body.reason : `${status} by the operator`, lastModified: now };
    const max = typeof base.max === 'number' ? base.max : QUOTA_DEFAULTS[row.name].max;
    return {
      ...base,
      ...(status === 'approved' && request.requestedMax > max ? { max: request.requestedMax } : {}),
      requests: requests.map((r) => (r.id === id ? decided! : r)),
    };
  });
  return { status: 200, body: requestView(after, row, decided!) };
}

/** The quota kind's own routes, below `/org/O/quota`. */
export const QUOTA_ROUTES: readonly KindRoute[] = [
  { method: 'GET', path: ':quota', action: 'read', run: getQuota },
  { method: 'PATCH', path: ':quota', action: 'operate', run: patchQuota },
  { method: 'PUT', path: ':quota', action: 'operate', run: putQuota },
  { method: 'POST', path: REQUESTS, action: 'write', run: createRequest },
  { method: 'GET', path: REQUESTS, action: 'read', run: listRequests },
  { method: 'GET', path: `${REQUESTS}/:id`, action: 'read', run: getRequest },
  { method: 'PATCH', path: `${REQUESTS}/:id`, action: 'operate', run: decideRequest },
];
