/**
 * HTTP/1.1 from clients on a cleartext listener, served without Node's HTTP server for as long as
 * the connection sends ordinary requests (`readPlainRequestHead`): no body or one framed by a plain
 * `Content-Length`, no upgrade (an `Upgrade` field without `Connection: upgrade` is no upgrade),
 * nothing a client would only send on purpose. Such a request gets a
 * request/response pair with the members the proxy uses of Node's `IncomingMessage` and
 * `ServerResponse` (a request with a body is a Readable fed from the socket, with backpressure), and
 * its answer leaves in one write (head and body together), where Node's server needs a corked pair of
 * writes, a parser callback per field list, streams and a timer per request. An answer that ends
 * before its request's body was read makes the connection read the rest and drop it (Node's `_dump`)
 * before the next request; a client that leaves mid-body aborts its request (`aborted`, as Node's).
 *
 * The first request that is not ordinary (or a head split across reads) ends the quick path: the
 * connection is handed, at that request's first byte, to Node's server, which serves it and the rest
 * of the connection exactly as it serves any connection, malformed requests and their 400s included.
 * Requests are served one at a time; bytes a client pipelines behind a request wait (the socket
 * paused) until its answer is written.
 *
 * The answer's head is built by the rules of Node's `ServerResponse` (the same `Date`, `Connection`,
 * `Keep-Alive` and framing fields, names and values checked the same way, the same exceptions), so a
 * client cannot tell which path served it. A connection with no request in flight for the idle time
 * (plus Node's one-second allowance) is closed; the timer is the socket's own, re-armed by its reads
 * and writes, never restarted per request.
 */
import http from 'node:http';
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { Readable } from 'node:stream';
import { readPlainRequestHead } from './request-line.js';
import { BAD_VALUE, TOKEN } from './fields.js';

export interface DownstreamOptions {
  /** Keep-alive: a connection with no request in flight this long is closed (advertised in `Keep-Alive`). */
  readonly idleTimeoutMs: number;
  /** A request head longer than this goes to Node's server (which answers 431). */
  readonly maxHeadBytes: number;
  /** Serve one request (the listener's request handlers). */
  onRequest(req: http.IncomingMessage, res: http.ServerResponse): void;
  /** Give the connection to Node's HTTP/1.1 server; its unread bytes have been put back in front. */
  handOver(socket: net.Socket): void;
}

/** Node's margin over the advertised keep-alive time (HTTP_SERVER_KEEP_ALIVE_TIMEOUT_BUFFER). */
const KEEP_ALIVE_ALLOWANCE_MS = 1000;
const CONNECTION_CLOSE = /(?:^|\W)close(?:$|\W)/i;
const TE_CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;

/** The socket member Node's server keeps the answer in flight in (`null` between requests). */
type Tracked = net.Socket & { _httpMessage?: DownstreamResponse | null };

/** Serve HTTP/1.1 on `socket`, whose first bytes are `first`. */
export function serveHttp1(socket: net.Socket, first: Buffer, opts: DownstreamOptions): void {
  new DownstreamConnection(socket, opts).start(first);
}

class CodedError extends Error {
  constructor(readonly code: string, message: string) {
    super(message);
  }
}

let dateSecond = -1;
let dateText = '';
/** `Date` for the current second, made once a second (as Node's `utcDate`). */
function utcDate(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateText = new Date(now).toUTCString();
  }
  return dateText;
}

class DownstreamConnection {
  /** Bytes read and not yet served. */
  private unread: Buffer | undefined = undefined;
  private current: DownstreamResponse | undefined = undefined;
  /** The request whose body is being read, and how many of its bytes are still to come. */
  private body: DownstreamBodyRequest | undefined = undefined;
  private bodyLeft = 0;
  /** Its answer has ended: the rest of the body is read and dropped. */
  private dropping = false;
  private serving = false;
  /** Closed, closing after its last answer, or handed to Node's server: serve nothing more. */
  private over = false;

  constructor(readonly socket: net.Socket, private readonly opts: DownstreamOptions) {
    this.listen('on');
    if (opts.idleTimeoutMs > 0) socket.setTimeout(opts.idleTimeoutMs + KEEP_ALIVE_ALLOWANCE_MS);
    (socket as Tracked)._httpMessage = null;
  }

  /** Add the connection's listeners to its socket, or (at the hand-over) remove them. */
  private listen(method: 'on' | 'off'): void {
    const socket = this.socket;
    socket[method]('data', this.onData);
    socket[method]('end', this.onEnd);
    socket[method]('error', this.onError);
    socket[method]('close', this.onClose);
    socket[method]('drain', this.onDrain);
    socket[method]('timeout', this.onTimeout);
  }

  start(first: Buffer): void {
    this.unread = first;
    this.serve();
  }

  private readonly onData = (chunk: Buffer): void => {
    this.unread = this.unread === undefined ? chunk : Buffer.concat([this.unread, chunk]);
    if (this.body !== undefined) {
      this.feedBody();
      if (this.body !== undefined || this.unread === undefined) return;
    }
    if (this.current !== undefined) {
      // Pipelined: wait for the answer in flight (no more is read meanwhile).
      this.socket.pause();
      return;
    }
    this.serve();
  };

  /** Hand the body bytes read so far to the request (or drop them), and end it at its length. */
  private feedBody(): void {
    const body = this.body!;
    while (this.bodyLeft > 0 && this.unread !== undefined) {
      const buf = this.unread;
      const take = Math.min(this.bodyLeft, buf.length);
      this.unread = take === buf.length ? undefined : buf.subarray(take);
      this.bodyLeft -= take;
      // `body.push`, looked up each time: a body counter may have wrapped it.
      if (!this.dropping && !body.push(take === buf.length ? buf : buf.subarray(0, take))) this.socket.pause();
    }
    if (this.bodyLeft > 0) return;
    this.body = undefined;
    this.dropping = false;
    body.complete = true;
    body.push(null);
  }

  /** The request's reader wants more of its body. */
  bodyWanted(req: DownstreamBodyRequest): void {
    if (this.body === req && !this.over && this.socket.isPaused()) this.socket.resume();
  }

  /** Serve the requests read so far, one at a time. */
  private serve(): void {
    if (this.serving) return;
    this.serving = true;
    try {
      while (this.current === undefined && this.body === undefined && this.unread !== undefined && !this.over) {
        const buf = this.unread;
        const head = readPlainRequestHead(buf, this.opts.maxHeadBytes);
        if (head === undefined) {
          this.handOver();
          return;
        }
        this.unread = head.end < buf.length ? buf.subarray(head.end) : undefined;
        const req = head.bodyLength > 0
          ? new DownstreamBodyRequest(head.method, head.url, head.headers, head.rawHeaders, this.socket, this)
          : new DownstreamRequest(head.method, head.url, head.headers, head.rawHeaders, this.socket);
        const res = new DownstreamResponse(req, this.socket, this, this.opts.idleTimeoutMs);
        this.current = res;
        (this.socket as Tracked)._httpMessage = res;
        if (req instanceof DownstreamBodyRequest) {
          this.body = req;
          this.bodyLeft = head.bodyLength;
        }
        // The handler first, then the body bytes already read (Node's parser keeps that order).
        this.opts.onRequest(req as unknown as http.IncomingMessage, res as unknown as http.ServerResponse);
        if (this.body === req) this.feedBody();
      }
    } finally {
      this.serving = false;
    }
    if (this.current === undefined && !this.over && this.socket.isPaused()) this.socket.resume();
  }

  /** The answer in flight was written whole. */
  answered(res: DownstreamResponse, last: boolean): void {
    if (this.current !== res) return;
    this.current = undefined;
    (this.socket as Tracked)._httpMessage = null;
    if (last) {
      this.over = true;
      this.socket.destroySoon();
      return;
    }
    const body = this.body;
    if (body !== undefined) {
      // Answered before its body was read whole: read the rest and drop it, then go on.
      this.dropping = true;
      body.removeAllListeners('data');
      body.resume();
      if (this.socket.isPaused()) this.socket.resume();
      return;
    }
    if (this.unread !== undefined) this.serve();
    else if (this.socket.isPaused()) this.socket.resume();
  }

  /** From the unread bytes on, the connection is Node's server's. */
  private handOver(): void {
    const socket = this.socket;
    this.over = true;
    this.listen('off');
    socket.setTimeout(0);
    // Node's server keeps no answer on a connection it has not answered yet.
    (socket as Tracked)._httpMessage = undefined;
    socket.pause();
    if (this.unread !== undefined) socket.unshift(this.unread);
    this.unread = undefined;
    this.opts.handOver(socket);
    socket.resume();
  }

  private readonly onEnd = (): void => {
    // The client is done sending. An answer in flight is aborted, as Node's server (not half-open)
    // aborts it; between requests, what was written still goes out before the connection closes.
    if (this.current === undefined) this.socket.destroySoon();
    else this.socket.destroy();
  };

  private readonly onError = (): void => {
    this.socket.destroy();
  };

  private readonly onClose = (): void => {
    this.over = true;
    const body = this.body;
    this.body = undefined;
    if (body !== undefined) body.destroy(Object.assign(new Error('aborted'), { code: 'ECONNRESET' }));
    const res = this.current;
    this.current = undefined;
    if (res !== undefined && !res.writableEnded) {
      res.destroyed = true;
      res.emit('close');
    }
  };

  private readonly onDrain = (): void => {
    this.current?.emit('drain');
  };

  private readonly onTimeout = (): void => {
    // Reads and writes re-arm the socket's timer, so it fires only after the idle time without
    // either. A request still waiting for its answer is not idle: the request timeout covers it.
    if (this.current === undefined) this.socket.destroy();
  };
}

/** The members of Node's `IncomingMessage` the proxy reads, for a request without a body. */
class DownstreamRequest extends EventEmitter {
  readonly httpVersion = '1.1';
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  readonly complete = true;
  readonly aborted = false;
  readonly readable = false;
  readonly readableEnded = true;
  readonly readableLength = 0;
  readonly trailers: Record<string, string> = {};
  readonly rawTrailers: string[] = [];
  private endScheduled = false;

  constructor(
    readonly method: string,
    readonly url: string,
    readonly headers: Record<string, string>,
    readonly rawHeaders: string[],
    readonly socket: net.Socket,
  ) {
    super();
  }

  get connection(): net.Socket {
    return this.socket;
  }

  /**
   * A reader that waits for the (empty) body's `end` gets it on the next tick, as from Node's
   * stream; the proxy never listens (it reads no body it does not have), so it pays nothing.
   */
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    super.on(event, listener);
    if (event === 'end' && !this.endScheduled) {
      this.endScheduled = true;
      process.nextTick(emitEnd, this);
    }
    return this;
  }

  override addListener(event: string | symbol, listener: (...args: any[]) => void): this {
    return this.on(event, listener);
  }

  /** No body: nothing is ever pushed (body counters wrap this and count nothing). */
  push(_chunk: unknown, _encoding?: BufferEncoding): boolean {
    return false;
  }

  resume(): this {
    return this;
  }

  destroy(): this {
    this.socket.destroy();
    return this;
  }
}

function emitEnd(req: DownstreamRequest): void {
  req.emit('end');
}

/**
 * A request with a `Content-Length` body: a Readable the connection pushes the body into (pausing
 * the socket when the reader is behind), with the members the proxy uses of `IncomingMessage`.
 */
class DownstreamBodyRequest extends Readable {
  readonly httpVersion = '1.1';
  readonly httpVersionMajor = 1;
  readonly httpVersionMinor = 1;
  complete = false;
  aborted = false;
  readonly trailers: Record<string, string> = {};
  readonly rawTrailers: string[] = [];

  constructor(
    readonly method: string,
    readonly url: string,
    readonly headers: Record<string, string>,
    readonly rawHeaders: string[],
    readonly socket: net.Socket,
    private readonly owner: DownstreamConnection,
  ) {
    super();
  }

  get connection(): net.Socket {
    return this.socket;
  }

  override _read(): void {
    this.owner.bodyWanted(this);
  }

  /**
   * As `IncomingMessage`: a request destroyed before its body was whole is aborted (`aborted`, and
   * its connection closed); the error is emitted only to a reader that listens for one.
   */
  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    if (!this.complete) {
      this.aborted = true;
      this.emit('aborted');
      this.socket.destroy();
    }
    callback(err !== null && this.listenerCount('error') > 0 ? err : null);
  }
}

/**
 * The members of Node's `ServerResponse` the proxy uses: `writeHead`, `write` (with `drain`),
 * `end`, `addTrailers`, `headersSent`, `writableEnded`, `destroyed`, `shouldKeepAlive`, `_header`,
 * and `close` when the connection closes before the answer was written.
 */
class DownstreamResponse extends EventEmitter {
  statusCode = 200;
  statusMessage = '';
  shouldKeepAlive = true;
  _header: string | null = null;
  writableEnded = false;
  destroyed = false;
  /** The head is made (`_header`) but not yet written. */
  private headPending = false;
  private hasBody: boolean;
  private chunked = false;
  /** The connection closes after this answer. */
  private last = false;
  private trailer = '';

  constructor(
    readonly req: DownstreamRequest | DownstreamBodyRequest,
    readonly socket: net.Socket,
    private readonly connection: DownstreamConnection,
    private readonly keepAliveTimeout: number,
  ) {
    super();
    this.hasBody = req.method !== 'HEAD';
  }

  get headersSent(): boolean {
    return this._header !== null;
  }

  writeHead(statusCode: number, headers?: http.OutgoingHttpHeaders | Record<string, string>): this {
    return this.makeHead(statusCode, headers, undefined);
  }

  /** Node's `writeHead`; `contentLength` is known when `end(chunk)` makes the head itself. */
  private makeHead(statusCode: number, headers: http.OutgoingHttpHeaders | undefined, contentLength: number | undefined): this {
    if (this._header !== null) throw new CodedError('ERR_HTTP_HEADERS_SENT', 'Cannot write headers after they are sent to the client');
    const code = statusCode | 0;
    if (code < 100 || code > 999) throw new CodedError('ERR_HTTP_INVALID_STATUS_CODE', `Invalid status code: ${statusCode}`);
    this.statusCode = code;
    if (!this.statusMessage) this.statusMessage = http.STATUS_CODES[code] ?? 'unknown';
    if (code === 204 || code === 304 || (code >= 100 && code <= 199)) this.hasBody = false;
    this.storeHead(headers, contentLength);
    return this;
  }

  /** Node's `_storeHeader` for a server answer to an HTTP/1.1 request. */
  private storeHead(headers: http.OutgoingHttpHeaders | undefined, contentLength: number | undefined): void {
    if (BAD_VALUE.test(this.statusMessage)) throw new CodedError('ERR_INVALID_CHAR', 'Invalid character in statusMessage');
    let head = `HTTP/1.1 ${this.statusCode} ${this.statusMessage}\r\n`;
    let connection = false;
    let length = false;
    let te = false;
    let date = false;
    let trailer = false;
    let defaultKeepAlive = true;
    if (headers) {
      for (const name in headers) {
        if (!Object.hasOwn(headers, name)) continue;
        const value = headers[name];
        if (!TOKEN.test(name)) throw new CodedError('ERR_INVALID_HTTP_TOKEN', `Header name must be a valid HTTP token ["${name}"]`);
        if (Array.isArray(value) && (value.length < 2 || name.toLowerCase() !== 'cookie')) {
          for (const v of value) head += field(name, v);
        } else {
          head += field(name, Array.isArray(value) ? value.join('; ') : value);
        }
        if (name.length < 4 || name.length > 17) continue;
        switch (name.toLowerCase()) {
          case 'connection':
            connection = true;
            if (CONNECTION_CLOSE.test(String(value))) this.last = true;
            else this.shouldKeepAlive = true;
            break;
          case 'transfer-encoding':
            te = true;
            if (TE_CHUNKED.test(String(value))) this.chunked = true;
            break;
          case 'content-length':
            length = true;
            break;
          case 'date':
            date = true;
            break;
          case 'trailer':
            trailer = true;
            break;
          case 'keep-alive':
            defaultKeepAlive = false;
            break;
        }
      }
    }
    if (!date) head += `Date: ${utcDate()}\r\n`;
    if (this.chunked && (this.statusCode === 204 || this.statusCode === 304)) {
      this.chunked = false;
      this.shouldKeepAlive = false;
    }
    if (!connection) {
      if (this.shouldKeepAlive) {
        head += 'Connection: keep-alive\r\n';
        if (this.keepAliveTimeout && defaultKeepAlive) head += `Keep-Alive: timeout=${Math.floor(this.keepAliveTimeout / 1000)}\r\n`;
      } else {
        this.last = true;
        head += 'Connection: close\r\n';
      }
    }
    if (!length && !te) {
      if (!this.hasBody) {
        this.chunked = false;
      } else if (!trailer && contentLength !== undefined) {
        head += `Content-Length: ${contentLength}\r\n`;
      } else {
        head += 'Transfer-Encoding: chunked\r\n';
        this.chunked = true;
      }
    }
    if (!this.chunked && trailer) throw new CodedError('ERR_HTTP_TRAILER_INVALID', 'Trailers are invalid with this transfer encoding');
    this._header = head + '\r\n';
    this.headPending = true;
  }

  addTrailers(headers: Record<string, string | string[]>): void {
    for (const name in headers) {
      const value = headers[name]!;
      if (!TOKEN.test(name)) throw new CodedError('ERR_INVALID_HTTP_TOKEN', `Trailer name must be a valid HTTP token ["${name}"]`);
      this.trailer += field(name, Array.isArray(value) ? value.join(', ') : value);
    }
  }

  write(chunk: Buffer | string, encoding?: BufferEncoding): boolean {
    if (this.writableEnded || this.destroyed) return false;
    if (this._header === null) this.writeHead(this.statusCode);
    const head = this.takeHead();
    const socket = this.socket;
    const length = typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk.length;
    if (!this.hasBody || length === 0) return head === undefined || socket.write(head, 'latin1');
    if (!this.chunked && head === undefined) return socket.write(chunk, encoding as BufferEncoding);
    socket.cork();
    if (head !== undefined) socket.write(head, 'latin1');
    if (this.chunked) socket.write(`${length.toString(16)}\r\n`, 'latin1');
    let ok = socket.write(chunk, encoding as BufferEncoding);
    if (this.chunked) ok = socket.write('\r\n', 'latin1');
    socket.uncork();
    return ok;
  }

  end(chunk?: Buffer | string, encoding?: BufferEncoding): this {
    if (this.writableEnded) return this;
    const hasChunk = chunk !== undefined && chunk !== null && chunk.length > 0;
    if (this._header === null) {
      // Answered without writeHead: Node frames the one chunk with its length.
      this.makeHead(this.statusCode, undefined, hasChunk ? (typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk!.length) : 0);
    }
    this.writableEnded = true;
    const socket = this.socket;
    const head = this.takeHead();
    const finalChunk = this.chunked && this.hasBody ? `0\r\n${this.trailer}\r\n` : '';
    if (!hasChunk || !this.hasBody) {
      const text = head === undefined ? finalChunk : head + finalChunk;
      if (text.length > 0) socket.write(text, 'latin1');
    } else if (typeof chunk === 'string' && !this.chunked && (encoding === undefined || encoding === 'utf8' || encoding === 'latin1')) {
      // Head and body as one string in the body's encoding: one write (Node does the same).
      socket.write(head === undefined ? chunk : head + chunk, encoding ?? 'utf8');
    } else {
      const length = typeof chunk === 'string' ? Buffer.byteLength(chunk, encoding) : chunk!.length;
      socket.cork();
      if (head !== undefined) socket.write(head, 'latin1');
      if (this.chunked) socket.write(`${length.toString(16)}\r\n`, 'latin1');
      socket.write(chunk!, encoding as BufferEncoding);
      if (this.chunked) socket.write(`\r\n${finalChunk}`, 'latin1');
      socket.uncork();
    }
    this.emit('finish');
    this.connection.answered(this, this.last);
    return this;
  }

  /** The head, once: it goes out with the first bytes written after it. */
  private takeHead(): string | undefined {
    if (!this.headPending) return undefined;
    this.headPending = false;
    return this._header!;
  }

  destroy(): this {
    this.socket.destroy();
    return this;
  }
}

/** One field line, its value checked as Node checks it (the same error codes). */
function field(name: string, value: string | number | undefined): string {
  if (value === undefined) throw new CodedError('ERR_HTTP_INVALID_HEADER_VALUE', `Invalid value "undefined" for header "${name}"`);
  const text = typeof value === 'string' ? value : String(value);
  if (BAD_VALUE.test(text)) throw new CodedError('ERR_INVALID_CHAR', `Invalid character in header content ["${name}"]`);
  return `${name}: ${text}\r\n`;
}
