/**
 * Request ids (DESIGN §6): a client's `x-request-id` is kept when it is 1–128 characters of
 * `[A-Za-z0-9._-]`, otherwise the proxy makes a new one. `newRequestId` uses the platform's UUID
 * generator, or builds a version-4 UUID from an injected random source so tests are
 * deterministic. Neither function throws.
 */
import { randomUUID } from 'node:crypto';

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

/** A new id: `crypto.randomUUID()`, or a v4-shaped UUID drawn from `random` when given. */
export function newRequestId(random?: () => number): string {
  if (random === undefined) return randomUUID();
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
