/**
 * Connection pools to upstreams, one per `host:port`: an `Http1Pool` (HTTP/1.1 keep-alive) for
 * `http` ports and one `node:http2` client session for `http2` and `grpc` ports (undici 7 drops
 * HTTP/2 trailers). Sessions that close or receive GOAWAY are forgotten and re-dialled on the next
 * request. Pools never time out on their own: the request pipeline owns every timeout.
 *
 * A caller's mesh upstreams (`meshTls` given) dial sidecars' mTLS listeners instead: HTTP/1.1 over
 * TLS (ALPN http/1.1) for `http` ports, one HTTP/2 session over TLS (ALPN h2) for `http2` and `grpc`
 * ports, each checked for the target workload's identity; the app's protocol is kept end to end, as
 * Istio does by default, so upgrades and trailers cross the hop unchanged.
 */
import http2 from 'node:http2';
import tls from 'node:tls';
import type { OnReadOpts } from 'node:net';
import { Http1Pool } from '../http1/index.js';
import type { MeshTlsClient } from './mesh-tls.js';
import type { HostPort } from '../routing/replicas.js';
import { MAX_HEADER_SIZE, SESSION_WINDOW, STREAM_WINDOW } from '../listener/index.js';


/**
 * Values by host, then port. Looked up on every request: the host strings come from the
 * configuration (the same string each time, its hash kept), so no `host:port` key is built and
 * hashed per request.
 */
class ByAddress<T> {
  private readonly hosts = new Map<string, Map<number, T>>();

  get(target: HostPort): T | undefined {
    return this.hosts.get(target.host)?.get(target.port);
  }

  set(target: HostPort, value: T): void {
    let ports = this.hosts.get(target.host);
    if (!ports) this.hosts.set(target.host, (ports = new Map()));
    ports.set(target.port, value);
  }

  delete(target: HostPort): void {
    const ports = this.hosts.get(target.host);
    if (!ports) return;
    ports.delete(target.port);
    if (ports.size === 0) this.hosts.delete(target.host);
  }

  *values(): IterableIterator<T> {
    for (const ports of this.hosts.values()) yield* ports.values();
  }

  clear(): void {
    this.hosts.clear();
  }
}

export class Upstreams {
  private readonly pools = new ByAddress<Http1Pool>();
  private readonly sessions = new ByAddress<http2.ClientHttp2Session>();
  private closed = false;

  constructor(readonly meshTls?: MeshTlsClient) {}

  /** `serverUri`: dial over mTLS (this caller's `meshTls`), requiring that identity of the target. */
  pool(target: HostPort, serverUri?: string): Http1Pool {
    let pool = this.pools.get(target);
    if (!pool) {
      const mesh = serverUri === undefined ? undefined : this.meshTls;
      pool = new Http1Pool(target.host, target.port, {
        connections: 256,
        idleTimeoutMs: 60_000,
        maxHeaderSize: MAX_HEADER_SIZE,
        connectTimeoutMs: 10_000,
        ...(mesh ? {
          connect: (host: string, port: number, onread: OnReadOpts) =>
            // Node's tls.connect takes net's `onread` (its types do not say so).
            tls.connect({ ...mesh.options(serverUri!, 'http/1.1'), host, port, onread, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 } as tls.ConnectionOptions),
        } : {}),
      });
      this.pools.set(target, pool);
    }
    return pool;
  }

  session(target: HostPort, serverUri?: string): http2.ClientHttp2Session {
    let session = this.sessions.get(target);
    if (session && !session.closed && !session.destroyed) return session;
    const host = target.host.includes(':') ? `[${target.host}]` : target.host;
    const mesh = serverUri === undefined ? undefined : this.meshTls;
    // Windows well above HTTP/2's 64 KiB default: a large body would otherwise wait for a
    // WINDOW_UPDATE round trip every 64 KiB. Node only grants window as data is read, so
    // backpressure still holds; the cost is at most one window of buffering per stream.
    session = http2.connect(`${mesh ? 'https' : 'http'}://${host}:${target.port}`, {
      maxHeaderListPairs: 1000,
      settings: { enablePush: false, initialWindowSize: STREAM_WINDOW },
      ...(mesh ? mesh.options(serverUri!, 'h2') : {}),
    });
    session.once('connect', (s: http2.ClientHttp2Session) => s.setLocalWindowSize(SESSION_WINDOW));
    const forget = (): void => {
      if (this.sessions.get(target) === session) this.sessions.delete(target);
    };
    session.on('error', forget);
    session.on('close', forget);
    session.on('goaway', forget);
    // A session with no open streams must not keep the process alive.
    session.unref();
    this.sessions.set(target, session);
    return session;
  }

  /** Drop the pool or session of a replica that went away. */
  forget(target: HostPort): void {
    const pool = this.pools.get(target);
    if (pool) {
      this.pools.delete(target);
      void pool.close().catch(() => undefined);
    }
    const session = this.sessions.get(target);
    if (session) {
      this.sessions.delete(target);
      session.close();
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const pending: Promise<unknown>[] = [];
    for (const pool of this.pools.values()) pending.push(pool.destroy().catch(() => undefined));
    for (const session of this.sessions.values()) session.destroy();
    this.pools.clear();
    this.sessions.clear();
    await Promise.all(pending);
  }
}
