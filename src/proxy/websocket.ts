/**
 * WebSocket (HTTP/1.1 Upgrade) forwarding through http-proxy-3's `ws()`, the one place that library
 * serves. Every call passes an error callback: without one an upstream ECONNREFUSED would crash the
 * process. An upstream that cannot be reached before the upgrade is answered 503 on the raw socket.
 * The caller hears how the upstream answered (`WebSocketHooks`): the hook runs before http-proxy-3
 * writes that answer to the client, so it may still change the answer's headers.
 */
import type { Agent, IncomingHttpHeaders, IncomingMessage, ClientRequest } from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { HostPort } from '../routing/replicas.js';
import { ERRORS } from '../filter/index.js';

export interface WebSocketHooks {
  /**
   * The upstream answered the upgrade request: `status` 101 with the socket that now carries the
   * tunnel (`headBytes`: bytes of it that were the answer head, not payload; `requestBytes`: those
   * of the request head), or another status whose answer is relayed and the connection closed.
   * `headers` may be changed: they are what the client gets.
   */
  answered(status: number, headers: IncomingHttpHeaders, upstream?: { socket: net.Socket; headBytes: number; requestBytes: number }): void;
  /** The upstream failed: before it answered (`beforeAnswer`: nothing was sent to the client), or after. */
  failed(beforeAnswer: boolean, err: Error): void;
}

const proxy = createProxyServer({ ws: true, xfwd: true, prependPath: false });
// Errors are handled per call; the server-level listener only keeps EventEmitter from throwing.
proxy.on('error', () => undefined);

/** The hooks of the upgrades in flight, found from their request when http-proxy-3 sends it upstream. */
const pending = new WeakMap<IncomingMessage, WebSocketHooks['answered']>();

// Emitted synchronously right after the upstream request is created, before http-proxy-3 adds its
// own listeners: ours run first, while the client has been sent nothing yet.
proxy.on('proxyReqWs', (proxyReq: ClientRequest, req: IncomingMessage) => {
  const answered = pending.get(req);
  if (!answered) return;
  pending.delete(req);
  proxyReq.once('upgrade', (res: IncomingMessage, socket: net.Socket, head: Buffer) => {
    answered(res.statusCode ?? 101, res.headers, { socket, headBytes: socket.bytesRead - head.length, requestBytes: socket.bytesWritten });
  });
  proxyReq.once('response', (res: IncomingMessage) => answered(res.statusCode ?? 0, res.headers));
});

export function proxyWebSocket(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  target: HostPort,
  reject: (status: number, message: string) => void,
  hooks?: WebSocketHooks,
  /** Dial through this agent (a mesh hop: TLS with the caller's certificate). */
  agent?: Agent,
): void {
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  let answered = false;
  pending.set(req, (status, headers, upstream) => {
    answered = true;
    hooks?.answered(status, headers, upstream);
  });
  proxy.ws(req, socket, head, { target: `${agent ? 'https' : 'http'}://${host}:${target.port}`, ...(agent ? { agent } : {}) }, (err: Error) => {
    hooks?.failed(!answered, err);
    // The upstream never answered: nothing was written for this request, so an HTTP answer is still possible.
    if (!answered && socket.writable) reject(ERRORS.UPSTREAM_RESET.status, ERRORS.UPSTREAM_RESET.message);
    else socket.destroy();
  });
}
