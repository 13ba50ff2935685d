/**
 * The client side of one HTTP/2 connection (RFC 9113; the framing both ends share is ./connection.ts),
 * just what unary gRPC calls need: a stream per call that sends one header block and one body and
 * receives headers, body and trailers. It exists
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
 *
 * Hardening: a request whose header list (RFC 9113 §6.5.2: octets of names and values plus 32 a
 * field) is above the server's SETTINGS_MAX_HEADER_LIST_SIZE fails locally and is never sent (before
 * the server's SETTINGS arrive the limit is unknown and taken as unlimited, as the RFC says); an
 * answer's decoded header list is bounded by the 64 KiB we advertise as ours: the block is still
 * decoded to keep HPACK's table in step, but nothing of it past the bound is kept and the stream is
 * reset (ENHANCE_YOUR_CALM), the call told why; DATA beyond our windows is FLOW_CONTROL_ERROR
 * (./connection.ts).
 */
import type { Socket } from 'node:net';
import { inReadBuffer } from '../read-buffer.js';
import {
  DATA,
  END_STREAM,
  H2Connection,
  H2Error,
  MAX_HEADER_BLOCK,
  MAX_STREAM_ID,
  PING,
  PREFACE,
  SETTINGS_ENABLE_PUSH,
  SETTINGS_INITIAL_WINDOW_SIZE,
  SETTINGS_MAX_HEADER_LIST_SIZE,
  STREAM_WINDOW,
  StreamBase,
  frame,
  openingFrames,
} from './connection.js';

export { H2Error } from './connection.js';

/** The decoded header list an answer may have: what our SETTINGS_MAX_HEADER_LIST_SIZE advertises. */
const MAX_HEADER_LIST = MAX_HEADER_BLOCK;

const OUR_SETTINGS = Buffer.concat([
  PREFACE,
  openingFrames([
    [SETTINGS_ENABLE_PUSH, 0],
    [SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW],
    [SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST],
  ]),
]);

/** What a stream's owner is told. */
export interface StreamOwner {
  /** A piece of the answer's body; returning false cancels the stream (it will not be told `closed`). */
  data(stream: H2Stream, chunk: Buffer): boolean;
  /** The stream is over: answered (`ended`), reset, or lost with its connection. */
  closed(stream: H2Stream): void;
}

/** One request/answer exchange. The fields describing the answer are read by the owner at `closed`. */
export class H2Stream extends StreamBase {
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
  /** Why we ended the stream ourselves (never sent, or reset by us with `rstCode`), if we did. */
  localError: string | undefined = undefined;
  open = false;

  constructor(
    readonly headerBlock: Buffer,
    body: Buffer,
    readonly owner: StreamOwner,
    /** The request's header list size as RFC 9113 §6.5.2 counts it (see `headerListSize`). */
    readonly headerListSize = 0,
  ) {
    super();
    this.body = body;
  }
}

export interface SessionEvents {
  /** The session is usable (TCP connected, and for TLS the handshake done with ALPN h2). */
  connected(): void;
  /** GOAWAY received or the connection is gone: send no new streams here. */
  unusable(reason: string): void;
}

/** Scratch for the few fields a block's decoding keeps, and the size of its header list so far. */
interface Fields {
  status: string | undefined;
  grpcStatus: string | undefined;
  grpcMessage: string | undefined;
  size: number;
}


export class H2Session extends H2Connection<H2Stream> {
  protected readonly peerName = 'server';
  private readonly waiting: H2Stream[] = [];
  private nextId = 1;
  private peerMaxStreams = Infinity;
  private pingWaiters: ((ok: boolean) => void)[] = [];
  private readonly fields: Fields = { status: undefined, grpcStatus: undefined, grpcMessage: undefined, size: 0 };
  /** No new streams: GOAWAY received, ids exhausted, or the connection ended. */
  draining = false;
  connected = false;

  constructor(
    socket: Socket,
    private readonly events: SessionEvents,
    secure: boolean,
  ) {
    super(socket);
    socket.on(secure ? 'secureConnect' : 'connect', () => {
      if (secure && (socket as import('node:tls').TLSSocket).alpnProtocol !== 'h2') {
        this.destroy('the server did not agree to HTTP/2 (ALPN h2)');
        return;
      }
      this.connected = true;
      this.events.connected();
    });
    // A cleartext socket is opened with `onread` and hands its bytes to `receive`: no 'data' events
    // (and no listener for them). A TLS socket reads through its stream.
    if (secure) socket.on('data', (chunk: Buffer) => this.onData(chunk));
    this.write(OUR_SETTINGS);
  }

  /** Bytes read by a socket opened with net.connect's `onread` (into the shared READ_BUFFER). */
  receive(bytes: Buffer): void {
    this.onData(bytes);
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
      if (!this.destroyed) this.resetFrame(stream.id, H2Error.CANCEL, stream.recvUnacked);
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

  protected override onPingAck(): void {
    for (const done of this.pingWaiters.splice(0)) done(true);
  }

  /** End the session at once; open streams are told, with `reason`. */
  override destroy(reason: string): void {
    if (this.destroyed) return;
    super.destroy(reason);
    this.draining = true;
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
    if (stream.headerListSize > this.peerMaxHeaderList) {
      // Never sent: the server said it would not take it (RFC 9113 §6.5.2; grpc-go fails it the same way).
      stream.localError = `request header list of ${stream.headerListSize} bytes is above the server's SETTINGS_MAX_HEADER_LIST_SIZE of ${this.peerMaxHeaderList}`;
      stream.owner.closed(stream);
      return;
    }
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
    // HEADERS, then the body as DATA frames beside their headers (one frame when it fits): the
    // flush copies the pieces into its one write.
    this.writeHeaderBlock(stream.id, stream.headerBlock, false);
    if (stream.body.length === 0) this.write(frame(DATA, END_STREAM, stream.id, undefined));
    else this.sendBody(stream);
  }

  private closeStream(stream: H2Stream): void {
    stream.open = false;
    this.streams.delete(stream.id);
  }

  private finishStream(stream: H2Stream): void {
    if (!stream.open) return;
    // The server answered before taking the whole request: nothing more will be sent.
    if (stream.sent < stream.body.length) this.resetFrame(stream.id, H2Error.NO_ERROR);
    this.closeStream(stream);
    stream.owner.closed(stream);
    this.startWaiting();
  }

  protected streamError(stream: H2Stream, code: number, why?: string): void {
    if (!stream.open) return;
    this.resetFrame(stream.id, code, stream.recvUnacked);
    this.closeStream(stream);
    stream.rstCode = code;
    if (why !== undefined) stream.localError = why;
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

  // ---- frames from the server --------------------------------------------------------------------

  protected onStreamData(s: H2Stream | undefined, id: number, data: Buffer, endStream: boolean): void {
    if (!s) {
      // A stream we never opened is idle (RFC 9113 §5.1); one we closed: its bytes count for the
      // connection only.
      if (id % 2 === 0 || id >= this.nextId) this.goAway(H2Error.PROTOCOL_ERROR, `DATA on idle stream ${id}`);
      return;
    }
    if (!s.responded) return this.streamError(s, H2Error.PROTOCOL_ERROR);
    // The call keeps its answer's bytes: copied out of a shared read buffer.
    if (data.length > 0 && !s.owner.data(s, inReadBuffer(data) ? Buffer.from(data) : data)) {
      this.closeStream(s);
      this.resetFrame(s.id, H2Error.CANCEL, s.recvUnacked);
      return this.startWaiting();
    }
    if (endStream) {
      s.ended = true;
      return this.finishStream(s);
    }
    this.ackData(s);
  }

  protected onReset(id: number, code: number): void {
    const s = this.streams.get(id);
    if (!s) return;
    s.rstCode = code;
    if (code === H2Error.REFUSED_STREAM) s.refused = true;
    this.closeStream(s);
    s.owner.closed(s);
    this.startWaiting();
  }

  protected readonly onField = (name: string, value: string): void => {
    const f = this.fields;
    // Past the bound nothing more is kept: the block is decoded to its end only to keep HPACK's
    // table in step (so a many-times-indexed grpc-message cannot grow without end).
    f.size += name.length + value.length + 32;
    if (f.size > MAX_HEADER_LIST) return;
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

  protected onHeaderBlock(id: number, endStream: boolean): void {
    const f = this.fields;
    const status = f.status;
    const grpcStatus = f.grpcStatus;
    const grpcMessage = f.grpcMessage;
    const size = f.size;
    f.status = f.grpcStatus = f.grpcMessage = undefined;
    f.size = 0;
    const s = this.streams.get(id);
    if (!s) return;
    if (size > MAX_HEADER_LIST) return this.streamError(s, H2Error.ENHANCE_YOUR_CALM, `answer header list above ${MAX_HEADER_LIST} bytes`);
    if (!s.responded) {
      const code = Number(status);
      if (!Number.isInteger(code) || code < 100 || code > 999) return this.streamError(s, H2Error.PROTOCOL_ERROR);
      if (code < 200) {
        if (endStream) return this.streamError(s, H2Error.PROTOCOL_ERROR);
        return; // informational: the answer follows
      }
      s.responded = true;
      s.status = code;
      if (grpcStatus !== undefined) {
        s.grpcStatus = grpcStatus;
        s.grpcMessage = grpcMessage;
      }
    } else {
      if (!endStream) return this.streamError(s, H2Error.PROTOCOL_ERROR); // trailers end the stream
      s.trailers = true;
      s.grpcStatus = grpcStatus;
      s.grpcMessage = grpcMessage;
    }
    if (endStream) {
      s.ended = true;
      this.finishStream(s);
    }
  }

  protected override onPeerMaxStreams(value: number): void {
    this.peerMaxStreams = value;
  }

  protected settingsApplied(): void {
    this.startWaiting();
  }

  protected onGoAway(lastId: number, code: number, debug: string): void {
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
}
