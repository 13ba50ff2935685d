/**
 * What a filter may do to headers, and which ones it must not trust: a header mutation
 * (`HeaderOp`: name, value and how it meets a header of the same name; the proxy applies them), the
 * names the edge strips from clients (`strippedAtEdge`), and the configured vendor's header names
 * (`vendorHeaders`). Pure functions of their arguments; no failure modes.
 */

/**
 * How a header mutation meets a header of the same name (Envoy's `HeaderValueOption`): `set`
 * replaces it (or adds the header), `append` adds another value, `add-if-absent` only adds,
 * `overwrite-if-exists` only replaces.
 */
export type HeaderAction = 'set' | 'append' | 'add-if-absent' | 'overwrite-if-exists';

/** One header mutation: lower-case name, value, action. */
export type HeaderOp = readonly [name: string, value: string, action: HeaderAction];

/** The header names of the configured vendor (`--vendor`, default `svc`). */
export interface VendorHeaders {
  debug: string;
  location: string;
  replica: string;
  /** Debug answers (DESIGN §11): the route taken, the attempts, the trace id. */
  route: string;
  attempts: string;
  traceId: string;
  /** Prefixes of request headers clients may not set. */
  strip: readonly string[];
}

export function vendorHeaders(vendor: string): VendorHeaders {
  return {
    debug: `x-${vendor}-debug`,
    location: `x-${vendor}-location`,
    replica: `x-${vendor}-replica`,
    route: `x-${vendor}-route`,
    attempts: `x-${vendor}-attempts`,
    traceId: `x-${vendor}-trace-id`,
    strip: vendor === 'envoy' ? ['x-envoy-'] : ['x-envoy-', `x-${vendor}-`],
  };
}

/** Headers the proxy sets for the app (or appends to), spelled with dashes. */
const SET_BY_PROXY = new Set(['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-request-id', 'x-forwarded-client-cert']);

function hasStrippedPrefix(name: string, prefixes: readonly string[]): boolean {
  for (const p of prefixes) if (name.startsWith(p)) return true;
  return false;
}

/**
 * A client-sent header (lower-case name) the edge removes: `x-envoy-*` and the vendor's `x-svc-*`;
 * `x-forwarded-client-cert`, which only the mesh may set; and any name with an underscore that,
 * spelled with dashes, would be one of those or a header the proxy sets (`x_forwarded_for`,
 * `x-svc_debug`...). Names with underscores are otherwise forwarded, as Envoy does by default, but
 * CGI-style servers (PHP, Rack, Django's META, nginx's fastcgi) read `x_forwarded_for` and
 * `x-forwarded-for` as the same variable, so one must not stand in for the other. Every such name
 * starts with `x`: other names cost one comparison.
 */
export function strippedAtEdge(name: string, prefixes: readonly string[]): boolean {
  if (name.charCodeAt(0) !== 120 /* 'x' */) return false;
  if (hasStrippedPrefix(name, prefixes) || name === 'x-forwarded-client-cert') return true;
  if (!name.includes('_')) return false;
  const dashed = name.replace(/_/g, '-');
  return SET_BY_PROXY.has(dashed) || hasStrippedPrefix(dashed, prefixes);
}
