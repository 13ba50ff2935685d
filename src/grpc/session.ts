/**
 * The client side of one HTTP/2 connection (RFC 9113), just what unary gRPC calls need: a stream per
 * call that sends one header block and one body and receives headers, body and trailers. It exists
 * because `node:http2` costs more per stream than the whole proxied request (a Duplex stream, header
 * objects both ways, an async resource per request); here a call is a few frames written in one
 * buffer and a small record.
 *
 * What it does of the protocol:
 * - preface and SETTINGS (no push, a 1 MiB stream window, the connection window raised to 16 MiB),
 *   SETTINGS from the server applied and acknowledged (window size changes, frame size, concurrency:
 *   calls beyond SETTINGS_MAX_CONCURRENT_STREAMS wait for a free stream);
 * - flow control both ways: request bodies are split to the server's windows and frame size and wait
 *   for WINDOW_UPDATE; received DATA is given back with WINDOW_UPDATE per stream and connection;
 * - HEADERS + CONTINUATION decoded with HPACK (dynamic table, Huffman), 1xx answers skipped,
 *   trailers; padding; PRIORITY ignored; PUSH_PROMISE refused (push is off);
 * - PING answered; our own PING (a liveness probe) resolved by its ACK;
 * - RST_STREAM ends a stream with its code; GOAWAY lets streams up to the last id finish and marks the
 *   ones above it refused (never processed: safe to send again), and no new stream starts;
 * - protocol errors end the connection with GOAWAY and the RFC's error code.
 * Limits: frames up to 16 KiB (our SETTINGS_MAX_FRAME_SIZE stays the default), header blocks up to 64 KiB.
 */
import type { Socket } from 'node:net';
import { HpackDecoder, HpackError } from './hpack.js';

const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

const DATA = 0x0;
const HEADERS = 0x1;
const PRIORITY = 0x2;
const RST_STREAM = 0x3;
const SETTINGS = 0x4;
const PUSH_PROMISE = 0x5;
const PING = 0x6;
const GOAWAY = 0x7;
const WINDOW_UPDATE = 0x8;
const CONTINUATION = 0x9;

const END_STREAM = 0x1;
const ACK = 0x1;
const END_HEADERS = 0x4;
const PADDED = 0x8;
const PRIORITY_FLAG = 0x20;

const SETTINGS_HEADER_TABLE_SIZE = 0x1;
const SETTINGS_ENABLE_PUSH = 0x2;
const SETTINGS_MAX_CONCURRENT_STREAMS = 0x3;
const SETTINGS_INITIAL_WINDOW_SIZE = 0x4;
const SETTINGS_MAX_FRAME_SIZE = 0x5;
const SETTINGS_MAX_HEADER_LIST_SIZE = 0x6;

/** HTTP/2 error codes (RFC 9113 §7). */
export const H2Error = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  ENHANCE_YOUR_CALM: 0xb,
} as const;

const MAX_WINDOW = 0x7fffffff;
const MAX_STREAM_ID = 0x7fffffff;
const DEFAULT_WINDOW = 65_535;
const MIN_FRAME_SIZE = 16_384;
const MAX_FRAME_SIZE = 0xffffff;
/** What we accept: the protocol's default frame size, and header blocks up to this. */
const OUR_MAX_FRAME = MIN_FRAME_SIZE;
const MAX_HEADER_BLOCK = 64 * 1024;
const STREAM_WINDOW = 1 << 20;
const CONNECTION_WINDOW = 16 << 20;

function frameHeader(out: Buffer, at: number, length: number, type: number, flags: number, streamId: number): void {
  out[at] = length >>> 16;
  out[at + 1] = (length >>> 8) & 0xff;
  out[at + 2] = length & 0xff;
  out[at + 3] = type;
  out[at + 4] = flags;
  out.writeUInt32BE(streamId, at + 5);
}

function frame(type: number, flags: number, streamId: number, payload: Buffer | undefined): Buffer {
  const length = payload ? payload.length : 0;
  const out = Buffer.allocUnsafe(9 + length);
  frameHeader(out, 0, length, type, flags, streamId);
  if (payload) payload.copy(out, 9);
  return out;
}

function u32(value: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeUInt32BE(value, 0);
  return b;
}

const OUR_SETTINGS = (() => {
  const entries: [number, number][] = [
    [SETTINGS_ENABLE_PUSH, 0],
    [SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW],
    [SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_BLOCK],
  ];
  const payload = Buffer.allocUnsafe(entries.length * 6);
  entries.forEach(([id, value], i) => {
    payload.writeUInt16BE(id, i * 6);
    payload.writeUInt32BE(value, i * 6 + 2);
  });
  return Buffer.concat([
    PREFACE,
    frame(SETTINGS, 0, 0, payload),
    frame(WINDOW_UPDATE, 0, 0, u32(CONNECTION_WINDOW - DEFAULT_WINDOW)),
  ]);
})();

/** What a stream's owner is told. */
export interface StreamOwner {
  /** A piece of the answer's body; returning false cancels the stream (it will not be told `closed`). */
  data(stream: H2Stream, chunk: Buffer): boolean;
  /** The stream is over: answered (`ended`), reset, or lost with its connection. */
  closed(stream: H2Stream): void;
}

/** One request/answer exchange. The fields describing the answer are read by the owner at `closed`. */
export class H2Stream {
  id = 0;
  /** Answer headers seen (a final, non-1xx status). */
  responded = false;
  status = 0;
  /** grpc-status / grpc-message of the headers (when the answer is trailers-only) or of the trailers. */
  grpcStatus: string | undefined = undefined;
  grpcMessage: string | undefined = undefined;
  trailers = false;
  /** The server ended its side. */
  ended = false;
  /** RST_STREAM code received, or -1. */
  rstCode = -1;
  /** Never processed by the server (REFUSED_STREAM, or above a GOAWAY's last stream): safe to send again. */
  refused = false;
  /** Why the connection ended under the stream, if it did. */
  connectionError: string | undefined = undefined;
  sendWindow = 0;
  private recvUnacked = 0;
  /** Body still to send (flow control), from `sent`. */
  body: Buffer;
  sent = 0;
  open = false;

  constructor(
    readonly headerBlock: Buffer,
    body: Buffer,
    readonly owner: StreamOwner,
  ) {
    this.body = body;
  }

  /** @internal Count received DATA; returns the stream WINDOW_UPDATE increment due, or 0. */
  received(length: number): number {
    this.recvUnacked += length;
    if (this.recvUnacked < STREAM_WINDOW / 2) return 0;
    const n = this.recvUnacked;
    this.recvUnacked = 0;
    return n;
  }
}

export interface SessionEvents {
  /** The session is usable (TCP connected, and for TLS the handshake done with ALPN h2). */
  connected(): void;
  /** GOAWAY received or the connection is gone: send no new streams here. */
  unusable(reason: string): void;
}

/** Scratch for the few fields a block's decoding keeps. */
interface Fields {
  status: string | undefined;
  grpcStatus: string | undefined;
  grpcMessage: string | undefined;
}

export class H2Session {
  private readonly streams = new Map<number, H2Stream>();
  private readonly waiting: H2Stream[] = [];
  private readonly hpack = new HpackDecoder();
  private nextId = 1;
  private peerMaxStreams = Infinity;
  private peerInitialWindow = DEFAULT_WINDOW;
  private peerMaxFrame = MIN_FRAME_SIZE;
  private connSendWindow = DEFAULT_WINDOW;
  private connRecvUnacked = 0;
  private inbox: Buffer | undefined;
  private sawSettings = false;
  /** A header block being continued: stream, END_STREAM flag, parts so far. */
  private continued: { id: number; endStream: boolean; parts: Buffer[]; size: number } | undefined;
  private outbox: Buffer[] = [];
  private flushQueued = false;
  private pingWaiters: ((ok: boolean) => void)[] = [];
  private readonly fields: Fields = { status: undefined, grpcStatus: undefined, grpcMessage: undefined };
  /** No new streams: GOAWAY received, ids exhausted, or the connection ended. */
  draining = false;
  destroyed = false;
  connected = false;

  constructor(
    private readonly socket: Socket,
    private readonly events: SessionEvents,
    secure: boolean,
  ) {
    socket.setNoDelay(true);
    socket.on(secure ? 'secureConnect' : 'connect', () => {
      if (secure && (socket as import('node:tls').TLSSocket).alpnProtocol !== 'h2') {
        this.destroy('the server did not agree to HTTP/2 (ALPN h2)');
        return;
      }
      this.connected = true;
      this.events.connected();
    });
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.destroy(err.message));
    socket.on('close', () => this.destroy('connection closed'));
    this.write(OUR_SETTINGS);
  }

  /** Unref the socket: an idle session must not keep the process alive. */
  unref(): void {
    this.socket.unref();
  }

  /** Start a stream (or queue it until the server allows one more). */
  request(stream: H2Stream): void {
    if (this.destroyed || this.draining) {
      stream.refused = true;
      stream.connectionError = 'session closed';
      stream.owner.closed(stream);
      return;
    }
    if (this.streams.size >= this.peerMaxStreams) {
      this.waiting.push(stream);
      return;
    }
    this.start(stream);
  }

  /** The owner gives up on a stream: RST_STREAM(CANCEL) if it was sent; never `closed` afterwards. */
  cancel(stream: H2Stream): void {
    if (stream.open) {
      this.closeStream(stream);
      if (!this.destroyed) this.write(frame(RST_STREAM, 0, stream.id, u32(H2Error.CANCEL)));
      this.startWaiting();
      return;
    }
    const i = this.waiting.indexOf(stream);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  /** PING the server; `done(true)` on its ACK, `done(false)` if the session ends first. */
  ping(done: (ok: boolean) => void): void {
    if (this.destroyed) return done(false);
    this.pingWaiters.push(done);
    if (this.pingWaiters.length === 1) this.write(frame(PING, 0, 0, Buffer.alloc(8)));
  }

  /** End the session at once; open streams are told, with `reason`. */
  destroy(reason: string): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.draining = true;
    this.socket.destroy();
    this.events.unusable(reason);
    for (const done of this.pingWaiters.splice(0)) done(false);
    const lost = [...this.streams.values(), ...this.waiting.splice(0)];
    this.streams.clear();
    for (const s of lost) {
      if (!s.open) s.refused = true;
      s.open = false;
      s.connectionError = reason;
      s.owner.closed(s);
    }
  }

  /** Close when the open streams are done (no new ones). */
  close(): void {
    this.draining = true;
    if (this.streams.size === 0) this.goAway(H2Error.NO_ERROR, 'closed');
  }

  private start(stream: H2Stream): void {
    if (this.nextId > MAX_STREAM_ID) {
      this.draining = true;
      this.events.unusable('out of stream ids');
      stream.refused = true;
      stream.connectionError = 'out of stream ids';
      stream.owner.closed(stream);
      return;
    }
    stream.id = this.nextId;
    this.nextId += 2;
    stream.open = true;
    stream.sendWindow = this.peerInitialWindow;
    this.streams.set(stream.id, stream);
    const block = stream.headerBlock;
    const body = stream.body;
    if (block.length <= this.peerMaxFrame && this.fits(stream, body.length)) {
      // The common case: HEADERS and the whole body in one DATA frame, one buffer.
      const out = Buffer.allocUnsafe(18 + block.length + body.length);
      frameHeader(out, 0, block.length, HEADERS, END_HEADERS, stream.id);
      block.copy(out, 9);
      frameHeader(out, 9 + block.length, body.length, DATA, END_STREAM, stream.id);
      body.copy(out, 18 + block.length);
      stream.sendWindow -= body.length;
      this.connSendWindow -= body.length;
      stream.sent = body.length;
      this.write(out);
      return;
    }
    for (let at = 0; at < block.length || at === 0; at += this.peerMaxFrame) {
      const last = at + this.peerMaxFrame >= block.length;
      this.write(frame(at === 0 ? HEADERS : CONTINUATION, last ? END_HEADERS : 0, stream.id, block.subarray(at, at + this.peerMaxFrame)));
      if (last) break;
    }
    if (body.length === 0) this.write(frame(DATA, END_STREAM, stream.id, undefined));
    else this.sendBody(stream);
  }

  private fits(stream: H2Stream, n: number): boolean {
    return n <= this.peerMaxFrame && n <= stream.sendWindow && n <= this.connSendWindow;
  }

  /** Send what the windows allow of a stream's (non-empty) body; the last frame ends the stream. */
  private sendBody(stream: H2Stream): void {
    const body = stream.body;
    while (stream.sent < body.length) {
      const n = Math.min(body.length - stream.sent, this.peerMaxFrame, stream.sendWindow, this.connSendWindow);
      if (n <= 0) return;
      const last = stream.sent + n === body.length;
      this.write(frame(DATA, last ? END_STREAM : 0, stream.id, body.subarray(stream.sent, stream.sent + n)));
      stream.sent += n;
      stream.sendWindow -= n;
      this.connSendWindow -= n;
    }
  }

  private unsentStreams(): void {
    for (const s of this.streams.values()) {
      if (s.sent < s.body.length) this.sendBody(s);
      if (this.connSendWindow <= 0) return;
    }
  }

  private write(buf: Buffer): void {
    if (this.destroyed) return;
    this.outbox.push(buf);
    if (!this.flushQueued) {
      this.flushQueued = true;
      setImmediate(this.flush);
    }
  }

  private readonly flush = (): void => {
    this.flushQueued = false;
    const out = this.outbox;
    if (out.length === 0 || this.destroyed) return;
    this.outbox = [];
    this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  };

  private closeStream(stream: H2Stream): void {
    stream.open = false;
    this.streams.delete(stream.id);
  }

  private finishStream(stream: H2Stream): void {
    if (!stream.open) return;
    // The server answered before taking the whole request: nothing more will be sent.
    if (stream.sent < stream.body.length) this.write(frame(RST_STREAM, 0, stream.id, u32(H2Error.NO_ERROR)));
    this.closeStream(stream);
    stream.owner.closed(stream);
    this.startWaiting();
  }

  private resetStream(stream: H2Stream, code: number): void {
    if (!stream.open) return;
    this.write(frame(RST_STREAM, 0, stream.id, u32(code)));
    this.closeStream(stream);
    stream.rstCode = code;
    stream.owner.closed(stream);
    this.startWaiting();
  }

  private startWaiting(): void {
    while (this.waiting.length > 0 && this.streams.size < this.peerMaxStreams && !this.draining) this.start(this.waiting.shift()!);
    if (this.draining && this.streams.size === 0 && !this.destroyed) {
      for (const s of this.waiting.splice(0)) {
        s.refused = true;
        s.connectionError = 'session closed';
        s.owner.closed(s);
      }
      this.goAway(H2Error.NO_ERROR, 'closed');
    }
  }

  /** Connection error: GOAWAY with the code, then the end. */
  private goAway(code: number, reason: string): void {
    if (this.destroyed) return;
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(0, 0);
    payload.writeUInt32BE(code, 4);
    this.write(frame(GOAWAY, 0, 0, payload));
    this.flush();
    this.socket.end();
    this.destroy(reason);
  }

  private onData(chunk: Buffer): void {
    let buf = this.inbox ? Buffer.concat([this.inbox, chunk]) : chunk;
    let at = 0;
    while (buf.length - at >= 9 && !this.destroyed) {
      const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
      if (length > OUR_MAX_FRAME) return this.goAway(H2Error.FRAME_SIZE_ERROR, `frame of ${length} bytes, above ${OUR_MAX_FRAME}`);
      if (buf.length - at < 9 + length) break;
      const type = buf[at + 3]!;
      const flags = buf[at + 4]!;
      const id = buf.readUInt32BE(at + 5) & MAX_STREAM_ID;
      const payload = buf.subarray(at + 9, at + 9 + length);
      at += 9 + length;
      this.onFrame(type, flags, id, payload);
    }
    if (this.destroyed) return;
    this.inbox = at < buf.length ? Buffer.from(buf.subarray(at)) : undefined;
    if (this.connRecvUnacked >= CONNECTION_WINDOW / 2) {
      this.write(frame(WINDOW_UPDATE, 0, 0, u32(this.connRecvUnacked)));
      this.connRecvUnacked = 0;
    }
  }

  private onFrame(type: number, flags: number, id: number, payload: Buffer): void {
    if (!this.sawSettings && type !== SETTINGS) return this.goAway(H2Error.PROTOCOL_ERROR, 'the server did not start with SETTINGS');
    if (this.continued && type !== CONTINUATION) return this.goAway(H2Error.PROTOCOL_ERROR, 'a header block was interrupted');
    switch (type) {
      case DATA:
        return this.onDataFrame(flags, id, payload);
      case HEADERS:
        return this.onHeaders(flags, id, payload);
      case CONTINUATION: {
        const c = this.continued;
        if (!c || c.id !== id) return this.goAway(H2Error.PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
        c.parts.push(payload);
        c.size += payload.length;
        if (c.size > MAX_HEADER_BLOCK) return this.goAway(H2Error.ENHANCE_YOUR_CALM, `header block above ${MAX_HEADER_BLOCK} bytes`);
        if (flags & END_HEADERS) {
          this.continued = undefined;
          this.onHeaderBlock(id, Buffer.concat(c.parts, c.size), c.endStream);
        }
        return;
      }
      case PRIORITY:
        return;
      case RST_STREAM: {
        if (id === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (payload.length !== 4) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM of the wrong size');
        const s = this.streams.get(id);
        if (!s) return;
        s.rstCode = payload.readUInt32BE(0);
        if (s.rstCode === H2Error.REFUSED_STREAM) s.refused = true;
        this.closeStream(s);
        s.owner.closed(s);
        return this.startWaiting();
      }
      case SETTINGS:
        return this.onSettings(flags, id, payload);
      case PUSH_PROMISE:
        return this.goAway(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE with push disabled');
      case PING:
        if (id !== 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'PING of the wrong size');
        if (flags & ACK) {
          for (const done of this.pingWaiters.splice(0)) done(true);
        } else {
          this.write(frame(PING, ACK, 0, payload));
        }
        return;
      case GOAWAY:
        return this.onGoAway(id, payload);
      case WINDOW_UPDATE:
        return this.onWindowUpdate(id, payload);
      default:
        // Unknown frame types are ignored (RFC 9113 §4.1).
        return;
    }
  }

  private onDataFrame(flags: number, id: number, payload: Buffer): void {
    if (id === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    this.connRecvUnacked += payload.length;
    const s = this.streams.get(id);
    if (!s) return; // a stream we cancelled: its bytes still count for the connection
    let data = payload;
    if (flags & PADDED) {
      const pad = payload[0] ?? 0;
      if (payload.length === 0 || pad >= payload.length) return this.goAway(H2Error.PROTOCOL_ERROR, 'padding longer than the frame');
      data = payload.subarray(1, payload.length - pad);
    }
    if (!s.responded) return this.resetStream(s, H2Error.PROTOCOL_ERROR);
    if (data.length > 0 && !s.owner.data(s, data)) {
      this.closeStream(s);
      this.write(frame(RST_STREAM, 0, s.id, u32(H2Error.CANCEL)));
      return this.startWaiting();
    }
    if (flags & END_STREAM) {
      s.ended = true;
      return this.finishStream(s);
    }
    const due = s.received(payload.length);
    if (due > 0) this.write(frame(WINDOW_UPDATE, 0, id, u32(due)));
  }

  private onHeaders(flags: number, id: number, payload: Buffer): void {
    if (id === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'HEADERS on stream 0');
    let start = 0;
    let end = payload.length;
    if (flags & PADDED) {
      const pad = payload[0] ?? 0;
      start = 1;
      end -= pad;
    }
    if (flags & PRIORITY_FLAG) start += 5;
    if (start > end) return this.goAway(H2Error.PROTOCOL_ERROR, 'HEADERS padding or priority longer than the frame');
    const fragment = payload.subarray(start, end);
    const endStream = (flags & END_STREAM) !== 0;
    if (flags & END_HEADERS) return this.onHeaderBlock(id, fragment, endStream);
    this.continued = { id, endStream, parts: [Buffer.from(fragment)], size: fragment.length };
  }

  private readonly onField = (name: string, value: string): void => {
    const f = this.fields;
    switch (name) {
      case ':status':
        f.status = value;
        return;
      case 'grpc-status':
        f.grpcStatus = value;
        return;
      case 'grpc-message':
        f.grpcMessage = f.grpcMessage === undefined ? value : `${f.grpcMessage},${value}`;
        return;
      default:
        return;
    }
  };

  private onHeaderBlock(id: number, block: Buffer, endStream: boolean): void {
    const f = this.fields;
    f.status = f.grpcStatus = f.grpcMessage = undefined;
    // Decoded whatever the stream's state: the table must stay in step with the server's.
    try {
      this.hpack.decode(block, this.onField);
    } catch (err) {
      if (err instanceof HpackError) return this.goAway(H2Error.COMPRESSION_ERROR, `header block: ${err.message}`);
      throw err;
    }
    const s = this.streams.get(id);
    if (!s) return;
    if (!s.responded) {
      const status = Number(f.status);
      if (!Number.isInteger(status) || status < 100 || status > 999) return this.resetStream(s, H2Error.PROTOCOL_ERROR);
      if (status < 200) {
        if (endStream) return this.resetStream(s, H2Error.PROTOCOL_ERROR);
        return; // informational: the answer follows
      }
      s.responded = true;
      s.status = status;
      if (f.grpcStatus !== undefined) {
        s.grpcStatus = f.grpcStatus;
        s.grpcMessage = f.grpcMessage;
      }
    } else {
      if (!endStream) return this.resetStream(s, H2Error.PROTOCOL_ERROR); // trailers end the stream
      s.trailers = true;
      s.grpcStatus = f.grpcStatus;
      s.grpcMessage = f.grpcMessage;
    }
    if (endStream) {
      s.ended = true;
      this.finishStream(s);
    }
  }

  private onSettings(flags: number, id: number, payload: Buffer): void {
    if (id !== 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & ACK) {
      if (payload.length !== 0) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if (payload.length % 6 !== 0) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'SETTINGS of the wrong size');
    this.sawSettings = true;
    for (let at = 0; at < payload.length; at += 6) {
      const key = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      switch (key) {
        case SETTINGS_HEADER_TABLE_SIZE:
          break; // we never index: the server's table size does not matter to us
        case SETTINGS_ENABLE_PUSH:
          if (value > 1) return this.goAway(H2Error.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH above 1');
          break;
        case SETTINGS_MAX_CONCURRENT_STREAMS:
          this.peerMaxStreams = value;
          break;
        case SETTINGS_INITIAL_WINDOW_SIZE: {
          if (value > MAX_WINDOW) return this.goAway(H2Error.FLOW_CONTROL_ERROR, 'SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1');
          const delta = value - this.peerInitialWindow;
          this.peerInitialWindow = value;
          for (const s of this.streams.values()) {
            s.sendWindow += delta;
            if (s.sendWindow > MAX_WINDOW) return this.goAway(H2Error.FLOW_CONTROL_ERROR, 'a stream window above 2^31-1');
          }
          break;
        }
        case SETTINGS_MAX_FRAME_SIZE:
          if (value < MIN_FRAME_SIZE || value > MAX_FRAME_SIZE) return this.goAway(H2Error.PROTOCOL_ERROR, 'SETTINGS_MAX_FRAME_SIZE out of range');
          this.peerMaxFrame = value;
          break;
        default:
          break; // including SETTINGS_MAX_HEADER_LIST_SIZE: our header blocks are small
      }
    }
    this.write(frame(SETTINGS, ACK, 0, undefined));
    this.unsentStreams();
    this.startWaiting();
  }

  private onGoAway(id: number, payload: Buffer): void {
    if (id !== 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
    if (payload.length < 8) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'GOAWAY too short');
    const lastId = payload.readUInt32BE(0) & MAX_STREAM_ID;
    const code = payload.readUInt32BE(4);
    const debug = payload.subarray(8).toString('utf8');
    const reason = `GOAWAY (code ${code}${debug ? `: ${debug}` : ''})`;
    this.draining = true;
    this.events.unusable(reason);
    for (const s of [...this.streams.values()]) {
      if (s.id <= lastId) continue;
      s.refused = true;
      s.connectionError = reason;
      this.closeStream(s);
      s.owner.closed(s);
    }
    this.startWaiting();
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    if (payload.length !== 4) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE of the wrong size');
    const increment = payload.readUInt32BE(0) & MAX_WINDOW;
    if (id === 0) {
      if (increment === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.connSendWindow += increment;
      if (this.connSendWindow > MAX_WINDOW) return this.goAway(H2Error.FLOW_CONTROL_ERROR, 'connection window above 2^31-1');
      return this.unsentStreams();
    }
    const s = this.streams.get(id);
    if (!s) return;
    if (increment === 0) return this.resetStream(s, H2Error.PROTOCOL_ERROR);
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) return this.resetStream(s, H2Error.FLOW_CONTROL_ERROR);
    if (s.sent < s.body.length) this.sendBody(s);
  }
}
