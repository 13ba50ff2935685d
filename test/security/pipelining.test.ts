/**
 * What follows a request the proxy refuses, and what precedes one it cannot read, on raw HTTP/1.1
 * connections (RFC 9112 §9.6: after an error that closes the connection, no further request is
 * processed). A refused request (bad framing, two Hosts, userinfo, an HTTP version the proxy does
 * not speak) is answered and the connection closed; nothing pipelined behind it reaches any
 * upstream, on every path: the quick path, Node's server, upgrades and CONNECT. A request already
 * forwarded before a later one went bad gets its whole answer first; the proxy's error never takes
 * its place.
 */
import http2 from 'node:http2';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { raw, startRecorder } from './fixtures.js';

const H = `api-${ALIAS}.app.localhost`;
const SMUGGLED = `GET /SMUGGLED HTTP/1.1\r\nHost: ${H}\r\n\r\n`;

/**
 * A recording upstream whose `/slow` requests are answered only when released: `nextSlow()` gives the
 * next one's gate (when it arrived, and its release). Everything else is answered at once.
 */
async function slowRecorder(t: Parameters<typeof startRecorder>[0]) {
  const gates: { arrived: () => void; released: Promise<void> }[] = [];
  const up = await startRecorder(t, (req, res) => {
    if (req.url !== '/slow') return false;
    const gate = gates.shift();
    if (!gate) return false;
    gate.arrived();
    void gate.released.then(() => res.end('slow answer'));
    return true;
  });
  return {
    ...up,
    nextSlow: () => {
      let arrived: () => void = () => undefined;
      let release: () => void = () => undefined;
      const gate = { arrived: () => arrived(), released: new Promise<void>((r) => (release = r)) };
      const arrivedP = new Promise<void>((r) => (arrived = r));
      gates.push(gate);
      t.teardown(() => release());
      return { arrived: arrivedP, release: () => release() };
    },
  };
}

t.test('nothing pipelined behind a refused request reaches an upstream', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const cases: [name: string, bytes: string, status: number][] = [
    ['a coding the proxy does not speak', `POST /x HTTP/1.1\r\nHost: ${H}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`, 501],
    ['two Host headers', `GET /a HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\n\r\n${SMUGGLED}`, 400],
    ['two Host headers with a body', `POST /a HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\nContent-Length: 3\r\n\r\nabc${SMUGGLED}`, 400],
    ['userinfo in Host (quick path)', `GET /a HTTP/1.1\r\nHost: user@${H}\r\n\r\n${SMUGGLED}`, 400],
    ['userinfo in Host (Node path)', `POST /a HTTP/1.1\r\nHost: user@${H}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`, 400],
    ['an h2c upgrade with two Hosts', `GET /a HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n${SMUGGLED}`, 400],
    ['a WebSocket upgrade with two Hosts', `GET /ws HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n${SMUGGLED}`, 400],
    ['a CONNECT with two Hosts', `CONNECT ${H}:8080 HTTP/1.1\r\nHost: ${H}:8080\r\nHost: evil.example\r\n\r\n${SMUGGLED}`, 400],
    ['HTTP/1.0 with Transfer-Encoding', `POST /a HTTP/1.0\r\nHost: ${H}\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`, 400],
    ['HTTP/2.0 in a request line, two Hosts', `GET /a HTTP/2.0\r\nHost: ${H}\r\nHost: evil.example\r\n\r\n${SMUGGLED}`, 505],
    ['HTTP/2.0 in a request line, a coding', `POST /x HTTP/2.0\r\nHost: ${H}\r\nTransfer-Encoding: gzip, chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`, 505],
    ['HTTP/2.0 in a plain request line', `GET /a HTTP/2.0\r\nHost: ${H}\r\n\r\n${SMUGGLED}`, 505],
    ['a WebSocket upgrade with a body', `GET /ws HTTP/1.1\r\nHost: ${H}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nContent-Length: ${SMUGGLED.length}\r\n\r\n${SMUGGLED}`, 400],
    ['a WebSocket upgrade with a chunked body', `GET /ws HTTP/1.1\r\nHost: ${H}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n${SMUGGLED}`, 400],
  ];
  for (const [name, bytes, status] of cases) {
    const before = up.seen.length;
    const answer = await raw(plane.port, bytes, { waitMs: 3000 });
    if (!t.same(answer.statuses, [status], `${name}: one answer, ${status}`)) t.comment(answer.text.slice(0, 800));
    t.ok(answer.closed, `${name}: connection closed`);
    t.same(up.seen.slice(before).map((s) => s.url), [], `${name}: nothing forwarded`);
  }
  t.notOk(up.seen.some((s) => s.url === '/SMUGGLED'), 'the smuggled request never reached the upstream');
});

t.test('HTTP versions other than 1.0 and 1.1 on an HTTP/1 connection: 505 and close', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  // 2.0 and 0.9 pass Node's parser (and are refused by the proxy); the rest fail in the parser.
  for (const version of ['2.0', '3.0', '1.2', '0.9', '2.1', '1.10', '11.1']) {
    const answer = await raw(plane.port, `GET /v HTTP/${version}\r\nHost: ${H}\r\n\r\n`);
    t.same(answer.statuses, [505], `HTTP/${version}: 505`);
    t.match(answer.text, /"code":"HTTP_VERSION_NOT_SUPPORTED"/);
    t.ok(answer.closed, `HTTP/${version}: closed`);
  }
  t.equal(up.seen.length, 0, 'none forwarded');
  const ok = await raw(plane.port, `GET /v HTTP/1.0\r\nHost: ${H}\r\n\r\n`);
  t.same(ok.statuses, [200], 'HTTP/1.0 is served');
});

t.test('an answer already under way is delivered whole before the connection closes', async (t) => {
  const up = await slowRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const cases: [name: string, bytes: string, want: number[]][] = [
    ['Connection: close, then a stray byte', `GET /slow HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\nx`, [200]],
    ['Connection: close, then a request', `GET /slow HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n${SMUGGLED}`, [200]],
    ['HTTP/1.0, then a request', `GET /slow HTTP/1.0\r\nHost: ${H}\r\n\r\n${SMUGGLED}`, [200]],
    ['a malformed request after it', `GET /slow HTTP/1.1\r\nHost: ${H}\r\n\r\nGET /b HTTP/1.1\r\nHost: ${H}\r\nX-A: a\rb\r\n\r\n${SMUGGLED}`, [200, 400]],
    ['two Hosts after it', `GET /slow HTTP/1.1\r\nHost: ${H}\r\n\r\nGET /b HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\n\r\n${SMUGGLED}`, [200, 400]],
    ['a body with two Hosts after it', `POST /slow HTTP/1.1\r\nHost: ${H}\r\nContent-Length: 1\r\n\r\nzGET /b HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\n\r\n${SMUGGLED}`, [200, 400]],
  ];
  for (const [name, bytes, want] of cases) {
    const before = up.seen.length;
    const slow = up.nextSlow();
    const answering = raw(plane.port, bytes, { waitMs: 5000 });
    await slow.arrived;
    // Let the proxy read (and react to) everything the client sent before the answer comes.
    await new Promise((r) => setTimeout(r, 100));
    slow.release();
    const answer = await answering;
    t.same(answer.statuses, want, `${name}: ${want.join(', ')}`);
    t.match(answer.text, /slow answer/, `${name}: the first answer whole`);
    t.ok(answer.closed, `${name}: then closed`);
    t.same(up.seen.slice(before).map((s) => s.url), ['/slow'], `${name}: only the first request forwarded`);
  }
});

t.test('an upgrade in absolute form is routed by its target\'s authority, as a plain request', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const ws = (target: string, host: string): string =>
    `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`;
  const foreign = await raw(plane.port, ws('http://evil.example/ws', H));
  t.same(foreign.statuses, [404], 'a foreign authority in the target: 404, as for a plain request');
  const plain = await raw(plane.port, `GET http://evil.example/ws HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`);
  t.same(plain.statuses, [404], 'the plain request: 404');
  t.equal(up.seen.length, 0, 'none forwarded');
});

t.test('h2c CONNECT to a workload: 404, as on HTTP/1.1', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.destroy());
  const status = await new Promise<number>((resolve, reject) => {
    const stream = session.request({ ':method': 'CONNECT', ':authority': `${H}:8080` });
    stream.on('response', (h) => resolve(Number(h[':status'])));
    stream.on('error', reject);
  });
  t.equal(status, 404);
  const h1 = await raw(plane.port, `CONNECT ${H}:8080 HTTP/1.1\r\nHost: ${H}:8080\r\n\r\n`);
  t.same(h1.statuses, [404], 'HTTP/1.1 CONNECT to an http port: 404');
  t.equal(up.seen.length, 0);
});

t.test('TLS: nothing pipelined behind a refused HTTP/1.1 request is served', async (t) => {
  const dir = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), {
    listenTls: ['127.0.0.1:0'],
    tls: { certFile: `${dir}cert.pem`, keyFile: `${dir}key.pem` },
  });
  await plane.ready();
  const port = plane.runtime.listeners.find((l) => l.tls)!.address.port;
  for (const bytes of [
    `GET /a HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\n\r\n${SMUGGLED}`,
    `GET /a HTTP/2.0\r\nHost: ${H}\r\n\r\n${SMUGGLED}`,
  ]) {
    const socket = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
    socket.on('error', () => undefined);
    socket.once('secureConnect', () => socket.write(bytes));
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    await new Promise((r) => socket.once('close', r));
    t.match(text, /^HTTP\/1\.1 (400|505) /, 'refused');
    t.equal([...text.matchAll(/HTTP\/1\.1 \d{3} /g)].length, 1, 'one answer, then closed');
  }
  t.equal(up.seen.length, 0, 'nothing forwarded');
});

t.test('TLS: an answer under way is delivered whole before a malformed request closes the connection', async (t) => {
  const dir = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));
  const up = await slowRecorder(t);
  const slow = up.nextSlow();
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), {
    listenTls: ['127.0.0.1:0'],
    tls: { certFile: `${dir}cert.pem`, keyFile: `${dir}key.pem` },
  });
  await plane.ready();
  const port = plane.runtime.listeners.find((l) => l.tls)!.address.port;
  const socket = tls.connect({ port, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
  socket.on('error', () => undefined);
  socket.once('secureConnect', () => socket.write(`GET /slow HTTP/1.1\r\nHost: ${H}\r\n\r\nGET /b HTTP/1.1\r\nHost: ${H}\r\nX-A: a\rb\r\n\r\n${SMUGGLED}`));
  let text = '';
  socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
  const closed = new Promise((r) => socket.once('close', r));
  await slow.arrived;
  await new Promise((r) => setTimeout(r, 100));
  slow.release();
  await closed;
  t.same([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1])), [200, 400], 'the answer, then the 400');
  t.match(text, /slow answer/, 'the first answer whole');
  t.same(up.seen.map((s) => s.url), ['/slow']);
});
