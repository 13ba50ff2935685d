/**
 * A pool of keep-alive HTTP/1.1 connections to one upstream `host:port`, one request at a time on
 * each (no pipelining). A request takes the most recently used idle connection, else opens a new
 * one up to the pool's limit, else waits in order. Its body streams with backpressure both ways, and
 * its answer is handed on as it is parsed: head, body slices, end with trailers.
 *
 * How it fails: a refused or timed-out connect reports the socket's code (`ECONNREFUSED`,
 * `CONNECT_TIMEOUT`, ...); a connection that closes, resets or breaks the protocol mid-answer reports
 * the error and is discarded; an aborted request discards its connection unless nothing was written
 * yet. A GET, HEAD or OPTIONS without a body that meets a kept-alive connection closing under it (no
 * byte of an answer yet) is sent once more on a new connection instead. A connection is reused only
 * after a complete answer that allows it, with its request body fully sent and no stray byte after
 * the answer. Idle connections close after the pool's idle timeout, or a second before the
 * upstream's own `Keep-Alive: timeout`, and never hold the process open. The pool never times a
 * request out: the caller owns every request timeout. Each connection is a `Connection`
 * (./connection.ts).
 */
import {
  Attempt,
  Connection,
  UpstreamClosedError,
  type ConnectionOwner,
  type PoolOptions,
  type UpstreamHandler,
  type UpstreamRequest,
} from './connection.js';
import type { HeaderMap } from './response-parser.js';

export class Http1Pool implements ConnectionOwner {
  /** `host:port` as sent in a Host field (IPv6 in brackets). */
  readonly authority: string;
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private queue: Attempt[] = [];
  private queueHead = 0;
  private closing = false;
  private closedWaiters: (() => void)[] = [];

  constructor(readonly host: string, readonly port: number, readonly options: PoolOptions) {
    this.authority = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  /** Connections open, idle ones, requests on a connection, and requests waiting for one. */
  get stats(): { connected: number; free: number; running: number; pending: number } {
    let running = 0;
    for (const conn of this.all) if (conn.busy) running++;
    let pending = 0;
    for (let i = this.queueHead; i < this.queue.length; i++) if (!this.queue[i]!.done) pending++;
    return { connected: this.all.size, free: this.idle.length, running, pending };
  }

  dispatch(request: UpstreamRequest, handler: UpstreamHandler): void {
    const attempt = new Attempt(request, handler);
    if (this.closing) return refuse(attempt);
    const conn = this.idle.pop();
    if (conn !== undefined) {
      // Not started: aborted at its start or refused before a byte was written; still idle.
      if (!conn.start(attempt)) {
        this.idle.push(conn);
        conn.idle();
      }
      return;
    }
    if (this.all.size < this.options.connections) {
      this.all.add(new Connection(this, attempt));
      return;
    }
    this.queue.push(attempt);
  }

  /** A connection finished its request and may carry another. */
  release(conn: Connection): void {
    if (this.closing) {
      conn.destroy();
      return;
    }
    for (let next = this.takeQueued(); next !== undefined; next = this.takeQueued()) {
      if (conn.start(next)) return;
    }
    this.idle.push(conn);
    conn.idle();
  }

  /** Send `attempt` again on a new connection (see `Connection.mayResend`), ahead of those waiting. */
  resend(attempt: Attempt): void {
    if (this.closing) return refuse(attempt);
    if (this.all.size < this.options.connections) this.all.add(new Connection(this, attempt));
    else this.queue.splice(this.queueHead, 0, attempt);
  }

  /** A connection is gone. A waiting request gets a new one in its place. */
  remove(conn: Connection): void {
    if (!this.all.delete(conn)) return;
    const i = this.idle.lastIndexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    if (this.closing) {
      if (this.all.size === 0) for (const w of this.closedWaiters.splice(0)) w();
      return;
    }
    while (this.all.size < this.options.connections) {
      const next = this.takeQueued();
      if (next === undefined) break;
      this.all.add(new Connection(this, next));
    }
  }

  /** The first waiting request not aborted meanwhile, taken off the queue. */
  private takeQueued(): Attempt | undefined {
    while (this.queueHead < this.queue.length) {
      const next = this.queue[this.queueHead]!;
      this.queue[this.queueHead++] = undefined as unknown as Attempt;
      if (this.queueHead === this.queue.length) {
        this.queue = [];
        this.queueHead = 0;
      }
      if (!next.done) return next;
    }
    return undefined;
  }

  /** Finish the requests in flight, then close every connection; waiting requests fail. */
  close(): Promise<void> {
    this.closing = true;
    this.failQueued();
    for (const conn of this.idle.splice(0)) conn.destroy();
    if (this.all.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.closedWaiters.push(resolve));
  }

  /** Close every connection now; requests in flight fail. */
  destroy(): Promise<void> {
    this.closing = true;
    this.failQueued();
    for (const conn of [...this.all]) conn.destroy();
    return Promise.resolve();
  }

  private failQueued(): void {
    const queued = this.queue.slice(this.queueHead);
    this.queue = [];
    this.queueHead = 0;
    for (const attempt of queued) if (!attempt.done) refuse(attempt);
  }
}

/** Fail a request the closing pool will not send. */
function refuse(attempt: Attempt): void {
  attempt.done = true;
  attempt.handler.onResponseError(attempt, new UpstreamClosedError('the upstream pool is closed'));
}

export type { HeaderMap, PoolOptions, UpstreamHandler, UpstreamRequest };
export type { UpstreamController } from './connection.js';
