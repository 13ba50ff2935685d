/**
 * The spans of one request (OpenTelemetry's HTTP semantic conventions): its server span, continuing
 * the caller's trace (W3C or B3) or sampled at once for `x-svc-debug: trace`, with the request's
 * attributes; one client span per upstream attempt, whose context is injected into the upstream
 * request in W3C and in the format that came in; and how both end, with the answer's status, size
 * and error. Called by the telemetry layer (./telemetry.ts) only for requests of traced workloads;
 * never throws.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Context, type Span } from '@opentelemetry/api';
import type { Clock } from '../deps.js';
import type { ExchangeInfo } from '../observe/index.js';
import type { HostPort } from '../routing/replicas.js';
import type { WorkloadTracing } from './config.js';
import { extract, inject, type Format } from './propagation.js';
import type { TracerEntry } from './tracer.js';

export type SdkModule = typeof import('./tracer.js');

/** What the spans keep of a request (the telemetry layer's per-request state holds it). */
export interface SpanState {
  tracing: WorkloadTracing | undefined;
  entry: TracerEntry | undefined;
  span: Span | undefined;
  ctx: Context;
  attempt: Span | undefined;
  format: Format | undefined;
  debug: boolean;
  /** Wall-clock ms minus clock ms, fixed for the request so its spans' times are consistent. */
  anchor: number;
}

const METHODS = new Set(['CONNECT', 'DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT', 'TRACE', 'QUERY']);

/** The method as spans name it: a known one by its name, any other as `HTTP` (`_OTHER` in attributes). */
export function methodOf(method: string | undefined): { name: string; known: boolean } {
  const m = method ?? 'GET';
  return { name: m, known: METHODS.has(m) };
}

/** A Host header → address and port (`[::1]:8080`, `example.com`, `10.0.0.1:80`). */
export function splitHost(host: string): { address: string; port: number | undefined } {
  if (host.charCodeAt(0) === 91 /* [ */) {
    const end = host.indexOf(']');
    if (end < 0) return { address: host, port: undefined };
    const port = host.charCodeAt(end + 1) === 58 /* : */ ? Number(host.slice(end + 2)) : Number.NaN;
    return { address: host.slice(1, end), port: Number.isInteger(port) ? port : undefined };
  }
  const colon = host.indexOf(':');
  if (colon < 0 || host.indexOf(':', colon + 1) >= 0) return { address: host, port: undefined };
  const port = Number(host.slice(colon + 1));
  return { address: host.slice(0, colon), port: Number.isInteger(port) && colon + 1 < host.length ? port : undefined };
}

/** The vendor's span attribute keys (`svc.location`, ...), made once per configuration. */
export interface VendorKeys {
  readonly vendor: string;
  readonly location: string;
  readonly replica: string;
  readonly requestId: string;
}

export function vendorKeys(vendor: string): VendorKeys {
  return { vendor, location: `${vendor}.location`, replica: `${vendor}.replica`, requestId: `${vendor}.request_id` };
}

function header(ex: ExchangeInfo, name: string): string | undefined {
  const v = ex.req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
}

/**
 * The request's server span, its parent the caller's context; `anchor` is the request's (SpanState),
 * `sidecarReplica` the replica a standalone sidecar serves.
 */
export function startServerSpan(ex: ExchangeInfo, st: SpanState, tracing: WorkloadTracing, entry: TracerEntry, sdk: SdkModule, keys: VendorKeys, anchor: number, sidecarReplica: string | undefined): void {
  st.tracing = tracing;
  st.entry = entry;
  entry.active++;
  let parent = ROOT_CONTEXT;
  const incoming = extract(ex.req.headers);
  // `x-svc-debug: trace`: sampled whatever the GVC's sampling or the caller's flag says (DESIGN §11).
  const forced = ex.debugInfo?.trace === true;
  if (incoming) {
    st.format = incoming.format;
    st.debug = incoming.debug;
    if (incoming.traceId && incoming.spanId) {
      parent = trace.setSpanContext(ROOT_CONTEXT, {
        traceId: incoming.traceId,
        spanId: incoming.spanId,
        traceFlags: incoming.sampled || forced ? TraceFlags.SAMPLED : TraceFlags.NONE,
        isRemote: true,
        ...(incoming.traceState ? { traceState: sdk.traceStateOf(incoming.traceState) } : {}),
      });
      if (incoming.sampled === undefined && !forced) parent = parent.setValue(sdk.DEFERRED_DECISION, true);
    } else if (incoming.sampled !== undefined || forced) {
      parent = parent.setValue(sdk.FORCED_DECISION, forced || incoming.sampled);
    }
  } else if (forced) {
    parent = parent.setValue(sdk.FORCED_DECISION, true);
  }
  const method = methodOf(ex.req.method);
  st.anchor = anchor;
  const span = entry.tracer.startSpan(method.known ? method.name : 'HTTP', { kind: SpanKind.SERVER, startTime: st.anchor + ex.startedAt }, parent);
  st.span = span;
  st.ctx = trace.setSpan(parent, span);
  if (!span.isRecording()) return;
  // One setAttribute per key: building an object first only to have the span copy it costs more.
  const k = keys;
  const attrs = tracing.attributes;
  for (const key in attrs) span.setAttribute(key, attrs[key]!);
  const { address, port } = splitHost(ex.host);
  span.setAttribute('http.request.method', method.known ? method.name : '_OTHER');
  if (!method.known) span.setAttribute('http.request.method_original', method.name);
  // A CONNECT has no path.
  if (ex.path) span.setAttribute('url.path', ex.path);
  if (ex.query) span.setAttribute('url.query', ex.query.charCodeAt(0) === 63 /* ? */ ? ex.query.slice(1) : ex.query);
  const forwardedProto = ex.listenerKind === 'sidecar' ? header(ex, 'x-forwarded-proto') : undefined;
  span.setAttribute('url.scheme', forwardedProto ?? (ex.tls ? 'https' : 'http'));
  span.setAttribute('server.address', address);
  span.setAttribute('server.port', port ?? ex.listenerPort);
  span.setAttribute('network.protocol.version', ex.req.httpVersion === '2.0' ? '2' : ex.req.httpVersion);
  span.setAttribute('client.address', ex.clientAddress);
  span.setAttribute('network.peer.address', ex.peer);
  span.setAttribute(k.requestId, ex.requestId);
  const ua = header(ex, 'user-agent');
  if (ua !== undefined) span.setAttribute('user_agent.original', ua);
  if (ex.location !== undefined) span.setAttribute(k.location, ex.location);
  const replica = ex.replica?.name ?? (ex.listenerKind === 'sidecar' ? sidecarReplica : undefined);
  if (replica !== undefined) span.setAttribute(k.replica, replica);
}

/** A client span for the attempt about to go to `target`, its context injected into `headers`; the previous attempt's ends. */
export function startAttemptSpan(ex: ExchangeInfo, st: SpanState, target: HostPort, headers: OutgoingHttpHeaders, keys: VendorKeys, clock: Clock): void {
  const entry = st.entry;
  const server = st.span;
  if (!entry || !st.tracing || !server) return;
  if (st.attempt) st.attempt.end(st.anchor + clock.now());
  const method = methodOf(ex.req.method);
  const span = entry.tracer.startChild(server, method.known ? method.name : 'HTTP', SpanKind.CLIENT, st.anchor + clock.now(), st.ctx);
  st.attempt = span;
  const sc = span.spanContext();
  inject(headers, {
    traceId: sc.traceId,
    spanId: sc.spanId,
    sampled: (sc.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED,
    debug: st.debug,
    traceState: sc.traceState?.serialize(),
  }, st.format);
  if (!span.isRecording()) return;
  // The workload's attributes and custom tags are on the server span, the parent of this one.
  const k = keys;
  const hostPort = target.host.includes(':') ? `[${target.host}]:${target.port}` : `${target.host}:${target.port}`;
  span.setAttribute('http.request.method', method.known ? method.name : '_OTHER');
  span.setAttribute('server.address', target.host);
  span.setAttribute('server.port', target.port);
  span.setAttribute('url.full', `http://${hostPort}${ex.pathWithQuery}`);
  if (ex.location !== undefined) span.setAttribute(k.location, ex.location);
  if (ex.replica) span.setAttribute(k.replica, ex.replica.name);
  if (ex.attempts > 1) span.setAttribute('http.request.resend_count', ex.attempts - 1);
}

/** The request is over: its open attempt span and its server span end. */
export function endSpans(ex: ExchangeInfo, st: SpanState, keys: VendorKeys, clock: Clock): void {
  const span = st.span!;
  const attempt = st.attempt;
  const status = ex.status;
  const error = ex.errorCode ? ex.errorCode.toLowerCase() : status === 0 ? 'reset' : status >= 500 ? String(status) : undefined;
  if (attempt) {
    // Still open: the delivered answer (ended with the response), or an attempt cut short.
    const cut = ex.timedOut ? 'timeout' : status === 0 ? 'reset' : undefined;
    if (cut && attempt.isRecording()) {
      attempt.setAttribute('error.type', cut);
      attempt.setStatus({ code: SpanStatusCode.ERROR });
    }
    attempt.end(st.anchor + clock.now());
    st.attempt = undefined;
  }
  if (span.isRecording()) {
    const k = keys;
    if (status > 0) span.setAttribute('http.response.status_code', status);
    if (ex.location !== undefined) span.setAttribute(k.location, ex.location);
    if (ex.replica) span.setAttribute(k.replica, ex.replica.name);
    // The body bytes written to the client: the app's answer, or the proxy's own (a 504's JSON);
    // a tunnel's payload each way, read once when it closed.
    span.setAttribute('http.response.body.size', ex.bytesSent);
    if (ex.tunnel) span.setAttribute('http.request.body.size', ex.tunnel.bytesIn);
    if (error !== undefined) {
      span.setAttribute('error.type', error);
      // Server spans: 4xx are the client's errors, not the server's (semantic conventions).
      if (status >= 500 || status === 0) span.setStatus({ code: SpanStatusCode.ERROR });
    }
  }
  span.end(st.anchor + clock.now());
  st.span = undefined;
  st.entry?.release();
}
