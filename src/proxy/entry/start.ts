/**
 * The start every HTTP request shares, whatever listener took it: its exchange (the client's
 * `x-request-id` kept when valid, the path normalized once, counted in flight, the telemetry told),
 * then the refusals that come before routing (DESIGN §5, §6): an overloaded process sheds it (503),
 * a malformed request gets 400 and its connection closed, an HTTP/2 CONNECT 404 (tunnels are
 * HTTP/1.1's), a URL over the limit 414, a path that does not normalize 400. `undefined`: answered.
 */
import type { Role } from '../../observe/index.js';
import type { Plane } from '../dataplane-options.js';
import type { DownstreamRequest, DownstreamResponse } from '../errors.js';
import { Exchange, abortOnClientClose } from '../exchange.js';
import { MAX_URL_LENGTH, normalizePath, routingAuthority } from '../path.js';
import { newRequestId, validRequestId } from '../request-id.js';
import { overHttp2 } from '../../listener/index.js';
import { problemReply, requestProblem } from '../sanitize.js';

export function startExchange(plane: Plane, req: DownstreamRequest, res: DownstreamResponse, tls: boolean, port = 0, role: Role = 'ingress'): Exchange | undefined {
  const norm = normalizePath(req.url ?? '/');
  const given = req.headers['x-request-id'];
  const requestId = typeof given === 'string' && validRequestId(given) ? given : newRequestId();
  const url = req.url ?? '/';
  const host = routingAuthority(url, (req.headers[':authority'] as string | undefined) ?? req.headers.host ?? '');
  const peer = req.socket?.remoteAddress ?? '';
  plane.inFlight++;
  const ex = new Exchange(
    req, res, requestId,
    norm.ok ? norm.path : req.url ?? '',
    norm.ok ? norm.query : '',
    host, peer, plane.opts.deps.clock.now(), plane.opts.deps.clock, plane,
  );
  ex.tls = tls;
  ex.listenerPort = port;
  plane.opts.telemetry?.requestStart(ex, role);
  abortOnClientClose(ex);
  // Shed before any work: an overloaded process answers at once instead of queueing.
  if (plane.opts.overload?.shed()) {
    ex.reply({ code: 'OVERLOADED' });
    return undefined;
  }
  const problem = requestProblem(req);
  if (problem) {
    // The connection is closed after the answer: its framing can no longer be trusted.
    // (The listener serves nothing after it on that connection: see src/listener/closing.ts.)
    ex.reply({ ...problemReply(problem), ...(overHttp2(req) ? {} : { headers: { connection: 'close' } }) });
    return undefined;
  }
  // Only an HTTP/2 CONNECT gets here (HTTP/1.1's go to Tunnels): tunnels to `tcp` ports are
  // HTTP/1.1 CONNECTs, and nothing else is ever a tunnel (never an open proxy).
  if (req.method === 'CONNECT') {
    ex.reply({ code: 'NO_ROUTE' });
    return undefined;
  }
  if (url.length > MAX_URL_LENGTH) {
    ex.reply({ code: 'URI_TOO_LONG' });
    return undefined;
  }
  if (!norm.ok) {
    ex.reply({ code: 'BAD_REQUEST', message: `bad request: ${norm.reason}` });
    return undefined;
  }
  return ex;
}
