/**
 * Request-head checks that Node's parsers leave to the proxy (DESIGN §5, "parse and sanitize"). The
 * parsers already answer 400 to both Content-Length and Transfer-Encoding, repeated Content-Length,
 * obs-fold, bare CR/LF, NUL and bad chunk sizes; what they let through and this rejects:
 *
 * - on an HTTP/1 connection, any version but 1.0 and 1.1 (505): llhttp accepts `HTTP/2.0` and
 *   `HTTP/0.9` request lines, and a request that claimed 2.0 would skip every HTTP/1 check below;
 *   whether a request is HTTP/2 is decided by the connection it came on (its compat stream), never
 *   by the version it states;
 * - HTTP/1.0 with `Transfer-Encoding` (RFC 9112 §6.1: the framing is faulty; 400);
 * - an HTTP/1.1 request without `Host` (RFC 9112 §3.2; 400);
 * - a body on an upgrade or a CONNECT (`Content-Length` other than 0, or any `Transfer-Encoding`):
 *   the bytes after the head become the tunnel's, so an upstream would read the body as a second
 *   request, or wait for one that never comes. An upgrade is what the HTTP/1.1 parser took for one
 *   (llhttp: an `Upgrade` field and `upgrade` among the `Connection` options; Node's server then
 *   hands the socket over with `req.upgrade` set). An `Upgrade` field alone is informational (RFC
 *   9110 §7.8: the sender must list it in `Connection`), so such a request is ordinary: its body is
 *   framed like any other's, and the field, hop-by-hop, is not forwarded (nginx does the same);
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
import { ERRORS } from '../filter/index.js';
import { overHttp2 } from '../listener/index.js';

export interface RequestProblem {
  readonly status: 400 | 501 | 505;
  readonly reason: string;
}

/** The local answer (errors.ts) for a problem: its code, and the code's message with the reason. */
export function problemReply(problem: RequestProblem): { code: 'BAD_REQUEST' | 'NOT_IMPLEMENTED' | 'HTTP_VERSION_NOT_SUPPORTED'; message: string } {
  const code = problem.status === 501 ? 'NOT_IMPLEMENTED' : problem.status === 505 ? 'HTTP_VERSION_NOT_SUPPORTED' : 'BAD_REQUEST';
  return { code, message: `${ERRORS[code].message}: ${problem.reason}` };
}

export function requestProblem(req: DownstreamRequest): RequestProblem | undefined {
  const headers = req.headers;
  const http2 = overHttp2(req);
  if (!http2 && (req.httpVersionMajor !== 1 || req.httpVersionMinor > 1)) return { status: 505, reason: `HTTP/${req.httpVersion} on an HTTP/1 connection` };
  const host = headers.host;
  if (host !== undefined && host.includes('@')) return { status: 400, reason: 'userinfo in Host' };
  if (http2) {
    const authority = headers[':authority'];
    if (host !== undefined && typeof authority === 'string' && authority.toLowerCase() !== host.toLowerCase()) {
      return { status: 400, reason: 'Host and :authority differ' };
    }
    return undefined;
  }
  // RFC 9112 §3.2: an HTTP/1.1 request without Host is a 400 (an HTTP/1.0 one is routed by its
  // absolute-form target if it has one, else it matches no host: 404).
  if (host === undefined && req.httpVersionMinor === 1) return { status: 400, reason: 'no Host header' };
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host' && ++hosts > 1) return { status: 400, reason: 'more than one Host header' };
  }
  const te = headers['transfer-encoding'];
  if (te !== undefined) {
    if (req.httpVersionMinor === 0) return { status: 400, reason: 'Transfer-Encoding in an HTTP/1.0 request' };
    if (te.trim().toLowerCase() !== 'chunked') return { status: 501, reason: `unsupported transfer coding "${te}"` };
  }
  if (req.method === 'CONNECT' || (req as { upgrade?: boolean }).upgrade === true) {
    const length = headers['content-length'];
    if (te !== undefined || (length !== undefined && Number(length) !== 0)) return { status: 400, reason: `a body on ${req.method === 'CONNECT' ? 'a CONNECT' : 'an upgrade'} request` };
  }
  return undefined;
}
