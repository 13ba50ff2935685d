/**
 * Request ids (DESIGN §6): a client's `x-request-id` is kept when it is 1–128 characters of
 * `[A-Za-z0-9._-]`, otherwise the proxy makes a new one: a version-4 UUID (RFC 9562 §5.4) from the
 * system's cryptographic random source, or from an injected random source so tests are
 * deterministic. Neither function throws.
 */
import { randomFillSync } from 'node:crypto';

export const MAX_REQUEST_ID_LENGTH = 128;

export function validRequestId(s: string | undefined): s is string {
  if (typeof s !== 'string' || s.length === 0 || s.length > MAX_REQUEST_ID_LENGTH) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    const ok =
      (c >= 0x61 && c <= 0x7a) || // a-z
      (c >= 0x41 && c <= 0x5a) || // A-Z
      (c >= 0x30 && c <= 0x39) || // 0-9
      c === 0x2d || // -
      c === 0x2e || // .
      c === 0x5f; // _
    if (!ok) return false;
  }
  return true;
}

const HEX = '0123456789abcdef';
const HEX_CODES = Buffer.from(HEX, 'latin1');

/** Random bytes for 256 ids, drawn at once (as `crypto.randomUUID()` caches them too). */
const RANDOM = Buffer.alloc(16 * 256);
let randomUsed = RANDOM.length;
/** An id's 36 characters are written here, then read out as one string. */
const TEXT = Buffer.alloc(36);

/**
 * A v4 UUID from the pooled random bytes: one string allocated, where `randomUUID()` joins sixteen
 * pieces (about ten times the garbage, on every request without an id).
 */
function uuid4(): string {
  if (randomUsed === RANDOM.length) {
    randomFillSync(RANDOM);
    randomUsed = 0;
  }
  const at = randomUsed;
  randomUsed += 16;
  let out = 0;
  for (let i = 0; i < 16; i++) {
    let byte = RANDOM[at + i]!;
    if (i === 6) byte = (byte & 0x0f) | 0x40; // version 4
    else if (i === 8) byte = (byte & 0x3f) | 0x80; // variant 10xx
    TEXT[out++] = HEX_CODES[byte >> 4]!;
    TEXT[out++] = HEX_CODES[byte & 15]!;
    if (i === 3 || i === 5 || i === 7 || i === 9) TEXT[out++] = 0x2d; // '-'
  }
  return TEXT.toString('latin1');
}

/** A new id: a random v4 UUID, drawn from `random` when given. */
export function newRequestId(random?: () => number): string {
  if (random === undefined) return uuid4();
  let out = '';
  for (let i = 0; i < 32; i++) {
    if (i === 8 || i === 12 || i === 16 || i === 20) out += '-';
    let nibble = Math.floor(random() * 16) & 15;
    if (i === 12) nibble = 4; // version
    else if (i === 16) nibble = (nibble & 3) | 8; // variant 10xx
    out += HEX[nibble];
  }
  return out;
}
