/**
 * `requestProblem`, the head checks Node's parsers leave to the proxy, as a table: duplicate Host
 * lines, userinfo in Host, Host against :authority on HTTP/2, transfer codings other than chunked, a
 * body on an upgrade (what the parser took for one, not any request with an Upgrade field).
 */
import t from 'tap';
import type { DownstreamRequest } from '../../src/proxy/errors.js';
import { requestProblem } from '../../src/proxy/sanitize.js';

/** `upgrade`: Node's server took it for one (llhttp: Upgrade and `Connection: upgrade`), as on its 'upgrade' event. */
function h1(raw: string[], version = '1.1', method = 'GET', upgrade = false): DownstreamRequest {
  const headers: Record<string, string> = {};
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    // As Node: the first Host wins, other repeated headers are joined.
    if (name === 'host' && headers.host !== undefined) continue;
    headers[name] = headers[name] === undefined ? raw[i + 1]! : `${headers[name]}, ${raw[i + 1]!}`;
  }
  const [major, minor] = version.split('.').map(Number);
  return { httpVersion: version, httpVersionMajor: major, httpVersionMinor: minor, method, headers, rawHeaders: raw, upgrade } as unknown as DownstreamRequest;
}

function h2(headers: Record<string, string>): DownstreamRequest {
  // Over HTTP/2 the request has its stream; the version alone proves nothing.
  return { httpVersion: '2.0', httpVersionMajor: 2, httpVersionMinor: 0, stream: {}, headers, rawHeaders: Object.entries(headers).flat() } as unknown as DownstreamRequest;
}

const cases: [name: string, req: DownstreamRequest, problem: string | undefined, status?: number][] = [
  ['one Host', h1(['Host', 'a.example']), undefined],
  ['no Host', h1([]), 'no Host header', 400],
  ['no Host on HTTP/1.0', h1([], '1.0'), undefined],
  ['two Host lines', h1(['Host', 'a.example', 'Host', 'b.example']), 'more than one Host header', 400],
  ['two Host lines, same value', h1(['Host', 'a.example', 'host', 'a.example']), 'more than one Host header', 400],
  ['Host among many headers', h1(['Accept', '*/*', 'Host', 'a.example', 'X-Host', 'b', 'Hostx', 'c']), undefined],
  ['userinfo in Host', h1(['Host', 'u@a.example']), 'userinfo in Host', 400],
  ['Transfer-Encoding: chunked', h1(['Host', 'a', 'Transfer-Encoding', 'chunked']), undefined],
  ['Transfer-Encoding: Chunked (case)', h1(['Host', 'a', 'Transfer-Encoding', ' Chunked ']), undefined],
  ['Transfer-Encoding: gzip, chunked', h1(['Host', 'a', 'Transfer-Encoding', 'gzip, chunked']), 'unsupported transfer coding "gzip, chunked"', 501],
  ['two Transfer-Encoding lines', h1(['Host', 'a', 'Transfer-Encoding', 'gzip', 'Transfer-Encoding', 'chunked']), 'unsupported transfer coding "gzip, chunked"', 501],
  ['HTTP/2, :authority only', h2({ ':authority': 'a.example' }), undefined],
  ['HTTP/2, host only', h2({ host: 'a.example' }), undefined],
  ['HTTP/2, the same in both', h2({ ':authority': 'a.example', host: 'A.EXAMPLE' }), undefined],
  ['HTTP/2, different', h2({ ':authority': 'a.example', host: 'b.example' }), 'Host and :authority differ', 400],
  ['HTTP/2, userinfo in host', h2({ ':authority': 'a.example', host: 'u@a.example' }), 'userinfo in Host', 400],
  ['HTTP/1.0', h1(['Host', 'a'], '1.0'), undefined],
  ['"HTTP/2.0" in an HTTP/1 request line', h1(['Host', 'a', 'Host', 'b'], '2.0'), 'HTTP/2.0 on an HTTP/1 connection', 505],
  ['"HTTP/0.9" in an HTTP/1 request line', h1(['Host', 'a'], '0.9'), 'HTTP/0.9 on an HTTP/1 connection', 505],
  ['"HTTP/1.2"', h1(['Host', 'a'], '1.2'), 'HTTP/1.2 on an HTTP/1 connection', 505],
  ['HTTP/1.0 with Transfer-Encoding', h1(['Host', 'a', 'Transfer-Encoding', 'chunked'], '1.0'), 'Transfer-Encoding in an HTTP/1.0 request', 400],
  ['an upgrade without a body', h1(['Host', 'a', 'Connection', 'Upgrade', 'Upgrade', 'websocket', 'Content-Length', '0'], '1.1', 'GET', true), undefined],
  ['an upgrade with Content-Length', h1(['Host', 'a', 'Connection', 'Upgrade', 'Upgrade', 'websocket', 'Content-Length', '5'], '1.1', 'GET', true), 'a body on an upgrade request', 400],
  ['an upgrade with Transfer-Encoding', h1(['Host', 'a', 'Connection', 'Upgrade', 'Upgrade', 'websocket', 'Transfer-Encoding', 'chunked'], '1.1', 'GET', true), 'a body on an upgrade request', 400],
  // RFC 9110 §7.8: Upgrade is meaningful only when Connection lists it; llhttp reads these as ordinary requests.
  ['an Upgrade field alone, with Content-Length', h1(['Host', 'a', 'Upgrade', 'websocket', 'Content-Length', '5'], '1.1', 'POST'), undefined],
  ['an Upgrade field alone, chunked', h1(['Host', 'a', 'Upgrade', 'websocket', 'Transfer-Encoding', 'chunked'], '1.1', 'POST'), undefined],
  ['an Upgrade field, Connection: keep-alive, a body', h1(['Host', 'a', 'Connection', 'keep-alive', 'Upgrade', 'h2c', 'Content-Length', '5'], '1.1', 'POST'), undefined],
  ['a CONNECT with Content-Length', h1(['Host', 'a:1', 'Content-Length', '1'], '1.1', 'CONNECT'), 'a body on a CONNECT request', 400],
  ['a POST with a body', h1(['Host', 'a', 'Content-Length', '5'], '1.1', 'POST'), undefined],
];

for (const [name, req, reason, status] of cases) {
  const got = requestProblem(req);
  t.same(got, reason === undefined ? undefined : { status, reason }, name);
}
