/**
 * The `grpc-message` a gRPC answer carries, percent-encoded as the gRPC over HTTP/2 spec asks: one
 * encoder for the proxy's own gRPC answers (proxy/errors.ts) and the rate-limit service's failures
 * (./server.ts). Never fails: any string has an encoding.
 */

/**
 * gRPC's percent-encoding of `grpc-message`: bytes outside printable ASCII, and `%` itself, become
 * `%XX` of their UTF-8 bytes; everything else is sent as is (gRPC over HTTP/2 spec).
 */
export function grpcMessage(message: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(message)) return message;
  let out = '';
  for (const byte of Buffer.from(message, 'utf8')) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}
