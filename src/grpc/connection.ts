/**
 * One HTTP/2 connection (RFC 9113), the part both ends share: the unary client's sessions
 * (./session.ts) and the unary server's connections (./server.ts) extend it with what each side does
 * with streams.
 *
 * Shared here: frames read off the socket (at most 16 KiB each: our SETTINGS_MAX_FRAME_SIZE stays the
 * default), header blocks assembled from HEADERS + CONTINUATION (padding and priority stripped, at
 * most 64 KiB) and decoded with HPACK whatever the stream's state, so the dynamic table stays in step;
 * the peer's SETTINGS applied and acknowledged (window size changes, frame size, the peer's
 * SETTINGS_MAX_HEADER_LIST_SIZE kept for the sides to honour when they send); PING answered;
 * flow control both ways (bodies split to the peer's windows and frame size and resumed on
 * WINDOW_UPDATE, received DATA given back with WINDOW_UPDATE per stream and connection); frames
 * written in one batch per event-loop turn; protocol errors end the connection with GOAWAY and the
 * RFC's error code. Unknown frame types and PRIORITY are ignored, PUSH_PROMISE is an error (push is
 * off both ways).
 *
 * Hardening against a hostile peer: DATA beyond the receive window we advertised is
 * FLOW_CONTROL_ERROR (RFC 9113 §6.9.1), GOAWAY when it overruns the connection's window and
 * RST_STREAM when it overruns an open stream's (padding counts, as the RFC says). We give windows
 * back as DATA arrives, so a peer reaches those bounds only by sending blind; the bound that bites is
 * a stream we reset: its window is never given back, so a peer that goes on sending on it (a
 * cancelled call flooded with DATA) passes what the stream had left and gets
 * GOAWAY(FLOW_CONTROL_ERROR) (the last 1024 reset streams are remembered; older ones count for the
 * connection only). What one connection holds of the peer's bytes is bounded by one frame (16 KiB) of
 * unread input plus one header block (64 KiB:
 * a longer run of CONTINUATION is ENHANCE_YOUR_CALM); a peer that sends 1,000 PINGs or SETTINGS
 * while our output to it never drains (it does not read their answers) is ENHANCE_YOUR_CALM, as
 * nghttp2 bounds its queued answers.
 */
import type { Socket } from 'node:net';
import { HpackDecoder, HpackError } from './hpack.js';
import { inReadBuffer } from '../read-buffer.js';
import {
  ACK,
  CONNECTION_WINDOW,
  CONTINUATION,
  DATA,
  DEFAULT_WINDOW,
  END_HEADERS,
  END_STREAM,
  GOAWAY,
  H2Error,
  HEADERS,
  MAX_FRAME_SIZE,
  MAX_HEADER_BLOCK,
  MAX_STREAM_ID,
  MAX_WINDOW,
  MIN_FRAME_SIZE,
  OUR_MAX_FRAME,
  PADDED,
  PING,
  PRIORITY,
  PRIORITY_FLAG,
  PUSH_PROMISE,
  RST_STREAM,
  SETTINGS,
  SETTINGS_ENABLE_PUSH,
  SETTINGS_HEADER_TABLE_SIZE,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_CONCURRENT_STREAMS,
  SETTINGS_MAX_FRAME_SIZE,
  SETTINGS_MAX_HEADER_LIST_SIZE,
  STREAM_WINDOW,
  WINDOW_UPDATE,
  frame,
  frameHeader,
  u32,
} from './frames.js';

export * from './frames.js';

/**
 * PINGs and SETTINGS (each owes an answer) taken while our output never drained: one more ends the
 * connection, since a peer that floods them without reading would grow our write buffer without end.
 * A size of the socket's buffer would not do: a large body to a slow reader fills it lawfully.
 */
const MAX_ANSWERS_BACKLOGGED = 1000;
/** Reset streams whose leftover receive window is remembered (the oldest forgotten first). */
const MAX_RESET_WINDOWS = 1024;

/** What both ends keep of a stream: its id, what it may still send, what it received. */
export class StreamBase {
  id = 0;
  sendWindow = 0;
  /** Body still to send (flow control), from `sent`. */
  body: Buffer = EMPTY;
  sent = 0;
  /** Sent after the body with END_STREAM (a server's trailers); without one the last DATA ends the stream. */
  trailerBlock: Buffer | undefined = undefined;
  /**
   * DATA received (padding included) since our last WINDOW_UPDATE for the stream: what the peer
   * used of the window we advertised (STREAM_WINDOW), so more than that is a flow-control error.
   */
  recvUnacked = 0;
}

const EMPTY = Buffer.alloc(0);

export abstract class H2Connection<S extends StreamBase> {
  protected readonly streams = new Map<number, S>();
  protected readonly hpack = new HpackDecoder();
  protected peerInitialWindow = DEFAULT_WINDOW;
  protected peerMaxFrame = MIN_FRAME_SIZE;
  protected connSendWindow = DEFAULT_WINDOW;
  /** The peer's SETTINGS_MAX_HEADER_LIST_SIZE: unlimited until it says otherwise (RFC 9113 §6.5.2). */
  protected peerMaxHeaderList = Infinity;
  /**
   * DATA received since our last connection WINDOW_UPDATE. Every update gives back exactly this, so
   * the window the peer may still use is CONNECTION_WINDOW minus it.
   */
  private connRecvUnacked = 0;
  /** Streams we reset while the peer may still send: the receive window each had left. */
  private readonly resetWindows = new Map<number, number>();
  /** PINGs and SETTINGS answered since our output last drained. */
  private answersBacklogged = 0;
  private inbox: Buffer | undefined;
  private sawSettings = false;
  /** A header block being continued: stream, END_STREAM flag, parts so far. */
  private continued: { id: number; endStream: boolean; parts: Buffer[]; size: number } | undefined;
  private outbox: Buffer[] = [];
  private flushQueued = false;
  destroyed = false;

  constructor(protected readonly socket: Socket) {
    socket.setNoDelay(true);
    socket.on('error', (err) => this.destroy(err.message));
    socket.on('close', () => this.destroy('connection closed'));
  }

  /** End the connection at once (subclasses tell their streams, then call this). */
  destroy(_reason: string): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.socket.destroy();
  }

  // ---- what each side does -----------------------------------------------------------------------

  /** The peer's first frame must be SETTINGS; `who` names the peer in the error. */
  protected abstract readonly peerName: string;
  /** A complete header block on stream `id` (already HPACK-decoded through `onField`). */
  protected abstract onHeaderBlock(id: number, endStream: boolean): void;
  /** Called for each decoded field of a header block, before `onHeaderBlock`. */
  protected abstract readonly onField: (name: string, value: string) => void;
  /**
   * DATA for stream `id` (padding removed), `stream` its record if it is open; both windows are
   * counted (and were not overrun) already.
   */
  protected abstract onStreamData(stream: S | undefined, id: number, data: Buffer, endStream: boolean): void;
  protected abstract onReset(id: number, code: number): void;
  protected abstract onGoAway(lastId: number, code: number, debug: string): void;
  /** The peer's SETTINGS were applied: bodies may move on, a stream limit may have changed. */
  protected abstract settingsApplied(): void;
  protected onPeerMaxStreams(_value: number): void {}
  protected onPingAck(): void {}
  /** A stream's body (and trailer block) went out in full through `sendBody`. */
  protected onBodySent(_stream: S): void {}

  // ---- writing -----------------------------------------------------------------------------------

  protected write(buf: Buffer): void {
    if (this.destroyed) return;
    this.outbox.push(buf);
    if (!this.flushQueued) {
      this.flushQueued = true;
      setImmediate(this.flush);
    }
  }

  protected readonly flush = (): void => {
    this.flushQueued = false;
    const out = this.outbox;
    if (out.length === 0 || this.destroyed) return;
    this.outbox = [];
    this.socket.write(out.length === 1 ? out[0]! : Buffer.concat(out));
  };

  /** A header block as HEADERS (+ CONTINUATION beyond the peer's frame size). */
  protected writeHeaderBlock(id: number, block: Buffer, endStream: boolean): void {
    const flags = endStream ? END_STREAM : 0;
    if (block.length <= this.peerMaxFrame) return this.write(frame(HEADERS, flags | END_HEADERS, id, block));
    for (let at = 0; at < block.length; at += this.peerMaxFrame) {
      const last = at + this.peerMaxFrame >= block.length;
      this.write(frame(at === 0 ? HEADERS : CONTINUATION, (at === 0 ? flags : 0) | (last ? END_HEADERS : 0), id, block.subarray(at, at + this.peerMaxFrame)));
    }
  }

  /** Does `n` bytes of body fit in one DATA frame the windows allow now? */
  protected fits(stream: S, n: number): boolean {
    return n <= this.peerMaxFrame && n <= stream.sendWindow && n <= this.connSendWindow;
  }

  /** Count `n` body bytes as sent in one go (the caller wrote them). */
  protected consumed(stream: S, n: number): void {
    stream.sendWindow -= n;
    this.connSendWindow -= n;
    stream.sent += n;
  }

  /**
   * Send what the windows allow of a stream's body; the last DATA ends the stream, or is followed by
   * the stream's trailer block. Returns true once everything (trailers included) was written.
   */
  protected sendBody(stream: S): boolean {
    const body = stream.body;
    while (stream.sent < body.length) {
      const n = Math.min(body.length - stream.sent, this.peerMaxFrame, stream.sendWindow, this.connSendWindow);
      if (n <= 0) return false;
      const last = stream.sent + n === body.length;
      // The frame header on its own and the body's piece as it is: the flush copies both into its write.
      const head = Buffer.allocUnsafe(9);
      frameHeader(head, 0, n, DATA, last && !stream.trailerBlock ? END_STREAM : 0, stream.id);
      this.write(head);
      this.write(body.subarray(stream.sent, stream.sent + n));
      this.consumed(stream, n);
    }
    if (stream.trailerBlock) {
      this.writeHeaderBlock(stream.id, stream.trailerBlock, true);
      stream.trailerBlock = undefined;
    }
    this.onBodySent(stream);
    return true;
  }

  /** Bodies waiting for window: called when the windows grew. */
  protected unsentBodies(): void {
    for (const s of this.streams.values()) {
      if (s.sent < s.body.length || s.trailerBlock) this.sendBody(s);
      if (this.connSendWindow <= 0) return;
    }
  }

  /**
   * RST_STREAM for stream `id`, `used` the bytes it received since its last WINDOW_UPDATE: DATA the
   * peer sent before it saw the reset may still come, up to the window the stream had left.
   */
  protected resetFrame(id: number, code: number, used = 0): void {
    this.write(frame(RST_STREAM, 0, id, u32(code)));
    if (this.resetWindows.size >= MAX_RESET_WINDOWS) this.resetWindows.delete(this.resetWindows.keys().next().value!);
    this.resetWindows.set(id, STREAM_WINDOW - used);
  }

  /** Connection error (or a clean end): GOAWAY with the code and `lastId`, then the end. */
  protected goAway(code: number, reason: string, lastId = 0): void {
    if (this.destroyed) return;
    const payload = Buffer.alloc(8);
    payload.writeUInt32BE(lastId, 0);
    payload.writeUInt32BE(code, 4);
    this.write(frame(GOAWAY, 0, 0, payload));
    this.flush();
    this.socket.end();
    this.destroy(reason);
  }

  // ---- reading -----------------------------------------------------------------------------------

  protected onData(chunk: Buffer): void {
    const buf = this.inbox ? Buffer.concat([this.inbox, chunk]) : chunk;
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
    if (!this.sawSettings && type !== SETTINGS) return this.goAway(H2Error.PROTOCOL_ERROR, `the ${this.peerName} did not start with SETTINGS`);
    if (this.continued && type !== CONTINUATION) return this.goAway(H2Error.PROTOCOL_ERROR, 'a header block was interrupted');
    switch (type) {
      case DATA:
        return this.onDataFrame(flags, id, payload);
      case HEADERS:
        return this.onHeaders(flags, id, payload);
      case CONTINUATION: {
        const c = this.continued;
        if (!c || c.id !== id) return this.goAway(H2Error.PROTOCOL_ERROR, 'CONTINUATION without HEADERS');
        // Kept until END_HEADERS, which may come in a later read: copied out of a shared read buffer.
        c.parts.push(inReadBuffer(payload) ? Buffer.from(payload) : payload);
        c.size += payload.length;
        if (c.size > MAX_HEADER_BLOCK) return this.goAway(H2Error.ENHANCE_YOUR_CALM, `header block above ${MAX_HEADER_BLOCK} bytes`);
        if (flags & END_HEADERS) {
          this.continued = undefined;
          this.headerBlock(id, Buffer.concat(c.parts, c.size), c.endStream);
        }
        return;
      }
      case PRIORITY:
        return;
      case RST_STREAM:
        if (id === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'RST_STREAM on stream 0');
        if (payload.length !== 4) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'RST_STREAM of the wrong size');
        this.resetWindows.delete(id);
        return this.onReset(id, payload.readUInt32BE(0));
      case SETTINGS:
        return this.onSettings(flags, id, payload);
      case PUSH_PROMISE:
        return this.goAway(H2Error.PROTOCOL_ERROR, 'PUSH_PROMISE with push disabled');
      case PING:
        if (id !== 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'PING on a stream');
        if (payload.length !== 8) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'PING of the wrong size');
        if (flags & ACK) return this.onPingAck();
        if (!this.mayAnswer()) return this.goAway(H2Error.ENHANCE_YOUR_CALM, 'PINGs while our answers go unread');
        return this.write(frame(PING, ACK, 0, payload));
      case GOAWAY: {
        if (id !== 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'GOAWAY on a stream');
        if (payload.length < 8) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'GOAWAY too short');
        return this.onGoAway(payload.readUInt32BE(0) & MAX_STREAM_ID, payload.readUInt32BE(4), payload.subarray(8).toString('utf8'));
      }
      case WINDOW_UPDATE:
        return this.onWindowUpdate(id, payload);
      default:
        // Unknown frame types are ignored (RFC 9113 §4.1).
        return;
    }
  }

  private onDataFrame(flags: number, id: number, payload: Buffer): void {
    if (id === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'DATA on stream 0');
    // The whole frame counts against both windows, padding included (RFC 9113 §6.9.1), and on the
    // connection's whatever the stream's state.
    this.connRecvUnacked += payload.length;
    if (this.connRecvUnacked > CONNECTION_WINDOW) return this.goAway(H2Error.FLOW_CONTROL_ERROR, `DATA beyond the connection window of ${CONNECTION_WINDOW} bytes`);
    let data = payload;
    if (flags & PADDED) {
      const pad = payload[0] ?? 0;
      if (payload.length === 0 || pad >= payload.length) return this.goAway(H2Error.PROTOCOL_ERROR, 'padding longer than the frame');
      data = payload.subarray(1, payload.length - pad);
    }
    const stream = this.streams.get(id);
    if (stream !== undefined) {
      stream.recvUnacked += payload.length;
      // Our SETTINGS raised the stream window from the default, never lowered it: a peer that has
      // not applied them yet has less window than this, never more.
      if (stream.recvUnacked > STREAM_WINDOW) return this.streamError(stream, H2Error.FLOW_CONTROL_ERROR, `DATA beyond the stream window of ${STREAM_WINDOW} bytes`);
    } else {
      const left = this.resetWindows.get(id);
      if (left !== undefined) {
        if (left < payload.length) return this.goAway(H2Error.FLOW_CONTROL_ERROR, `DATA on reset stream ${id} beyond the window it had left`);
        if (flags & END_STREAM) this.resetWindows.delete(id);
        else this.resetWindows.set(id, left - payload.length);
      }
    }
    this.onStreamData(stream, id, data, (flags & END_STREAM) !== 0);
  }

  /** May one more PING or SETTINGS be answered? Not past MAX_ANSWERS_BACKLOGGED while our output never drained. */
  private mayAnswer(): boolean {
    if (this.socket.writableLength === 0) this.answersBacklogged = 0;
    return ++this.answersBacklogged <= MAX_ANSWERS_BACKLOGGED;
  }

  /** Give back a stream's received DATA when enough has arrived. */
  protected ackData(stream: S): void {
    if (stream.recvUnacked < STREAM_WINDOW / 2) return;
    this.write(frame(WINDOW_UPDATE, 0, stream.id, u32(stream.recvUnacked)));
    stream.recvUnacked = 0;
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
    if (flags & END_HEADERS) return this.headerBlock(id, fragment, endStream);
    this.continued = { id, endStream, parts: [Buffer.from(fragment)], size: fragment.length };
  }

  private headerBlock(id: number, block: Buffer, endStream: boolean): void {
    // Decoded whatever the stream's state: the table must stay in step with the peer's.
    try {
      this.hpack.decode(block, this.onField);
    } catch (err) {
      if (err instanceof HpackError) return this.goAway(H2Error.COMPRESSION_ERROR, `header block: ${err.message}`);
      throw err;
    }
    this.onHeaderBlock(id, endStream);
  }

  private onSettings(flags: number, id: number, payload: Buffer): void {
    if (id !== 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'SETTINGS on a stream');
    if (flags & ACK) {
      if (payload.length !== 0) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'SETTINGS ACK with a payload');
      return;
    }
    if (payload.length % 6 !== 0) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'SETTINGS of the wrong size');
    if (!this.mayAnswer()) return this.goAway(H2Error.ENHANCE_YOUR_CALM, 'SETTINGS while our answers go unread');
    this.sawSettings = true;
    for (let at = 0; at < payload.length; at += 6) {
      const key = payload.readUInt16BE(at);
      const value = payload.readUInt32BE(at + 2);
      switch (key) {
        case SETTINGS_HEADER_TABLE_SIZE:
          break; // we never index: the peer's table size does not matter to us
        case SETTINGS_ENABLE_PUSH:
          if (value > 1) return this.goAway(H2Error.PROTOCOL_ERROR, 'SETTINGS_ENABLE_PUSH above 1');
          break;
        case SETTINGS_MAX_CONCURRENT_STREAMS:
          this.onPeerMaxStreams(value);
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
        case SETTINGS_MAX_HEADER_LIST_SIZE:
          this.peerMaxHeaderList = value;
          break;
        default:
          break;
      }
    }
    this.write(frame(SETTINGS, ACK, 0, undefined));
    this.unsentBodies();
    this.settingsApplied();
  }

  private onWindowUpdate(id: number, payload: Buffer): void {
    if (payload.length !== 4) return this.goAway(H2Error.FRAME_SIZE_ERROR, 'WINDOW_UPDATE of the wrong size');
    const increment = payload.readUInt32BE(0) & MAX_WINDOW;
    if (id === 0) {
      if (increment === 0) return this.goAway(H2Error.PROTOCOL_ERROR, 'WINDOW_UPDATE of 0');
      this.connSendWindow += increment;
      if (this.connSendWindow > MAX_WINDOW) return this.goAway(H2Error.FLOW_CONTROL_ERROR, 'connection window above 2^31-1');
      return this.unsentBodies();
    }
    const s = this.streams.get(id);
    if (!s) return;
    if (increment === 0) return this.streamError(s, H2Error.PROTOCOL_ERROR);
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) return this.streamError(s, H2Error.FLOW_CONTROL_ERROR, 'a WINDOW_UPDATE took the stream window above 2^31-1');
    if (s.sent < s.body.length || s.trailerBlock) this.sendBody(s);
  }

  /** A stream error (RFC 9113 §5.4.2): RST_STREAM with the code, and the stream is over; `why` is ours to tell. */
  protected abstract streamError(stream: S, code: number, why?: string): void;
}
