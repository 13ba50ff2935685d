/**
 * Streams one request to an upstream and its answer back, with backpressure both ways and nothing
 * buffered whole. HTTP/1.1 upstreams go through our own connection pool (src/http1/); HTTP/2 and gRPC
 * upstreams through a `node:http2` stream, so trailers (gRPC status) reach the client. An upstream that
 * fails before response headers gets the 503 of DESIGN §6 (504 once the timeout fired); after headers
 * the downstream stream is reset, since no other answer is possible. A request body the client cut
 * reaches the upstream cut, never framed as whole: its h2 stream is reset without END_STREAM, and the
 * HTTP/1.1 pool sees the body fail (no terminating chunk; the connection is closed).
 */
import http2 from 'node:http2';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import { LENT_CHUNK_BYTES, type Http1Pool, type HeaderMap, type UpstreamController, type UpstreamHandler } from '../http1/index.js';
import type { Readable, Writable } from 'node:stream';
import type { Exchange } from './exchange.js';
import { applyHeaderOps, downstreamResponseHeaders } from './headers.js';
import type { FailureKind } from '../retry/policy.js';
import { bodyCut, hasBody } from '../filter/index.js';
import { respondHttp2 } from './respond-http2.js';

const { HTTP2_HEADER_STATUS } = http2.constants;

export interface ForwardHooks {
  /** Extra response headers (debug headers) computed once the upstream answered. */
  responseHeaders(exchange: Exchange): OutgoingHttpHeaders | undefined;
  /**
   * The upstream answered with these headers. Return true to deliver the answer; false when a retry
   * was scheduled instead (the forwarder then drops this attempt).
   */
  onResponse(exchange: Exchange, status: number, headers: Readonly<Record<string, string | string[] | undefined>>): boolean;
  /** The attempt failed before an answer. Return true when a retry was scheduled. */
  onFailure(exchange: Exchange, kind: FailureKind): boolean;
}

/** Thrown into an attempt that is dropped because a retry replaces it. */
class RetryScheduled extends Error {
  override name = 'RetryScheduled';
}

const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EADDRNOTAVAIL', 'CONNECT_TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN']);

/** Classify a failed attempt for the retry policy (Envoy's reset reasons). */
export function failureKind(err: Error & { code?: string }, rstCode?: number): FailureKind {
  if (rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) return 'refused-stream';
  if (err.code && CONNECT_ERRORS.has(err.code)) return 'connect-failure';
  return 'reset';
}

function mergeHeaders(base: OutgoingHttpHeaders, ...extra: (OutgoingHttpHeaders | undefined)[]): OutgoingHttpHeaders {
  for (const e of extra) {
    if (!e) continue;
    for (const k in e) {
      // The proxy's debug timings go before the app's own (Server-Timing is a list).
      if (k === 'server-timing' && base[k] !== undefined) base[k] = `${String(e[k])}, ${[base[k]].flat().join(', ')}`;
      else base[k] = e[k];
    }
  }
  return base;
}

/**
 * Apply the answer's status and headers downstream. `headers` are the upstream's (lower-case tokens,
 * checked by the parser that read them). `trailers`: the answer may still end with trailers.
 */
function writeHead(exchange: Exchange, status: number, headers: OutgoingHttpHeaders, hooks: ForwardHooks, trailers: boolean): void {
  exchange.status = status;
  exchange.upstreamHeadersAt = performance.now();
  const added = exchange.responseHeaders;
  const debug = hooks.responseHeaders(exchange);
  mergeHeaders(headers, added, debug);
  const ops = exchange.responseHeaderOps;
  if (ops) applyHeaderOps(headers, ops);
  const res = exchange.res;
  const stream = (res as Http2ServerResponse).stream;
  if (stream === undefined) res.writeHead(status, headers as Record<string, string>);
  else respondHttp2(res as Http2ServerResponse, stream, status, headers, trailers, added !== undefined || debug !== undefined || ops !== undefined);
}

function failBeforeHeaders(exchange: Exchange, err: Error, hooks: ForwardHooks, rstCode?: number): void {
  if (exchange.isFinished) return;
  if (exchange.res.headersSent) {
    exchange.abort(err);
    return;
  }
  if (!exchange.timedOut && hooks.onFailure(exchange, failureKind(err, rstCode))) return;
  exchange.reply({ code: exchange.timedOut ? 'UPSTREAM_TIMEOUT' : (err as { code?: string }).code === 'UPSTREAM_PROTOCOL_ERROR' ? 'UPSTREAM_PROTOCOL_ERROR' : 'UPSTREAM_RESET' });
}

/** The HTTP/1.1 pool's handler: one per request, writing straight to the downstream response. */
class ResponseHandler implements UpstreamHandler {
  private controller: UpstreamController | undefined;
  /** This attempt was replaced by a retry: ignore everything it still reports. */
  private dropped = false;
  private readonly onDrain = (): void => this.controller?.resume();
  /** The body's last chunk, held for `res.end(chunk)`: head and body leave in one write. */
  private tail: Buffer | undefined = undefined;

  constructor(private readonly exchange: Exchange, private readonly hooks: ForwardHooks) {}

  onRequestStart(controller: UpstreamController): void {
    this.controller = controller;
    // A request that waited in the pool's queue may be over already (client gone, timed out):
    // starting it now would answer nobody and pause this pooled connection forever.
    if (this.exchange.isFinished) {
      this.dropped = true;
      controller.abort(new Error('the request ended before its upstream attempt started'));
      return;
    }
    this.exchange.abortUpstream = (reason) => controller.abort(reason);
  }

  onResponseStart(controller: UpstreamController, statusCode: number, headers: HeaderMap): void {
    if (this.dropped) return;
    if (this.exchange.isFinished) {
      // Nobody to answer: release the connection instead of leaving its body unread.
      this.dropped = true;
      controller.abort(new Error('the request ended before its answer arrived'));
      return;
    }
    if (!this.hooks.onResponse(this.exchange, statusCode, headers)) {
      this.dropped = true;
      controller.abort(new RetryScheduled());
      return;
    }
    // Only a chunked body can end with trailers.
    writeHead(this.exchange, statusCode, downstreamResponseHeaders(headers), this.hooks, headers['transfer-encoding'] !== undefined);
  }

  onResponseData(controller: UpstreamController, chunk: Buffer, last: boolean): void {
    if (this.dropped) return;
    const res = this.exchange.res;
    this.exchange.bytesSent += chunk.length;
    if (last) {
      this.tail = chunk;
      return;
    }
    if (!(res as Writable).write(chunk)) {
      controller.pause();
      res.once('drain', this.onDrain);
    }
  }

  onResponseEnd(_c: UpstreamController, trailers: HeaderMap | undefined): void {
    if (this.dropped) return;
    const res = this.exchange.res;
    if (trailers !== undefined && hasAny(trailers)) res.addTrailers(trailers as Record<string, string>);
    const tail = this.tail;
    if (tail !== undefined) {
      this.tail = undefined;
      // A chunk the pool lends (up to LENT_CHUNK_BYTES, a view of its read buffer) must not outlive
      // this call; as text it does not, and Node writes a head and a text body as one string (a
      // Buffer body takes the outgoing message's pending-data queue). Latin-1 maps each byte to one
      // character and back, so any bytes survive the trip.
      if (tail.length <= LENT_CHUNK_BYTES) res.end(tail.toString('latin1'), 'latin1');
      else res.end(tail);
    } else {
      res.end();
    }
    this.exchange.finish();
  }

  onResponseError(_c: UpstreamController, err: Error): void {
    if (this.dropped) return;
    failBeforeHeaders(this.exchange, err, this.hooks);
  }
}

/**
 * Cancel an upstream HTTP/2 stream without passing a cut body on as whole. node:http2's
 * `close(code)` ends a stream whose request body is still open first (an empty DATA frame with
 * END_STREAM, then RST_STREAM), so the upstream would read the body it has as complete;
 * `destroy()` sends RST_STREAM alone, with NO_ERROR, as Envoy resets upstream streams. Once our side
 * ended (the body went whole), CANCEL says more.
 */
function resetUpstream(stream: http2.ClientHttp2Stream): void {
  if (stream.destroyed) return;
  if (stream.writableEnded) stream.close(http2.constants.NGHTTP2_CANCEL);
  else stream.destroy();
}

/**
 * Stream the request body upstream, ending the stream (END_STREAM) only for a body that really
 * ended: pipe() would end it at the source's 'end', which node:http2's compat request also emits
 * after its client reset it mid-upload (body-cut.ts). `req` is the downstream request, also when
 * `source` replays it (ext_authz, retries). The cost: one listener per request with a body.
 */
export function sendBody(source: Readable, stream: http2.ClientHttp2Stream, req: Readable): void {
  const end = (): void => {
    if (bodyCut(req)) resetUpstream(stream);
    else stream.end();
  };
  if (source.readableEnded) return end();
  // Failed before anyone listened (a replay of a body cut during the check): no event will come.
  if (source.destroyed) return resetUpstream(stream);
  source.pipe(stream, { end: false });
  source.once('end', end);
  source.on('error', () => resetUpstream(stream));
}

function hasAny(record: object): boolean {
  for (const _ in record) return true;
  return false;
}

/** Forward over HTTP/1.1 through the upstream's connection pool. */
export function forwardHttp1(exchange: Exchange, pool: Http1Pool, path: string, headers: OutgoingHttpHeaders, hooks: ForwardHooks): void {
  const req = exchange.req;
  const body = exchange.bodyOverride ?? (hasBody(exchange) ? (req as Readable) : null);
  exchange.upstreamStartedAt = performance.now();
  pool.dispatch({ method: req.method ?? 'GET', path, headers, body }, new ResponseHandler(exchange, hooks));
}

/** Forward over HTTP/2 (h2c) through a client session; trailers are passed on. */
export function forwardHttp2(
  exchange: Exchange,
  session: http2.ClientHttp2Session,
  path: string,
  headers: OutgoingHttpHeaders,
  hooks: ForwardHooks,
): void {
  const req = exchange.req;
  const withBody = exchange.bodyOverride !== undefined || hasBody(exchange);
  const h2headers: http2.OutgoingHttpHeaders = {
    ':method': req.method ?? 'GET',
    ':path': path,
    ':authority': headers.host as string,
    ':scheme': 'http',
  };
  for (const name in headers) if (name !== 'host') h2headers[name] = headers[name];
  exchange.upstreamStartedAt = performance.now();
  let stream: http2.ClientHttp2Stream;
  try {
    stream = session.request(h2headers, { endStream: !withBody });
  } catch (err) {
    failBeforeHeaders(exchange, err as Error, hooks);
    return;
  }
  /** This attempt was replaced by a retry: ignore everything it still reports. */
  let dropped = false;
  exchange.abortUpstream = () => resetUpstream(stream);
  if (withBody) sendBody(exchange.bodyOverride ?? (req as Readable), stream, req as Readable);
  const res = exchange.res;
  stream.on('response', (upstreamHeaders, flags) => {
    if (dropped || exchange.isFinished) return;
    const status = Number(upstreamHeaders[HTTP2_HEADER_STATUS]) || 502;
    if (!hooks.onResponse(exchange, status, upstreamHeaders as Record<string, string>)) {
      dropped = true;
      resetUpstream(stream);
      return;
    }
    const out = downstreamResponseHeaders(upstreamHeaders as Record<string, string>);
    const endStream = (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) !== 0;
    const downstream = (res as Http2ServerResponse).stream;
    if (endStream && downstream) {
      // Trailers-only answer (a gRPC error): keep it one HEADERS frame with END_STREAM.
      exchange.status = status;
      exchange.upstreamHeadersAt = performance.now();
      mergeHeaders(out, exchange.responseHeaders, hooks.responseHeaders(exchange));
      if (exchange.responseHeaderOps) applyHeaderOps(out, exchange.responseHeaderOps);
      if (!downstream.destroyed) downstream.respond({ ...out, ':status': status }, { endStream: true });
      exchange.finish();
      return;
    }
    writeHead(exchange, status, out, hooks, true);
    // The body is read only now: Node emits 'response' on the next tick, so DATA that came in the
    // same read as the HEADERS would otherwise flow out first (an implicit head, then a second one).
    stream.on('data', onData);
    stream.on('end', onEnd);
  });
  stream.on('trailers', (trailers) => {
    if (dropped) return;
    res.addTrailers(downstreamResponseHeaders(trailers as Record<string, string>) as Record<string, string>);
  });
  const onData = (chunk: Buffer): void => {
    if (dropped) return;
    exchange.bytesSent += chunk.length;
    if (!(res as Writable).write(chunk)) {
      stream.pause();
      res.once('drain', () => stream.resume());
    }
  };
  const onEnd = (): void => {
    if (dropped || exchange.isFinished) return;
    res.end();
    exchange.finish();
  };
  // A stream that fails reports it twice ('error', then 'close'): the attempt ends at the first, or
  // a retry would be scheduled twice and two attempts would answer one request.
  const fail = (err: Error): void => {
    if (dropped) return;
    dropped = true;
    failBeforeHeaders(exchange, err, hooks, stream.rstCode);
  };
  stream.on('error', fail);
  stream.on('close', () => {
    if (dropped || exchange.isFinished) return;
    // Closed without 'end': reset by the upstream (RST_STREAM) or the session went away.
    fail(new Error(`upstream stream closed (code ${stream.rstCode})`));
  });
}

export { RetryScheduled };
