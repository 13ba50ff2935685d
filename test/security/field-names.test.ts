/**
 * Field-level decisions at the edge where proxies differ (docs/reliability.md, "Hostile input"):
 * - names with underscores are forwarded (Envoy's default), except those that, spelled with dashes,
 *   name a header the proxy sets or strips (`x_forwarded_for`, `x-svc_debug`, ...): CGI-style servers
 *   read both spellings as one variable. `x-forwarded-client-cert` from a client is always removed;
 * - HTTP/2 field values with CR, LF or NUL never reach an upstream (nghttp2 drops the field or resets
 *   the stream; RFC 9113 §8.2.1);
 * - an HTTP/1.1 request without `Host` is 400 (RFC 9112 §3.2); an HTTP/1.0 one without a host 404.
 */
import http2 from 'node:http2';
import t from 'tap';
import { strippedAtEdge } from '../../src/filter/index.js';
import { ALIAS, records, startPlane, waitFor } from '../helpers/harness.js';
import { connectH2, get, headersFrame, raw, startRecorder } from './fixtures.js';

const H = `api-${ALIAS}.app.localhost`;
const STRIP = ['x-envoy-', 'x-svc-'];

t.test('strippedAtEdge, as a table', async (t) => {
  const cases: [string, boolean][] = [
    ['x-svc-debug', true], ['x-envoy-original-path', true], ['x-forwarded-client-cert', true],
    ['x_svc_debug', true], ['x-svc_debug', true], ['x_envoy_upstream', true], ['x_forwarded_for', true],
    ['x-forwarded_for', true], ['x_forwarded_proto', true], ['x_forwarded_host', true], ['x_request_id', true],
    ['x_forwarded_client_cert', true],
    ['x-forwarded-for', false], ['x-request-id', false], ['x_custom', false], ['my_header', false],
    ['content_length', false], ['x-svcx', false], ['accept', false], ['x', false], ['x_', false],
  ];
  for (const [name, stripped] of cases) t.equal(strippedAtEdge(name, STRIP), stripped, name);
});

t.test('underscore spellings of the headers the proxy sets or strips never reach the app', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const forged: [string, string][] = [
    ['X_Forwarded_For', '6.6.6.6'], ['X-Forwarded_Proto', 'https'], ['X_Forwarded_Host', 'evil.example'],
    ['X_Request_Id', 'forged'], ['X-Svc_Debug', 'true'], ['X_Envoy_Original_Path', '/admin'],
    ['X-Forwarded-Client-Cert', 'By=spiffe://evil;URI=spiffe://evil'], ['X_Forwarded_Client_Cert', 'URI=spiffe://evil'],
    ['My_Header', 'kept'],
  ];
  const h1 = await raw(plane.port, `GET /h1 HTTP/1.1\r\nHost: ${H}\r\n${forged.map(([n, v]) => `${n}: ${v}\r\n`).join('')}Connection: close\r\n\r\n`);
  t.same(h1.statuses, [200]);
  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.destroy());
  await new Promise<void>((resolve, reject) => {
    const stream = session.request({ ':path': '/h2', ':authority': H, ...Object.fromEntries(forged.map(([n, v]) => [n.toLowerCase(), v])) });
    stream.on('error', reject);
    stream.resume();
    stream.on('end', () => resolve());
  });
  t.equal(up.seen.length, 2);
  for (const seen of up.seen) {
    const names = Object.keys(seen.headers);
    t.same(names.filter((n) => n.includes('_')), ['my_header'], `${seen.url}: only the harmless underscore name is forwarded`);
    t.equal(seen.headers['my_header'], 'kept');
    t.equal(seen.headers['x-forwarded-for'], '127.0.0.1', `${seen.url}: the proxy's x-forwarded-for alone`);
    t.notOk(seen.headers['x-forwarded-client-cert'], `${seen.url}: no client-sent x-forwarded-client-cert`);
    t.not(seen.headers['x-request-id'], 'forged');
  }
});

t.test('HTTP/2 field values with CR, LF or NUL never reach an upstream', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const h2 = await connectH2(t, plane.port);
  const bad: [string, string][] = [['x-cr', 'a\rb'], ['x-lf', 'a\nInjected: 1'], ['x-crlf', 'a\r\nInjected: 1'], ['x-nul', 'a\0b']];
  let id = 1;
  for (const field of bad) {
    h2.write(headersFrame(id, get(H, `/f${id}`, [field])));
    id += 2;
  }
  // Every stream is answered (the field dropped) or reset: wait until each one is.
  await waitFor(() => {
    const resets = h2.resets();
    const answered = h2.answered();
    for (let s = 1; s < id; s += 2) if (!answered.has(s) && resets[s] === undefined && !h2.closed) return false;
    return true;
  }, 10_000, 'every stream answered or reset');
  for (const seen of up.seen) {
    for (const [name] of bad) t.notOk(name in seen.headers, `${seen.url}: ${name} not forwarded`);
    t.notOk('injected' in seen.headers, `${seen.url}: nothing injected`);
  }
  t.comment(`${up.seen.length} of ${bad.length} requests served without the field, the rest reset`);
});

t.test('a request without Host: 400 on HTTP/1.1, 404 on HTTP/1.0', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const h11 = await raw(plane.port, 'GET / HTTP/1.1\r\n\r\n');
  t.same(h11.statuses, [400], 'HTTP/1.1');
  t.match(h11.text, /no Host header/);
  t.ok(h11.closed);
  const h10 = await raw(plane.port, 'GET / HTTP/1.0\r\n\r\n');
  t.same(h10.statuses, [404], 'HTTP/1.0');
  const absolute = await raw(plane.port, `GET http://${H}/ HTTP/1.0\r\n\r\n`);
  t.same(absolute.statuses, [200], 'HTTP/1.0 in absolute form is routed by its target');
  t.equal(up.seen.length, 1);
});
