/**
 * A lean gRPC client for unary calls, for the calls a filter makes once per request (ext_authz
 * `Check`, RLS `ShouldRateLimit`). It speaks the gRPC-over-HTTP/2 wire format directly on its own
 * HTTP/2 connection (./session.ts): one long-lived connection per service, a stream per call carrying
 * one length-prefixed message each way, the status from the trailers (or a trailers-only answer).
 * It replaces @grpc/grpc-js on this path because grpc-js spends more per call than the rest of the
 * request (a stack trace captured per call, interceptor and resolver layers, a load balancer per
 * channel), and `node:http2` because its per-stream objects cost about as much again.
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
 *   gRPC spec gives for it;
 * - a request whose header list is above the server's SETTINGS_MAX_HEADER_LIST_SIZE is never sent:
 *   INTERNAL, as grpc-go fails it; an answer whose header list is above our 64 KiB is
 *   RESOURCE_EXHAUSTED, as gRPC's C core fails it; DATA beyond our flow-control windows is INTERNAL.
 * Nothing throws: every outcome is a `UnaryResult`.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { Clock, Timer } from '../deps.js';
import { encodeFields, headerListSize } from './hpack.js';
import { H2Error, H2Session, H2Stream, type StreamOwner } from './session.js';
import { READ_BUFFER } from '../read-buffer.js';

/** The gRPC status codes this client produces itself. */
export const Status = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
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
  /** Extra request headers (custom metadata) on every call, e.g. `authorization`. */
  readonly metadata?: readonly (readonly [string, string])[];
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

/** The length of a gRPC message's prefix: a compressed flag and a 4-byte length. */
export const GRPC_PREFIX = 5;

/**
 * A message encoded after GRPC_PREFIX bytes of room (`new ProtoWriter(size, GRPC_PREFIX)`) made a
 * gRPC frame in place: the prefix written into the room, no copy.
 */
export function prefixInPlace(framed: Buffer): Buffer {
  framed[0] = 0;
  framed.writeUInt32BE(framed.length - GRPC_PREFIX, 1);
  return framed;
}

/** A gRPC length-prefixed message (uncompressed). */
export function grpcFrame(message: Buffer): Buffer {
  const out = Buffer.allocUnsafe(5 + message.length);
  out[0] = 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/** A unary stream's body, collected chunk by chunk up to a bound (one message and its prefix). */
export class MessageBody {
  private first: Buffer | undefined = undefined;
  private rest: Buffer[] | undefined = undefined;
  private size = 0;

  constructor(private readonly maxMessageBytes: number) {}

  /** Keep a chunk; false once the body is larger than one message within the bound can be. */
  add(chunk: Buffer): boolean {
    this.size += chunk.length;
    if (this.size > this.maxMessageBytes + 5) return false;
    if (this.first === undefined) this.first = chunk;
    else (this.rest ??= [this.first]).push(chunk);
    return true;
  }

  /**
   * The one uncompressed message the body must be, or why it is not: `what` names the message
   * (`answer`, `request`), `empty` is what is said of a body without one.
   */
  message(what: string, empty: string): Buffer | string {
    const body = this.rest ? Buffer.concat(this.rest, this.size) : this.first;
    if (body === undefined || body.length < 5) return empty;
    if (body[0] !== 0) return `compressed ${what} (no compression was offered)`;
    if (body.readUInt32BE(1) !== body.length - 5) return `${what} is not exactly one message`;
    return body.subarray(5);
  }
}

/** A request's header block (cached per path and timeout) and its header list size (RFC 9113 §6.5.2). */
interface RequestHead {
  readonly timeoutMs: number;
  readonly block: Buffer;
  readonly listSize: number;
}

interface Call {
  readonly path: string;
  readonly frame: Buffer;
  readonly timeoutMs: number;
  readonly resolve: (r: UnaryResult) => void;
  done: boolean;
  attempt: Attempt | undefined;
  timer: Timer | undefined;
}

const fail = (code: number, message: string, timeout = false): UnaryResult => ({ ok: false, code, message, timeout });

/** One attempt of a call on one session: collects the answer's body, decides the result at the end. */
class Attempt implements StreamOwner {
  readonly stream: H2Stream;
  private readonly body: MessageBody;

  constructor(
    private readonly channel: UnaryChannel,
    readonly session: H2Session,
    readonly call: Call,
    head: RequestHead,
    private readonly transparentRetry: boolean,
  ) {
    this.stream = new H2Stream(head.block, call.frame, this, head.listSize);
    this.body = new MessageBody(channel.maxResponseBytes);
  }

  data(_stream: H2Stream, chunk: Buffer): boolean {
    if (this.call.done) return false;
    if (!this.body.add(chunk)) {
      this.channel.finish(this.call, fail(Status.RESOURCE_EXHAUSTED, `answer larger than ${this.channel.maxResponseBytes} bytes`));
      return false;
    }
    return true;
  }

  closed(s: H2Stream): void {
    const call = this.call;
    if (call.done) return;
    const finish = (result: UnaryResult): void => this.channel.finish(call, result);
    // We ended it (a request the server's header list limit refuses, an answer past our bounds, DATA
    // past our window): nothing to retry, the server did not fail.
    if (s.localError !== undefined) return finish(fail(s.rstCode === H2Error.ENHANCE_YOUR_CALM ? Status.RESOURCE_EXHAUSTED : Status.INTERNAL, s.localError));
    if (!s.responded) {
      // Never processed by the server (REFUSED_STREAM, above a GOAWAY's last stream, or not yet
      // sent when the connection went): gRPC's transparent retry sends it once more.
      if (this.transparentRetry && s.refused) return this.channel.attempt(call, false);
      const why = s.connectionError ?? (s.rstCode >= 0 ? `stream reset by the server (HTTP/2 error ${s.rstCode})` : 'stream closed before an answer');
      return finish(fail(Status.UNAVAILABLE, why));
    }
    if (s.status !== 200) return finish(fail(codeForHttpStatus(s.status), `HTTP status ${s.status}`));
    if (s.grpcStatus === undefined) {
      if (!s.ended) return finish(fail(Status.UNAVAILABLE, s.connectionError ?? `stream reset by the server (HTTP/2 error ${s.rstCode})`));
      return finish(fail(Status.INTERNAL, 'answer ended without grpc-status'));
    }
    const code = Number(s.grpcStatus);
    if (code !== Status.OK) return finish(fail(Number.isInteger(code) ? code : Status.UNKNOWN, decodeMessage(s.grpcMessage)));
    const message = this.body.message('answer', 'OK without a message');
    if (typeof message === 'string') return finish(fail(Status.INTERNAL, message));
    finish({ ok: true, message });
  }
}

export class UnaryChannel {
  private session: H2Session | undefined;
  private readonly authority: string;
  private readonly clock: Clock;
  private backoffMs = INITIAL_BACKOFF_MS;
  /** After a failed connect: calls before this time fail at once. */
  private retryAt = 0;
  private lastError = '';
  private closed = false;
  private pinging = false;
  /** Per method path: the request header block for the last timeout used with it. */
  private readonly blocks = new Map<string, RequestHead>();
  readonly maxResponseBytes: number;

  constructor(private readonly opts: UnaryChannelOptions) {
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    this.authority = `${host}:${opts.port}`;
    this.clock = opts.clock;
    this.maxResponseBytes = opts.maxResponseBytes;
  }

  /** One unary call: `path` is `/package.Service/Method`, `message` the encoded request. */
  call(path: string, message: Buffer, timeoutMs: number): Promise<UnaryResult> {
    return this.callFramed(path, grpcFrame(message), timeoutMs);
  }

  /** One unary call whose request is already a gRPC frame (see `prefixInPlace`); the frame is not changed. */
  callFramed(path: string, frame: Buffer, timeoutMs: number): Promise<UnaryResult> {
    return new Promise((resolve) => {
      const call: Call = { path, frame, timeoutMs, resolve, done: false, attempt: undefined, timer: undefined };
      call.timer = this.clock.setTimeout(() => {
        this.finish(call, fail(Status.DEADLINE_EXCEEDED, `timed out after ${timeoutMs} ms`, true));
        const a = call.attempt;
        if (a) {
          a.session.cancel(a.stream);
          this.probe(a.session);
        }
      }, timeoutMs);
      this.attempt(call, true);
    });
  }

  /** @internal */
  finish(call: Call, result: UnaryResult): void {
    if (call.done) return;
    call.done = true;
    this.clock.clearTimeout(call.timer);
    call.resolve(result);
  }

  /**
   * @internal One attempt of a call. `transparentRetry`: a stream the server never processed
   * (REFUSED_STREAM, or above a GOAWAY's last stream id) is sent once more, as gRPC's transparent
   * retry does; nothing else is retried.
   */
  attempt(call: Call, transparentRetry: boolean): void {
    const session = this.currentSession();
    if (typeof session === 'string') return this.finish(call, fail(Status.UNAVAILABLE, session));
    const a = new Attempt(this, session, call, this.head(call.path, call.timeoutMs), transparentRetry);
    call.attempt = a;
    session.request(a.stream);
  }

  private head(path: string, timeoutMs: number): RequestHead {
    const cached = this.blocks.get(path);
    if (cached && cached.timeoutMs === timeoutMs) return cached;
    const fields: (readonly [string, string])[] = [
      [':method', 'POST'],
      [':scheme', this.opts.tls ? 'https' : 'http'],
      [':path', path],
      [':authority', this.authority],
      ['content-type', 'application/grpc'],
      ['te', 'trailers'],
      ['grpc-timeout', `${Math.max(1, Math.min(99_999_999, Math.ceil(timeoutMs)))}m`],
      ['user-agent', USER_AGENT],
      ...(this.opts.metadata ?? []),
    ];
    const head = { timeoutMs, block: encodeFields(fields), listSize: headerListSize(fields) };
    this.blocks.set(path, head);
    return head;
  }

  /** The session to send on, or why there is none. */
  private currentSession(): H2Session | string {
    const s = this.session;
    if (s && !s.draining) return s;
    if (this.closed) return 'client closed';
    if (this.clock.now() < this.retryAt) return `not connected: ${this.lastError}`;
    return this.connect();
  }

  private connect(): H2Session {
    const { host, port } = this.opts;
    const socket = this.opts.tls
      ? tls.connect({
          host,
          port,
          ALPNProtocols: ['h2'],
          ...(this.opts.ca !== undefined ? { ca: [...tls.rootCertificates, this.opts.ca.toString()] } : {}),
          ...(net.isIP(host) === 0 ? { servername: host } : {}),
        })
      : net.connect({
          host,
          port,
          // Read into the shared buffer, straight into the session's frame reader (no 'data' events).
          onread: {
            buffer: READ_BUFFER,
            callback: (bytes, buffer) => {
              session.receive((buffer as Buffer).subarray(0, bytes));
              return true;
            },
          },
        });
    const session: H2Session = new H2Session(
      socket,
      {
        connected: () => {
          this.backoffMs = INITIAL_BACKOFF_MS;
          this.retryAt = 0;
        },
        unusable: (reason) => {
          this.lastError = reason;
          if (this.session !== session) return;
          this.session = undefined;
          if (!session.connected) {
            // Fail fast until the backoff ends, then try again on the next call.
            this.retryAt = this.clock.now() + this.backoffMs;
            this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2);
          }
        },
      },
      this.opts.tls,
    );
    // An idle session must not keep the process alive.
    session.unref();
    this.session = session;
    return session;
  }

  /** After a timeout: is the session still alive? Drop it when a PING is not answered in time. */
  private probe(session: H2Session): void {
    if (this.pinging || session.destroyed) return;
    this.pinging = true;
    const watchdog = this.clock.setTimeout(() => {
      this.pinging = false;
      session.destroy('no answer to a PING');
    }, PING_TIMEOUT_MS);
    watchdog.unref?.();
    session.ping((ok) => {
      this.clock.clearTimeout(watchdog);
      this.pinging = false;
      if (!ok) session.destroy('PING failed');
    });
  }

  close(): void {
    this.closed = true;
    const s = this.session;
    this.session = undefined;
    s?.close();
  }
}
