/**
 * Hostile-input helpers: a raw HTTP/1.1 client (bytes exactly as written, the whole answer back, and
 * whether the proxy closed the connection), a raw HTTP/2 client that frames by hand (HPACK literals
 * without indexing, so any header — invalid ones included — goes out as written, and RST_STREAM at
 * will), and an upstream that records every request it sees. Loopback only, every wait bounded.
 */
import http from 'node:http';
import net from 'node:net';
import type { TapLike } from '../helpers/harness.js';

export interface RawAnswer {
  /** Everything the proxy wrote, latin1. */
  readonly text: string;
  /** Status lines in order (pipelined answers, or an answer spliced into another). */
  readonly statuses: number[];
  /** The proxy closed the connection (FIN or reset) before we gave up waiting. */
  readonly closed: boolean;
  readonly ms: number;
}

/**
 * Write `parts` (with `gapMs` between them, and each later one only once `before(received)` holds
 * when given) on a new connection and collect the answer until the proxy closes or `waitMs` passes.
 */
export function raw(
  port: number,
  parts: string | Buffer | (string | Buffer)[],
  opts: { gapMs?: number; waitMs?: number; before?: (received: string) => boolean } = {},
): Promise<RawAnswer> {
  const list = Array.isArray(parts) ? parts : [parts];
  const { gapMs = 50, waitMs = 2000 } = opts;
  return new Promise((resolve) => {
    const t0 = performance.now();
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    let closed = false;
    let done = false;
    const finish = (): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const statuses = [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));
      resolve({ text, statuses, closed, ms: performance.now() - t0 });
    };
    const timer = setTimeout(finish, waitMs);
    socket.on('connect', async () => {
      for (let i = 0; i < list.length && !closed; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, gapMs));
        // `before`: what must have arrived before a later part is written (an event, not a time).
        while (i > 0 && opts.before && !opts.before(text) && !closed) await new Promise((r) => setTimeout(r, 10));
        if (!socket.destroyed) socket.write(list[i]!);
      }
    });
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('end', () => {
      closed = true;
      finish();
    });
    socket.on('close', () => {
      closed = true;
      finish();
    });
    socket.on('error', () => undefined);
  });
}

export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  rawHeaders: string[];
  body: string;
  /** The request was cut before its body ended. */
  aborted: boolean;
  /** The request is over, complete or cut (`aborted` is final from then on). */
  closed: boolean;
}

/** An upstream that records every request and answers 200 with `ok` (after its body). */
export async function startRecorder(t: TapLike, answer?: (req: http.IncomingMessage, res: http.ServerResponse) => boolean): Promise<{ port: number; seen: Seen[]; open(): number }> {
  const seen: Seen[] = [];
  const sockets = new Set<net.Socket>();
  // As large a head as the proxy accepts, so the upstream's own limit never answers for it.
  const server = http.createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body: '', aborted: false, closed: false };
    seen.push(entry);
    if (answer?.(req, res)) return;
    req.on('data', (c: Buffer) => (entry.body += c.toString('latin1')));
    req.on('error', () => undefined);
    req.on('close', () => {
      if (!req.complete) entry.aborted = true;
      entry.closed = true;
    });
    req.on('end', () => res.end('ok'));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
  });
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, seen, open: () => sockets.size };
}

// ---- HTTP/2 by hand ----------------------------------------------------------------------------

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8 } as const;
export const H2_ERROR = { NO_ERROR: 0, PROTOCOL_ERROR: 1, INTERNAL_ERROR: 2, REFUSED_STREAM: 7, CANCEL: 8, ENHANCE_YOUR_CALM: 11 } as const;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');

function hpackInt(value: number, prefixBits: number, flags: number): Buffer {
  const max = (1 << prefixBits) - 1;
  if (value < max) return Buffer.from([flags | value]);
  const out = [flags | max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest & 127) | 128);
    rest >>= 7;
  }
  out.push(rest);
  return Buffer.from(out);
}

/** A header block of literals without indexing (RFC 7541 §6.2.2), names and values as given. */
export function hpack(headers: [string, string][]): Buffer {
  const parts: Buffer[] = [];
  for (const [name, value] of headers) {
    const n = Buffer.from(name, 'latin1');
    const v = Buffer.from(value, 'latin1');
    parts.push(Buffer.from([0]), hpackInt(n.length, 7, 0), n, hpackInt(v.length, 7, 0), v);
  }
  return Buffer.concat(parts);
}

export function frame(type: number, flags: number, stream: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

export function headersFrame(stream: number, headers: [string, string][], endStream = true): Buffer {
  return frame(FRAME.HEADERS, 0x4 | (endStream ? 0x1 : 0), stream, hpack(headers));
}

export function rstFrame(stream: number, code: number = H2_ERROR.CANCEL): Buffer {
  const p = Buffer.alloc(4);
  p.writeUInt32BE(code);
  return frame(FRAME.RST_STREAM, 0, stream, p);
}

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly stream: number;
  readonly payload: Buffer;
}

export interface RawH2 {
  readonly socket: net.Socket;
  readonly frames: Frame[];
  readonly closed: boolean;
  /** Write unless the connection is gone. */
  write(data: Buffer): boolean;
  /** The first GOAWAY received: its last stream id and error code. */
  goaway(): { lastStream: number; code: number } | undefined;
  /** RST_STREAM error code → count. */
  resets(): Record<number, number>;
  /** Streams that got a HEADERS frame back. */
  answered(): Set<number>;
  close(): void;
}

/** Connect, send the preface and empty SETTINGS, ACK the server's SETTINGS and PINGs. */
export async function connectH2(t: TapLike, port: number): Promise<RawH2> {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  const frames: Frame[] = [];
  let buf = Buffer.alloc(0);
  let closed = false;
  let settled: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (settled = resolve));
  socket.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 9) {
      const len = buf.readUIntBE(0, 3);
      if (buf.length < 9 + len) break;
      const f = { type: buf[3]!, flags: buf[4]!, stream: buf.readUInt32BE(5) & 0x7fffffff, payload: buf.subarray(9, 9 + len) };
      buf = buf.subarray(9 + len);
      frames.push(f);
      if (f.type === FRAME.SETTINGS && !(f.flags & 1)) {
        socket.write(frame(FRAME.SETTINGS, 1, 0));
        settled();
      }
      if (f.type === FRAME.PING && !(f.flags & 1)) socket.write(frame(FRAME.PING, 1, 0, f.payload));
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => {
    closed = true;
    settled();
  });
  socket.write(Buffer.concat([PREFACE, frame(FRAME.SETTINGS, 0, 0)]));
  await Promise.race([ready, new Promise((r) => setTimeout(r, 2000))]);
  return {
    socket,
    frames,
    get closed() {
      return closed;
    },
    write: (data) => (closed || socket.destroyed ? false : socket.write(data)),
    goaway: () => {
      const g = frames.find((f) => f.type === FRAME.GOAWAY);
      return g && { lastStream: g.payload.readUInt32BE(0) & 0x7fffffff, code: g.payload.readUInt32BE(4) };
    },
    resets: () => {
      const out: Record<number, number> = {};
      for (const f of frames) if (f.type === FRAME.RST_STREAM) out[f.payload.readUInt32BE(0)] = (out[f.payload.readUInt32BE(0)] ?? 0) + 1;
      return out;
    },
    answered: () => new Set(frames.filter((f) => f.type === FRAME.HEADERS).map((f) => f.stream)),
    close: () => socket.destroy(),
  };
}

/** The request headers of a plain GET, pseudo-headers first. */
export function get(authority: string, path = '/', extra: [string, string][] = []): [string, string][] {
  return [[':method', 'GET'], [':scheme', 'http'], [':path', path], [':authority', authority], ...extra];
}
