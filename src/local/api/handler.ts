/**
 * The platform API's requests (DESIGN §12; platform spec, Endpoints): the path matched against the
 * routes, the caller authenticated (auth.ts), the org checked, the action allowed, then the answer:
 * a record, a list or an error body, JSON, `cache-control: no-store`. Order of refusals: an unknown
 * path (404) or method (405), then the credential (403), then an unknown org (404), then the
 * permission (403), then the resource (404). A POSTed GVC is checked by the rules of config files
 * (ConfigStore.add: validate.ts) and routed at once. Bodies are read up to 1 MiB (413 past it).
 * Every failure is answered with an error body; nothing here throws to the listener.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Logger } from 'pino';
import type { ConfigStore } from '../../config/store.js';
import type { Snapshot } from '../../config/model.js';
import type { RawRecord } from '../../config/records.js';
import { normalizePath } from '../../proxy/path.js';
import { ApiError } from './errors.js';
import { authenticate, mayDo, type Action, type ApiCaller, type Principal } from './auth.js';
import { gvcView, indexOf, listOf, recordView, selfLink, type RecordIndex } from './views.js';
import { quotaRows, quotaView } from './quota.js';

export type ApiRequest = IncomingMessage | Http2ServerRequest;
export type ApiResponse = ServerResponse | Http2ServerResponse;

export const MAX_BODY_BYTES = 1024 * 1024;

export interface ApiDeps {
  readonly store: ConfigStore;
  /** The org `up` serves (the org record's name, else the mesh's default). */
  org(): string;
  /** The key of every `SVC_TOKEN` of this run (src/local/env.ts). */
  readonly tokenSecret: string | Uint8Array;
  /** The operator key (`.svcproxy/api-token`): an org administrator; none: no caller is one. */
  readonly operatorKey?: string;
  /** When the records without `created` were created: `up`'s start. */
  readonly since: string;
  /** Wall clock, ISO 8601: a POSTed record's `created`. */
  now(): string;
  /** A fresh record id. */
  newId(): string;
  readonly logger: Logger;
}

interface Ctx {
  readonly deps: ApiDeps;
  readonly snapshot: Snapshot;
  readonly index: RecordIndex;
  readonly org: string;
  readonly principal: Principal;
  readonly req: ApiRequest;
}

interface Route {
  readonly method: 'GET' | 'POST';
  readonly action: Action;
  run(ctx: Ctx): Promise<Answer> | Answer;
}

interface Answer {
  readonly status: number;
  readonly body: unknown;
  readonly headers?: Readonly<Record<string, string>>;
}

/** Members of a POSTed GVC the platform keeps for itself (spec: read-only); dropped, then set. */
const READ_ONLY = ['id', 'version', 'created', 'lastModified', 'links', 'alias', 'status'];

/** The routes of a path (by segments after `/org/{org}`); undefined: no such path. */
function routesOf(rest: readonly string[]): readonly Route[] | undefined {
  const [a, b, c, d] = rest;
  switch (rest.length) {
    case 0:
      return [{ method: 'GET', action: 'read-org', run: (ctx) => ok(recordView(ctx.index.orgRecord ?? { kind: 'org', name: ctx.org }, ctx.org, ctx.deps.since)) }];
    case 1:
      if (a === 'gvc') return [{ method: 'POST', action: 'create', run: createGvc }];
      if (a === 'quota') return [{ method: 'GET', action: 'read', run: (ctx) => ok(listOf('quota', quotaRows(ctx.snapshot, ctx.index).map((r) => quotaView(r, ctx.org)), `${selfLink(ctx.org, 'org', ctx.org)}/quota`)) }];
      return undefined;
    case 2:
      if (a === 'gvc') return [{ method: 'GET', action: 'read', run: (ctx) => ok(gvcView(found(ctx.index.of('gvc').get(b!), 'gvc', b!), ctx.snapshot, ctx.org, ctx.deps.since)) }];
      if (a === 'secret' || a === 'auditctx') {
        return [{ method: 'GET', action: 'read', run: (ctx) => ok(recordView(found(ctx.index.of(a).get(b!), a, b!), ctx.org, ctx.deps.since)) }];
      }
      return undefined;
    case 3:
      if (a === 'gvc' && c === 'identity') return [{ method: 'GET', action: 'read', run: (ctx) => identities(ctx, b!) }];
      return undefined;
    case 4:
      if (a === 'gvc' && c === 'workload') {
        return [{ method: 'GET', action: 'read', run: (ctx) => {
          found(ctx.index.of('gvc').get(b!), 'gvc', b!);
          return ok(recordView(found(ctx.index.of('workload').get(`${b}/${d}`), 'workload', d!, b), ctx.org, ctx.deps.since, b));
        } }];
      }
      return undefined;
    default:
      return undefined;
  }
}

function ok(body: unknown, status = 200, headers?: Readonly<Record<string, string>>): Answer {
  return headers ? { status, body, headers } : { status, body };
}

function found(record: RawRecord | undefined, kind: string, name: string, gvc?: string): RawRecord {
  if (record === undefined) throw new ApiError('not_found', `${kind} ${name} not found${gvc === undefined ? '' : ` in gvc ${gvc}`}`, { kind, name });
  return record;
}

function identities(ctx: Ctx, gvc: string): Answer {
  found(ctx.index.of('gvc').get(gvc), 'gvc', gvc);
  const items: Record<string, unknown>[] = [];
  for (const [key, record] of ctx.index.of('identity')) {
    if (key.startsWith(`${gvc}/`)) items.push(recordView(record, ctx.org, ctx.deps.since, gvc));
  }
  return ok(listOf('identity', items, `${selfLink(ctx.org, 'gvc', gvc)}/identity`));
}

async function createGvc(ctx: Ctx): Promise<Answer> {
  const type = String(ctx.req.headers['content-type'] ?? 'application/json').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json' && !type.endsWith('+json')) {
    throw new ApiError('unsupported_media_type', `the body must be application/json, not ${type}`);
  }
  const text = await readBody(ctx.req);
  let given: unknown;
  try {
    given = JSON.parse(text);
  } catch (e) {
    throw new ApiError('bad_request', 'the body is not JSON', { error: (e as Error).message });
  }
  if (given === null || typeof given !== 'object' || Array.isArray(given)) throw new ApiError('bad_request', 'the body must be a GVC record (a JSON object)');
  const raw = given as Record<string, unknown>;
  if (raw.kind !== undefined && raw.kind !== 'gvc') {
    throw new ApiError('invalid_record', `kind must be gvc here, not ${JSON.stringify(raw.kind)}`, { errors: [`kind: must be gvc, not ${JSON.stringify(raw.kind)}`] });
  }
  const record: Record<string, unknown> = { kind: 'gvc' };
  for (const [k, v] of Object.entries(raw)) if (k !== 'kind' && !READ_ONLY.includes(k)) record[k] = v;
  const name = record.name;
  const exists = (s: Snapshot): boolean => typeof name === 'string' && s.gvcs.has(name);
  if (exists(ctx.snapshot)) throw new ApiError('already_exists', `gvc ${String(name)} already exists`, { kind: 'gvc', name });
  const now = ctx.deps.now();
  Object.assign(record, { id: ctx.deps.newId(), version: 1, created: now, lastModified: now });
  const result = await ctx.deps.store.add(record);
  if (!result.ok) {
    // Another POST of the same name won the race: the validator calls it a duplicate.
    if (exists(ctx.deps.store.current)) throw new ApiError('already_exists', `gvc ${String(name)} already exists`, { kind: 'gvc', name });
    throw new ApiError('invalid_record', `the gvc record is invalid: ${result.errors[0] ?? ''}`, { errors: result.errors });
  }
  const self = selfLink(ctx.org, 'gvc', String(name));
  return ok(gvcView(record, result.snapshot, ctx.org, ctx.deps.since), 201, { location: self });
}

function readBody(req: ApiRequest): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        reject(new ApiError('payload_too_large', `the body is over ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** The path's segments after `/org/{org}`, with the org; undefined when it is no API path. */
function parsePath(url: string): { org: string; rest: string[] } | undefined {
  const norm = normalizePath(url);
  if (!norm.ok) throw new ApiError('bad_request', `bad request target: ${norm.reason}`);
  const parts = norm.path.split('/').slice(1);
  if (parts[parts.length - 1] === '') parts.pop();
  if (parts[0] !== 'org' || parts.length < 2) return undefined;
  let decoded: string[];
  try {
    decoded = parts.map((p) => decodeURIComponent(p));
  } catch {
    throw new ApiError('bad_request', 'bad percent-encoding in the path');
  }
  if (decoded.some((p) => p === '')) return undefined;
  return { org: decoded[1]!, rest: decoded.slice(2) };
}

/** Answers one API request from `caller` (undefined: outside every workload). */
export async function handleApi(deps: ApiDeps, req: ApiRequest, res: ApiResponse, caller: ApiCaller | undefined): Promise<void> {
  let answer: Answer;
  try {
    answer = await answerOf(deps, req, caller);
  } catch (e) {
    if (!(e instanceof ApiError)) deps.logger.error({ err: e }, 'platform API: internal error');
    const err = e instanceof ApiError ? e : new ApiError('internal_error', 'internal error');
    answer = { status: err.status, body: err.body(), ...(err.code === 'method_not_allowed' ? { headers: { allow: String(err.details.allow) } } : {}) };
  }
  send(res, answer);
}

async function answerOf(deps: ApiDeps, req: ApiRequest, caller: ApiCaller | undefined): Promise<Answer> {
  const path = parsePath(req.url ?? '/');
  const routes = path && routesOf(path.rest);
  if (!path || !routes) throw new ApiError('not_found', `no such path: ${req.method ?? ''} ${pathOnly(req.url ?? '/')}`);
  const route = routes.find((r) => r.method === req.method);
  if (!route) {
    const allow = routes.map((r) => r.method).join(', ');
    throw new ApiError('method_not_allowed', `${req.method ?? ''} is not served here (allowed: ${allow})`, { allow });
  }
  const snapshot = deps.store.current;
  const authorization = req.headers.authorization;
  const principal = authenticate(typeof authorization === 'string' ? authorization : undefined, caller, deps.tokenSecret, snapshot.workloads.keys(), deps.operatorKey);
  const org = deps.org();
  if (path.org !== org) throw new ApiError('not_found', `org ${path.org} not found`, { kind: 'org', name: path.org });
  const index = indexOf(snapshot, org);
  mayDo(principal, route.action, (key) => index.of('workload').get(key));
  return route.run({ deps, snapshot, index, org, principal, req });
}

function pathOnly(url: string): string {
  const norm = normalizePath(url);
  return norm.ok ? norm.path : '';
}

function send(res: ApiResponse, answer: Answer): void {
  const body = JSON.stringify(answer.body);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...answer.headers,
  };
  try {
    (res as ServerResponse).writeHead(answer.status, headers);
    res.end(body);
  } catch {
    // The client went away (a destroyed HTTP/2 stream throws here): nobody to answer.
  }
}
