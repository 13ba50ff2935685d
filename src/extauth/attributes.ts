/**
 * Builds the `CheckRequest` of Envoy's ext_authz v3 for one exchange, as Envoy's
 * `CheckRequestUtils::createHttpCheck` does: the source peer (the client address after trusted
 * proxies; the principal of a verified client certificate, and its URL-encoded PEM when asked), the
 * destination peer (the proxy's local address and certificate principal), `request.time`, and
 * `request.http` with every header — HTTP/1.1's Host as `:authority`, plus `:method`, `:path`
 * (normalized path and query; none for a CONNECT, whose `path` is empty), `:scheme`, lower-case
 * names, repeated headers joined with "," — the headers the proxy itself sets before the app sees
 * them (`x-request-id`, `x-forwarded-for`, `x-forwarded-proto`), and the body prefix with
 * `x-envoy-auth-partial-body`. Every string is UTF-8-sanitized (utf8.ts). Pure apart from reading
 * the sockets' TLS state; never throws.
 */
import type { TLSSocket } from 'node:tls';
import type { X509Certificate } from 'node:crypto';
import { parseSubjectAltName as readSubjectAltName } from '../mesh/index.js';
import { strippedAtEdge, type ExchangeView } from '../filter/index.js';
import { wellFormed, wireString, utf8Body } from './utf8.js';

/** What a check sends of the body. */
export interface CheckBody {
  /** At most the limit (8 KiB). */
  readonly bytes: Buffer;
  /** More body followed (or the body was longer than the limit). */
  readonly partial: boolean;
}

export interface AttributeOptions {
  readonly includePeerCert: boolean;
  readonly packAsBytes: boolean;
  /** Request-header name prefixes the edge strips (client `x-envoy-*`, `x-<vendor>-*`). */
  readonly stripPrefixes: readonly string[];
  /** Wall-clock milliseconds (request.time). */
  readonly now: number;
}

export const PARTIAL_BODY_HEADER = 'x-envoy-auth-partial-body';

/** Connection-specific headers that never reach the app, so the check does not see them either. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'http2-settings', 'host']);

export interface SocketAddressObject {
  socket_address: { address: string; port_value: number };
}

export interface PeerObject {
  address?: SocketAddressObject;
  principal: string;
  certificate: string;
}

/** `AttributeContext.HttpRequest` (keepCase field names, as proto-loader reads them too). */
export interface HttpRequestObject {
  id: string;
  method: string;
  headers: Record<string, string>;
  path: string;
  host: string;
  scheme: string;
  query: string;
  fragment: string;
  size: number;
  protocol: string;
  body?: string;
  raw_body?: Buffer;
}

/** The `CheckRequest` the filter sends (encoded by encode.ts). */
export interface CheckRequestObject {
  attributes: {
    source: PeerObject;
    destination: PeerObject;
    request: { time: { seconds: number; nanos: number }; http: HttpRequestObject };
    context_extensions: Record<string, string>;
  };
}

/** The request as the proxy and the check see it: scheme, and the header view. */
export interface CheckView {
  readonly scheme: string;
  /** Lower-case name → value, repeated headers joined with ",". */
  readonly headers: Record<string, string>;
}

/**
 * The header map of the check: what the app will receive (minus hop-by-hop headers, minus the
 * prefixes the edge strips), plus Envoy's pseudo-headers. Built from the raw header list so
 * repeated headers are all kept (Node's parsed `headers` drops some duplicates).
 */
export function checkView(ex: ExchangeView, stripPrefixes: readonly string[]): CheckView {
  const sidecar = ex.listenerKind === 'sidecar';
  const headers: Record<string, string> = Object.create(null) as Record<string, string>;
  const raw = ex.req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (name.charCodeAt(0) === 58 /* ':' */ || HOP_BY_HOP.has(name)) continue;
    // A client must not be able to tell the auth server the body was (not) cut.
    if (name === PARTIAL_BODY_HEADER) continue;
    // Behind the edge (a standalone sidecar), the ingress already stripped them.
    if (!sidecar && strippedAtEdge(name, stripPrefixes)) continue;
    if (name === 'te' && !/\btrailers\b/i.test(raw[i + 1]!)) continue;
    const value = wireString(raw[i + 1]!);
    const prior = headers[name];
    // HTTP/2 splits cookies into separate fields; Envoy's codec rejoins them with "; " (RFC 9113 §8.2.3).
    headers[name] = prior === undefined ? value : `${prior}${name === 'cookie' ? '; ' : ','}${value}`;
  }
  const forwardedProto = headers['x-forwarded-proto'];
  // At the edge the connection decides (a client cannot claim https); a sidecar trusts the ingress.
  const scheme = sidecar && (forwardedProto === 'http' || forwardedProto === 'https') ? forwardedProto : ex.tls ? 'https' : 'http';
  headers[':authority'] = wireString(ex.host);
  headers[':method'] = wireString(ex.req.method ?? 'GET');
  // A CONNECT has no :path (its target is the authority), as Envoy sees it.
  if (ex.req.method !== 'CONNECT') headers[':path'] = wireString(ex.pathWithQuery);
  headers[':scheme'] = scheme;
  headers['x-request-id'] = ex.requestId;
  headers['x-forwarded-proto'] = scheme;
  const xff = headers['x-forwarded-for'];
  headers['x-forwarded-for'] = xff ? `${xff}, ${ex.peer}` : ex.peer;
  return { scheme, headers };
}

/** The `CheckRequest` as a plain object (keepCase field names), for encode.ts. */
export function buildCheckRequest(ex: ExchangeView, view: CheckView, opts: AttributeOptions, body: CheckBody | undefined): CheckRequestObject {
  const headers = body ? { ...view.headers, [PARTIAL_BODY_HEADER]: body.partial ? 'true' : 'false' } : view.headers;
  const socket = ex.req.socket as (TLSSocket & { encrypted?: boolean }) | null | undefined;
  const source: PeerObject = { principal: '', certificate: '' };
  const destination: PeerObject = { principal: '', certificate: '' };
  // The client address after trusted proxies; its port only when it is the connection's own peer.
  const sourcePort = ex.clientAddress === ex.peer ? socket?.remotePort ?? 0 : 0;
  if (ex.clientAddress) source.address = socketAddress(ex.clientAddress, sourcePort);
  if (socket?.localAddress) destination.address = socketAddress(socket.localAddress, socket.localPort ?? 0);
  if (ex.tls && socket) {
    const peer = verifiedPeerCertificate(socket);
    if (peer) {
      source.principal = principalOf(peer);
      if (opts.includePeerCert) source.certificate = urlEncodedPem(peer);
    }
    const local = safe(() => socket.getX509Certificate?.());
    if (local) destination.principal = principalOf(local);
  }
  const cl = ex.req.headers['content-length'];
  const size = typeof cl === 'string' && /^\d+$/.test(cl) ? Number(cl) : -1;
  const http: HttpRequestObject = {
    id: ex.requestId,
    method: headers[':method']!,
    headers,
    path: headers[':path'] ?? '',
    host: headers[':authority']!,
    scheme: view.scheme,
    query: '',
    fragment: '',
    size,
    protocol: ex.req.httpVersion === '2.0' ? 'HTTP/2' : ex.req.httpVersion === '1.0' ? 'HTTP/1.0' : 'HTTP/1.1',
  };
  if (body) {
    if (opts.packAsBytes) http.raw_body = body.bytes;
    else http.body = utf8Body(body.bytes);
  }
  const millis = opts.now;
  const seconds = Math.floor(millis / 1000);
  return {
    attributes: {
      source,
      destination,
      request: { time: { seconds, nanos: Math.round((millis - seconds * 1000) * 1e6) }, http },
      context_extensions: {},
    },
  };
}

function socketAddress(address: string, port: number): SocketAddressObject {
  return { socket_address: { address: wireString(address), port_value: port } };
}

function safe<T>(fn: () => T): T | undefined {
  try {
    return fn();
  } catch {
    return undefined;
  }
}

/**
 * The client's certificate, only when the TLS handshake verified it against the listener's client
 * CA: an unverified certificate is never presented to the auth server as an identity.
 */
export function verifiedPeerCertificate(socket: TLSSocket): X509Certificate | undefined {
  if (!safe(() => socket.authorized)) return undefined;
  return safe(() => socket.getPeerX509Certificate?.()) ?? undefined;
}

/** Envoy's principal: the first URI SAN, else the first DNS SAN, else the subject (RFC 2253 order). */
export function principalOf(cert: Pick<X509Certificate, 'subjectAltName' | 'subject'>): string {
  const sans = parseSubjectAltName(cert.subjectAltName ?? '');
  const uri = sans.find((s) => s.type === 'URI');
  if (uri) return wellFormed(uri.value);
  const dns = sans.find((s) => s.type === 'DNS');
  if (dns) return wellFormed(dns.value);
  return wellFormed(rfc2253(cert.subject ?? ''));
}

/**
 * `DNS:a.example, URI:spiffe://x` (Node quotes values that contain separators) → entries; the mesh's
 * reader (tested against what Node reports), none when the list cannot be read.
 */
export function parseSubjectAltName(s: string): { type: string; value: string }[] {
  return readSubjectAltName(s) ?? [];
}

/** Node's subject (`C=US\nO=Acme\nCN=client`, issuer order) in RFC 2253 form (`CN=client,O=Acme,C=US`). */
export function rfc2253(subject: string): string {
  return subject
    .split('\n')
    .filter((line) => line !== '')
    .reverse()
    .map((line) => {
      const eq = line.indexOf('=');
      if (eq < 0) return line;
      return `${line.slice(0, eq)}=${line.slice(eq + 1).replace(/[,+"\\<>;]/g, (c) => `\\${c}`)}`;
    })
    .join(',');
}

/** Envoy's `urlEncodedPemEncodedPeerCertificate`: the PEM with `\n`, space, `+`, `/`, `=` escaped. */
export function urlEncodedPem(cert: Pick<X509Certificate, 'toString'>): string {
  return encodeURIComponent(cert.toString());
}
