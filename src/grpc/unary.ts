/**
 * A lean gRPC client for unary calls on `node:http2`, for the calls a filter makes once per request
 * (ext_authz `Check`, RLS `ShouldRateLimit`). It speaks the gRPC-over-HTTP/2 wire format directly:
 * one long-lived HTTP/2 session per service, a stream per call carrying one length-prefixed message
 * each way, the status from the trailers (or a trailers-only answer). It replaces @grpc/grpc-js on
 * this path because grpc-js spends more per call than the rest of the request (a stack trace
 * captured per call, interceptor and resolver layers, a load balancer per channel).
 *
 * Semantics follow grpc-js without wait-for-ready, which is what the filters want:
 * - one attempt per call (the filter's failure mode decides what a failure means), except gRPC's
 *   transparent retry: a stream the server refused unprocessed (REFUSED_STREAM) is sent once more;
 * - a call made while the session is connecting waits for it; a call made after a failed connect,
 *   within the reconnect backoff (100 ms doubling to 2 s), fails at once with UNAVAILABLE;
 * - every call is bounded by its timeout (injected clock), sent to the server as `grpc-timeout`, and
 *   cancelled with RST_STREAM(CANCEL) when it runs out; a timeout also pings the session, and a session
 *   whose ping is not answered within a second is dropped (a peer that vanished without a FIN);
 * - a GOAWAY or a closed session sends the next calls to a new session;
 * - answers are bounded (`maxResponseBytes`: RESOURCE_EXHAUSTED above it), compressed answers are
 *   refused (no `grpc-accept-encoding` is sent), and a non-200 HTTP status maps to the gRPC code the
 *   gRPC spec gives for it.
 * Nothing throws: every outcome is a `UnaryResult`.
 */
import http2 from 'node:http2';
import { isIP } from 'node:net';
import tls from 'node:tls';
import type { Clock, Timer } from '../deps.js';

/** The gRPC status codes this client produces itself. */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  DEADLINE_EXCEEDED: 4,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  UNAUTHENTICATED: 16,
} as const;

/** Every gRPC status name by code, for messages and logs. */
const STATUS_NAMES = [
  'OK', 'CANCELLED', 'UNKNOWN', 'INVALID_ARGUMENT', 'DEADLINE_EXCEEDED', 'NOT_FOUND', 'ALREADY_EXISTS', 'PERMISSION_DENIED',
  'RESOURCE_EXHAUSTED', 'FAILED_PRECONDITION', 'ABORTED', 'OUT_OF_RANGE', 'UNIMPLEMENTED', 'INTERNAL', 'UNAVAILABLE', 'DATA_LOSS',
  'UNAUTHENTICATED',
];

export function statusName(code: number): string {
  return STATUS_NAMES[code] ?? String(code);
}

export type UnaryResult =
  | { readonly ok: true; readonly message: Buffer }
  | { readonly ok: false; readonly code: number; readonly message: string; readonly timeout: boolean };

export interface UnaryChannelOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  /** Extra trusted CA certificates (PEM), added to Node's roots. */
  readonly ca?: string | Buffer;
  /** Answers larger than this are refused with RESOURCE_EXHAUSTED. */
  readonly maxResponseBytes: number;
  readonly clock: Clock;
}

const INITIAL_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 2000;
const PING_TIMEOUT_MS = 1000;
const USER_AGENT = 'svcproxy';

/** HTTP status → gRPC status, as the gRPC spec maps them (doc/http-grpc-status-mapping.md). */
function codeForHttpStatus(status: number): number {
  switch (status) {
    case 400: return Status.INTERNAL;
    case 401: return Status.UNAUTHENTICATED;
    case 403: return Status.PERMISSION_DENIED;
    case 404: return Status.UNIMPLEMENTED;
    case 429:
    case 502:
    case 503:
    case 504: return Status.UNAVAILABLE;
    default: return Status.UNKNOWN;
  }
}

/** `grpc-message` is percent-encoded (the gRPC spec); a malformed escape is kept as it is. */
function decodeMessage(raw: string | string[] | undefined): string {
  const text = Array.isArray(raw) ? raw.join(',') : raw ?? '';
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function frame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

interface Call {
  readonly path: string;
  readonly frame: Buffer;
  readonly timeoutMs: number;
  readonly resolve: (r: UnaryResult) => void;
  done: boolean;
  stream: http2.ClientHttp2Stream | undefined;
  timer: Timer | undefined;
}

const fail = (code: number, message: string, timeout = false): UnaryResult => ({ ok: false, code, message, timeout });

export class UnaryChannel {
  private session: http2.ClientHttp2Session | undefined;
  private readonly origin: string;
  private readonly connectOptions: http2.SecureClientSessionOptions;
  private readonly clock: Clock;
  private backoffMs = INITIAL_BACKOFF_MS;
  /** After a failed connect: calls before this time fail at once. */
  private retryAt = 0;
  private lastError = '';
  private closed = false;
  private pinging = false;

  constructor(private readonly opts: UnaryChannelOptions) {
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    this.origin = `${opts.tls ? 'https' : 'http'}://${host}:${opts.port}`;
    this.clock = opts.clock;
    this.connectOptions = {
      settings: { enablePush: false },
      maxSessionMemory: 16,
      ...(opts.tls
        ? {
            ...(opts.ca !== undefined ? { ca: [...tls.rootCertificates, opts.ca.toString()] } : {}),
            ...(isIP(opts.host) === 0 ? { servername: opts.host } : {}),
          }
        : {}),
    };
  }

  /** One unary call: `path` is `/package.Service/Method`, `message` the encoded request. */
  call(path: string, message: Buffer, timeoutMs: number): Promise<UnaryResult> {
    return new Promise((resolve) => {
      const call: Call = { path, frame: frame(message), timeoutMs, resolve, done: false, stream: undefined, timer: undefined };
      call.timer = this.clock.setTimeout(() => {
        this.finish(call, fail(Status.DEADLINE_EXCEEDED, `timed out after ${timeoutMs} ms`, true));
        const stream = call.stream;
        if (stream && !stream.destroyed) {
          stream.close(http2.constants.NGHTTP2_CANCEL);
          this.probe(stream.session as http2.ClientHttp2Session | undefined);
        }
      }, timeoutMs);
      this.attempt(call, true);
    });
  }

  private finish(call: Call, result: UnaryResult): void {
    if (call.done) return;
    call.done = true;
    this.clock.clearTimeout(call.timer);
    call.resolve(result);
  }

  /**
   * One attempt of a call. `transparentRetry`: a stream the server refused (RST_STREAM
   * REFUSED_STREAM: the server never processed it) is sent once more, as gRPC's transparent retry
   * does; nothing else is retried.
   */
  private attempt(call: Call, transparentRetry: boolean): void {
    const session = this.currentSession();
    if (typeof session === 'string') return this.finish(call, fail(Status.UNAVAILABLE, session));
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request(
        {
          ':method': 'POST',
          ':path': call.path,
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-timeout': `${Math.max(1, Math.min(99_999_999, Math.ceil(call.timeoutMs)))}m`,
          'user-agent': USER_AGENT,
        },
        { endStream: false },
      );
    } catch (err) {
      // Out of stream ids, or the session closed under us: the next call gets a new session.
      this.drop(session);
      return this.finish(call, fail(Status.UNAVAILABLE, `request not sent: ${(err as Error).message}`));
    }
    call.stream = stream;
    const max = this.opts.maxResponseBytes + 5;
    let httpStatus = 0;
    let headers: http2.IncomingHttpHeaders | undefined;
    let trailers: http2.IncomingHttpHeaders | undefined;
    let first: Buffer | undefined;
    let rest: Buffer[] | undefined;
    let size = 0;
    let streamError: Error | undefined;
    const finish = (result: UnaryResult): void => this.finish(call, result);
    stream.on('response', (h) => {
      headers = h;
      httpStatus = Number(h[':status']);
    });
    stream.on('trailers', (t) => {
      trailers = t;
    });
    stream.on('data', (chunk: Buffer) => {
      if (call.done) return;
      size += chunk.length;
      if (size > max) {
        finish(fail(Status.RESOURCE_EXHAUSTED, `answer larger than ${this.opts.maxResponseBytes} bytes`));
        stream.close(http2.constants.NGHTTP2_CANCEL);
        return;
      }
      if (first === undefined) first = chunk;
      else (rest ??= [first]).push(chunk);
    });
    stream.on('error', (err) => {
      streamError = err;
    });
    stream.on('close', () => {
      if (call.done) return;
      if (headers === undefined) {
        if (transparentRetry && stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) return this.attempt(call, false);
        const why = streamError?.message ?? (this.lastError || 'stream closed before an answer');
        return finish(fail(Status.UNAVAILABLE, why));
      }
      if (httpStatus !== 200) return finish(fail(codeForHttpStatus(httpStatus), `HTTP status ${httpStatus}`));
      // Trailers-only answers carry the status in the headers.
      const meta = trailers ?? (headers['grpc-status'] !== undefined ? headers : undefined);
      const statusText = meta?.['grpc-status'];
      if (statusText === undefined) {
        return finish(fail(streamError ? Status.UNAVAILABLE : Status.INTERNAL, streamError ? streamError.message : 'answer ended without grpc-status'));
      }
      const code = Number(statusText);
      if (code !== Status.OK) return finish(fail(Number.isInteger(code) ? code : Status.UNKNOWN, decodeMessage(meta?.['grpc-message'])));
      const body = rest ? Buffer.concat(rest, size) : first;
      if (body === undefined || body.length < 5) return finish(fail(Status.INTERNAL, 'OK without a message'));
      if (body[0] !== 0) return finish(fail(Status.INTERNAL, 'compressed answer (no compression was offered)'));
      const length = body.readUInt32BE(1);
      if (length !== body.length - 5) return finish(fail(Status.INTERNAL, 'answer is not exactly one message'));
      finish({ ok: true, message: body.subarray(5) });
    });
    stream.end(call.frame);
  }

  /** The session to send on, or why there is none. */
  private currentSession(): http2.ClientHttp2Session | string {
    const s = this.session;
    if (s && !s.closed && !s.destroyed) return s;
    if (this.closed) return 'client closed';
    if (this.clock.now() < this.retryAt) return `not connected: ${this.lastError}`;
    return this.connect();
  }

  private connect(): http2.ClientHttp2Session {
    const session = http2.connect(this.origin, this.connectOptions);
    let connected = false;
    session.once('connect', () => {
      connected = true;
      this.backoffMs = INITIAL_BACKOFF_MS;
      this.retryAt = 0;
    });
    session.on('error', (err: Error) => {
      this.lastError = err.message;
      if (!connected && this.session === session) {
        // Fail fast until the backoff ends, then try again on the next call.
        this.retryAt = this.clock.now() + this.backoffMs;
        this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2);
      }
    });
    session.on('goaway', () => this.drop(session, false));
    session.on('close', () => this.drop(session, false));
    // An idle session must not keep the process alive.
    session.unref();
    this.session = session;
    return session;
  }

  private drop(session: http2.ClientHttp2Session, close = true): void {
    if (this.session === session) this.session = undefined;
    if (close && !session.destroyed) session.destroy();
  }

  /** After a timeout: is the session still alive? Drop it when a PING is not answered in time. */
  private probe(session: http2.ClientHttp2Session | undefined): void {
    if (!session || this.pinging || session.destroyed || session.connecting) return;
    this.pinging = true;
    const watchdog = this.clock.setTimeout(() => {
      this.pinging = false;
      this.lastError = 'no answer to a PING';
      this.drop(session);
    }, PING_TIMEOUT_MS);
    watchdog.unref?.();
    const sent = session.ping((err) => {
      this.clock.clearTimeout(watchdog);
      this.pinging = false;
      if (err) this.drop(session);
    });
    if (!sent) {
      this.clock.clearTimeout(watchdog);
      this.pinging = false;
    }
  }

  close(): void {
    this.closed = true;
    const s = this.session;
    this.session = undefined;
    s?.close();
  }
}
