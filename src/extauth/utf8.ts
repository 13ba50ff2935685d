/**
 * UTF-8 sanitizing for every string the check request carries. Protobuf `string` fields must be
 * valid UTF-8, and an authorization server written in Go (OPA-Envoy, Authorino) rejects the whole
 * message otherwise: a hostile header would turn every check into an RPC error, and fail-open
 * configurations would then let the request through. So invalid bytes become U+FFFD before
 * encoding, as Envoy sanitizes header values (`MessageUtil::sanitizeUtf8String`). Total: never throws.
 */

/**
 * A string Node decoded from the wire (header values, the request target, the method): Node's HTTP
 * parsers hand bytes over as latin1 (one char per byte), so the bytes are re-read as UTF-8, invalid
 * sequences becoming U+FFFD. ASCII, the common case, is returned as is without copying.
 */
export function wireString(s: string): string {
  let i = 0;
  const n = s.length;
  while (i < n && s.charCodeAt(i) < 0x80) i++;
  if (i === n) return s;
  for (let j = i; j < n; j++) {
    // Not a byte string after all (an API gave us real Unicode): only lone surrogates can be wrong.
    if (s.charCodeAt(j) > 0xff) return wellFormed(s);
  }
  return Buffer.from(s, 'latin1').toString('utf8');
}

/** A JavaScript string with any lone surrogate replaced by U+FFFD (so it encodes to valid UTF-8). */
export function wellFormed(s: string): string {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdfff) return Buffer.from(s, 'utf8').toString('utf8');
  }
  return s;
}

/** Body bytes as a string field (`body`): invalid UTF-8 becomes U+FFFD. */
export function utf8Body(bytes: Buffer): string {
  return bytes.toString('utf8');
}
