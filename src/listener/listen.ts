/**
 * One listening port that speaks HTTP/1.1 and h2c (prior knowledge) in cleartext, or HTTP/1.1 and h2
 * over TLS chosen by ALPN. Node 20 cannot serve both cleartext protocols from one server, so the port
 * is a `net.Server` that peeks at each connection's first bytes: the HTTP/2 preface goes to an
 * `http2` server, anything else is HTTP/1.1, served by src/http1/downstream.ts while its requests
 * are ordinary and by an `http` server from the first one that is not. Every handler receives the
 * compat request/response pair of its protocol (the quick path's has the members the proxy uses).
 *
 * Limits (`ListenerLimits`, ./limits.ts, each with a production default): a client has `headersTimeoutMs` to
 * choose a protocol and send a whole HTTP/1.1 request head (slowloris: 408, connection closed);
 * `maxConnections` connections at once (beyond, new ones are closed on accept and counted); a
 * connection with no request in flight for `idleTimeoutMs` is closed (HTTP/1.1 keep-alive timeout;
 * an HTTP/2 session with no open stream gets GOAWAY);
 * `maxRequestsPerConnection` HTTP/1.1 requests per connection; `maxConcurrentStreams` HTTP/2 streams
 * per session (beyond: REFUSED_STREAM); and an HTTP/2 session whose client resets more than
 * `maxStreamResetsPerSecond` unanswered streams in one second (rapid reset, CVE-2023-44487) gets
 * GOAWAY ENHANCE_YOUR_CALM and is closed. Malformed HTTP/1.1 gets 400/431/408 and the connection
 * closed, never an answer injected into a response already under way (./closing.ts).
 */
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import { lingeringClose, serveHttp1, type DownstreamOptions } from '../http1/index.js';
import { MESH_CIPHERSUITES } from '../mesh/index.js';
import { ClosingConnections } from './closing.js';
import { DEFAULT_LIMITS, MAX_HEADER_SIZE, SESSION_WINDOW, STREAM_WINDOW, type ListenerLimits } from './limits.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

/** The request came on an HTTP/2 stream (whatever version an HTTP/1 request line may claim). */
export function overHttp2(req: http.IncomingMessage | http2.Http2ServerRequest): boolean {
  return (req as { stream?: unknown }).stream !== undefined;
}

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
    // See limits.ts: a larger window than the 64 KiB default, granted only as data is read.
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
  // Node's server closes a connection after its last answer with destroySoon(), both sides at once:
  // a lingering close instead, as the quick path does (src/http1/linger.ts).
  h1.on('connection', (socket: net.Socket) => {
    socket.destroySoon = () => lingeringClose(socket);
  });
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
 * the connections a mesh listener's CONNECT hands over: src/proxy/entry/outbound.ts).
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
