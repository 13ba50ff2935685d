/**
 * A protobuf reader over one message's bytes, for the messages decoded on hot paths (the RLS
 * service's requests, its answers to the proxy, ext_authz answers): varints, length-delimited fields
 * as views, and skipping of every field it does not know (wire types 0, 1, 2, 5), as protobuf decoders
 * do. Malformed input (a truncated field, a varint over ten bytes, wire types 3, 4, 6, 7) throws
 * `ProtoError`.
 *
 * Varints are exact or refused, never rounded: `varint()` (keys, lengths, small unsigned numbers)
 * throws `ProtoError` for a value above 2^53 - 1, the largest a JavaScript number holds exactly; the
 * typed readers take all 64 bits as protobufjs does (bits past 64 of a ten-byte varint dropped):
 * `int64()` / `uint64()` as exact decimal text, `int32()` / `uint32()` as the low 32 bits (a negative
 * int32 is a ten-byte varint on the wire); skipping an unknown varint field never looks at its value.
 * Tested against protobufjs on random 64-bit values (test/grpc/proto-reader.test.ts).
 */
export class ProtoError extends Error {
  override name = 'ProtoError';
}

/** A field key as the reader returns it: field number and wire type (0 varint, 2 length-delimited …). */
export const key = (field: number, wire: number): number => field * 8 + wire;

export class ProtoReader {
  pos: number;

  constructor(
    private readonly buf: Uint8Array,
    start = 0,
    readonly end = buf.length,
  ) {
    this.pos = start;
  }

  get done(): boolean {
    return this.pos >= this.end;
  }

  /** A varint up to 2^53 - 1 (keys, lengths, enums, small unsigned numbers); a larger one is a ProtoError. */
  varint(): number {
    // Up to seven bytes (49 bits, always exact) read here with nothing more to check: keys and
    // lengths come through here, and a check on every return cost ~3% of a message's decoding
    // (counted with cachegrind). Longer varints go on in `rest`, which applies the bound.
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 7; i++) {
      if (this.pos >= this.end) throw new ProtoError('truncated varint');
      const b = this.buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    return this.rest(value, scale);
  }

  /** Bytes 8 to 10 of a varint read by `varint`, and its bound. */
  private rest(value: number, scale: number): number {
    for (let i = 7; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtoError('truncated varint');
      const b = this.buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) {
        if (value > Number.MAX_SAFE_INTEGER) throw new ProtoError('varint above 2^53 - 1 where a smaller number was expected (read 64-bit fields with int64 or uint64)');
        return value;
      }
      scale *= 128;
    }
    throw new ProtoError('varint longer than 10 bytes');
  }

  /**
   * Read a varint's bytes; its value as a number, exact up to 2^53 - 1 (above it, rounded: enough to
   * tell that `exact` is needed, since rounding never brings a value of 2^53 or more below it).
   */
  private scan(): number {
    let value = 0;
    let scale = 1;
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new ProtoError('truncated varint');
      const b = this.buf[this.pos++]!;
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    throw new ProtoError('varint longer than 10 bytes');
  }

  /** An int64 as proto-loader gives it with `longs: String`: its decimal text. */
  int64(): string {
    const start = this.pos;
    const v = this.scan();
    return v <= Number.MAX_SAFE_INTEGER ? String(v) : BigInt.asIntN(64, this.exact(start)).toString();
  }

  /** A uint64 as proto-loader gives it with `longs: String`: its decimal text. */
  uint64(): string {
    const start = this.pos;
    const v = this.scan();
    return v <= Number.MAX_SAFE_INTEGER ? String(v) : BigInt.asUintN(64, this.exact(start)).toString();
  }

  /** An int32 (a negative one is sign-extended to ten bytes on the wire): the varint's low 32 bits, signed. */
  int32(): number {
    const start = this.pos;
    const v = this.scan();
    return v < 0x80000000 ? v : Number(BigInt.asIntN(32, this.exact(start)));
  }

  /** A uint32: the varint's low 32 bits, as protobufjs reads it. */
  uint32(): number {
    const start = this.pos;
    const v = this.scan();
    return v <= Number.MAX_SAFE_INTEGER ? v >>> 0 : Number(BigInt.asUintN(32, this.exact(start)));
  }

  /** A bool: any varint other than zero is true, whatever its size (as protobuf's decoders read it). */
  bool(): boolean {
    return this.scan() !== 0;
  }

  /** The varint at `start` (already read once, so well formed) as an exact BigInt. */
  private exact(start: number): bigint {
    let value = 0n;
    let shift = 0n;
    for (let at = start; at < this.pos; at++, shift += 7n) value |= BigInt(this.buf[at]! & 0x7f) << shift;
    return value;
  }

  /** The next field's key: `field << 3 | wire type` (compare it with `key(field, wire)`). */
  key(): number {
    return this.varint();
  }

  /** A length-delimited field's bounds; the reader moves past it. */
  delimited(): { start: number; end: number } {
    const length = this.varint();
    const start = this.pos;
    const end = start + length;
    if (end > this.end) throw new ProtoError('truncated length-delimited field');
    this.pos = end;
    return { start, end };
  }

  string(): string {
    const { start, end } = this.delimited();
    return Buffer.from(this.buf.buffer, this.buf.byteOffset + start, end - start).toString('utf8');
  }

  /** A bytes field, as a view of the message's buffer. */
  bytes(): Buffer {
    const { start, end } = this.delimited();
    return Buffer.from(this.buf.buffer, this.buf.byteOffset + start, end - start);
  }

  /** A reader for the embedded message that comes next. */
  message(): ProtoReader {
    const { start, end } = this.delimited();
    return new ProtoReader(this.buf, start, end);
  }

  /** Skip the field whose key was just read. */
  skip(key: number): void {
    const wire = key % 8;
    switch (wire) {
      case 0:
        this.scan(); // any 64-bit value: an unknown field's value is not ours to judge
        return;
      case 1:
        this.advance(8);
        return;
      case 2:
        this.delimited();
        return;
      case 5:
        this.advance(4);
        return;
      default:
        throw new ProtoError(`wire type ${wire} is not supported`);
    }
  }

  private advance(n: number): void {
    if (this.pos + n > this.end) throw new ProtoError('truncated fixed-size field');
    this.pos += n;
  }
}

const NO_BYTES = Buffer.alloc(0);

/** The keys of varint (wire type 0) and length-delimited (2: strings, bytes, messages) fields 1–8, for the readers' comparisons. */
export const VARINT_1 = key(1, 0);
export const VARINT_2 = key(2, 0);
export const VARINT_3 = key(3, 0);
export const VARINT_4 = key(4, 0);
export const DELIMITED_1 = key(1, 2);
export const DELIMITED_2 = key(2, 2);
export const DELIMITED_3 = key(3, 2);
export const DELIMITED_4 = key(4, 2);
export const DELIMITED_5 = key(5, 2);
export const DELIMITED_6 = key(6, 2);
export const DELIMITED_7 = key(7, 2);
export const DELIMITED_8 = key(8, 2);

/**
 * `envoy.config.core.v3.HeaderValue { key 1, value 2, raw_value 3 }`, which Envoy's rate-limit and
 * authorization answers both carry, as proto-loader gives it (defaults filled in).
 */
export function readHeaderValue(r: ProtoReader): { key: string; value: string; raw_value: Buffer } {
  const h: { key: string; value: string; raw_value: Buffer } = { key: '', value: '', raw_value: NO_BYTES };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) h.key = r.string();
    else if (k === DELIMITED_2) h.value = r.string();
    else if (k === DELIMITED_3) h.raw_value = r.bytes();
    else r.skip(k);
  }
  return h;
}

/** A message of two strings, `key` 1 and `value` 2 (a rate-limit descriptor's entry, a query parameter). */
export function readKeyValue(r: ProtoReader): { key: string; value: string } {
  const kv = { key: '', value: '' };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) kv.key = r.string();
    else if (k === DELIMITED_2) kv.value = r.string();
    else r.skip(k);
  }
  return kv;
}

/** An enum number by name; a number the proto does not name stays a number, as proto-loader leaves it. */
export function enumName<T extends string>(names: readonly T[], n: number): T {
  return names[n] ?? (n as unknown as T);
}
