/**
 * The platform API's requests (DESIGN §12–§13; platform spec, Endpoints): the path normalized and
 * matched against the routes of the table of kinds (router.ts, kinds.ts), the caller authenticated
 * (auth.ts), the org checked, the action allowed, then the route's answer (writes.ts): a record, a
 * list or an error body, JSON, `cache-control: no-store`. Order of refusals: an unknown path (404) or
 * method (405 with `Allow`), then the credential (403), then an unknown org (404), then the
 * permission (403), then the resource (404), then the body (413, 408, 415, 400), then the write
 * (409, 400). Every failure is answered with an error body and logged without the request's body;
 * nothing here throws to the listener.
 */
import type { ServerResponse } from 'node:http';
import { normalizePath } from '../../proxy/path.js';
import { ApiError } from './errors.js';
import { authenticate, mayDo, type ApiCaller } from './auth.js';
import { mustClose } from './body.js';
import type { Answer, ApiContext, ApiDeps, ApiRequest, ApiResponse } from './context.js';
import { buildRouter } from './router.js';
import { indexOf } from './views.js';

export type { ApiDeps, ApiRequest, ApiResponse } from './context.js';

const router = buildRouter();

/** Answers one API request from `caller` (undefined: outside every workload). */
export async function handleApi(deps: ApiDeps, req: ApiRequest, res: ApiResponse, caller: ApiCaller | undefined): Promise<void> {
  let answer: Answer;
  let close = false;
  try {
    answer = await answerOf(deps, req, caller);
  } catch (e) {
    if (!(e instanceof ApiError)) deps.logger.error({ err: e, method: req.method, path: pathOnly(req.url ?? '/') }, 'platform API: internal error');
    const err = e instanceof ApiError ? e : new ApiError('internal_error', 'internal error');
    close = e instanceof ApiError && mustClose(e);
    answer = { status: err.status, body: err.body(), ...(err.code === 'method_not_allowed' ? { headers: { allow: String(err.details.allow) } } : {}) };
  }
  send(req, res, answer, close);
}

async function answerOf(deps: ApiDeps, req: ApiRequest, caller: ApiCaller | undefined): Promise<Answer> {
  const url = req.url ?? '/';
  const norm = normalizePath(url);
  if (!norm.ok) throw new ApiError('bad_request', `bad request target: ${norm.reason}`);
  const method = req.method ?? '';
  const found = router.match(method, norm.path);
  if (found.route === undefined) {
    if (found.allow.length === 0) throw new ApiError('not_found', `no such path: ${method} ${norm.path}`);
    const allow = found.allow.join(', ');
    throw new ApiError('method_not_allowed', `${method} is not served here (allowed: ${allow})`, { allow });
  }
  const { route, params } = found;
  if (Object.values(params).some((p) => p === undefined || p === '')) throw new ApiError('not_found', `no such path: ${method} ${norm.path}`);
  const snapshot = deps.store.current;
  const authorization = req.headers.authorization;
  const principal = authenticate(typeof authorization === 'string' ? authorization : undefined, caller, deps.tokenSecret, snapshot.workloads.keys(), deps.operatorKey);
  const org = deps.org();
  // `/org`, `/org/-query` and `/org/-schema/permissions` name no org: they answer the one `up` serves.
  if (params.org !== undefined && params.org !== org) throw new ApiError('not_found', `org ${params.org} not found`, { kind: 'org', name: params.org });
  const index = indexOf(snapshot, org);
  mayDo(principal, route.action, (key) => index.of('workload').get(key));
  const query = new URLSearchParams(url.includes('?') ? url.slice(url.indexOf('?') + 1) : '');
  const ctx: ApiContext = { deps, snapshot, index, org, principal, req, params, query };
  return route.run(ctx);
}

function pathOnly(url: string): string {
  const norm = normalizePath(url);
  return norm.ok ? norm.path : '';
}

function send(req: ApiRequest, res: ApiResponse, answer: Answer, close: boolean): void {
  const body = answer.body === undefined ? '' : JSON.stringify(answer.body);
  const headers: Record<string, string | number> = {
    ...(answer.body === undefined ? {} : { 'content-type': 'application/json' }),
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    ...answer.headers,
  };
  // The body's rest was not read: on HTTP/1.1 it cannot be told from a next request.
  if (close && req.httpVersionMajor === 1) headers.connection = 'close';
  try {
    (res as ServerResponse).writeHead(answer.status, headers);
    res.end(body);
  } catch {
    // The client went away (a destroyed HTTP/2 stream throws here): nobody to answer.
  }
}
