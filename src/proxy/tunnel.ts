/**
 * WebSocket upgrades and CONNECT tunnels as exchanges that last as long as the connection: the
 * answer that switched it (101, or 200 for CONNECT) is their status, and the payload bytes each way
 * are read off the upstream socket's own counters once the tunnel closes (no per-chunk work: the
 * sockets are piped). Also the raw-socket pieces both kinds share: answering on the socket before
 * it switched, and a CONNECT re-issued to a replica's own sidecar with the request's headers (so
 * the sidecar can authorize it and continue its trace) whose answer is relayed verbatim.
 * Nothing here throws; a socket error ends the tunnel.
 */
import http from 'node:http';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import type { OutgoingHttpHeaders } from 'node:http';
import type { HostPort } from '../routing/replicas.js';
import { errorBody } from '../filter/index.js';

export type TunnelKind = 'websocket' | 'connect';

/** The answer to a CONNECT the proxy itself opened (no header bytes). */
export const CONNECTION_ESTABLISHED = 'HTTP/1.1 200 Connection Established\r\n\r\n';

/** Longest answer head a sidecar may send to a relayed CONNECT. */
const MAX_HEAD = 64 * 1024;

/** Per-tunnel state of an exchange (`Exchange.tunnel`). */
export class Tunnel {
  /** Payload bytes from the client, after its request head (Envoy's request body bytes). */
  bytesIn = 0;
  /** Names plus values of the answer head the proxy wrote (Envoy's response header bytes). */
  responseHeaderBytes = 0;
  private upstream: net.Socket | undefined = undefined;
  private rxHead = 0;
  private txHead = 0;

  constructor(readonly kind: TunnelKind) {}

  /**
   * The upstream connection now carries the tunnel; `rxHead` / `txHead` are the bytes of it that
   * were heads (the upgrade answer and request), not payload.
   */
  carry(upstream: net.Socket, rxHead: number, txHead: number): void {
    this.upstream = upstream;
    this.rxHead = rxHead;
    this.txHead = txHead;
  }

  /** Payload bytes so far: from the client (`in`) and to it (`out`); zero before the switch. */
  counts(): { in: number; out: number } {
    const u = this.upstream;
    if (!u) return { in: 0, out: 0 };
    return { in: Math.max(0, u.bytesWritten - this.txHead), out: Math.max(0, u.bytesRead - this.rxHead) };
  }
}

/** Header bytes as Envoy counts them: names plus values, no framing. */
export function headerBytes(headers: http.IncomingHttpHeaders | OutgoingHttpHeaders): number {
  let n = 0;
  for (const name in headers) {
    const v = headers[name];
    if (v === undefined) continue;
    if (Array.isArray(v)) for (const x of v) n += name.length + x.length;
    else n += name.length + String(v).length;
  }
  return n;
}

/**
 * Answer an upgrade or CONNECT on its raw socket (the platform's JSON error shape) and close it.
 * Returns what was written (status 0: nothing, the socket was gone).
 */
export function rejectUpgrade(socket: Duplex, status: number, message: string, id: string, code = 'BAD_REQUEST'): { status: number; headerBytes: number; bodyBytes: number } {
  if (!socket.writable) {
    socket.destroy();
    return { status: 0, headerBytes: 0, bodyBytes: 0 };
  }
  const body = errorBody(status, message, code, id);
  const length = Buffer.byteLength(body);
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nconnection: close\r\n\r\n${body}`,
  );
  return { status, headerBytes: 'content-type'.length + 'application/json'.length + 'content-length'.length + String(length).length + 'connection'.length + 'close'.length, bodyBytes: length };
}

/** What a relayed CONNECT learned from the sidecar's answer. */
/**
 * A CONNECT answered by a TCP connection to `target`: once connected, `connected` (the tunnel's
 * bookkeeping), then 200 and the client's early bytes, and the two sockets piped; `failed` when the
 * connect fails before that (nothing was sent to the client); either side closing ends both.
 */
export function openTcpTunnel(
  socket: Duplex, head: Buffer, target: HostPort,
  hooks: { connected(upstream: net.Socket): void; failed(): void }, noDelay = false,
): void {
  const upstream = net.connect({ host: target.host, port: target.port, noDelay });
  let connected = false;
  upstream.once('connect', () => {
    connected = true;
    if (socket.destroyed) return void upstream.destroy();
    hooks.connected(upstream);
    socket.write(CONNECTION_ESTABLISHED);
    if (head.length) upstream.write(head);
    upstream.pipe(socket);
    socket.pipe(upstream);
  });
  upstream.on('error', () => {
    if (!connected && !socket.destroyed) hooks.failed();
    else socket.destroy();
  });
  socket.once('close', () => upstream.destroy());
}

export interface RelayedAnswer {
  readonly status: number;
  readonly headerBytes: number;
  /** Content-Length of the answer, when it had one (a refusal's body). */
  readonly bodyBytes: number;
}

export interface RelayHooks {
  /** The sidecar answered; its answer is on its way to the client and the sockets are piped. */
  answered(answer: RelayedAnswer): void;
  /** The sidecar could not be reached, or closed before answering; nothing was sent to the client. */
  failed(connected: boolean): void;
  /** Opens the connection to the sidecar (a mesh hop: TLS); default TCP. */
  dial?(): net.Socket;
}

/**
 * CONNECT `authority` through the replica's sidecar at `target`: the request head with `headers`
 * (the client's, the proxy's `x-forwarded-*` and `x-request-id`, trace context), then the client's
 * early bytes; the sidecar's answer, whatever it is, goes to the client verbatim and the two sockets
 * are piped (a refusal's body, then its close, reach the client as the sidecar sent them).
 */
export function relayConnect(tunnel: Tunnel, socket: Duplex, head: Buffer, target: HostPort, authority: string, headers: OutgoingHttpHeaders, hooks: RelayHooks): net.Socket {
  const upstream = hooks.dial?.() ?? net.connect(target.port, target.host);
  let connected = false;
  let answered = false;
  let requestHead = 0;
  upstream.once(hooks.dial ? 'secureConnect' : 'connect', () => {
    connected = true;
    if (socket.destroyed) return void upstream.destroy();
    let text = `CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n`;
    for (const name in headers) {
      if (name === 'host') continue;
      const v = headers[name];
      if (v === undefined) continue;
      for (const x of Array.isArray(v) ? v : [String(v)]) text += `${name}: ${x}\r\n`;
    }
    const bytes = Buffer.from(`${text}\r\n`, 'latin1');
    requestHead = bytes.length;
    upstream.write(bytes);
    if (head.length) upstream.write(head);
  });
  let seen: Buffer = Buffer.alloc(0);
  const onData = (chunk: Buffer): void => {
    seen = seen.length ? Buffer.concat([seen, chunk]) : chunk;
    const end = seen.indexOf('\r\n\r\n');
    if (end < 0) {
      if (seen.length > MAX_HEAD) upstream.destroy();
      return;
    }
    upstream.off('data', onData);
    upstream.pause();
    answered = true;
    const lines = seen.subarray(0, end).toString('latin1').split('\r\n');
    const status = Number(lines[0]!.split(' ')[1]) || 0;
    let bytes = 0;
    let bodyBytes = 0;
    for (let i = 1; i < lines.length; i++) {
      const colon = lines[i]!.indexOf(':');
      if (colon <= 0) continue;
      const name = lines[i]!.slice(0, colon).trim();
      const value = lines[i]!.slice(colon + 1).trim();
      bytes += name.length + value.length;
      if (name.toLowerCase() === 'content-length') bodyBytes = Number(value) || 0;
    }
    tunnel.carry(upstream, end + 4, requestHead);
    socket.write(seen);
    hooks.answered({ status, headerBytes: bytes, bodyBytes });
    upstream.pipe(socket);
    socket.pipe(upstream);
    upstream.resume();
  };
  upstream.on('data', onData);
  let failed = false;
  const fail = (): void => {
    if (answered || failed) return;
    failed = true;
    hooks.failed(connected);
  };
  upstream.on('error', () => {
    if (answered) socket.destroy();
    else fail();
  });
  upstream.once('close', fail);
  socket.once('close', () => upstream.destroy());
  return upstream;
}
