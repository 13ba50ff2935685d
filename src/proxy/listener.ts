/**
 * One listening port that speaks HTTP/1.1 and h2c (prior knowledge) in cleartext, or HTTP/1.1 and h2
 * over TLS chosen by ALPN. Node 20 cannot serve both cleartext protocols from one server, so the port
 * is a `net.Server` that peeks at each connection's first bytes: the HTTP/2 preface goes to an
 * `http2` server, anything else to an `http` server. A connection that sends nothing is closed by the
 * HTTP server's own timeouts. Every handler receives the compat request/response pair of its protocol.
 */
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { MAX_HEADER_SIZE, SESSION_WINDOW, STREAM_WINDOW } from './upstreams.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

export interface ListenerHandlers {
  request(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse): void;
  upgrade?(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
  connect?(req: http.IncomingMessage, socket: Duplex, head: Buffer): void;
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
  handlers: ListenerHandlers;
}

export interface Listener {
  readonly address: { host: string; port: number };
  readonly tls: boolean;
  /** Stop accepting; idle keep-alive connections are closed, in-flight requests go on. */
  stopAccepting(): Promise<void>;
  /** Destroy every connection. */
  destroy(): void;
  openConnections(): number;
}

function configureHttp1(server: http.Server): void {
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;
}

const HTTP2_SETTINGS: http2.Settings = {
  maxConcurrentStreams: 1000,
  enablePush: false,
  maxHeaderListSize: MAX_HEADER_SIZE,
  // See upstreams.ts: a larger window than the 64 KiB default, granted only as data is read.
  initialWindowSize: STREAM_WINDOW,
};

/** Grow a new session's connection-level window too (the SETTINGS frame only sets streams'). */
function growSessionWindow(session: http2.ServerHttp2Session): void {
  try {
    session.setLocalWindowSize(SESSION_WINDOW);
  } catch {
    // The session closed before it started: nothing to grow.
  }
}

export async function listen(opts: ListenerOptions): Promise<Listener> {
  const { handlers } = opts;
  const sockets = new Set<Duplex>();
  const track = (socket: Duplex): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };

  let outer: net.Server;
  let h1: http.Server | undefined;
  let h2: http2.Http2Server | http2.Http2SecureServer;
  if (opts.tls) {
    const secure = http2.createSecureServer({
      cert: opts.tls.cert,
      key: opts.tls.key,
      ...(opts.tls.clientCa !== undefined ? { ca: opts.tls.clientCa, requestCert: true, rejectUnauthorized: false } : {}),
      allowHTTP1: true,
      ALPNProtocols: ['h2', 'http/1.1'],
      settings: HTTP2_SETTINGS,
      maxSessionMemory: 64,
    });
    secure.on('request', handlers.request);
    if (handlers.upgrade) secure.on('upgrade', handlers.upgrade);
    if (handlers.connect) secure.on('connect' as 'request', handlers.connect as never);
    secure.on('secureConnection', track);
    secure.on('sessionError', () => undefined);
    secure.on('session', growSessionWindow);
    h2 = secure;
    outer = secure;
  } else {
    h1 = http.createServer({ maxHeaderSize: MAX_HEADER_SIZE, requireHostHeader: false }, handlers.request);
    configureHttp1(h1);
    const upgrade = handlers.upgrade;
    if (upgrade) {
      const server = h1;
      h1.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
        if (isWebSocketUpgrade(req)) upgrade(req, socket, head);
        else replayWithoutUpgrade(server, req, socket as net.Socket, head);
      });
    }
    if (handlers.connect) h1.on('connect', handlers.connect);
    h1.on('clientError', onClientError);
    const plain = http2.createServer({ settings: HTTP2_SETTINGS, maxSessionMemory: 64 });
    plain.on('request', handlers.request);
    plain.on('sessionError', () => undefined);
    plain.on('session', growSessionWindow);
    h2 = plain;
    const httpServer = h1;
    outer = net.createServer({ noDelay: true }, (socket) => {
      track(socket);
      sniff(socket, httpServer, plain);
    });
  }

  await new Promise<void>((resolve, reject) => {
    outer.once('error', reject);
    outer.listen(opts.port, opts.host, () => {
      outer.off('error', reject);
      resolve();
    });
  });
  const addr = outer.address() as net.AddressInfo;

  return {
    address: { host: addr.address, port: addr.port },
    tls: Boolean(opts.tls),
    openConnections: () => sockets.size,
    stopAccepting: () =>
      new Promise<void>((resolve) => {
        outer.close(() => resolve());
        h1?.closeIdleConnections();
        // HTTP/2 sessions get GOAWAY through close(); streams in flight finish.
        h2.close();
        // Cleartext h1 connections that go idle later are closed by keepAliveTimeout; nudge them now.
        for (const socket of sockets) if ((socket as net.Socket & { _httpMessage?: unknown })._httpMessage === null) socket.end();
      }),
    destroy: () => {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      outer.close();
    },
  };
}

/** Peek at the first bytes and hand the socket to the server that speaks its protocol. */
function sniff(socket: net.Socket, h1: http.Server, h2: http2.Http2Server): void {
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
    // any connection quiet for 66 s: an HTTP/1.1 request waiting on a slow upstream (timeouts go
    // up to 3600 s), an idle CONNECT tunnel.
    socket.setTimeout(0);
    socket.off('timeout', onIdle);
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
  socket.setTimeout(66_000);
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

/** Malformed requests get the status Node's parser chose, with a JSON body where we can write one. */
function onClientError(err: NodeJS.ErrnoException & { rawPacket?: Buffer }, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  let status = 400;
  let message = 'bad request';
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    status = 431;
    message = 'request header fields too large';
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT') {
    status = 408;
    message = 'request timeout';
  } else if (err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  } else if (err.code) {
    message = `bad request: ${err.code.replace(/^HPE_/, '').toLowerCase().replace(/_/g, ' ')}`;
  }
  const body = JSON.stringify({ status, message, code: status === 431 ? 'HEADERS_TOO_LARGE' : 'BAD_REQUEST', details: {}, id: '' });
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
