/**
 * The grammar of an HTTP/1.1 head that requests and responses share (RFC 9110, RFC 9112): field names
 * (tokens, lower-cased once) and values, `Content-Length` lists, `Connection` and `Keep-Alive`,
 * trailer lines, and the one pass that finds a head's end and refuses every byte no head may hold.
 * Pure functions over strings and buffers; a violation is a return value, never a throw.
 */

export type HeaderMap = Record<string, string | string[]>;

/** RFC 9110 token characters (field names). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A field value may hold HTAB, visible ASCII, SP and obs-text; nothing else (no CR, LF or NUL). */
export const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** `scanHead`: the head is not complete in the bytes given. */
export const INCOMPLETE = -1;
/** `scanHead` returns `-2 - i` for a forbidden byte at `i`. */
export const badByteAt = (result: number): number => -2 - result;

/**
 * Find the end of the head that starts at `start`, checking every byte on the way from `from` to
 * `limit` (one pass over the bytes, instead of a search for the blank line and two scans of the
 * text): the index of the empty line that ends it (CRLF CRLF), `INCOMPLETE`, or `-2 - i` for a byte
 * no head may hold at `i`: a control character other than HTAB, CR and LF, DEL, a CR not followed
 * by LF, or an LF not after a CR. RFC 9112 §2.2 lets a recipient take a bare LF as a line's end;
 * llhttp does not, and neither does this reader: two readers that split lines differently can be
 * told two different answers.
 */
export function scanHead(buf: Buffer, start: number, from: number, limit: number): number {
  for (let i = from; i < limit; i++) {
    const c = buf[i]!;
    if (c >= 0x20) {
      if (c === 0x7f) return -2 - i;
      continue;
    }
    if (c === 10) {
      if (i === start || buf[i - 1] !== 13) return -2 - i;
      if (i + 1 >= limit) return INCOMPLETE;
      if (buf[i + 1] === 13) {
        if (i + 2 >= limit) return INCOMPLETE;
        if (buf[i + 2] === 10) return i - 1;
        return -3 - i;
      }
    } else if (c === 13) {
      if (i + 1 >= limit) return INCOMPLETE;
      if (buf[i + 1] !== 10) return -2 - i;
    } else if (c !== 9) {
      return -2 - i;
    }
  }
  return INCOMPLETE;
}

/** Say where a head with a forbidden character (at `at`) has it. */
export function badHeadMessage(head: string, at: number): string {
  const lineStart = head.lastIndexOf('\n', at - 1) + 1;
  if (lineStart === 0) return `invalid status line ${JSON.stringify(head.slice(0, Math.min(64, head.indexOf('\n') >>> 0)))}`;
  const colon = head.indexOf(':', lineStart);
  const name = colon > lineStart && colon < at ? head.slice(lineStart, colon) : head.slice(lineStart, at);
  return `invalid value in field ${name.slice(0, 64)}`;
}
/**
 * Lower-cased field names, by the name as received: an upstream sends the same few names on every
 * answer (and a client on every request), so each is checked and lower-cased once, and the same string object is reused as the key
 * (V8 finds an already-internalized key without hashing it again). Bounded: past the limit, names
 * are checked every time.
 */
const NAMES = new Map<string, string>();
const MAX_NAMES = 1024;

/** The lower-cased name, or `undefined` when `raw` is not a token. */
export function fieldName(raw: string): string | undefined {
  const known = NAMES.get(raw);
  if (known !== undefined) return known;
  if (!TOKEN.test(raw)) return undefined;
  const name = raw.toLowerCase();
  if (NAMES.size < MAX_NAMES) NAMES.set(raw, name);
  return name;
}

export const DIGITS = /^\d{1,15}$/;

/**
 * The length a `Content-Length` value gives: a list or repeats of one same length are one length
 * (RFC 9110 §8.6); anything else is invalid, and different lengths are an error of their own.
 */
export function contentLengthValue(value: string): number | 'invalid' | 'differing' {
  if (DIGITS.test(value)) return Number(value);
  let length = -1;
  for (const part of value.split(',')) {
    const v = part.trim();
    if (!DIGITS.test(v)) return 'invalid';
    const n = Number(v);
    if (length >= 0 && n !== length) return 'differing';
    length = n;
  }
  return length;
}

export function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

export function isOWS(c: number): boolean {
  return c === 32 || c === 9;
}

/** HTTP/1.1 keeps the connection unless `close`; HTTP/1.0 only with `keep-alive` (RFC 9112 §9.3). */
export function keepAliveOf(minor: string, connection: string | undefined): boolean {
  if (connection === undefined) return minor === '1';
  if (connection === 'keep-alive') return true;
  let keep = minor === '1';
  for (const token of connection.split(',')) {
    const t = token.trim().toLowerCase();
    if (t === 'close') return false;
    if (t === 'keep-alive') keep = true;
  }
  return keep;
}

/** `Keep-Alive: timeout=5, max=100` → 5000. */
export function keepAliveTimeout(value: string): number | undefined {
  const m = /(?:^|[,\s])timeout\s*=\s*(\d+)/i.exec(value);
  return m ? Number(m[1]) * 1000 : undefined;
}

/** Trailer field lines into a map (names lower-cased), or an error message. */
export function parseTrailers(lines: string[]): HeaderMap | string {
  const out: HeaderMap = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon <= 0) return `invalid trailer line ${JSON.stringify(line.slice(0, 64))}`;
    const rawName = line.slice(0, colon);
    if (!TOKEN.test(rawName)) return `invalid trailer name ${JSON.stringify(rawName.slice(0, 64))}`;
    // Optional whitespace is spaces and tabs only: `trim()` would also take a CR or an 0xA0 away.
    let from = colon + 1;
    let to = line.length;
    while (from < to && isOWS(line.charCodeAt(from))) from++;
    while (to > from && isOWS(line.charCodeAt(to - 1))) to--;
    const value = line.slice(from, to);
    if (BAD_VALUE.test(value)) return `invalid value in trailer ${rawName}`;
    const name = rawName.toLowerCase();
    if (name === '__proto__') continue;
    // A length in the trailers would frame nothing (RFC 9110 §6.5.1); llhttp refuses it.
    if (name === 'content-length') return 'a content-length trailer';
    const prior = out[name];
    if (prior === undefined) out[name] = value;
    else if (Array.isArray(prior)) prior.push(value);
    else out[name] = [prior, value];
  }
  return out;
}
