/**
 * Header rewriting at each hop: hop-by-hop headers removed (RFC 9110 §7.6.1, plus every name the
 * `Connection` header lists), client-supplied `x-envoy-*`, vendor (`x-svc-*`) and
 * `x-forwarded-client-cert` headers stripped at the edge (with their underscore spellings), `x-forwarded-for` / `x-forwarded-proto` / `x-request-id` set, the Host chosen by the
 * route. One pass over the incoming headers, one object out; no failure modes.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import { strippedAtEdge, type HeaderOp } from '../filter/index.js';

/** Hop-by-hop in both directions (RFC 9110 §7.6.1, plus HTTP/2's connection-specific ones). */
const RESPONSE_HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'te',
  'trailer',
  'upgrade',
  'http2-settings',
]);

/** On requests also `expect` (answered here; undici refuses it) and `host` (the route sets it). */
const HOP_BY_HOP = new Set([...RESPONSE_HOP_BY_HOP, 'expect', 'host']);

export interface UpstreamHeaderOptions {
  /** Host (h1) / :authority (h2) to send upstream. */
  host: string;
  /** The downstream peer, appended to `x-forwarded-for`. */
  peer: string;
  /** `http` or `https`: the scheme the client used (edge), or the one already forwarded (inner hops). */
  proto: string;
  requestId: string;
  /** At the edge: strip client-supplied `x-envoy-*` and `x-<vendor>-*` (and see `strippedAtEdge`). */
  stripPrefixes?: readonly string[];
  /** Keep `te: trailers` (HTTP/2 and gRPC upstreams need it). */
  keepTeTrailers: boolean;
  /** Serverless targets: the original host, appended to `x-forwarded-host`. */
  forwardedHost?: string;
  /** Set after everything else (`domain` routes' `headers.request.set`). */
  set?: readonly (readonly [string, string])[];
  /** Set for upgrades (WebSocket): keep `connection: upgrade` and `upgrade`. */
  keepUpgrade?: boolean;
}

/** Names listed in a `Connection` header are hop-by-hop too. */
function connectionTokens(value: string | string[] | undefined): Set<string> | undefined {
  if (value === undefined || value === 'keep-alive' || value === 'close' || value === 'Keep-Alive') return undefined;
  const joined = Array.isArray(value) ? value.join(',') : value;
  let out: Set<string> | undefined;
  for (const token of joined.split(',')) {
    const name = token.trim().toLowerCase();
    if (name && name !== 'close' && name !== 'keep-alive' && name !== 'upgrade') (out ??= new Set()).add(name);
  }
  return out;
}

/**
 * The headers to send upstream, from the downstream request's parsed headers (lower-case names;
 * HTTP/2 pseudo-headers are skipped).
 */
export function upstreamHeaders(incoming: IncomingHttpHeaders, opts: UpstreamHeaderOptions): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const extraHop = connectionTokens(incoming.connection);
  for (const name in incoming) {
    if (name.charCodeAt(0) === 58 /* ':' */) continue;
    if (HOP_BY_HOP.has(name)) continue;
    if (extraHop?.has(name)) continue;
    if (opts.stripPrefixes !== undefined && strippedAtEdge(name, opts.stripPrefixes)) continue;
    const value = incoming[name];
    if (value === undefined) continue;
    out[name] = value;
  }
  if (opts.keepTeTrailers && typeof incoming.te === 'string' && incoming.te.toLowerCase().includes('trailers')) {
    out.te = 'trailers';
  }
  if (opts.keepUpgrade && incoming.upgrade) {
    out.connection = 'upgrade';
    out.upgrade = incoming.upgrade;
  }
  out.host = opts.host;
  const xff = out['x-forwarded-for'];
  out['x-forwarded-for'] = xff ? `${Array.isArray(xff) ? xff.join(', ') : xff}, ${opts.peer}` : opts.peer;
  out['x-forwarded-proto'] = opts.proto;
  out['x-request-id'] = opts.requestId;
  if (opts.forwardedHost !== undefined) {
    const prior = out['x-forwarded-host'];
    out['x-forwarded-host'] = prior ? `${Array.isArray(prior) ? prior.join(', ') : prior}, ${opts.forwardedHost}` : opts.forwardedHost;
  }
  if (opts.set) for (const [name, value] of opts.set) out[name] = value;
  return out;
}



/** The upstream response's headers minus hop-by-hop ones (HTTP/2 forbids them; h1 re-frames). */
export function downstreamResponseHeaders(incoming: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  const extraHop = connectionTokens(incoming.connection);
  for (const name in incoming) {
    if (name.charCodeAt(0) === 58) continue;
    if (RESPONSE_HOP_BY_HOP.has(name) || extraHop?.has(name)) continue;
    const value = incoming[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** The client address after `trustedProxies` hops of `x-forwarded-for` (Envoy's xff_num_trusted_hops). */
export function clientAddress(peer: string, xff: string | string[] | undefined, trustedProxies: number): string {
  if (trustedProxies <= 0 || xff === undefined) return peer;
  const list = (Array.isArray(xff) ? xff.join(',') : xff).split(',');
  // The peer is the last hop; each trusted proxy appended the address before it.
  const index = list.length - trustedProxies;
  // Fewer hops than trusted proxies: the header cannot be trusted to name the client (Envoy falls
  // back to the connection's peer).
  if (index < 0) return peer;
  const candidate = list[index]?.trim();
  return candidate || peer;
}

/** Apply `ops` in order to `headers` (lower-case names), in place; returns `headers`. */
export function applyHeaderOps(headers: OutgoingHttpHeaders, ops: readonly HeaderOp[]): OutgoingHttpHeaders {
  for (const [name, value, action] of ops) {
    const prior = headers[name];
    switch (action) {
      case 'set':
        headers[name] = value;
        break;
      case 'append':
        headers[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [String(prior), value];
        break;
      case 'add-if-absent':
        if (prior === undefined) headers[name] = value;
        break;
      case 'overwrite-if-exists':
        if (prior !== undefined) headers[name] = value;
        break;
    }
  }
  return headers;
}
