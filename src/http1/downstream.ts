/**
 * HTTP/1.1 from clients on a cleartext listener, served without Node's HTTP server for as long as
 * the connection sends ordinary requests (`readPlainRequestHead`): no body or one framed by a plain
 * `Content-Length`, a `Connection` of keep-alive or close at most (close: its answer is the last, as
 * from Node's server), no upgrade (an `Upgrade` field without `Connection: upgrade` is no upgrade),
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
 * The answer's head is built by the rules of Node's `ServerResponse` (./downstream-messages.ts), so
 * a client cannot tell which path served it. A connection with no request in flight for the idle time
 * (plus Node's one-second allowance) is closed; the timer is the socket's own, re-armed by its reads
 * and writes, never restarted per request.
 */
import type http from 'node:http';
import type net from 'node:net';
import { readPlainRequestHead } from './request-line.js';
import { lingeringClose } from './linger.js';
import { DownstreamBodyRequest, DownstreamRequest, DownstreamResponse, type MessageOwner } from './downstream-messages.js';

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

/** The socket member Node's server keeps the answer in flight in (`null` between requests). */
type Tracked = net.Socket & { _httpMessage?: DownstreamResponse | null };

/** Serve HTTP/1.1 on `socket`, whose first bytes are `first`. */
export function serveHttp1(socket: net.Socket, first: Buffer, opts: DownstreamOptions): void {
  new DownstreamConnection(socket, opts).start(first);
}

class DownstreamConnection implements MessageOwner {
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
    // Closing after its last answer (lingering): what the client still sends is dropped.
    if (this.over) return;
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
      if (!this.dropping && !body.push(take === buf.length ? buf : buf.subarray(0, take)) && !this.over) this.socket.pause();
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
        // The client's last request: its answer says `Connection: close` and ends the connection.
        if (head.close) res.shouldKeepAlive = false;
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
      lingeringClose(this.socket);
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
