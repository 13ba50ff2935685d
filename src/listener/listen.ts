/**
 * One listening port that speaks HTTP/1.1 and h2c (prior knowledge) in cleartext, or HTTP/1.1 and h2
 * over TLS chosen by ALPN. Node 20 cannot serve both cleartext protocols from one server, so the port
 * is a `net.Server` that peeks at each connection's first bytes: the HTTP/2 preface goes to an
 * `http2` server, anything else is HTTP/1.1, served by src/http1/downstream.ts while its requests
 * are ordinary and by an `http` server from the first one that is not. Every handler receives the
 * compat request/response pair of its protocol (the quick path's has the members the proxy uses).
 *
 * Limits (`ListenerLimits`, each with a production default): a client has `headersTimeoutMs` to
 * choose a protocol and send a whole HTTP/1.1 request head (slowloris: 408, connection closed);
 * `maxConnections` connections at once (beyond, new ones are closed on accept and counted); a
 * connection with no request in flight for `idleTimeoutMs` is closed (HTTP/1.1 keep-alive timeout;
 * an HTTP/2 session with no open stream gets GOAWAY);
 * `maxRequestsPerConnection` HTTP/1.1 requests per connection; `maxConcurrentStreams` HTTP/2 streams
 * per session (beyond: REFUSED_STREAM); and an HTTP/2 session whose client resets more than
 * `maxStreamResetsPerSecond` unanswered streams in one second (rapid reset, CVE-2023-44487) gets
 * GOAWAY ENHANCE_YOUR_CALM and is closed. Malformed HTTP/1.1 gets 400/431/408 and the connection
 * closed, never an answer injected into a response already under way.
 */
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { serveHttp1, type DownstreamOptions } from '../http1/index.js';
import { errorBody } from '../proxy/errors.js';
import { ERRORS, type ErrorCode } from '../filter/index.js';
import { overHttp2 } from '../proxy/sanitize.js';
import { MESH_CIPHERSUITES } from '../mesh/index.js';
import { MAX_HEADER_SIZE, SESSION_WINDOW, STREAM_WINDOW } from '../proxy/upstreams.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export interface ListenerHandlers {
  request(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void;
  upgrade?(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  connect?(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
}

/** PEM certificate chain, key and CA bundle of a mesh mTLS listener. */
export interface MeshServerCredentials {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

export interface ListenerOptions {
  host: string;
  port: number;
  /**
   * `clientCa`: request a client certificate and verify it against these CAs. A client without a
   * certificate is still served (the certificate is optional); one whose certificate does not verify
   * is served too, but its certificate is never presented as an identity (`socket.authorized` false).
   */
  tls?: { cert: string | Buffer; key: string | Buffer; clientCa?: string | Buffer };
  /**
   * A mesh mTLS listener (DESIGN §9) instead: TLS 1.3 only, a client certificate required and
   * verified against the context's CA (a client without one, or with one of another CA or expired,
   * fails the handshake). `setCredentials` swaps in renewed credentials for new connections.
   */
  mtls?: MeshServerCredentials;
  /** The handlers, or what makes them from the bound listener (when they need its port). */
  handlers: ListenerHandlers | ((listener: Listener) => ListenerHandlers);
  limits?: ListenerLimits;
  /** Told about what the limits turned away (for metrics). */
  events?: ListenerEvents;
}

/** Per-listener protection limits; an absent member takes its default (`DEFAULT_LIMITS`). */
export interface ListenerLimits {
  /**
   * Time a client has, from connecting (or from the end of its previous request), to send a whole
   * HTTP/1.1 request head, and to send enough bytes to pick a protocol. Past it: 408 and close.
   */
  readonly headersTimeoutMs?: number;
  /**
   * A connection with no request in flight this long is closed: HTTP/1.1 keep-alive connections
   * between requests, HTTP/2 sessions with no open stream (GOAWAY, then close).
   */
  readonly idleTimeoutMs?: number;
  /** Connections open at once; 0: unlimited. Beyond it new connections are closed on accept. */
  readonly maxConnections?: number;
  /** HTTP/1.1 requests served on one connection (the last answer says `Connection: close`); 0: unlimited. */
  readonly maxRequestsPerConnection?: number;
  /** HTTP/2 streams open at once in one session (SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly maxConcurrentStreams?: number;
  /** HTTP/2 streams one session may see aborted (client resets) in one second before it is closed. */
  readonly maxStreamResetsPerSecond?: number;
}

export const DEFAULT_LIMITS: Required<ListenerLimits> = Object.freeze({
  headersTimeoutMs: 66_000,
  idleTimeoutMs: 65_000,
  maxConnections: 16_384,
  maxRequestsPerConnection: 0,
  maxConcurrentStreams: 1000,
  maxStreamResetsPerSecond: 200,
});

export interface ListenerEvents {
  /** A connection was closed on accept: `maxConnections` were already open. */
  connectionRejected?(): void;
  /** An HTTP/2 session was closed with ENHANCE_YOUR_CALM (too many stream resets). */
  sessionCalmed?(): void;
  /** A TLS handshake completed (mTLS listeners). */
  handshake?(socket: tls.TLSSocket): void;
  /**
   * A TLS handshake failed: plain text, no or a bad client certificate, ... `presented`: the
   * certificate the client sent, when it sent one (the socket no longer has it).
   */
  handshakeFailed?(err: Error, socket: tls.TLSSocket, presented: tls.PeerCertificate | undefined): void;
}

export interface Listener {
  readonly address: { host: string; port: number };
  readonly tls: boolean;
  /** New connections of an mTLS listener use these (renewed mesh credentials). */
  setCredentials(credentials: MeshServerCredentials): void;
  /** Stop accepting; idle keep-alive connections are closed, in-flight requests go on. */
  stopAccepting(): Promise<void>;
  /** Destroy every connection. */
  destroy(): void;
  openConnections(): number;
}

function configureHttp1(server: http.Server, limits: Required<ListenerLimits>): void {
  server.keepAliveTimeout = limits.idleTimeoutMs;
  server.headersTimeout = limits.headersTimeoutMs;
  server.requestTimeout = 0;
  server.maxRequestsPerSocket = limits.maxRequestsPerConnection;
  // Node starts its connection tracking (which enforces headersTimeout and makes
  // closeIdleConnections() work) on 'listening'. This server never listens: the sniffer hands it
  // its connections. Without this, no headers timeout is ever enforced (slowloris).
  server.emit('listening');
}

function http2Settings(limits: Required<ListenerLimits>): http2.Settings {
  return {
    maxConcurrentStreams: limits.maxConcurrentStreams,
    enablePush: false,
    maxHeaderListSize: MAX_HEADER_SIZE,
    // See upstreams.ts: a larger window than the 64 KiB default, granted only as data is read.
    initialWindowSize: STREAM_WINDOW,
  };
}

/** How often Node checks request heads against the headers timeout. */
function checkingInterval(headersTimeoutMs: number): number {
  return Math.min(30_000, Math.max(50, Math.floor(headersTimeoutMs / 4)));
}

/** Grow a new session's connection-level window too (the SETTINGS frame only sets streams'). */
function growSessionWindow(session: http2.ServerHttp2Session): void {
  try {
    session.setLocalWindowSize(SESSION_WINDOW);
  } catch {
    // The session closed before it started: nothing to grow.
  }
}

export async function listen(opts: ListenerOptions): Promise<Listener> {
  const { events } = opts;
  const given = opts.handlers;
  let made: ListenerHandlers | undefined;
  // Made after binding: until then (no connection can arrive), calls go through this indirection.
  const handlers: ListenerHandlers = typeof given !== 'function' ? given : {
    request: (req, res) => made!.request(req, res),
    upgrade: (req, socket, head) => made!.upgrade?.(req, socket, head),
    connect: (req, socket, head) => made!.connect?.(req, socket, head),
  };
  const limits: Required<ListenerLimits> = { ...DEFAULT_LIMITS };
  for (const [k, v] of Object.entries(opts.limits ?? {})) if (v !== undefined) (limits as Record<string, number>)[k] = v;
  const sockets = new Set<Duplex>();
  const track = (socket: Duplex): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const sessions = new Set<http2.ServerHttp2Session>();
  let draining = false;
  const onSession = (session: http2.ServerHttp2Session): void => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
    // A session that opens while draining is told at once to go elsewhere.
    if (draining) session.close();
    // Idle: no frame for the idle time. A session with a stream still open (a quiet long poll or
    // gRPC stream) is left alone; its next frame restarts the clock.
    // (`on`, not setTimeout's callback, which Node registers with `once`: the timer fires again.)
    session.setTimeout(limits.idleTimeoutMs);
    session.on('timeout', () => {
      if ((openStreams.get(session) ?? 0) === 0) session.close();
    });
  };
  const openStreams = new WeakMap<http2.Http2Session, number>();
  const guard = rapidResetGuard(limits.maxStreamResetsPerSecond, events);
  const onStream = (stream: http2.ServerHttp2Stream): void => {
    const session = stream.session;
    if (session) {
      openStreams.set(session, (openStreams.get(session) ?? 0) + 1);
      stream.once('close', () => openStreams.set(session, (openStreams.get(session) ?? 1) - 1));
    }
    guard(stream);
  };
  // HTTP/1.1: while draining, and on a connection's last allowed request, the answer closes the
  // connection. Node's own maxRequestsPerSocket only says `Connection: close` and answers 503 to a
  // client that ignores it.
  const served = new WeakMap<Duplex, number>();
  const perConnection = limits.maxRequestsPerConnection;
  const closeWhenDue = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void => {
    if (req.httpVersionMajor !== 1) return;
    const h1res = res as http.ServerResponse;
    if (draining) h1res.shouldKeepAlive = false;
    if (perConnection > 0) {
      const n = (served.get(req.socket) ?? 0) + 1;
      served.set(req.socket, n);
      if (n >= perConnection) h1res.shouldKeepAlive = false;
    }
  };
  const closing = new ClosingConnections();
  // Every HTTP/1.1 request Node's servers parse: nothing is served on a connection that is closing
  // (see ClosingConnections); HTTP/2 streams go straight to the handler.
  const onRequest = (req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void => {
    if (overHttp2(req)) return handlers.request(req, res);
    const h1req = req as http.IncomingMessage;
    const h1res = res as http.ServerResponse;
    if (closing.refuses(h1req)) return;
    closeWhenDue(req, res);
    handlers.request(req, res);
    closing.after(h1req, h1res);
  };
  const onClientError = (err: NodeJS.ErrnoException, socket: Duplex): void => closing.clientError(err, socket);

  const h1 = http.createServer(
    { maxHeaderSize: MAX_HEADER_SIZE, requireHostHeader: false, connectionsCheckingInterval: checkingInterval(limits.headersTimeoutMs) },
    onRequest,
  );
  configureHttp1(h1, limits);
  const upgrade = handlers.upgrade;
  if (upgrade) {
    h1.on('upgrade', closing.guard((req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
      if (isWebSocketUpgrade(req)) upgrade(req, socket, head);
      else replayWithoutUpgrade(h1, req, socket as net.Socket, head);
    }));
  }
  if (handlers.connect) h1.on('connect', closing.guard(handlers.connect));
  h1.on('clientError', onClientError);
  const h2 = http2.createServer({ settings: http2Settings(limits), maxSessionMemory: 64 });
  h2.on('request', handlers.request);
  // An HTTP/2 CONNECT is answered by the data plane like any request (Node's compat layer would
  // answer 405 itself): tunnels are HTTP/1.1's.
  h2.on('connect' as 'request', handlers.request);
  h2.on('sessionError', () => undefined);
  h2.on('session', growSessionWindow);
  h2.on('session', onSession);
  h2.on('stream', onStream);
  // Ordinary requests are served without Node's HTTP/1.1 server (src/http1/downstream.ts), except
  // on a listener that counts requests per connection: Node's server does the counting there.
  const quick: DownstreamOptions | undefined = limits.maxRequestsPerConnection > 0 ? undefined : {
    idleTimeoutMs: limits.idleTimeoutMs,
    maxHeadBytes: MAX_HEADER_SIZE,
    onRequest: (req, res) => {
      closeWhenDue(req, res);
      handlers.request(req, res);
    },
    handOver: (socket) => h1.emit('connection', socket),
  };
  const serve = (socket: net.Socket): void => {
    track(socket);
    sniff(socket, h1, h2, limits.headersTimeoutMs, quick);
  };

  // TLS is only the outer layer: once the handshake is done (ALPN h2 or http/1.1), the decrypted
  // connection is served exactly as a cleartext one, by the same servers and the same quick
  // HTTP/1.1 path (Node's secure HTTP/2 server would parse HTTP/1.1 over TLS itself, ~10 µs a
  // request slower, with none of the cleartext listener's protections written twice).
  let outer: net.Server;
  let secureServer: tls.Server | undefined;
  if (opts.tls || opts.mtls) {
    const secure = tls.createServer({
      ...(opts.mtls
        ? { ...opts.mtls, requestCert: true, rejectUnauthorized: true, minVersion: 'TLSv1.3' as const, ciphers: MESH_CIPHERSUITES, honorCipherOrder: true }
        : { cert: opts.tls!.cert, key: opts.tls!.key }),
      ...(opts.tls?.clientCa !== undefined ? { ca: opts.tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
      ALPNProtocols: ['h2', 'http/1.1'],
      handshakeTimeout: limits.headersTimeoutMs,
      noDelay: true,
    } as tls.TlsOptions, serve);
    if (events?.handshake) secure.on('secureConnection', events.handshake);
    if (events?.handshakeFailed) {
      const failed = events.handshakeFailed;
      const presented = presentedCertificates(secure);
      secure.on('tlsClientError', (err: Error, socket: tls.TLSSocket) => failed(err, socket, presented.get(socket) ?? undefined));
    }
    secureServer = secure;
    outer = secure;
  } else {
    outer = net.createServer({ noDelay: true }, serve);
  }
  if (limits.maxConnections > 0) outer.maxConnections = limits.maxConnections;
  outer.on('drop', () => events?.connectionRejected?.());

  await new Promise<void>((resolve, reject) => {
    outer.once('error', reject);
    outer.listen(opts.port, opts.host, () => {
      outer.off('error', reject);
      resolve();
    });
  });
  const addr = outer.address() as net.AddressInfo;

  let idleSweep: NodeJS.Timeout | undefined;
  const listener: Listener = {
    address: { host: addr.address, port: addr.port },
    tls: Boolean(opts.tls || opts.mtls),
    setCredentials: (c) => secureServer?.setSecureContext({ ...c, minVersion: 'TLSv1.3', ciphers: MESH_CIPHERSUITES, honorCipherOrder: true }),
    openConnections: () => sockets.size,
    // Resolves once the port no longer accepts; connections in flight are the caller's to wait for
    // (with its grace period) and then destroy(). Waiting here for them to close would let one
    // keep-alive client hold a drain past any grace period.
    stopAccepting: async () => {
      if (draining) return;
      draining = true;
      outer.close();
      // Every HTTP/2 session gets GOAWAY: its streams in flight finish, new ones go elsewhere.
      for (const session of sessions) session.close();
      // HTTP/1.1: answers still to be written say `Connection: close`; idle connections are closed
      // now, and each busy one as soon as its answer is done.
      for (const socket of sockets) {
        const res = inFlightResponse(socket);
        if (res && !res.headersSent) res.shouldKeepAlive = false;
      }
      const sweep = (): void => {
        // `null`: an HTTP/1.1 connection between requests (HTTP/2 sockets have no such member).
        for (const socket of sockets) if (inFlightResponse(socket) === null) socket.destroy();
      };
      sweep();
      idleSweep = setInterval(sweep, 100);
      idleSweep.unref();
    },
    destroy: () => {
      draining = true;
      clearInterval(idleSweep);
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      outer.close();
      // Stops Node's connection-checking timer of the HTTP/1.1 server.
      h1.close(() => undefined);
    },
  };
  if (typeof given === 'function') made = given(listener);
  return listener;
}

/**
 * HTTP/2 rapid reset (CVE-2023-44487): a client that opens streams and resets them at once makes
 * the proxy start (and cancel) upstream work for free. Streams aborted before their answer ended
 * are counted per session in one-second windows; past `perSecond` in a window the session gets
 * GOAWAY ENHANCE_YOUR_CALM and is closed. Other sessions are not affected.
 */
function rapidResetGuard(perSecond: number, events: ListenerEvents | undefined): (stream: http2.ServerHttp2Stream) => void {
  const state = new WeakMap<http2.Http2Session, { windowStart: number; resets: number }>();
  return (stream) => {
    if (perSecond <= 0) return;
    stream.once('aborted', () => {
      const session = stream.session;
      if (!session || session.destroyed) return;
      const now = performance.now();
      let s = state.get(session);
      if (!s || now - s.windowStart >= 1000) state.set(session, (s = { windowStart: now, resets: 0 }));
      if (++s.resets <= perSecond) return;
      state.delete(session);
      events?.sessionCalmed?.();
      // GOAWAY first (destroy() alone would send NO_ERROR), then drop the connection once it is out.
      session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM);
      setImmediate(() => session.destroy());
    });
  };
}

/** The HTTP/1.1 answer a connection is writing: `null` between requests, `undefined` if not HTTP/1.1. */
function inFlightResponse(socket: Duplex): http.ServerResponse | null | undefined {
  return (socket as Duplex & { _httpMessage?: http.ServerResponse | null })._httpMessage;
}

/**
 * Peek at the first bytes and hand the socket to the server that speaks its protocol (also used for
 * the connections a mesh listener's CONNECT hands over: src/proxy/dataplane.ts).
 */
export function sniff(socket: net.Socket, h1: http.Server, h2: http2.Http2Server, timeoutMs: number, quick: DownstreamOptions | undefined): void {
  let seen: Buffer | undefined;
  const onData = (chunk: Buffer): void => {
    const data = seen ? Buffer.concat([seen, chunk]) : chunk;
    const n = Math.min(data.length, PREFACE.length);
    const isPrefix = data.subarray(0, n).equals(PREFACE.subarray(0, n));
    if (isPrefix && data.length < PREFACE.length) {
      seen = data; // could still be the HTTP/2 preface: wait for more
      return;
    }
    socket.off('data', onData);
    socket.off('error', onError);
    // From here on the chosen server's own timeouts apply. Left armed, this timer would destroy
    // any connection quiet for the headers timeout: an HTTP/1.1 request waiting on a slow upstream (timeouts go
    // up to 3600 s), an idle CONNECT tunnel.
    socket.setTimeout(0);
    socket.off('timeout', onIdle);
    if (!isPrefix && quick !== undefined) {
      serveHttp1(socket, data, quick);
      return;
    }
    socket.pause();
    socket.unshift(data);
    if (isPrefix) {
      // The HTTP/2 session consumes the socket's handle and feeds itself the unshifted bytes with
      // socket.read() on the next tick; resuming here would flow them out as 'data' events that
      // nobody hears, and the session would see a bad preface.
      h2.emit('connection', socket);
    } else {
      h1.emit('connection', socket);
      socket.resume();
    }
  };
  const onError = (): void => {
    socket.destroy();
  };
  // A connection that never sends enough bytes to choose a server is dropped after the headers timeout.
  const onIdle = (): void => {
    socket.destroy();
  };
  socket.on('data', onData);
  socket.on('error', onError);
  socket.on('timeout', onIdle);
  socket.setTimeout(timeoutMs);
}

/** WebSocket is the one upgrade the proxy forwards (http-proxy-3 destroys the socket of any other). */
function isWebSocketUpgrade(req: http.IncomingMessage): boolean {
  return req.method === 'GET' && req.headers.upgrade?.trim().toLowerCase() === 'websocket';
}

/**
 * Any other Upgrade (`h2c` from `curl --http2` and Java's HttpClient on http:// URLs) is ignored, as
 * RFC 9110 §7.8 allows and Envoy does: the request is answered in HTTP/1.1. Node's parser has already
 * handed the socket over (it does so for every Upgrade once an 'upgrade' listener exists), so the
 * request head is rebuilt without the Upgrade, put back in front of the unread bytes (a body follows
 * intact, chunked or not) and the socket is given to the HTTP/1.1 server again.
 */
function replayWithoutUpgrade(server: http.Server, req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
  let text = `${req.method} ${req.url} HTTP/${req.httpVersion}\r\n`;
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    const lower = name.toLowerCase();
    if (lower === 'upgrade' || lower === 'http2-settings') continue;
    let value = raw[i + 1]!;
    if (lower === 'connection') {
      value = value.split(',').map((v) => v.trim()).filter((v) => v && !/^(upgrade|http2-settings)$/i.test(v)).join(', ');
      if (!value) continue;
    }
    text += `${name}: ${value}\r\n`;
  }
  socket.unshift(head.length ? Buffer.concat([Buffer.from(`${text}\r\n`, 'latin1'), head]) : Buffer.from(`${text}\r\n`, 'latin1'));
  server.emit('connection', socket);
}

/** How long a connection that got a 400/408/431 may stay open for the client to read it. */
const ERROR_LINGER_MS = 1000;

/**
 * HTTP/1.1 connections that serve no further request (RFC 9112 §9.6). Node's server parses every
 * request pipelined in one read and emits each at once, queueing their answers; so a request the
 * proxy refuses and closes on (bad framing, two Hosts, an HTTP version it does not speak) is
 * usually followed, in the same turn, by whatever the client pipelined behind it. Once an answer
 * on a connection says `Connection: close` (or the client's request did), every later request on
 * it is dropped unanswered, upgrades and CONNECTs included, and the connection closes after the
 * answers before it.
 *
 * A head Node's parser rejects (400, 431, 408, or bytes after a request that asked to close) while
 * earlier answers are still being written waits for them: they go out whole, then the error answer
 * (none for bytes after `Connection: close`: the client said it was done), then the close. Only an
 * error inside the body of the request being answered cuts it: that request is aborted upstream
 * and, if its answer had started, the connection is destroyed without an error spliced in.
 */
class ClosingConnections {
  private readonly sockets = new WeakSet<Duplex>();
  /** Connections whose parser failed (it may report the same failure again on the next read). */
  private readonly failed = new WeakSet<Duplex>();
  /** Each connection's latest request and its answer. */
  private readonly latest = new WeakMap<Duplex, http.ServerResponse>();

  /** True (and nothing is to be served) when the request's connection is closing. */
  refuses(req: http.IncomingMessage): boolean {
    return this.sockets.has(req.socket);
  }

  /** After the handler ran: an answer that closes the connection closes it to later requests. */
  after(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.latest.set(req.socket, res);
    if (!res.shouldKeepAlive || (res as http.ServerResponse & { _last?: boolean })._last === true) this.sockets.add(req.socket);
  }

  /** An upgrade or CONNECT handler that is not run on a closing connection. */
  guard<A extends unknown[]>(handler: (req: http.IncomingMessage, ...rest: A) => void): (req: http.IncomingMessage, ...rest: A) => void {
    return (req, ...rest) => {
      if (!this.refuses(req)) handler(req, ...rest);
    };
  }

  /** Node's parser rejected what came on `socket` (its 'clientError'). */
  clientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
    if (err.code === 'ECONNRESET') return void socket.destroy();
    // The parser reports its failure again on every later read: answered once.
    if (this.failed.has(socket)) return;
    this.failed.add(socket);
    // An answer on it already said `Connection: close` (or its request did).
    const closing = this.sockets.has(socket);
    this.sockets.add(socket);
    const last = this.latest.get(socket);
    const pending = last !== undefined && !last.writableFinished && !last.destroyed;
    if (pending && !last.req.complete && !last.writableEnded) {
      // The error is in the body of the request being answered, which is cut: an error answer
      // only while nothing of its answer went out.
      if (last.headersSent || !socket.writable) return void socket.destroy();
      return sendClientError(err, socket);
    }
    if (closing || err.code === 'HPE_CLOSED_CONNECTION') {
      // What came after a request or an answer that closes the connection is ignored, as nginx
      // does: Node's server closes the connection once that answer is out.
      if (!pending) endThenDestroy(socket);
      return;
    }
    if (pending) {
      // A later request went bad: the answers before it first, then the error and the close.
      last.once('finish', () => (socket.writable ? sendClientError(err, socket) : endThenDestroy(socket)));
      last.once('close', () => (last.writableFinished ? undefined : socket.destroy()));
      return;
    }
    if (!socket.writable) return void socket.destroy();
    sendClientError(err, socket);
  }
}

/** A request line whose version is well formed (one the parser does not speak: 505, not 400). */
const WELL_FORMED_VERSION = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+ [^ \r\n]+ HTTP\/\d+\.\d+\r\n/;

/**
 * The certificate each client of a TLS server presented, read as its handshake ends. Node refuses a
 * client certificate that fails verification by destroying the socket before 'tlsClientError', and
 * the certificate goes with the socket's TLS state, yet a refusal is to be logged with the identity
 * the peer claimed. 'keylog' is the server event that hands over the TLSSocket during the handshake;
 * a listener put first on that socket's 'secure' event runs before Node's own verdict. Only mTLS
 * listeners ask for this: their connections are pooled, so the few callbacks per handshake are rare.
 */
function presentedCertificates(server: tls.Server): WeakMap<tls.TLSSocket, tls.PeerCertificate | null> {
  const presented = new WeakMap<tls.TLSSocket, tls.PeerCertificate | null>();
  server.on('keylog', (_line: Buffer, socket: tls.TLSSocket) => {
    if (presented.has(socket)) return;
    presented.set(socket, null);
    socket.prependOnceListener('secure', () => presented.set(socket, socket.getPeerCertificate()));
  });
  return presented;
}

/** Close once what was written is out; a client that never closes its side is dropped after a while. */
function endThenDestroy(socket: Duplex): void {
  socket.end();
  lingerThenDestroy(socket);
}

function lingerThenDestroy(socket: Duplex): void {
  // end() only half-closes: a client that never closes its side would hold the connection forever.
  setTimeout(() => socket.destroy(), ERROR_LINGER_MS).unref();
}

/**
 * Malformed requests get the status Node's parser chose, with a JSON body where we can write one,
 * and the connection is closed.
 */
function sendClientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
  let status: number = ERRORS.BAD_REQUEST.status;
  let message: string = ERRORS.BAD_REQUEST.message;
  let code: ErrorCode = 'BAD_REQUEST';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    code = 'HEADERS_TOO_LARGE';
    ({ status, message } = ERRORS[code]);
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    // (No code of its own: a 408 is only ever Node's parser's.)
    status = 408;
    message = 'request timeout';
  } else if (err.code === 'HPE_INVALID_VERSION' && WELL_FORMED_VERSION.test(err.rawPacket?.toString('latin1', 0, 8192) ?? '')) {
    code = 'HTTP_VERSION_NOT_SUPPORTED';
    ({ status, message } = ERRORS[code]);
  } else if (err.code) {
    message = `bad request: ${err.code.replace(/^HPE_/, '').toLowerCase().replace(/_/g, ' ')}`;
  }
  const body = errorBody(status, message, code, '');
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
  lingerThenDestroy(socket);
}
