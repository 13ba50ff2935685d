/**
 * A protobuf writer into one growing buffer, for the messages the proxy encodes on its hot paths
 * (OTLP span batches, ext_authz CheckRequests, RLS RateLimitRequests) without an intermediate
 * message object. Nested messages reserve one byte for their length (most are under 128 bytes) and
 * move their content only when it is longer. ASCII strings and hex ids are written byte by byte in
 * JavaScript: for short strings that is cheaper than a call into Buffer's C++ per string. Fields are
 * written in the order the caller writes them: callers write them in field-number order, as
 * protobuf encoders do.
 */
export class ProtoWriter {
  buf: Buffer;
  pos: number;

  /**
   * `headroom`: bytes left free in front of the message for the caller to fill (a gRPC prefix, so
   * the message becomes a frame without a copy); `view()` includes them.
   */
  constructor(size = 64 * 1024, headroom = 0) {
    this.buf = Buffer.allocUnsafe(size);
    this.pos = headroom;
  }

  private room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + n + 1024));
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }

  varint(v: number): void {
    this.room(10);
    const buf = this.buf;
    while (v > 0x7f) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[this.pos++] = v;
  }

  tag(field: number, wire: number): void {
    this.varint((field << 3) | wire);
  }

  /** A varint field (uint32, uint64, a non-negative int, an enum, a bool as 0 / 1). */
  uint(field: number, v: number): void {
    this.tag(field, 0);
    this.varint(v);
  }

  /** Start nested message `field`: its tag, one byte reserved for the length; returns where the content starts. */
  begin(field: number): number {
    this.tag(field, 2);
    this.room(1);
    this.pos++;
    return this.pos;
  }

  /** End the nested message whose content started at `start`. */
  end(start: number): void {
    const length = this.pos - start;
    if (length < 0x80) {
      this.buf[start - 1] = length;
      return;
    }
    const extra = varintSize(length) - 1;
    this.room(extra);
    this.buf.copyWithin(start + extra, start, this.pos);
    let at = start - 1;
    let v = length;
    while (v > 0x7f) {
      this.buf[at++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    this.buf[at] = v;
    this.pos += extra;
  }

  string(field: number, s: string): void {
    this.tag(field, 2);
    const n = s.length;
    if (n < 0x80) {
      // ASCII (the usual case) fits as it is; anything else goes through Buffer's UTF-8 encoder.
      this.room(n + 1);
      const buf = this.buf;
      const at = this.pos;
      let i = 0;
      for (; i < n; i++) {
        const c = s.charCodeAt(i);
        if (c > 0x7f) break;
        buf[at + 1 + i] = c;
      }
      if (i === n) {
        buf[at] = n;
        this.pos = at + 1 + n;
        return;
      }
    }
    const bytes = Buffer.byteLength(s);
    this.varint(bytes);
    this.room(bytes);
    this.pos += this.buf.write(s, this.pos, 'utf8');
  }

  /** A lowercase or uppercase hex id as bytes. */
  hex(field: number, hex: string): void {
    const n = hex.length >> 1;
    this.tag(field, 2);
    this.varint(n);
    this.room(n);
    const buf = this.buf;
    for (let i = 0; i < n; i++) buf[this.pos++] = (nibble(hex.charCodeAt(2 * i)) << 4) | nibble(hex.charCodeAt(2 * i + 1));
  }

  /** Bytes already encoded (fields of the message being written). */
  raw(b: Uint8Array): void {
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  bytes(field: number, b: Uint8Array): void {
    this.tag(field, 2);
    this.varint(b.length);
    this.room(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  /**
   * An int64 varint (two's complement for negatives: ten bytes), written from the value's two 32-bit
   * halves (exact for the integers a double holds); ext_authz sends `size: -1` on most checks.
   */
  int64(field: number, v: number): void {
    this.tag(field, 0);
    if (v >= 0) return this.varint(v);
    this.room(10);
    let lo = (v % 4294967296) >>> 0;
    let hi = Math.floor(v / 4294967296) >>> 0;
    const buf = this.buf;
    while (hi !== 0 || lo > 0x7f) {
      buf[this.pos++] = (lo & 0x7f) | 0x80;
      lo = ((lo >>> 7) | (hi << 25)) >>> 0;
      hi >>>= 7;
    }
    buf[this.pos++] = lo;
  }

  double(field: number, v: number): void {
    this.tag(field, 1);
    this.room(8);
    this.pos = this.buf.writeDoubleLE(v, this.pos);
  }

  fixed32(field: number, v: number): void {
    this.tag(field, 5);
    this.room(4);
    this.u32(v >>> 0);
  }

  private u32(v: number): void {
    const buf = this.buf;
    buf[this.pos++] = v & 0xff;
    buf[this.pos++] = (v >>> 8) & 0xff;
    buf[this.pos++] = (v >>> 16) & 0xff;
    buf[this.pos++] = v >>> 24;
  }

  /**
   * An OpenTelemetry HrTime as fixed64 nanoseconds since the epoch, in exact double arithmetic:
   * seconds split in 16-bit halves so every product stays below 2^53.
   */
  time(field: number, t: readonly [number, number]): void {
    this.tag(field, 1);
    this.room(8);
    const [sec, nanos] = t;
    const a = (sec % 65536) * 1e9 + nanos; // < 2^47
    const b = Math.floor(sec / 65536) * 1e9; // the part worth 2^16 more
    let lo = (b % 65536) * 65536 + (a % 4294967296);
    const carry = Math.floor(lo / 4294967296);
    lo -= carry * 4294967296;
    const hi = Math.floor(b / 65536) + Math.floor(a / 4294967296) + carry;
    this.u32(lo);
    this.u32(hi);
  }

  /** A `map<string, string>` entry (key 1, value 2) as field `field`. */
  entry(field: number, key: string, value: string): void {
    const start = this.begin(field);
    this.string(1, key);
    this.string(2, value);
    this.end(start);
  }

  /** The bytes written, without a copy: for a writer used once. */
  view(): Buffer {
    return this.buf.subarray(0, this.pos);
  }
}

function nibble(c: number): number {
  // '0'-'9' → 0-9, 'a'-'f' / 'A'-'F' → 10-15
  return c <= 0x39 ? c - 0x30 : (c | 0x20) - 0x57;
}

function varintSize(v: number): number {
  let n = 1;
  while (v > 0x7f) {
    v = Math.floor(v / 128);
    n++;
  }
  return n;
}

