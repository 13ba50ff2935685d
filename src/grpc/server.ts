/**
 * A lean unary gRPC server, for the rate-limit service: each method takes the request message's bytes
 * and answers the response's bytes, or fails with a gRPC status. It speaks HTTP/2 itself, on the
 * framing the proxy's client uses (./connection.ts), because `node:http2` costs more per call than
 * the check it carries (a Duplex stream, header objects both ways, `respond` and trailers per call);
 * here a call is a small record and its answer one buffer of frames.
 *
 * The wire as the gRPC spec (PROTOCOL-HTTP2.md) has it, and as grpc-js answers:
 * - POST only (else HTTP 405), `content-type: application/grpc[+proto|;…]` (else HTTP 415);
 * - an unknown path is trailers-only UNIMPLEMENTED;
 * - exactly one length-prefixed message, at most `maxMessageBytes` (else RESOURCE_EXHAUSTED);
 *   a compressed one (flag 1) is INTERNAL, as we offer no `grpc-accept-encoding`;
 * - OK answers carry the message in DATA and `grpc-status: 0` in trailers; failures are trailers-only
 *   with `grpc-status` and a percent-encoded `grpc-message`;
 * - the client's `grpc-timeout`: a call not answered by then is answered DEADLINE_EXCEEDED;
 * - a call the client cancelled (RST_STREAM) or whose connection went is not answered; an answer
 *   sent before the request's end is followed by RST_STREAM(NO_ERROR), as RFC 9113 §8.1 allows.
 * HTTP/2 as a server: the client's preface, then SETTINGS; at most 1000 concurrent streams (more are
 * refused with REFUSED_STREAM, which clients retry); at most 16 MiB of requests held at once (a call
 * going past it is RESOURCE_EXHAUSTED); stream ids odd and increasing; header lists up to 64 KiB
 * decoded (a larger one ends the connection); GOAWAY from the client: the connection ends once its
 * calls are answered. Cleartext (h2c with prior knowledge) or TLS with ALPN h2.
 * Hardening: a client's DATA beyond the windows we advertised is FLOW_CONTROL_ERROR (./connection.ts);
 * a connection silent both ways for `idleTimeoutMs` is let go (GOAWAY when no call is open);
 * a failure's header block honours the client's SETTINGS_MAX_HEADER_LIST_SIZE (the message left out
 * when it would not fit, the stream reset when not even the status fits).
 */
import net, { type AddressInfo, type Socket } from 'node:net';
import tls from 'node:tls';
import { grpcMessage } from './message.js';
import {
  DATA,
  END_HEADERS,
  END_STREAM,
  GOAWAY,
  H2Connection,
  H2Error,
  HEADERS,
  MAX_HEADER_BLOCK,
  PREFACE,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_CONCURRENT_STREAMS,
  SETTINGS_MAX_HEADER_LIST_SIZE,
  STREAM_WINDOW,
  StreamBase,
  frame,
  frameHeader,
  openingFrames,
} from './connection.js';
import { encodeFields, headerListSize, HpackError } from './hpack.js';
import { grpcFrame, MessageBody, Status } from './unary.js';

/** A gRPC failure a method raises on purpose (its code is the answer's `grpc-status`). */
export class RpcError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
    this.name = 'RpcError';
  }
}

export type UnaryMethod = (request: Buffer) => Promise<Buffer>;

export interface UnaryServerOptions {
  readonly host: string;
  readonly port: number;
  /** `/package.Service/Method` → handler. */
  readonly methods: ReadonlyMap<string, UnaryMethod>;
  readonly maxMessageBytes: number;
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /** A method that threw something other than RpcError (answered INTERNAL). */
  readonly onError?: (path: string, err: Error) => void;
  /**
   * A connection that neither sends nor receives a byte this long is let go (default 5 minutes):
   * with no call open, GOAWAY and a graceful end (clients reconnect); with calls still open (a
   * client stopped mid-frame), at once. Without it, a client that stops halfway holds its
   * connection, and its buffered input, for ever.
   */
  readonly idleTimeoutMs?: number;
}

/** `idleTimeoutMs` when not given. */
export const DEFAULT_IDLE_TIMEOUT_MS = 300_000;

export interface UnaryServer {
  readonly address: { host: string; port: number };
  /** Stop accepting; calls in flight finish (at most `graceMs`), then every connection closes. */
  close(graceMs?: number): Promise<void>;
}

const MAX_STREAMS = 1000;
/**
 * Request bytes held at once on a connection, over all its calls (node:http2 bounds a session's
 * memory the same way): a call that would go past it is answered RESOURCE_EXHAUSTED.
 */
export const MAX_HELD_BYTES = 16 << 20;
/** Decoded header list bound (SETTINGS_MAX_HEADER_LIST_SIZE; RFC 9113 counts 32 bytes a field). */
const MAX_HEADER_LIST = MAX_HEADER_BLOCK;

const OPENING = openingFrames([
  [SETTINGS_MAX_CONCURRENT_STREAMS, MAX_STREAMS],
  [SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW],
  [SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST],
]);

const OK_HEADERS = encodeFields([[':status', '200'], ['content-type', 'application/grpc']]);
const OK_TRAILERS = encodeFields([['grpc-status', '0']]);
const METHOD_NOT_ALLOWED = encodeFields([[':status', '405'], ['allow', 'POST']]);
const UNSUPPORTED_TYPE = encodeFields([[':status', '415'], ['content-type', 'text/plain']]);
const GRPC_TYPE = /^application\/grpc(?:$|[+;])/;

function failureBlock(code: number, message: string): Buffer {
  return encodeFields([[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', String(code)], ['grpc-message', grpcMessage(message)]]);
}

function statusOnlyBlock(code: number): Buffer {
  return encodeFields([[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', String(code)]]);
}

/** The header list size (RFC 9113 §6.5.2) of a failure, with its percent-encoded message or without one. */
function failureListSize(code: number, encodedMessage: string | undefined): number {
  const fields: [string, string][] = [[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', String(code)]];
  if (encodedMessage !== undefined) fields.push(['grpc-message', encodedMessage]);
  return headerListSize(fields);
}

/** `grpc-timeout` (up to 8 digits and a unit) in milliseconds, or undefined when absent or unreadable. */
export function parseGrpcTimeout(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  const m = /^(\d{1,8})([HMSmun])$/.exec(value);
  if (!m) return undefined;
  const n = Number(m[1]);
  switch (m[2]) {
    case 'H':
      return n * 3_600_000;
    case 'M':
      return n * 60_000;
    case 'S':
      return n * 1000;
    case 'm':
      return n;
    case 'u':
      return n / 1000;
    default:
      return n / 1_000_000;
  }
}

class Call extends StreamBase {
  /** The client's side is over (END_STREAM seen). */
  requestEnded = false;
  /** Our answer has begun (nothing more may be answered). */
  answered = false;
  /** A body larger than the bound: answered already, further DATA ignored. */
  refused = false;
  /** Request bytes this call holds (counted against the connection's bound). */
  held = 0;
  timer: NodeJS.Timeout | undefined = undefined;

  constructor(
    id: number,
    sendWindow: number,
    readonly path: string,
    readonly method: UnaryMethod | undefined,
    readonly message: MessageBody,
  ) {
    super();
    this.id = id;
    this.sendWindow = sendWindow;
  }
}

/** Scratch for the fields of the header block being decoded. */
interface Fields {
  method: string | undefined;
  path: string | undefined;
  scheme: string | undefined;
  contentType: string | undefined;
  timeout: string | undefined;
  size: number;
}

class ServerConnection extends H2Connection<Call> {
  protected readonly peerName = 'client';
  private preface = 0;
  private lastStreamId = 0;
  /** GOAWAY sent or received: no new calls; the connection ends once the open ones are answered. */
  private draining = false;
  /** Our side of the socket is ended. */
  private ending = false;
  private readonly fields: Fields = { method: undefined, path: undefined, scheme: undefined, contentType: undefined, timeout: undefined, size: 0 };
  /** Request bytes held by the open calls. */
  private held = 0;

  constructor(socket: Socket, private readonly opts: UnaryServerOptions, private readonly gone: (c: ServerConnection) => void) {
    super(socket);
    this.write(OPENING);
    socket.on('data', (chunk: Buffer) => this.onSocketData(chunk));
    socket.setTimeout(opts.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS);
    socket.on('timeout', () => (this.streams.size === 0 && !this.draining ? this.drain() : this.destroy('idle')));
  }

  /** The client's preface (it may come in pieces), then frames. */
  private onSocketData(chunk: Buffer): void {
    if (this.preface < PREFACE.length) {
      const n = Math.min(PREFACE.length - this.preface, chunk.length);
      if (!chunk.subarray(0, n).equals(PREFACE.subarray(this.preface, this.preface + n))) {
        return this.goAway(H2Error.PROTOCOL_ERROR, 'not an HTTP/2 client preface');
      }
      this.preface += n;
      if (n === chunk.length) return;
      chunk = chunk.subarray(n);
    }
    this.onData(chunk);
  }

  override destroy(reason: string): void {
    if (this.destroyed) return;
    super.destroy(reason);
    for (const call of this.streams.values()) clearTimeout(call.timer);
    this.streams.clear();
    this.gone(this);
  }

  /** Stop taking calls; end once the open ones are answered. */
  drain(): void {
    if (this.draining || this.destroyed) return;
    this.draining = true;
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(this.lastStreamId, 0);
    this.write(frame(GOAWAY, 0, 0, payload));
    this.endIfIdle();
  }

  /**
   * Draining and no call left: end our side once the last answers are written; the connection is
   * over when the client closes its side too (or after 5 s). Destroying the socket at once could drop
   * answer bytes still queued in it.
   */
  private endIfIdle(): void {
    if (!this.draining || this.streams.size > 0 || this.destroyed || this.ending) return;
    this.ending = true;
    this.flush();
    this.socket.end();
    setTimeout(() => this.destroy('closed'), 5000).unref();
  }

  // ---- requests ----------------------------------------------------------------------------------

  protected readonly onField = (name: string, value: string): void => {
    const f = this.fields;
    f.size += name.length + value.length + 32;
    if (f.size > MAX_HEADER_LIST) throw new HpackError(`header list larger than ${MAX_HEADER_LIST} bytes`);
    switch (name) {
      case ':method':
        f.method = value;
        return;
      case ':path':
        f.path = value;
        return;
      case ':scheme':
        f.scheme = value;
        return;
      case 'content-type':
        f.contentType = value;
        return;
      case 'grpc-timeout':
        f.timeout = value;
        return;
      default:
        return;
    }
  };

  protected onHeaderBlock(id: number, endStream: boolean): void {
    const f = this.fields;
    const { method, path, scheme, contentType, timeout } = f;
    f.method = f.path = f.scheme = f.contentType = f.timeout = undefined;
    f.size = 0;
    const open = this.streams.get(id);
    if (open) {
      // Trailers from the client: they end its side.
      if (open.requestEnded) return this.streamError(open, H2Error.STREAM_CLOSED);
      if (!endStream) return this.streamError(open, H2Error.PROTOCOL_ERROR);
      return this.requestEnd(open);
    }
    if (id % 2 === 0 || id <= this.lastStreamId) return this.goAway(H2Error.PROTOCOL_ERROR, `HEADERS on stream ${id}, not a new client stream`, this.lastStreamId);
    this.lastStreamId = id;
    if (this.draining) return; // above the id our GOAWAY named: ignored, the client may retry it elsewhere
    if (this.streams.size >= MAX_STREAMS) return this.resetFrame(id, H2Error.REFUSED_STREAM);
    if (method === undefined || path === undefined || scheme === undefined) return this.resetFrame(id, H2Error.PROTOCOL_ERROR);
    const handler = this.opts.methods.get(path);
    const call = new Call(id, this.peerInitialWindow, path, handler, new MessageBody(this.opts.maxMessageBytes));
    call.requestEnded = endStream;
    this.streams.set(id, call);
    if (method !== 'POST') return this.answerBlock(call, METHOD_NOT_ALLOWED);
    if (!GRPC_TYPE.test(contentType ?? '')) return this.answerBlock(call, UNSUPPORTED_TYPE);
    if (!handler) return this.fail(call, Status.UNIMPLEMENTED, `unknown method ${path}`);
    const ms = parseGrpcTimeout(timeout);
    if (ms !== undefined) {
      call.timer = setTimeout(() => this.fail(call, Status.DEADLINE_EXCEEDED, 'Deadline exceeded'), Math.max(1, Math.ceil(ms)));
      call.timer.unref();
    }
    if (endStream) this.dispatch(call);
  }

  protected onStreamData(call: Call | undefined, id: number, data: Buffer, endStream: boolean): void {
    if (!call) {
      // A stream we answered (and reset) or refused: its bytes count for the connection only.
      if (id > this.lastStreamId) return this.goAway(H2Error.PROTOCOL_ERROR, `DATA on idle stream ${id}`, this.lastStreamId);
      return;
    }
    if (call.requestEnded) return this.streamError(call, H2Error.STREAM_CLOSED);
    if (!call.refused && !call.answered && data.length > 0) {
      if (this.held + data.length > MAX_HELD_BYTES) {
        call.refused = true;
        this.fail(call, Status.RESOURCE_EXHAUSTED, `more than ${MAX_HELD_BYTES} bytes of requests at once on this connection`);
      } else if (!call.message.add(data)) {
        call.refused = true;
        this.fail(call, Status.RESOURCE_EXHAUSTED, `request message larger than ${this.opts.maxMessageBytes} bytes`);
      } else {
        call.held += data.length;
        this.held += data.length;
      }
    }
    if (endStream) return this.requestEnd(call);
    this.ackData(call);
  }

  private requestEnd(call: Call): void {
    call.requestEnded = true;
    if (call.answered) return this.close(call);
    this.dispatch(call);
  }

  /** The request is whole: run the method on its message. */
  private dispatch(call: Call): void {
    const message = call.message.message('request', 'request without a message');
    if (typeof message === 'string') return this.fail(call, Status.INTERNAL, message);
    call.method!(message).then(
      (reply) => this.answer(call, reply),
      (err: Error) => {
        if (err instanceof RpcError) return this.fail(call, err.code, err.message);
        this.opts.onError?.(call.path, err);
        this.fail(call, Status.INTERNAL, err.message);
      },
    );
  }

  protected onReset(id: number): void {
    const call = this.streams.get(id);
    if (!call) return;
    // Cancelled: never answered, and no RST_STREAM answers a RST_STREAM (RFC 9113 §5.4.2).
    call.answered = true;
    call.requestEnded = true;
    this.close(call);
  }

  protected onGoAway(): void {
    this.drain();
  }

  protected settingsApplied(): void {}

  protected streamError(call: Call, code: number, _why?: string): void {
    this.resetFrame(call.id, code, call.recvUnacked);
    call.answered = true;
    call.requestEnded = true; // the reset ends both sides
    this.close(call);
  }

  // ---- answers -----------------------------------------------------------------------------------

  /** The message, then `grpc-status: 0`: one buffer when the windows allow, else as they open. */
  private answer(call: Call, reply: Buffer): void {
    if (call.answered || this.destroyed) return;
    call.answered = true;
    clearTimeout(call.timer);
    const body = grpcFrame(reply);
    if (OK_HEADERS.length + OK_TRAILERS.length <= this.peerMaxFrame && this.fits(call, body.length)) {
      const out = Buffer.allocUnsafe(27 + OK_HEADERS.length + body.length + OK_TRAILERS.length);
      let at = 0;
      frameHeader(out, at, OK_HEADERS.length, HEADERS, END_HEADERS, call.id);
      at += 9 + OK_HEADERS.copy(out, at + 9);
      frameHeader(out, at, body.length, DATA, 0, call.id);
      at += 9 + body.copy(out, at + 9);
      frameHeader(out, at, OK_TRAILERS.length, HEADERS, END_HEADERS | END_STREAM, call.id);
      OK_TRAILERS.copy(out, at + 9);
      this.consumed(call, body.length);
      this.write(out);
      return this.close(call);
    }
    this.writeHeaderBlock(call.id, OK_HEADERS, false);
    call.body = body;
    call.trailerBlock = OK_TRAILERS;
    this.sendBody(call);
  }

  protected override onBodySent(call: Call): void {
    this.close(call);
  }

  /**
   * A trailers-only failure. Its header list honours the client's SETTINGS_MAX_HEADER_LIST_SIZE: a
   * message that would go past it is left out (the status alone), and if even that is too large the
   * stream is reset (INTERNAL_ERROR) rather than answered with a block the client refuses.
   */
  private fail(call: Call, code: number, message: string): void {
    if (this.peerMaxHeaderList === Infinity) return this.answerBlock(call, failureBlock(code, message));
    const encoded = grpcMessage(message);
    if (failureListSize(code, encoded) <= this.peerMaxHeaderList) return this.answerBlock(call, failureBlock(code, message));
    if (failureListSize(code, undefined) <= this.peerMaxHeaderList) return this.answerBlock(call, statusOnlyBlock(code));
    if (call.answered || this.destroyed) return;
    clearTimeout(call.timer);
    this.streamError(call, H2Error.INTERNAL_ERROR);
  }

  /** One header block that ends the stream (a failure or an HTTP error). */
  private answerBlock(call: Call, block: Buffer): void {
    if (call.answered || this.destroyed) return;
    call.answered = true;
    clearTimeout(call.timer);
    this.writeHeaderBlock(call.id, block, true);
    this.close(call);
  }

  /** Our side is done: forget the call; if the client is still sending, tell it to stop (NO_ERROR). */
  private close(call: Call): void {
    if (!this.streams.has(call.id)) return;
    clearTimeout(call.timer);
    this.held -= call.held;
    this.streams.delete(call.id);
    if (!call.requestEnded) this.resetFrame(call.id, H2Error.NO_ERROR, call.recvUnacked);
    this.endIfIdle();
  }
}

/** Listen on host:port (0 picks one); cleartext h2c, or TLS (ALPN h2) with a certificate. */
export async function startUnaryServer(opts: UnaryServerOptions): Promise<UnaryServer> {
  const connections = new Set<ServerConnection>();
  const accept = (socket: Socket): void => {
    connections.add(new ServerConnection(socket, opts, (c) => connections.delete(c)));
  };
  const server = opts.tls
    ? tls.createServer({ cert: opts.tls.cert, key: opts.tls.key, ALPNProtocols: ['h2'] }, (socket) => {
        if (socket.alpnProtocol !== 'h2') return void socket.destroy();
        accept(socket);
      })
    : net.createServer(accept);
  if (opts.tls) server.on('tlsClientError', () => undefined);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    address: { host: opts.host, port },
    close: (graceMs = 5000) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          for (const c of connections) c.destroy('server closed');
        }, graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        // GOAWAY now; each connection ends once its calls are answered.
        for (const c of connections) c.drain();
      }),
  };
}
