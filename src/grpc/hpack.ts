/**
 * HPACK (RFC 7541) for the unary gRPC client's own HTTP/2 connection: a complete decoder (static and
 * dynamic table, Huffman strings, table size updates) for the header blocks servers send, and the
 * few encodings the client needs to send its requests (indexed static fields and literals without
 * indexing, never Huffman, so the server's table is never touched by us).
 *
 * Anything malformed throws `HpackError`: the connection must end with COMPRESSION_ERROR then, since
 * the two tables can no longer agree.
 */

export class HpackError extends Error {}

/** RFC 7541 Appendix A. Index 1 is STATIC[0]. */
const STATIC: readonly (readonly [string, string])[] = [
  [':authority', ''], [':method', 'GET'], [':method', 'POST'], [':path', '/'], [':path', '/index.html'],
  [':scheme', 'http'], [':scheme', 'https'], [':status', '200'], [':status', '204'], [':status', '206'],
  [':status', '304'], [':status', '400'], [':status', '404'], [':status', '500'], ['accept-charset', ''],
  ['accept-encoding', 'gzip, deflate'], ['accept-language', ''], ['accept-ranges', ''], ['accept', ''],
  ['access-control-allow-origin', ''], ['age', ''], ['allow', ''], ['authorization', ''], ['cache-control', ''],
  ['content-disposition', ''], ['content-encoding', ''], ['content-language', ''], ['content-length', ''],
  ['content-location', ''], ['content-range', ''], ['content-type', ''], ['cookie', ''], ['date', ''], ['etag', ''],
  ['expect', ''], ['expires', ''], ['from', ''], ['host', ''], ['if-match', ''], ['if-modified-since', ''],
  ['if-none-match', ''], ['if-range', ''], ['if-unmodified-since', ''], ['last-modified', ''], ['link', ''],
  ['location', ''], ['max-forwards', ''], ['proxy-authenticate', ''], ['proxy-authorization', ''], ['range', ''],
  ['referer', ''], ['refresh', ''], ['retry-after', ''], ['server', ''], ['set-cookie', ''],
  ['strict-transport-security', ''], ['transfer-encoding', ''], ['user-agent', ''], ['vary', ''], ['via', ''],
  ['www-authenticate', ''],
];

/** The static index of a name (its first entry), for literals with an indexed name. */
export function staticNameIndex(name: string): number {
  const i = STATIC.findIndex(([n]) => n === name);
  return i < 0 ? 0 : i + 1;
}

/** The static index of an exact name and value, or 0. */
export function staticIndex(name: string, value: string): number {
  const i = STATIC.findIndex(([n, v]) => n === name && v === value);
  return i < 0 ? 0 : i + 1;
}

/**
 * The Huffman code's lengths in bits for symbols 0..255 and EOS (256), RFC 7541 Appendix B. The code
 * is canonical (within a length, codes ascend with the symbol; shorter codes come first), so the
 * lengths alone define it.
 */
const HUFFMAN_LENGTHS = [
  13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
  6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
  13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
  15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
  20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
  22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
  26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
  20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
  30,
];
const EOS = 256;
const MAX_CODE_BITS = 30;

/** Canonical decoding tables: per length, the first code, how many codes, and where they start in SYMBOLS. */
const FIRST_CODE = new Int32Array(MAX_CODE_BITS + 1);
const COUNT = new Int32Array(MAX_CODE_BITS + 1);
const START = new Int32Array(MAX_CODE_BITS + 1);
const SYMBOLS = new Uint16Array(HUFFMAN_LENGTHS.length);
/** The code of every symbol (for tests and for checking the table). */
export const HUFFMAN_CODES = new Uint32Array(HUFFMAN_LENGTHS.length);
{
  const order = HUFFMAN_LENGTHS.map((len, sym) => ({ len, sym })).sort((a, b) => a.len - b.len || a.sym - b.sym);
  let code = 0;
  let len = order[0]!.len;
  order.forEach((e, i) => {
    code <<= e.len - len;
    len = e.len;
    if (COUNT[len] === 0) {
      FIRST_CODE[len] = code;
      START[len] = i;
    }
    COUNT[len]!++;
    SYMBOLS[i] = e.sym;
    HUFFMAN_CODES[e.sym] = code;
    code++;
  });
}

/** Decode a Huffman-coded string (RFC 7541 §5.2): at most 7 bits of padding, all ones; EOS is an error. */
export function huffmanDecode(buf: Buffer, start: number, end: number): string {
  let out = '';
  let code = 0;
  let len = 0;
  for (let i = start; i < end; i++) {
    const byte = buf[i]!;
    for (let bit = 7; bit >= 0; bit--) {
      code = (code << 1) | ((byte >> bit) & 1);
      len++;
      const d = code - FIRST_CODE[len]!;
      if (COUNT[len]! > 0 && d >= 0 && d < COUNT[len]!) {
        const sym = SYMBOLS[START[len]! + d]!;
        if (sym === EOS) throw new HpackError('EOS inside a Huffman string');
        out += String.fromCharCode(sym);
        code = 0;
        len = 0;
      } else if (len >= MAX_CODE_BITS) {
        throw new HpackError('invalid Huffman code');
      }
    }
  }
  if (len > 7 || code !== (1 << len) - 1) throw new HpackError('invalid Huffman padding');
  return out;
}

/** Entries are [name, value]; size counts as RFC 7541 §4.1 does (octets + 32). */
const entrySize = (name: string, value: string): number => name.length + value.length + 32;

/**
 * A header list's size as SETTINGS_MAX_HEADER_LIST_SIZE counts it (RFC 9113 §6.5.2): the octets of
 * every name and value (latin1, as `encodeFields` writes them) plus 32 per field.
 */
export function headerListSize(fields: readonly (readonly [string, string])[]): number {
  let size = 0;
  for (const [name, value] of fields) size += entrySize(name, value);
  return size;
}

/** Integers above this are refused (RFC 7541 §5.1 leaves the bound to the decoder). */
const MAX_INT = 0x7fffffff;

/**
 * One connection's decoding context. `maxTableSize` is what our SETTINGS_HEADER_TABLE_SIZE allows
 * (the default 4096 when not sent); a size update above it is an error.
 */
export class HpackDecoder {
  private table: [string, string][] = [];
  private size = 0;
  private limit: number;
  private pos = 0;

  constructor(private readonly maxTableSize = 4096) {
    this.limit = maxTableSize;
  }

  /** @internal The dynamic table, newest first, and its size as RFC 7541 §4.1 counts it (for tests). */
  dynamicTable(): { entries: readonly (readonly [string, string])[]; size: number } {
    return { entries: this.table, size: this.size };
  }

  /** Every field of a complete header block, in order. Strings are bytes as latin1. */
  decode(block: Buffer, field: (name: string, value: string) => void): void {
    this.pos = 0;
    const end = block.length;
    let fieldSeen = false;
    while (this.pos < end) {
      const b = block[this.pos]!;
      if (b & 0x80) {
        // Indexed field.
        const [name, value] = this.entry(this.integer(block, 7));
        field(name, value);
        fieldSeen = true;
      } else if (b & 0x40) {
        // Literal with incremental indexing.
        const index = this.integer(block, 6);
        const name = index === 0 ? this.string(block) : this.entry(index)[0];
        const value = this.string(block);
        this.add(name, value);
        field(name, value);
        fieldSeen = true;
      } else if (b & 0x20) {
        // Dynamic table size update: only at the start of a block.
        if (fieldSeen) throw new HpackError('table size update after a field');
        const size = this.integer(block, 5);
        if (size > this.maxTableSize) throw new HpackError(`table size update to ${size}, above ${this.maxTableSize}`);
        this.limit = size;
        this.evict(0);
      } else {
        // Literal without indexing (0000) or never indexed (0001).
        const index = this.integer(block, 4);
        const name = index === 0 ? this.string(block) : this.entry(index)[0];
        field(name, this.string(block));
        fieldSeen = true;
      }
    }
  }

  private entry(index: number): readonly [string, string] {
    if (index === 0) throw new HpackError('index 0');
    if (index <= STATIC.length) return STATIC[index - 1]!;
    const e = this.table[index - STATIC.length - 1];
    if (!e) throw new HpackError(`index ${index} beyond the table`);
    return e;
  }

  private add(name: string, value: string): void {
    const size = entrySize(name, value);
    this.evict(size);
    // An entry larger than the table empties it and is not added (RFC 7541 §4.4).
    if (size > this.limit) return;
    this.table.unshift([name, value]);
    this.size += size;
  }

  /** Evict the oldest entries until `room` more octets fit. */
  private evict(room: number): void {
    while (this.size + room > this.limit && this.table.length > 0) {
      const [n, v] = this.table.pop()!;
      this.size -= entrySize(n, v);
    }
  }

  private integer(buf: Buffer, prefixBits: number): number {
    const max = (1 << prefixBits) - 1;
    let value = buf[this.pos++]! & max;
    if (value < max) return value;
    let shift = 0;
    for (;;) {
      if (this.pos >= buf.length) throw new HpackError('truncated integer');
      const b = buf[this.pos++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (value > MAX_INT) throw new HpackError('integer too large');
      if ((b & 0x80) === 0) return value;
      shift += 7;
    }
  }

  private string(buf: Buffer): string {
    if (this.pos >= buf.length) throw new HpackError('truncated string');
    const huffman = (buf[this.pos]! & 0x80) !== 0;
    const length = this.integer(buf, 7);
    const start = this.pos;
    const end = start + length;
    if (end > buf.length) throw new HpackError('truncated string');
    this.pos = end;
    return huffman ? huffmanDecode(buf, start, end) : buf.toString('latin1', start, end);
  }
}

/** An HPACK integer with an N-bit prefix whose high bits are `flags`. */
function encodeInteger(out: number[], flags: number, prefixBits: number, value: number): void {
  const max = (1 << prefixBits) - 1;
  if (value < max) {
    out.push(flags | value);
    return;
  }
  out.push(flags | max);
  value -= max;
  while (value >= 0x80) {
    out.push((value & 0x7f) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
}

function encodeString(out: number[], s: string): void {
  const bytes = Buffer.from(s, 'latin1');
  encodeInteger(out, 0, 7, bytes.length);
  for (const b of bytes) out.push(b);
}

/**
 * Encode fields without touching the peer's dynamic table: a static entry that matches exactly is
 * indexed, anything else is a literal without indexing (the name indexed when the static table has it).
 */
export function encodeFields(fields: readonly (readonly [string, string])[]): Buffer {
  const out: number[] = [];
  for (const [name, value] of fields) {
    const exact = staticIndex(name, value);
    if (exact) {
      encodeInteger(out, 0x80, 7, exact);
      continue;
    }
    const nameIndex = staticNameIndex(name);
    encodeInteger(out, 0x00, 4, nameIndex);
    if (!nameIndex) encodeString(out, name);
    encodeString(out, value);
  }
  return Buffer.from(out);
}
