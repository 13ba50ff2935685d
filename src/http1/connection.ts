/**
 * One keep-alive HTTP/1.1 connection to an upstream and the request on it (see pool.ts for the pool
 * that owns it): writes the request head and streams its body with backpressure, parses the answer
 * into the request's handler, and decides whether the connection may carry another request. It
 * tells its owner when it is free again, when it is gone, and when a request must be sent again on a
 * new connection; every failure is reported to the request in flight, never thrown.
 */
import net from 'node:net';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { ResponseParser, type HeaderMap, type ResponseSink } from './response-parser.js';
import { requestHead, type BodyFraming } from './request-head.js';
import { READ_BUFFER, inReadBuffer } from '../read-buffer.js';
import { BODY_CUT, bodyCut } from '../filter/index.js';

/** What the caller can do to a request in flight. */
export interface UpstreamController {
  /** Stop the request: nothing more is reported to its handler. */
  abort(reason: Error): void;
  /** Stop reading the answer (downstream backpressure) / read on. */
  pause(): void;
  resume(): void;
}

/** Receives one request's progress, in this order (any may be the last: then `onResponseError`). */
export interface UpstreamHandler {
  /** A connection was assigned and the request is about to be written. */
  onRequestStart(controller: UpstreamController): void;
  onResponseStart(controller: UpstreamController, status: number, headers: HeaderMap): void;
  /**
   * A piece of the body, the handler's to keep; except a `last` chunk (the body ends with it, and
   * `onResponseEnd` follows in the same call) of at most `LENT_CHUNK_BYTES`: that one is lent, a
   * view of the connections' shared read buffer, valid until `onResponseEnd` returns (decode or
   * copy it to keep it).
   */
  onResponseData(controller: UpstreamController, chunk: Buffer, last: boolean): void;
  onResponseEnd(controller: UpstreamController, trailers: HeaderMap | undefined): void;
  onResponseError(controller: UpstreamController, err: Error): void;
}

export interface UpstreamRequest {
  method: string;
  /** The request target (origin-form). */
  path: string;
  headers: OutgoingHttpHeaders;
  body: Readable | null;
}

export interface PoolOptions {
  /** Connections at most; more requests wait in order. */
  connections: number;
  /** An idle connection closes after this long (ms). */
  idleTimeoutMs: number;
  /** Largest response head (and trailer section) accepted, in bytes. */
  maxHeaderSize: number;
  /** A connect that takes longer fails with `CONNECT_TIMEOUT` (ms). */
  connectTimeoutMs: number;
  /**
   * Opens a connection (default: TCP with Nagle off and TCP keep-alive on). The socket must read
   * through `onread` (net.connect's option of that name): the connection gets its bytes there.
   */
  connect?: (host: string, port: number, onread: net.OnReadOpts) => net.Socket;
}

function tcpConnect(host: string, port: number, onread: net.OnReadOpts): net.Socket {
  return net.connect({ host, port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000, onread });
}

// Upstream connections read their answers' heads into the shared READ_BUFFER (src/read-buffer.ts):
// body bytes in it are copied out before a handler gets them (except a small last chunk, lent until
// the answer ends), and so is a partial head the parser keeps. While a large body streams in large
// reads, a connection reads into buffers of its own, which its chunks then keep without a copy (see
// `nextReadBuffer`).

/** The most a read takes in at once (what Node reads into by default). */
const READ_SIZE = READ_BUFFER.length;
/** A read at least this large means a body is streaming in bulk. */
const BULK_READ = 16 * 1024;

/** A last body chunk up to this size is lent to the handler, not copied (see `onResponseData`). */
export const LENT_CHUNK_BYTES = 1024;

/** An idle connection closes this long before the upstream's advertised keep-alive timeout. */
const KEEP_ALIVE_MARGIN_MS = 1000;
/** Methods a client may send again by itself when a connection fails under them (RFC 9110 §9.2.2). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

function ignore(): void {}

class ConnectTimeoutError extends Error {
  override name = 'ConnectTimeoutError';
  readonly code = 'CONNECT_TIMEOUT';
}

export class UpstreamClosedError extends Error {
  override name = 'UpstreamClosedError';
  readonly code = 'UPSTREAM_CLOSED';
}

class BodyError extends Error {
  override name = 'RequestBodyError';
  readonly code = 'REQUEST_BODY_ERROR';
}

/** The pool a connection belongs to. */
export interface ConnectionOwner {
  readonly host: string;
  readonly port: number;
  /** `host:port` as sent in a Host field. */
  readonly authority: string;
  readonly options: PoolOptions;
  /** The connection finished its request and may carry another. */
  release(conn: Connection): void;
  /** The connection is gone. */
  remove(conn: Connection): void;
  /** Send `attempt` again on a new connection. */
  resend(attempt: Attempt): void;
}

/** One request, from dispatch to its end; the controller its handler holds. */
export class Attempt implements UpstreamController {
  conn: Connection | undefined = undefined;
  /** Over: answered, failed or aborted. Nothing more reaches the handler. */
  done = false;
  /** Bytes of it were written: aborting must discard the connection. */
  written = false;
  /** Sent again on a fresh connection after a kept-alive one closed under it (once at most). */
  resent = false;

  constructor(readonly request: UpstreamRequest, readonly handler: UpstreamHandler) {}

  abort(_reason: Error): void {
    if (this.done) return;
    this.done = true;
    // A waiting request is skipped when its turn comes.
    this.conn?.abandon(this);
  }

  pause(): void {
    if (!this.done) this.conn?.pause();
  }

  resume(): void {
    if (!this.done) this.conn?.resume();
  }
}

export class Connection implements ResponseSink {
  private readonly socket: net.Socket;
  private readonly parser: ResponseParser;
  private attempt: Attempt | undefined = undefined;
  private connected = false;
  private closed = false;
  private idleTimeoutMs: number;
  // The body being sent, and how.
  private body: Readable | null = null;
  private framing: BodyFraming | undefined = undefined;
  private bodySent = 0;
  private bodyDone = true;
  private waitingDrain = false;
  /** Reading is paused for the downstream's backpressure. */
  private paused = false;
  /** Requests written on this connection so far. */
  private requests = 0;

  constructor(private readonly pool: ConnectionOwner, first: Attempt) {
    const opts = pool.options;
    this.idleTimeoutMs = opts.idleTimeoutMs;
    this.parser = new ResponseParser(opts.maxHeaderSize);
    this.attempt = first;
    first.conn = this;
    this.socket = (opts.connect ?? tcpConnect)(pool.host, pool.port, { buffer: this.nextReadBuffer, callback: this.onRead });
    this.socket.setTimeout(opts.connectTimeoutMs);
    this.socket.on('connect', this.onConnect);
    this.socket.on('end', this.onEnd);
    this.socket.on('error', this.onError);
    this.socket.on('close', this.onClose);
    this.socket.on('timeout', this.onTimeout);
    this.socket.on('drain', this.onDrain);
  }

  get busy(): boolean {
    return this.attempt !== undefined;
  }

  /**
   * Send `attempt` on this connection. False when its handler aborted it at the start (the
   * connection is untouched and free for another).
   */
  start(attempt: Attempt): boolean {
    this.attempt = attempt;
    attempt.conn = this;
    if (!this.connected) return true;
    return this.send(attempt);
  }

  private send(attempt: Attempt): boolean {
    const socket = this.socket;
    attempt.handler.onRequestStart(attempt);
    if (attempt.done) {
      this.attempt = undefined;
      return false;
    }
    const { method, path, headers, body } = attempt.request;
    let framing: BodyFraming;
    let head: string;
    try {
      ({ head, framing } = requestHead(method, path, headers, body !== null, this.pool.authority));
    } catch (err) {
      // Nothing was written: the connection stays good.
      this.attempt = undefined;
      attempt.done = true;
      attempt.handler.onResponseError(attempt, err as Error);
      return false;
    }
    socket.ref();
    this.parser.expect(this, method === 'HEAD');
    attempt.written = true;
    this.requests++;
    socket.write(head, 'latin1');
    if (body !== null) this.sendBody(body, framing);
    else this.bodyDone = true;
    return true;
  }

  private sendBody(body: Readable, framing: BodyFraming): void {
    this.body = body;
    this.framing = framing;
    this.bodySent = 0;
    this.bodyDone = false;
    this.waitingDrain = false;
    if (body.readableEnded) {
      this.onBodyEnd();
      return;
    }
    if (body.destroyed) {
      this.onBodyError(new BodyError('the request body was destroyed before it was sent'));
      return;
    }
    body.on('data', this.onBodyData);
    body.on('end', this.onBodyEnd);
    body.on('error', this.onBodyError);
    body.on('close', this.onBodyClose);
    body.resume();
  }

  private readonly onBodyData = (chunk: Buffer | string): void => {
    const data = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (data.length === 0) return;
    const framing = this.framing!;
    this.bodySent += data.length;
    const socket = this.socket;
    let ok: boolean;
    if (framing.kind === 'chunked') {
      socket.cork();
      socket.write(`${data.length.toString(16)}\r\n`, 'latin1');
      socket.write(data);
      ok = socket.write('\r\n', 'latin1');
      socket.uncork();
    } else {
      if (framing.kind === 'none' || this.bodySent > framing.length) {
        this.onBodyError(new BodyError('the request body is longer than its content-length'));
        return;
      }
      ok = socket.write(data);
    }
    if (!ok && !this.waitingDrain) {
      this.waitingDrain = true;
      this.body?.pause();
    }
  };

  private readonly onDrain = (): void => {
    if (!this.waitingDrain) return;
    this.waitingDrain = false;
    this.body?.resume();
  };

  private readonly onBodyEnd = (): void => {
    // An HTTP/2 client's reset ends its body too (body-cut.ts): never send the terminating chunk then.
    if (this.body !== null && bodyCut(this.body)) return this.onBodyError(new BodyError(BODY_CUT));
    const framing = this.framing;
    this.detachBody();
    this.bodyDone = true;
    if (framing?.kind === 'chunked') this.socket.write('0\r\n\r\n', 'latin1');
    else if (framing?.kind === 'length' && this.bodySent !== framing.length) {
      this.fail(new BodyError(`the request body ended after ${this.bodySent} of ${framing.length} bytes`));
      return;
    }
  };

  private readonly onBodyError = (err: Error): void => {
    this.fail(err instanceof BodyError ? err : new BodyError(`the request body failed: ${err.message}`));
  };

  private readonly onBodyClose = (): void => {
    // 'close' before 'end': the client went away mid-body.
    if (this.body !== null) this.onBodyError(new BodyError('the request body ended early'));
  };

  private detachBody(): void {
    const body = this.body;
    if (body === null) return;
    this.body = null;
    body.off('data', this.onBodyData);
    body.off('end', this.onBodyEnd);
    body.off('error', this.onBodyError);
    body.off('close', this.onBodyClose);
    // The body may still fail after this request is over (the client resets mid-upload): an error
    // with no listener would throw from the stream.
    if (body.listenerCount('error') === 0) body.on('error', ignore);
    if (this.waitingDrain) {
      this.waitingDrain = false;
      body.resume();
    }
  }

  // ---- the answer ----------------------------------------------------------------------------

  onHead(status: number, headers: HeaderMap): void {
    const attempt = this.attempt!;
    attempt.handler.onResponseStart(attempt, status, headers);
  }

  onBody(chunk: Buffer, last: boolean): void {
    const attempt = this.attempt!;
    // A view of the shared read buffer is copied before the handler may keep it.
    const lent = last && chunk.length <= LENT_CHUNK_BYTES;
    attempt.handler.onResponseData(attempt, !lent && inReadBuffer(chunk) ? Buffer.from(chunk) : chunk, last);
  }

  onComplete(trailers: HeaderMap | undefined): void {
    const attempt = this.attempt!;
    this.attempt = undefined;
    attempt.done = true;
    if (this.paused) this.resume();
    const parser = this.parser;
    const reusable = parser.keepAlive && parser.trailingBytes === 0 && !this.closed;
    if (reusable && parser.keepAliveTimeoutMs !== undefined) {
      const ms = Math.max(KEEP_ALIVE_MARGIN_MS, Math.min(this.pool.options.idleTimeoutMs, parser.keepAliveTimeoutMs - KEEP_ALIVE_MARGIN_MS));
      if (ms !== this.idleTimeoutMs) {
        this.idleTimeoutMs = ms;
        this.socket.setTimeout(ms);
      }
    }
    attempt.handler.onResponseEnd(attempt, trailers);
    // An answer before the whole body was sent: the upstream will not read the rest (Envoy resets
    // the upstream connection here too).
    if (!reusable || !this.bodyDone) this.destroy();
    else if (!this.closed) this.pool.release(this);
  }

  // ---- the socket ----------------------------------------------------------------------------

  private readonly onConnect = (): void => {
    this.connected = true;
    this.socket.setTimeout(this.idleTimeoutMs);
    const attempt = this.attempt;
    // No request any more (aborted while connecting), or aborted at its start: free for another.
    if (attempt === undefined || !this.send(attempt)) this.pool.release(this);
  };

  /** Bytes of the last read. */
  private lastRead = 0;

  /**
   * Where the next read goes. While a body streams in bulk (the last read was large and more than a
   * lent chunk's worth is due), a new buffer of the connection's own, sized to the body's rest (at
   * most a read's worth): its chunks are handed on without a copy. Otherwise the shared buffer: a
   * head, a small rest, or a body trickling in small reads, whose few bytes are cheaper to copy than
   * a mostly empty buffer of their own.
   */
  private readonly nextReadBuffer = (): Buffer => {
    if (this.lastRead >= BULK_READ) {
      const body = this.parser.bodyAhead(READ_SIZE);
      if (body > LENT_CHUNK_BYTES) return Buffer.allocUnsafeSlow(body);
    }
    return READ_BUFFER;
  };

  /** Bytes read (into `nextReadBuffer()`). Backpressure pauses the socket; the return value never does. */
  private readonly onRead = (bytes: number, buffer: Uint8Array): boolean => {
    this.lastRead = bytes;
    const err = this.parser.execute((buffer as Buffer).subarray(0, bytes));
    if (err) this.fail(err);
    // Bytes the parser keeps for the next read (a head or chunk line split between reads), when they
    // are in the shared buffer; a buffer of the connection's own is not reused.
    else if (buffer === READ_BUFFER) this.parser.ownPending();
    return true;
  };

  private readonly onEnd = (): void => {
    // The upstream closed its side: a body read to the close is complete; anything else is cut
    // short, a disconnect as when the socket closes (503 UPSTREAM_RESET, Envoy's UC), not bytes that
    // broke the protocol (502 UPSTREAM_PROTOCOL_ERROR).
    const err = this.parser.finish();
    if (err) this.fail(new UpstreamClosedError(err.message));
    this.destroy();
  };

  private readonly onError = (err: Error): void => {
    this.fail(err);
  };

  private readonly onClose = (): void => {
    if (this.attempt && !this.attempt.done) {
      this.fail(this.parser.busy ? new UpstreamClosedError('the upstream closed the connection before the response was complete') : new UpstreamClosedError('the upstream closed the connection'));
    }
    this.closed = true;
    this.detachBody();
    this.pool.remove(this);
  };

  private readonly onTimeout = (): void => {
    if (!this.connected) {
      this.fail(new ConnectTimeoutError(`connect to ${this.pool.authority} timed out`));
      return;
    }
    // Idle past the timeout: close. A busy connection waits; the caller owns request timeouts.
    if (this.attempt === undefined) this.destroy();
  };

  /** The attempt's handler gave up on it: the connection is discarded unless nothing was sent. */
  abandon(attempt: Attempt): void {
    if (this.attempt !== attempt) return;
    this.attempt = undefined;
    if (!attempt.written) return;
    this.parser.abandon();
    this.detachBody();
    this.destroy();
  }

  /** Report `err` to the request in flight and discard the connection. */
  private fail(err: Error): void {
    const attempt = this.attempt;
    this.attempt = undefined;
    const resend = attempt !== undefined && !attempt.done && this.mayResend(attempt);
    this.detachBody();
    this.destroy();
    if (attempt === undefined || attempt.done) return;
    if (resend) {
      attempt.resent = true;
      attempt.written = false;
      attempt.conn = undefined;
      this.pool.resend(attempt);
      return;
    }
    attempt.done = true;
    attempt.handler.onResponseError(attempt, err);
  }

  /**
   * A kept-alive connection the upstream closed just as a request went out on it (it had no way to
   * know): not one byte of an answer came back. A request without a body whose method is safe
   * (RFC 9110 §9.2.2 lets a client retry those by itself) is sent once more, on a new connection.
   */
  private mayResend(attempt: Attempt): boolean {
    return !attempt.resent && this.requests > 1 && !this.parser.gotBytes && attempt.request.body === null && SAFE_METHODS.has(attempt.request.method);
  }

  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  /** Make this connection idle: unref'd so an idle pool never holds the process open. */
  idle(): void {
    this.socket.unref();
  }

  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.detachBody();
    this.socket.destroy();
    this.pool.remove(this);
  }
}
