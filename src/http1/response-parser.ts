/**
 * An incremental parser for HTTP/1.1 responses (RFC 9112) read from an upstream connection, one
 * response per request sent. It finds the head, checks it strictly (status line, field names and
 * values, one framing), and hands on the body as slices of the buffers read, without copying:
 * `Content-Length`, `chunked` (with trailers), or everything up to the connection's end. Interim
 * 1xx answers are skipped. Any violation is returned as an `UpstreamProtocolError` and leaves the
 * parser dead: the connection it reads cannot be trusted any further.
 *
 * Framing follows RFC 9112 §6.3 and Envoy's strict defaults: a response with both `Content-Length`
 * and `Transfer-Encoding`, with a transfer coding other than `chunked`, or with differing lengths is
 * an error, not a guess.
 */
import {
  DIGITS, INCOMPLETE, badByteAt, badHeadMessage, contentLengthValue, fieldName, isDigit, isOWS,
  keepAliveOf, keepAliveTimeout, parseTrailers, scanHead, type HeaderMap,
} from './fields.js';

export type { HeaderMap };


/** Receives one response. */
export interface ResponseSink {
  onHead(status: number, headers: HeaderMap): void;
  /**
   * A slice of the body (a view into the buffer read: copy it to keep it past the response). `last`:
   * the body ends with this slice (its `Content-Length` is reached) and `onComplete` follows at once.
   */
  onBody(chunk: Buffer, last: boolean): void;
  /** The response is complete; `trailers` of a chunked body that carried any. */
  onComplete(trailers: HeaderMap | undefined): void;
}

export class UpstreamProtocolError extends Error {
  override name = 'UpstreamProtocolError';
  readonly code = 'UPSTREAM_PROTOCOL_ERROR';
}

const enum State {
  /** No request is waiting for an answer: any byte is an error. */
  Idle,
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkDataEnd,
  Trailers,
  UntilClose,
  Dead,
}

/**
 * A chunk-size line (its CRLF taken off): hex size, then extensions `;name[=token|"quoted"]` (not
 * interpreted; RFC 9112 §7.1.1). No whitespace anywhere in it: llhttp refuses the BWS the grammar
 * allows, and a reader that takes more than the one after it is a reader that frames otherwise.
 */
const CHUNK_SIZE =
  /^([0-9A-Fa-f]{1,15})(?:;[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:=(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+|"(?:[\t \x21\x23-\x5b\x5d-\x7e\x80-\xff]|\\[\t\x20-\x7e\x80-\xff])*"))?)*$/;
/** `Transfer-Encoding` that frames a body as chunked: the one coding, any case, trailing spaces (llhttp reads `chunked\t` as another coding). */
const CHUNKED = /^chunked *$/i;
/** A chunk-size line (with its extensions) longer than this is refused. */
const MAX_CHUNK_LINE = 4096;
/** Field names remembered by position, per parser (a connection's upstream repeats its own). */
const MAX_REMEMBERED_FIELDS = 64;


export class ResponseParser {
  private state = State.Idle;
  private sink: ResponseSink | undefined = undefined;
  private noBody = false;
  /** Bytes of a head (or chunk line, or trailers) split over reads. */
  private pending: Buffer | undefined = undefined;
  private remaining = 0;
  private headBytes = 0;
  /**
   * Where a forbidden byte of a head still incomplete is (from the head's start), or -1: the next
   * read's scan starts there, so the byte fails the head once its line is complete instead of being
   * passed over as already scanned.
   */
  private badAt = -1;
  /** Whether the connection may carry another request after the current response. */
  keepAlive = true;
  /** The upstream's `Keep-Alive: timeout=N` in milliseconds, when it sent one. */
  keepAliveTimeoutMs: number | undefined = undefined;
  /** Field names of the last answer by position: as received, and lower-cased. */
  private readonly rawNames: string[] = [];
  private readonly names: string[] = [];
  /** The last `Keep-Alive` value parsed (an upstream sends the same one on every answer). */
  private lastHint: string | undefined = undefined;
  private lastHintMs: number | undefined = undefined;
  /** Bytes that followed the last complete response in the same read (a protocol error to reuse). */
  trailingBytes = 0;
  /** Any byte arrived for the current request. */
  gotBytes = false;

  constructor(private readonly maxHeadSize: number) {}

  /** A request was written: parse its response into `sink`. `noBody` for HEAD requests. */
  expect(sink: ResponseSink, noBody: boolean): void {
    this.sink = sink;
    this.noBody = noBody;
    this.state = State.Head;
    this.pending = undefined;
    this.headBytes = 0;
    this.badAt = -1;
    this.trailingBytes = 0;
    this.gotBytes = false;
    this.keepAlive = true;
  }

  /**
   * How many body bytes the next read may bring, at most `max`: 0 while a head is awaited (or no
   * answer at all), the rest of a `Content-Length` body, else `max` (a chunked body, or one read to
   * the close).
   */
  bodyAhead(max: number): number {
    switch (this.state) {
      case State.Length:
        return Math.min(max, this.remaining);
      case State.ChunkSize:
      case State.ChunkData:
      case State.ChunkDataEnd:
      case State.Trailers:
      case State.UntilClose:
        return max;
      default:
        return 0;
    }
  }

  /** Copy the bytes kept for the next read, which may be a view of a buffer the caller reuses. */
  ownPending(): void {
    if (this.pending !== undefined) this.pending = Buffer.from(this.pending);
  }

  /** Whether a response is in progress (a request was sent and its answer has not completed). */
  get busy(): boolean {
    return this.state !== State.Idle && this.state !== State.Dead;
  }

  /** Feed bytes read from the connection. Returns the error that killed the parser, if any. */
  execute(data: Buffer): UpstreamProtocolError | undefined {
    if (data.length === 0) return undefined;
    if (this.state === State.Dead) return new UpstreamProtocolError('the connection already failed');
    if (this.state === State.Idle) return this.fail('the upstream sent bytes no request asked for');
    this.gotBytes = true;
    let offset = 0;
    while (offset < data.length) {
      switch (this.state as State) {
        case State.Head: {
          const next = this.readHead(data, offset);
          if (next < 0) return (this.state as State) === State.Dead ? this.deadError : undefined;
          offset = next;
          break;
        }
        case State.Length: {
          const n = Math.min(this.remaining, data.length - offset);
          this.remaining -= n;
          const chunk = offset === 0 && n === data.length ? data : data.subarray(offset, offset + n);
          offset += n;
          this.sink!.onBody(chunk, this.remaining === 0);
          if (this.remaining === 0 && this.state === State.Length) this.complete(undefined, data.length - offset);
          break;
        }
        case State.UntilClose: {
          this.sink!.onBody(offset === 0 ? data : data.subarray(offset), false);
          offset = data.length;
          break;
        }
        case State.ChunkSize:
        case State.ChunkDataEnd:
        case State.Trailers: {
          const next = this.readLine(data, offset);
          if (next < 0) return (this.state as State) === State.Dead ? this.deadError : undefined;
          offset = next;
          break;
        }
        case State.ChunkData: {
          const n = Math.min(this.remaining, data.length - offset);
          this.remaining -= n;
          this.sink!.onBody(data.subarray(offset, offset + n), false);
          offset += n;
          if (this.remaining === 0 && this.state === State.ChunkData) this.state = State.ChunkDataEnd;
          break;
        }
        case State.Idle:
          // A complete response followed by more bytes in the same read.
          this.trailingBytes = data.length - offset;
          return undefined;
        case State.Dead:
          return this.deadError;
      }
    }
    return undefined;
  }

  /** The connection ended. Completes a body read to the close; anything else cut short is an error. */
  finish(): UpstreamProtocolError | undefined {
    if (this.state === State.UntilClose) {
      this.complete(undefined, 0);
      return undefined;
    }
    if (this.state === State.Idle || this.state === State.Dead) return undefined;
    return this.fail('the upstream closed the connection before the response was complete');
  }

  private deadError = new UpstreamProtocolError('malformed response');

  private fail(message: string): UpstreamProtocolError {
    this.state = State.Dead;
    this.sink = undefined;
    this.pending = undefined;
    this.deadError = new UpstreamProtocolError(message);
    return this.deadError;
  }

  /** The response is no longer wanted (the request was aborted): nothing more is delivered. */
  abandon(): void {
    this.state = State.Dead;
    this.sink = undefined;
    this.pending = undefined;
    this.deadError = new UpstreamProtocolError('the response was abandoned');
  }

  private complete(trailers: HeaderMap | undefined, trailing: number): void {
    const sink = this.sink;
    // The sink abandoned the response while handling the bytes just delivered.
    if (sink === undefined) return;
    this.state = State.Idle;
    this.sink = undefined;
    this.trailingBytes = trailing;
    sink.onComplete(trailers);
  }

  /** Join bytes kept from earlier reads with this one; returns the buffer and where `data` starts in it. */
  private joined(data: Buffer, offset: number): [Buffer, number] {
    const pending = this.pending;
    if (!pending) return [data, offset];
    this.pending = undefined;
    return [Buffer.concat([pending, data.subarray(offset)]), 0];
  }

  /** Parse a head from `data` at `offset`; returns the offset after it, or -1 when more is needed. */
  private readHead(data: Buffer, offset: number): number {
    const pendingLength = this.pending?.length ?? 0;
    const [buf, start] = this.joined(data, offset);
    // Scan on from a little before the new bytes: the blank line may straddle two reads, and a CR
    // that ended the last read is judged by the byte after it.
    const limit = Math.min(buf.length, start + this.maxHeadSize + 4);
    const from = this.badAt >= 0 ? start + this.badAt : Math.max(start, pendingLength - 3);
    this.badAt = -1;
    const end = scanHead(buf, start, from, limit);
    // A forbidden byte fails the response once its line is complete, so the error names the same
    // line however the bytes were split into reads.
    const lineEnd = end < INCOMPLETE ? buf.indexOf(10, badByteAt(end)) : -1;
    if (end === INCOMPLETE || (end < INCOMPLETE && lineEnd < 0)) {
      if (buf.length - start > this.maxHeadSize) {
        this.fail(`the response head exceeds ${this.maxHeadSize} bytes`);
        return -1;
      }
      if (end < INCOMPLETE) this.badAt = badByteAt(end) - start;
      this.pending = start === 0 ? buf : buf.subarray(start);
      return -1;
    }
    if (end < 0) {
      this.fail(badHeadMessage(buf.toString('latin1', start, lineEnd), badByteAt(end) - start));
      return -1;
    }
    if (end - start > this.maxHeadSize) {
      this.fail(`the response head exceeds ${this.maxHeadSize} bytes`);
      return -1;
    }
    const sep = 4;
    const head = buf.toString('latin1', start, end);
    const error = this.parseHead(head);
    if (error) {
      this.fail(error);
      return -1;
    }
    const consumed = end + sep;
    // Where the head ends in `data` (the pending bytes came before it).
    const next = buf === data ? consumed : offset + (consumed - pendingLength);
    // A head with no body completes the response here, once the bytes after it are known.
    if (this.state === State.Idle && this.sink !== undefined) this.complete(undefined, data.length - next);
    return next;
  }

  /** Returns an error message, or undefined after delivering the head (and setting the body state). */
  private parseHead(head: string): string | undefined {
    // Every byte was checked by scanHead: no control character, DEL, or CR but before an LF.
    let eol = head.indexOf('\n');
    if (eol < 0) eol = head.length;
    const statusEnd = head.charCodeAt(eol - 1) === 13 ? eol - 1 : eol;
    // `HTTP/1.x NNN[ reason]`; the reason's characters were checked with the whole head.
    const minorCode = head.charCodeAt(7);
    if (
      !head.startsWith('HTTP/1.', 0) ||
      (minorCode !== 48 && minorCode !== 49) ||
      head.charCodeAt(8) !== 32 ||
      !isDigit(head.charCodeAt(9)) ||
      !isDigit(head.charCodeAt(10)) ||
      !isDigit(head.charCodeAt(11)) ||
      (statusEnd !== 12 && head.charCodeAt(12) !== 32) ||
      statusEnd < 12
    ) {
      return `invalid status line ${JSON.stringify(head.slice(0, Math.min(statusEnd, 64)))}`;
    }
    const minor = minorCode === 49 ? '1' : '0';
    const status = (head.charCodeAt(9) - 48) * 100 + (head.charCodeAt(10) - 48) * 10 + (head.charCodeAt(11) - 48);
    if (status < 100) return `invalid status ${status}`;
    const headers: HeaderMap = {};
    let contentLength = -1;
    let transferEncoding: string | undefined;
    let connection: string | undefined;
    let keepAliveHint: string | undefined;
    let index = 0;
    const rawNames = this.rawNames;
    const names = this.names;
    for (let start = eol + 1; start < head.length; start = eol + 1) {
      eol = head.indexOf('\n', start);
      if (eol < 0) eol = head.length;
      const lineEnd = head.charCodeAt(eol - 1) === 13 ? eol - 1 : eol;
      const first = head.charCodeAt(start);
      // obs-fold: RFC 9112 §5.2 lets a recipient of a response refuse it, and llhttp does.
      if (first === 32 || first === 9) return 'a continuation line (obs-fold)';
      // An upstream sends the same fields in the same order on every answer: the name at this
      // position last time is checked in place, without slicing or hashing a new string.
      let name: string | undefined;
      let colon: number;
      const known = rawNames[index];
      if (known !== undefined && head.charCodeAt(start + known.length) === 58 && head.startsWith(known, start)) {
        name = names[index]!;
        colon = start + known.length;
      } else {
        colon = head.indexOf(':', start);
        if (colon <= start || colon > lineEnd) return `invalid field line ${JSON.stringify(head.slice(start, lineEnd).slice(0, 64))}`;
        const raw = head.slice(start, colon);
        name = fieldName(raw);
        if (name === undefined) return `invalid field name ${JSON.stringify(head.slice(start, Math.min(colon, start + 64)))}`;
        if (index < MAX_REMEMBERED_FIELDS) {
          rawNames[index] = raw;
          names[index] = name;
        }
      }
      index++;
      // Optional whitespace is spaces and tabs only (RFC 9110 §5.6.3): obs-text such as 0xA0 stays.
      let from = colon + 1;
      let to = lineEnd;
      while (from < to && isOWS(head.charCodeAt(from))) from++;
      while (to > from && isOWS(head.charCodeAt(to - 1))) to--;
      const value = head.slice(from, to);
      switch (name) {
        case 'content-length': {
          // One plain length. A list of one same length or a repeated line (RFC 9110 §8.6 lets a
          // recipient refuse either, and llhttp and Envoy do) would otherwise reach the client as sent.
          if (!DIGITS.test(value)) {
            const n = contentLengthValue(value);
            if (n === 'invalid') return `invalid content-length ${JSON.stringify(value.slice(0, 32))}`;
            if (n === 'differing' || (contentLength >= 0 && n !== contentLength)) return 'differing content-length values';
            return `a content-length list ${JSON.stringify(value.slice(0, 32))}`;
          }
          // llhttp takes spaces after the digits, not a tab.
          for (let k = to; k < lineEnd; k++) if (head.charCodeAt(k) === 9) return `invalid content-length ${JSON.stringify(head.slice(from, lineEnd).slice(0, 32))}`;
          const n = Number(value);
          if (contentLength >= 0) return n === contentLength ? 'a repeated content-length' : 'differing content-length values';
          contentLength = n;
          break;
        }
        case 'transfer-encoding':
          // An empty one is refused on any answer, interim ones included (llhttp 9, Node 22, does too).
          if (value === '') return 'unsupported transfer-encoding ""';
          // Trailing blanks kept: `chunked` followed by a tab is another coding to llhttp.
          transferEncoding = transferEncoding === undefined ? head.slice(from, lineEnd) : `${transferEncoding}, ${head.slice(from, lineEnd)}`;
          break;
        case 'connection':
          connection = connection === undefined ? value : `${connection}, ${value}`;
          break;
        case 'keep-alive':
          keepAliveHint = value;
          break;
        case '__proto__':
          // Not representable in a plain object; no real header has this name.
          continue;
      }
      const prior = headers[name];
      if (prior === undefined) headers[name] = value;
      else if (Array.isArray(prior)) prior.push(value);
      else headers[name] = [prior, value];
    }
    // Both framings is an error whether or not this answer has a body (llhttp refuses it on an
    // interim answer, a HEAD answer and a 304 too): the upstream cannot be trusted to frame the next.
    if (transferEncoding !== undefined && contentLength >= 0) return 'both content-length and transfer-encoding';
    if (status < 200) {
      // 101 without an upgrade request is a protocol error; other 1xx are interim: skip them.
      if (status === 101) return 'a 101 answer to a request that asked for no upgrade';
      // An interim answer that closes the connection leaves no room for the final one (llhttp
      // refuses the bytes after it).
      if (!keepAliveOf(minor, connection)) return 'an interim answer that closes the connection';
      return undefined;
    }
    this.keepAlive = keepAliveOf(minor, connection);
    if (keepAliveHint === undefined) this.keepAliveTimeoutMs = undefined;
    else {
      if (keepAliveHint !== this.lastHint) {
        this.lastHint = keepAliveHint;
        this.lastHintMs = keepAliveTimeout(keepAliveHint);
      }
      this.keepAliveTimeoutMs = this.lastHintMs;
    }
    let next: State;
    if (this.noBody || status === 204 || status === 304) {
      if (transferEncoding !== undefined && status === 204) return 'a 204 answer with transfer-encoding';
      next = State.Idle;
    } else if (transferEncoding !== undefined) {
      if (minor === '0') return 'transfer-encoding in an HTTP/1.0 response';
      if (!CHUNKED.test(transferEncoding)) return `unsupported transfer-encoding ${JSON.stringify(transferEncoding.slice(0, 32))}`;
      next = State.ChunkSize;
    } else if (contentLength >= 0) {
      next = contentLength === 0 ? State.Idle : State.Length;
      this.remaining = contentLength;
    } else {
      next = State.UntilClose;
      this.keepAlive = false;
    }
    this.state = next;
    this.sink!.onHead(status, headers);
    return undefined;
  }

  /** Parse one line of chunked framing; returns the offset after it, or -1 when more is needed. */
  private readLine(data: Buffer, offset: number): number {
    const pendingLength = this.pending?.length ?? 0;
    const [buf, start] = this.joined(data, offset);
    const nl = buf.indexOf(10, Math.max(start, pendingLength));
    if (nl < 0) {
      if (buf.length - start > (this.state === State.Trailers ? this.maxHeadSize : MAX_CHUNK_LINE)) {
        this.fail('a chunk line or trailer section too long');
        return -1;
      }
      this.pending = start === 0 ? buf : buf.subarray(start);
      return -1;
    }
    // Every line of the chunked framing ends in CRLF (llhttp refuses a bare LF there too).
    if (nl === start || buf[nl - 1] !== 13) {
      this.fail(this.state === State.Trailers ? 'a trailer line without CRLF' : 'a chunk line without CRLF');
      return -1;
    }
    const line = buf.toString('latin1', start, nl - 1);
    const consumed = nl + 1;
    const next = buf === data ? consumed : offset + (consumed - pendingLength);
    switch (this.state) {
      case State.ChunkSize: {
        const m = CHUNK_SIZE.exec(line);
        if (!m) {
          this.fail(`invalid chunk size line ${JSON.stringify(line.slice(0, 32))}`);
          return -1;
        }
        const size = parseInt(m[1]!, 16);
        if (size === 0) {
          this.state = State.Trailers;
          this.headBytes = 0;
          this.trailerLines = undefined;
        } else {
          this.remaining = size;
          this.state = State.ChunkData;
        }
        return next;
      }
      case State.ChunkDataEnd:
        if (line !== '') {
          this.fail('chunk data longer than its size');
          return -1;
        }
        this.state = State.ChunkSize;
        return next;
      default: {
        // Trailers: field lines up to an empty line.
        if (line === '') {
          const trailers = this.trailerLines ? parseTrailers(this.trailerLines) : undefined;
          if (typeof trailers === 'string') {
            this.fail(trailers);
            return -1;
          }
          this.trailerLines = undefined;
          this.complete(trailers, data.length - next);
          return next;
        }
        this.headBytes += line.length;
        if (this.headBytes > this.maxHeadSize) {
          this.fail('the trailer section is too large');
          return -1;
        }
        (this.trailerLines ??= []).push(line);
        return next;
      }
    }
  }

  private trailerLines: string[] | undefined = undefined;
}

