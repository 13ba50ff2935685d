/**
 * The request/response pair of an ordinary HTTP/1.1 request on the quick path (./downstream.ts): the
 * members the proxy uses of Node's `IncomingMessage` (a request with a body is a Readable its
 * connection feeds, with backpressure) and of `ServerResponse`, whose head is built by Node's own
 * rules (the same `Date`, `Connection`, `Keep-Alive` and framing fields, names and values checked the
 * same way, the same error codes thrown), so a client cannot tell which path served it.
 */
import http from 'node:http';
import { EventEmitter } from 'node:events';
import type net from 'node:net';
import { Readable } from 'node:stream';
import { BAD_VALUE, TOKEN } from './fields.js';

/** What the messages tell the connection that serves them. */
export interface MessageOwner {
  /** The request's reader wants more of its body. */
  bodyWanted(req: DownstreamBodyRequest): void;
  /** The answer in flight was written whole; `last`: the connection closes after it. */
  answered(res: DownstreamResponse, last: boolean): void;
}

const CONNECTION_CLOSE = /(?:^|\W)close(?:$|\W)/i;
const TE_CHUNKED = /(?:^|\W)chunked(?:$|\W)/i;

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

/** The members of Node's `IncomingMessage` the proxy reads, for a request without a body. */
export class DownstreamRequest extends EventEmitter {
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
export class DownstreamBodyRequest extends Readable {
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
    private readonly owner: MessageOwner,
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
export class DownstreamResponse extends EventEmitter {
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
    private readonly connection: MessageOwner,
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
