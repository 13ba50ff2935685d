/**
 * Request-head checks that Node's parsers leave to the proxy (DESIGN §5, "parse and sanitize"). The
 * parsers already answer 400 to both Content-Length and Transfer-Encoding, repeated Content-Length,
 * obs-fold, bare CR/LF, NUL and bad chunk sizes; what they let through and this rejects:
 *
 * - more than one `Host` line (Node keeps the first and drops the rest, so two hops could route one
 *   request by different names);
 * - a `Host` with userinfo (`user@host`: not a valid Host, and a classic filter-bypass spelling);
 * - on HTTP/2, a `host` header that names another authority than `:authority` (RFC 9113 §8.3.1);
 * - a transfer coding other than `chunked` (Node accepts `gzip, chunked`; forwarding the body
 *   re-framed without the coding would hand the app bytes it cannot read; Envoy answers 501).
 *
 * Pure: `(request) => problem | undefined`; the caller answers and closes the connection.
 */
import type { DownstreamRequest } from './errors.js';

export interface RequestProblem {
  readonly status: 400 | 501;
  readonly reason: string;
}

export function requestProblem(req: DownstreamRequest): RequestProblem | undefined {
  const headers = req.headers;
  const host = headers.host;
  if (host !== undefined && host.includes('@')) return { status: 400, reason: 'userinfo in Host' };
  if (req.httpVersionMajor === 2) {
    const authority = headers[':authority'];
    if (host !== undefined && typeof authority === 'string' && authority.toLowerCase() !== host.toLowerCase()) {
      return { status: 400, reason: 'Host and :authority differ' };
    }
    return undefined;
  }
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) return { status: 400, reason: 'more than one Host header' };
  }
  const te = headers['transfer-encoding'];
  if (te !== undefined && te.trim().toLowerCase() !== 'chunked') return { status: 501, reason: `unsupported transfer coding "${te}"` };
  return undefined;
}
