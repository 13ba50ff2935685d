/**
 * One finished request → Envoy's `HTTPAccessLogEntry`: common properties (addresses, start time, the
 * timings Envoy reports relative to it, upstream address and cluster, response flags), request and
 * response properties, and the extra headers and trailers the log asked for. Pure apart from reading
 * the exchange; never throws. Header byte counts follow Envoy's (names plus values, no framing). A
 * WebSocket or CONNECT tunnel is logged as Envoy logs an upgrade: its duration is the connection's,
 * its body bytes the payload each way.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { ExchangeInfo } from '../observe/index.js';
import { parseSubjectAltName } from '../mesh/index.js';
import type { HostPort } from '../routing/replicas.js';
import type { AccessLogSpec } from './config.js';
import type { DurationMessage, HttpAccessLogEntry, SocketAddressMessage } from './proto.js';

/** What the telemetry layer observed about a request beyond the exchange's own fields. */
export interface RequestFacts {
  /** Upstream of the last attempt. */
  upstream?: HostPort;
  /** Clock ms of the first upstream attempt (0: none). */
  firstUpstreamTxAt: number;
  /** Clock ms at which the request's last byte arrived (0: unknown). */
  lastRxAt: number;
  /** Body bytes received (-1: not counted; then Content-Length is used). */
  requestBodyBytes: number;
  /** Trailers sent downstream (only captured when the log asks for some). */
  trailers?: Record<string, string | string[] | undefined>;
  /** Why the last attempt failed, when it did (`connect-failure`, `reset`, ...). */
  failure?: string;
}

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);

export function duration(ms: number): DurationMessage {
  const clamped = Math.max(0, ms);
  const seconds = Math.floor(clamped / 1000);
  return { seconds, nanos: Math.round((clamped - seconds * 1000) * 1e6) % 1e9 };
}

function address(host: string | undefined, port: number | undefined): SocketAddressMessage | undefined {
  if (!host) return undefined;
  return { socket_address: { address: host.startsWith('::ffff:') ? host.slice(7) : host, port_value: port ?? 0 } };
}

function text(value: string | string[] | number | undefined): string {
  if (value === undefined) return '';
  return Array.isArray(value) ? value.join(',') : String(value);
}

/** Envoy's response flags for how the request ended; `undefined` when none applies. */
export function responseFlags(ex: ExchangeInfo, failure: string | undefined): Record<string, unknown> | undefined {
  const flags: Record<string, unknown> = {};
  switch (ex.errorCode) {
    case 'NO_ROUTE': flags.no_route_found = true; break;
    case 'NO_HEALTHY_UPSTREAM': case 'SUSPENDED': flags.no_healthy_upstream = true; break;
    case 'UPSTREAM_TIMEOUT': flags.upstream_request_timeout = true; break;
    case 'UPSTREAM_RESET':
      if (failure === 'connect-failure') flags.upstream_connection_failure = true;
      else flags.upstream_remote_reset = true;
      if (ex.attempts > 1) flags.upstream_retry_limit_exceeded = true;
      break;
    case 'UPSTREAM_PROTOCOL_ERROR':
      flags.upstream_protocol_error = true;
      if (ex.attempts > 1) flags.upstream_retry_limit_exceeded = true;
      break;
    case 'HTTP_VERSION_NOT_SUPPORTED': flags.downstream_protocol_error = true; break;
    case 'RATE_LIMITED': flags.rate_limited = true; break;
    case 'RATE_LIMIT_UNAVAILABLE': flags.rate_limit_service_error = true; break;
    case 'AUTH_DENIED': case 'AUTH_FAILED': flags.unauthorized_details = { reason: 'EXTERNAL_SERVICE' }; break;
    case 'BAD_REQUEST': case 'HEADERS_TOO_LARGE': case 'URI_TOO_LONG': case 'PAYLOAD_TOO_LARGE': flags.downstream_protocol_error = true; break;
    case 'OVERLOADED': flags.overload_manager = true; break;
    default:
      if (ex.status === 0) flags.downstream_connection_termination = true;
  }
  for (const _ in flags) return flags;
  return undefined;
}

/** The response header block as sent (`res._header` for HTTP/1.1, the stream's sent headers for h2). */
function sentHeaders(ex: ExchangeInfo): { block?: string; map?: OutgoingHttpHeaders } {
  const res = ex.res as unknown as { _header?: string | null; stream?: { sentHeaders?: OutgoingHttpHeaders } };
  if (typeof res._header === 'string') return { block: res._header };
  const map = res.stream?.sentHeaders;
  return map ? { map } : {};
}

function headerFromBlock(block: string, name: string): string | undefined {
  const lower = block.toLowerCase();
  const at = lower.indexOf(`\r\n${name}:`);
  if (at < 0) return undefined;
  const start = at + name.length + 3;
  const end = block.indexOf('\r\n', start);
  return block.slice(start, end < 0 ? undefined : end).trim();
}

function responseHeader(sent: { block?: string; map?: OutgoingHttpHeaders }, name: string): string | undefined {
  if (sent.block !== undefined) return headerFromBlock(sent.block, name);
  const v = sent.map?.[name];
  return v === undefined ? undefined : text(v);
}

function responseHeaderBytes(sent: { block?: string; map?: OutgoingHttpHeaders }): number {
  if (sent.block !== undefined) {
    // Status line and CRLF/": " framing are not header bytes.
    let n = 0;
    const lines = sent.block.split('\r\n');
    for (let i = 1; i < lines.length; i++) {
      const line = lines[i]!;
      if (line) n += line.length - (line.includes(': ') ? 2 : 1);
    }
    return n;
  }
  let n = 0;
  for (const [k, v] of Object.entries(sent.map ?? {})) n += k.length + text(v).length;
  return n;
}

/** What a TLS socket tells about itself (Node's TLSSocket; the HTTP/2 compat socket forwards these). */
interface TlsFacts {
  authorized?: boolean;
  getProtocol?(): string | null;
  servername?: string | false;
  getPeerCertificate?(): { subjectaltname?: string; subject?: Record<string, string>; issuer?: Record<string, string> } | null;
  getCertificate?(): { subjectaltname?: string } | object | null;
}

const TLS_VERSIONS: Record<string, string> = { TLSv1: 'TLSv1', 'TLSv1.1': 'TLSv1_1', 'TLSv1.2': 'TLSv1_2', 'TLSv1.3': 'TLSv1_3' };

/** `subjectaltname` text → Envoy's SubjectAltName list (URI and DNS entries). */
function sans(text: string | undefined): { uri?: string; dns?: string }[] {
  const out: { uri?: string; dns?: string }[] = [];
  for (const e of parseSubjectAltName(text ?? '') ?? []) {
    if (e.type === 'URI') out.push({ uri: e.value });
    else if (e.type === 'DNS') out.push({ dns: e.value });
  }
  return out;
}

/**
 * Envoy's `tls_properties`: version, SNI, and the SANs of the local and peer certificates. On a
 * mesh listener the peer's is the verified caller's URI (`sourcePrincipal`); elsewhere a client
 * certificate the handshake verified.
 */
function tlsProperties(socket: TlsFacts | undefined, sourcePrincipal: string | undefined): Record<string, unknown> | undefined {
  if (!socket) return undefined;
  try {
    const protocol = socket.getProtocol?.() ?? '';
    const local = socket.getCertificate?.() as { subjectaltname?: string } | null | undefined;
    // Only a certificate the handshake verified names the peer.
    const peer = sourcePrincipal !== undefined || socket.authorized !== true ? undefined : socket.getPeerCertificate?.();
    return {
      tls_version: TLS_VERSIONS[protocol] ?? 'VERSION_UNSPECIFIED',
      tls_sni_hostname: typeof socket.servername === 'string' ? socket.servername : '',
      local_certificate_properties: { subject_alt_name: sans(local?.subjectaltname) },
      peer_certificate_properties: { subject_alt_name: sourcePrincipal !== undefined ? [{ uri: sourcePrincipal }] : sans(peer?.subjectaltname) },
    };
  } catch {
    return undefined;
  }
}

/**
 * The entry for one request; `wallNow` / `now` are the clock's wall and monotonic readings at the end.
 * Returns the entry and its approximate encoded size (for the `buffer_size_bytes` bound).
 */
export function buildEntry(ex: ExchangeInfo, facts: RequestFacts, spec: AccessLogSpec, now: number, wallNow: number): { entry: HttpAccessLogEntry; size: number } {
  const req = ex.req;
  const h = req.headers;
  const start = ex.startedAt;
  const since = (at: number): DurationMessage | undefined => (at > 0 ? duration(at - start) : undefined);
  const socket = req.socket as { remotePort?: number; localAddress?: string; localPort?: number } | undefined;
  const fromPeer = ex.clientAddress === ex.peer;

  const common: Record<string, unknown> = {
    sample_rate: 1,
    downstream_remote_address: address(ex.clientAddress, fromPeer ? socket?.remotePort : 0),
    downstream_direct_remote_address: address(ex.peer, socket?.remotePort),
    downstream_local_address: address(socket?.localAddress, socket?.localPort),
    start_time: duration(wallNow - (now - start)),
    time_to_last_rx_byte: since(facts.lastRxAt),
    time_to_first_upstream_tx_byte: since(facts.firstUpstreamTxAt),
    time_to_first_upstream_rx_byte: since(ex.upstreamHeadersAt),
    time_to_first_downstream_tx_byte: since(ex.upstreamHeadersAt),
    time_to_last_downstream_tx_byte: duration(now - start),
    upstream_remote_address: facts.upstream ? address(facts.upstream.host, facts.upstream.port) : undefined,
    upstream_cluster: facts.upstream ? spec.workload : '',
    response_flags: responseFlags(ex, facts.failure),
    upstream_transport_failure_reason: facts.failure && ex.errorCode ? facts.failure : '',
    route_name: spec.workloadName,
    duration: duration(now - start),
    upstream_request_attempt_count: ex.attempts,
    tls_properties: ex.tls ? tlsProperties(req.socket as unknown as TlsFacts, ex.sourcePrincipal) : undefined,
  };

  let headerBytes = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i++) headerBytes += raw[i]!.length;
  const contentLength = Number(h['content-length']);
  const bodyBytes = ex.tunnel ? ex.tunnel.bytesIn : facts.requestBodyBytes >= 0 ? facts.requestBodyBytes : Number.isFinite(contentLength) ? contentLength : 0;
  const method = req.method ?? 'GET';
  const path = ex.pathWithQuery;
  const userAgent = text(h['user-agent']);
  const referer = text(h.referer);
  const forwardedFor = text(h['x-forwarded-for']);
  let size = 160 + path.length + ex.host.length + userAgent.length + referer.length + forwardedFor.length + ex.requestId.length;

  const request: Record<string, unknown> = {
    request_method: METHODS.has(method) ? method : 'METHOD_UNSPECIFIED',
    scheme: ex.tls ? 'https' : 'http',
    authority: ex.host,
    path,
    user_agent: userAgent,
    referer,
    forwarded_for: forwardedFor,
    request_id: ex.requestId,
    request_headers_bytes: headerBytes,
    request_body_bytes: bodyBytes,
  };
  if (spec.requestHeaders.length > 0) {
    const logged: Record<string, string> = {};
    for (const name of spec.requestHeaders) {
      const v = h[name];
      if (v !== undefined) size += name.length + (logged[name] = text(v)).length + 4;
    }
    request.request_headers = logged;
  }

  const sent = sentHeaders(ex);
  const response: Record<string, unknown> = {
    response_code: ex.status > 0 ? { value: ex.status } : undefined,
    // A tunnel's answer head went out on the raw socket (unless a filter's local reply wrote it).
    response_headers_bytes: ex.tunnel && sent.block === undefined ? ex.tunnel.responseHeaderBytes : responseHeaderBytes(sent),
    response_body_bytes: ex.bytesSent,
    response_code_details: ex.errorCode ? ex.errorCode.toLowerCase() : ex.status > 0 ? 'via_upstream' : '',
  };
  if (spec.responseHeaders.length > 0) {
    const logged: Record<string, string> = {};
    for (const name of spec.responseHeaders) {
      const v = responseHeader(sent, name);
      if (v !== undefined) size += name.length + (logged[name] = v).length + 4;
    }
    response.response_headers = logged;
  }
  if (spec.responseTrailers.length > 0 && facts.trailers) {
    const logged: Record<string, string> = {};
    const lower: Record<string, string | string[] | undefined> = {};
    for (const [k, v] of Object.entries(facts.trailers)) lower[k.toLowerCase()] = v;
    for (const name of spec.responseTrailers) {
      const v = lower[name];
      if (v !== undefined) size += name.length + (logged[name] = text(v)).length + 4;
    }
    response.response_trailers = logged;
  }

  const version = req.httpVersion === '2.0' ? 'HTTP2' : req.httpVersion === '1.0' ? 'HTTP10' : 'HTTP11';
  return { entry: { common_properties: common, protocol_version: version, request, response }, size };
}
