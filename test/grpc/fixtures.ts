/**
 * Raw HTTP/2 peers on loopback sockets for the tests of src/grpc/: a fake server the unary client
 * connects to, and a raw client for the unary server. Each side writes whatever frames a test builds
 * (valid or not) and reads the other side's frames; every wait ends at the frame it waits for or at
 * the socket's close, never at a timer, so a test cannot hang on a peer that went away.
 */
import net from 'node:net';
import type { TapLike } from '../helpers/harness.js';

export const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
export const T = { DATA: 0, HEADERS: 1, PRIORITY: 2, RST_STREAM: 3, SETTINGS: 4, PUSH_PROMISE: 5, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 } as const;
export const F = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

export interface Frame {
  readonly type: number;
  readonly flags: number;
  readonly id: number;
  readonly payload: Buffer;
}

export function rawFrame(type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id >>> 0, 5);
  return Buffer.concat([h, payload]);
}

export function settingsFrame(entries: readonly (readonly [number, number])[] = []): Buffer {
  const p = Buffer.alloc(entries.length * 6);
  entries.forEach(([k, v], i) => {
    p.writeUInt16BE(k, i * 6);
    p.writeUInt32BE(v >>> 0, i * 6 + 2);
  });
  return rawFrame(T.SETTINGS, 0, 0, p);
}

export const u32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
};

/** `n` bytes of DATA on stream `id` in frames of at most 16 KiB (no END_STREAM). */
export function dataFrames(id: number, n: number, frameSize = 16_384): Buffer {
  const out: Buffer[] = [];
  for (let left = n; left > 0; left -= frameSize) out.push(rawFrame(T.DATA, 0, id, Buffer.alloc(Math.min(frameSize, left), 0x61)));
  return Buffer.concat(out);
}

/** One end of a raw connection: frames in, bytes out. */
export class RawPeer {
  readonly frames: Frame[] = [];
  /** Bytes received that were not a whole frame (or the preface). */
  private pending = Buffer.alloc(0);
  private prefaceLeft: number;
  private waiters: { pred: (f: Frame) => boolean; done: (f: Frame | undefined) => void }[] = [];
  closed = false;
  readonly whenClosed: Promise<void>;

  constructor(readonly socket: net.Socket, expectPreface: boolean) {
    this.prefaceLeft = expectPreface ? PREFACE.length : 0;
    socket.on('error', () => undefined);
    socket.on('data', (d: Buffer) => this.onBytes(d));
    this.whenClosed = new Promise((resolve) =>
      socket.once('close', () => {
        this.closed = true;
        for (const w of this.waiters.splice(0)) w.done(undefined);
        resolve();
      }),
    );
  }

  private onBytes(d: Buffer): void {
    let buf = this.pending.length ? Buffer.concat([this.pending, d]) : d;
    if (this.prefaceLeft > 0) {
      const n = Math.min(this.prefaceLeft, buf.length);
      this.prefaceLeft -= n;
      buf = buf.subarray(n);
    }
    let at = 0;
    while (buf.length - at >= 9) {
      const len = buf.readUIntBE(at, 3);
      if (buf.length - at < 9 + len) break;
      const f: Frame = { type: buf[at + 3]!, flags: buf[at + 4]!, id: buf.readUInt32BE(at + 5) & 0x7fffffff, payload: Buffer.from(buf.subarray(at + 9, at + 9 + len)) };
      at += 9 + len;
      this.frames.push(f);
      this.waiters = this.waiters.filter((w) => {
        if (!w.pred(f)) return true;
        w.done(f);
        return false;
      });
    }
    this.pending = Buffer.from(buf.subarray(at));
  }

  send(...bufs: Buffer[]): boolean {
    if (this.closed || this.socket.destroyed) return false;
    return this.socket.write(bufs.length === 1 ? bufs[0]! : Buffer.concat(bufs));
  }

  /** The first frame (already received or to come) that `pred` accepts, or undefined once the socket closed. */
  next(pred: (f: Frame) => boolean, from = 0): Promise<Frame | undefined> {
    const seen = this.frames.slice(from).find(pred);
    if (seen) return Promise.resolve(seen);
    if (this.closed) return Promise.resolve(undefined);
    return new Promise((done) => this.waiters.push({ pred, done }));
  }

  /**
   * PING the other side and wait for its ACK, or for a GOAWAY or the close before it: what came
   * first (the ACK proves every frame sent before the PING was processed without ending the connection).
   */
  async ping(): Promise<'ack' | 'goaway' | 'closed'> {
    const mark = Buffer.from('fuzzping');
    this.send(rawFrame(T.PING, 0, 0, mark));
    const f = await this.next((f) => f.type === T.GOAWAY || (f.type === T.PING && (f.flags & F.ACK) !== 0 && f.payload.equals(mark)));
    return f === undefined ? 'closed' : f.type === T.GOAWAY ? 'goaway' : 'ack';
  }

  /** Error codes of the GOAWAY frames received. */
  goAwayCodes(): number[] {
    return this.frames.filter((f) => f.type === T.GOAWAY && f.payload.length >= 8).map((f) => f.payload.readUInt32BE(4));
  }
}

/** A raw TCP server playing an HTTP/2 server: `onPeer` gets each connection (the client's preface is skipped). */
export async function fakeServer(t: TapLike, onPeer: (peer: RawPeer) => void): Promise<{ port: number; peers: RawPeer[] }> {
  const peers: RawPeer[] = [];
  const server = net.createServer((socket) => {
    const peer = new RawPeer(socket, true);
    peers.push(peer);
    onPeer(peer);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const p of peers) p.socket.destroy();
    server.close();
  });
  return { port: (server.address() as net.AddressInfo).port, peers };
}

/** A raw client connected to `port`, its preface sent. */
export async function rawClient(t: TapLike, port: number): Promise<RawPeer> {
  const socket = net.connect(port, '127.0.0.1');
  const peer = new RawPeer(socket, false);
  t.teardown(() => socket.destroy());
  await new Promise<void>((resolve) => {
    socket.once('connect', resolve);
    socket.once('close', resolve);
  });
  peer.send(PREFACE);
  return peer;
}
