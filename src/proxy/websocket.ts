/**
 * WebSocket (HTTP/1.1 Upgrade) forwarding through http-proxy-3's `ws()`, the one place that library
 * serves. Every call passes an error callback: without one an upstream ECONNREFUSED would crash the
 * process. An upstream that cannot be reached before the upgrade is answered 503 on the raw socket.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { HostPort } from '../routing/replicas.js';
import { ERRORS } from './errors.js';

const proxy = createProxyServer({ ws: true, xfwd: true, prependPath: false });
// Errors are handled per call; the server-level listener only keeps EventEmitter from throwing.
proxy.on('error', () => undefined);

export function proxyWebSocket(
  req: IncomingMessage,
  socket: Duplex,
  head: Buffer,
  target: HostPort,
  reject: (status: number, message: string) => void,
): void {
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  proxy.ws(req, socket, head, { target: `http://${host}:${target.port}` }, () => {
    // Nothing written to the client yet: the upgrade never happened, so an HTTP answer is still possible.
    const written = (socket as Duplex & { bytesWritten?: number }).bytesWritten ?? 0;
    if (written === 0 && socket.writable) reject(ERRORS.UPSTREAM_RESET.status, ERRORS.UPSTREAM_RESET.message);
    else socket.destroy();
  });
}
