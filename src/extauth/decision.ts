/**
 * What an authorization answer means, as Envoy's ext_authz filter reads it: allow (with header,
 * response-header and query mutations), deny (status, headers and body for the client), or error
 * (the failure mode decides). gRPC: status OK allows (`ok_response` mutations); any other status
 * denies, with `denied_response`'s status (403 when unset) and verbatim headers and body. HTTP: 200
 * allows (auth-response headers matching the upstream prefixes are set upstream, and
 * `x-envoy-auth-headers-to-remove` lists headers to remove); 5xx is an error; anything else denies
 * with the auth server's own status, headers and body. Pure functions, no I/O.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { HeaderAction, HeaderOp } from '../filter/index.js';
import type { CheckResponseObject, HeaderValueOptionObject } from './proto.js';

export interface OkMutations {
  /** Final values to set on the upstream request (lower-case names, wire bytes as latin1). */
  readonly upstreamSet: readonly [string, string][];
  readonly upstreamRemove: readonly string[];
  /**
   * `response_headers_to_add`, in order, applied to the response the client gets (the app's, or a
   * local reply) with their actions: `append` adds a value next to the app's, `set` replaces it.
   */
  readonly responseHeaders: readonly HeaderOp[] | undefined;
  readonly querySet: readonly [string, string][];
  readonly queryRemove: readonly string[];
}

export type Decision =
  | { readonly kind: 'ok'; readonly mutations: OkMutations | undefined }
  | { readonly kind: 'denied'; readonly status: number; readonly headers: OutgoingHttpHeaders; readonly body: string | Buffer }
  | { readonly kind: 'error'; readonly reason: string };

const TOKEN = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** Never set by an auth server: they frame the message, or route it (Envoy: pseudo-headers and Host). */
const PROTECTED = new Set(['host', 'connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'http2-settings', 'content-length']);

class MutationError extends Error {}

/** A header value as the wire bytes: UTF-8 of the decoded string, carried in a latin1 JS string. */
function wireValue(h: { value: string; raw_value?: Buffer }): string {
  if (h.value === '' && h.raw_value && h.raw_value.length > 0) return h.raw_value.toString('latin1');
  return Buffer.from(h.value, 'utf8').toString('latin1');
}

type Action = HeaderAction;

/**
 * `append` (the BoolValue) wins when present; otherwise `append_action`. The enum's default
 * (APPEND_IF_EXISTS_OR_ADD, 0) cannot be told from "unset", and ext_authz documents `append` as
 * defaulting to false in its messages, so 0 means set (as Envoy's ext_authz has always done).
 */
export function actionOf(option: Pick<HeaderValueOptionObject, 'append' | 'append_action'>): Action {
  if (option.append) return option.append.value ? 'append' : 'set';
  switch (option.append_action) {
    case 'ADD_IF_ABSENT':
    case 1:
      return 'add-if-absent';
    case 'OVERWRITE_IF_EXISTS':
    case 3:
      return 'overwrite-if-exists';
    default:
      return 'set';
  }
}

interface Mutation {
  name: string;
  value: string;
  action: Action;
}

function readOption(option: HeaderValueOptionObject, strict: boolean): Mutation | undefined {
  const h = option.header;
  if (!h) return undefined;
  const name = h.key.toLowerCase();
  const value = wireValue(h);
  if (!TOKEN.test(name) || BAD_VALUE.test(value)) {
    if (strict) throw new MutationError(`invalid header ${JSON.stringify(h.key)}`);
    return undefined;
  }
  if (value === '' && !option.keep_empty_value) return undefined;
  return { name, value, action: actionOf(option) };
}

/**
 * The OK mutations applied over the check's header view (`existing`, the request as the app would
 * receive it), in Envoy's order: sets/appends first, removals last (so a header both set and
 * removed is removed). Appending joins with "," onto the current value (or adds the header).
 */
export function okMutations(ok: NonNullable<CheckResponseObject['ok_response']>, existing: Readonly<Record<string, string>>): OkMutations | undefined {
  // The usual answer: allowed, nothing to change.
  if (!ok.headers?.length && !ok.headers_to_remove?.length && !ok.response_headers_to_add?.length && !ok.query_parameters_to_set?.length && !ok.query_parameters_to_remove?.length) return undefined;
  const changed = new Map<string, string>();
  const current = (name: string): string | undefined => changed.get(name) ?? existing[name];
  for (const option of ok.headers ?? []) {
    const m = readOption(option, true);
    if (!m || PROTECTED.has(m.name)) continue;
    const now = current(m.name);
    switch (m.action) {
      case 'set':
        changed.set(m.name, m.value);
        break;
      case 'append':
        changed.set(m.name, now === undefined ? m.value : `${now},${m.value}`);
        break;
      case 'add-if-absent':
        if (now === undefined) changed.set(m.name, m.value);
        break;
      case 'overwrite-if-exists':
        if (now !== undefined) changed.set(m.name, m.value);
        break;
    }
  }
  const upstreamRemove: string[] = [];
  for (const raw of ok.headers_to_remove ?? []) {
    const name = raw.toLowerCase();
    // Envoy: pseudo-headers and Host cannot be removed.
    if (!TOKEN.test(name) || name === 'host') continue;
    changed.delete(name);
    upstreamRemove.push(name);
  }
  let responseHeaders: HeaderOp[] | undefined;
  for (const option of ok.response_headers_to_add ?? []) {
    const m = readOption(option, true);
    if (!m || PROTECTED.has(m.name)) continue;
    (responseHeaders ??= []).push([m.name, m.value, m.action]);
  }
  const queryRemove = (ok.query_parameters_to_remove ?? []).filter((k) => k !== '');
  const removed = new Set(queryRemove);
  // Envoy sets, then removes: a parameter in both lists ends up removed.
  const querySet = (ok.query_parameters_to_set ?? [])
    .filter((q) => q.key !== '' && !removed.has(q.key))
    .map((q): [string, string] => [q.key, q.value]);
  if (changed.size === 0 && upstreamRemove.length === 0 && !responseHeaders && querySet.length === 0 && queryRemove.length === 0) return undefined;
  return { upstreamSet: [...changed], upstreamRemove, responseHeaders, querySet, queryRemove };
}

/** Headers of a denial for the client: set, or appended with `append: true`; unsafe ones dropped. */
export function deniedHeaders(options: readonly HeaderValueOptionObject[]): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const option of options) {
    const m = readOption(option, false);
    if (!m || PROTECTED.has(m.name)) continue;
    const prior = out[m.name];
    if (m.action === 'append' && prior !== undefined) out[m.name] = Array.isArray(prior) ? [...prior, m.value] : [String(prior), m.value];
    else if (m.action !== 'add-if-absent' || prior === undefined) out[m.name] = m.value;
  }
  return out;
}

const DEFAULT_DENY_STATUS = 403;

/** A denial status the client can be sent: a final status (200–599), else 403. */
export function denyStatus(code: number | undefined): number {
  return code !== undefined && Number.isInteger(code) && code >= 200 && code <= 599 ? code : DEFAULT_DENY_STATUS;
}

/** gRPC mode: a decoded `CheckResponse`. */
export function fromCheckResponse(res: CheckResponseObject, existing: Readonly<Record<string, string>>, statusCodes: ReadonlyMap<string, number>): Decision {
  const code = res.status?.code ?? 0;
  if (code === 0) {
    const ok = res.http_response === 'ok_response' || (res.http_response === undefined && res.ok_response) ? res.ok_response : undefined;
    try {
      return { kind: 'ok', mutations: ok ? okMutations(ok, existing) : undefined };
    } catch (err) {
      if (err instanceof MutationError) return { kind: 'error', reason: `ok_response: ${err.message}` };
      throw err;
    }
  }
  const denied = res.http_response === 'denied_response' || (res.http_response === undefined && res.denied_response) ? res.denied_response : undefined;
  if (!denied) return { kind: 'denied', status: DEFAULT_DENY_STATUS, headers: {}, body: '' };
  const raw = denied.status?.code;
  const number = typeof raw === 'number' ? raw : raw === undefined ? undefined : statusCodes.get(raw) ?? (/^\d+$/.test(raw) ? Number(raw) : undefined);
  return { kind: 'denied', status: denyStatus(number), headers: deniedHeaders(denied.headers ?? []), body: denied.body ?? '' };
}

export const HEADERS_TO_REMOVE = 'x-envoy-auth-headers-to-remove';

type ResponseHeaders = Readonly<Record<string, string | string[] | undefined>>;

function joined(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v.join(',') : v;
}

/** HTTP mode: the auth server's answer. */
export function fromHttpResponse(status: number, headers: ResponseHeaders, body: Buffer, upstreamPrefixes: readonly string[]): Decision {
  if (status >= 500) return { kind: 'error', reason: `authorization server answered ${status}` };
  if (status === 200) {
    const upstreamSet: [string, string][] = [];
    if (upstreamPrefixes.length > 0) {
      for (const name in headers) {
        const value = joined(headers[name]);
        if (value === undefined || PROTECTED.has(name) || name === HEADERS_TO_REMOVE) continue;
        if (!upstreamPrefixes.some((p) => name.startsWith(p))) continue;
        if (!TOKEN.test(name) || BAD_VALUE.test(value)) continue;
        upstreamSet.push([name, value]);
      }
    }
    const upstreamRemove = (joined(headers[HEADERS_TO_REMOVE]) ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter((s) => s !== '' && s !== 'host' && TOKEN.test(s));
    const removed = new Set(upstreamRemove);
    const set = upstreamSet.filter(([name]) => !removed.has(name));
    if (set.length === 0 && upstreamRemove.length === 0) return { kind: 'ok', mutations: undefined };
    return { kind: 'ok', mutations: { upstreamSet: set, upstreamRemove, responseHeaders: undefined, querySet: [], queryRemove: [] } };
  }
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || PROTECTED.has(name) || name.charCodeAt(0) === 58) continue;
    const values = Array.isArray(value) ? value : [value];
    if (!TOKEN.test(name) || values.some((v) => BAD_VALUE.test(v))) continue;
    out[name] = value;
  }
  return { kind: 'denied', status: denyStatus(status), headers: out, body };
}
