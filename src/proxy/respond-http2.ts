/**
 * The head of an upstream's answer on a client's HTTP/2 stream, sent with the stream's own
 * `respond()` instead of Node's compat response (`res.writeHead()`). The compat layer copies every
 * field through `setHeader` (trimmed, lower-cased and checked again, one by one) and always asks for
 * trailers (`waitForTrailers`), so each answer ends with a call back into JavaScript and an extra
 * empty DATA frame, trailers or not. Here the upstream's fields, already lower-case tokens checked by
 * the parser that read them, go out as they are; trailers are asked for only when the answer can
 * still have some (the compat response sends what `addTrailers` gave it, as before). The compat
 * response still writes the body, ends the stream and reports its state (`headersSent` is the
 * stream's).
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Http2ServerResponse, ServerHttp2Stream } from 'node:http2';

/** A field name the compat layer would send unchanged: a lower-case token, not `connection`. */
const PLAIN_NAME = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;

/**
 * `checkNames`: fields were added on the proxy's side (filters, debug headers): unless every name is
 * plain, the compat layer's `writeHead` sends them, with its own rules (names lower-cased,
 * `connection` dropped, a name that is not a token destroys the stream).
 */
export function respondHttp2(
  res: Http2ServerResponse,
  stream: ServerHttp2Stream,
  status: number,
  headers: OutgoingHttpHeaders,
  trailers: boolean,
  checkNames: boolean,
): void {
  if (checkNames && !plainNames(headers)) {
    res.writeHead(status, headers as Record<string, string>);
    return;
  }
  // As the compat layer: nothing to answer on a stream already gone.
  if (stream.destroyed || stream.closed) return;
  res.statusCode = status;
  headers[':status'] = status;
  stream.respond(headers, { waitForTrailers: trailers });
}

function plainNames(headers: OutgoingHttpHeaders): boolean {
  for (const name in headers) if (name === 'connection' || !PLAIN_NAME.test(name)) return false;
  return true;
}
