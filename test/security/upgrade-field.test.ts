/**
 * An `Upgrade` field without `upgrade` in `Connection` asks for nothing (RFC 9110 §7.8; llhttp reads
 * the request as an ordinary one): the proxy forwards it as an ordinary request, body and all,
 * without the `Upgrade` field (hop-by-hop, as every name `Connection` lists), on the quick path and
 * on Node's path (a listener that counts requests per connection has no quick path; a chunked body
 * always goes to Node's server). The connection stays usable: the body was not taken for a request.
 * A genuine upgrade (`Connection: Upgrade` + `Upgrade: websocket`, no body) still switches protocols,
 * and an upgrade with a body is still refused 400 with nothing forwarded. Issue 35; nginx 1.22
 * forwards such a request too.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { readPlainRequestHead } from '../../src/http1/request-line.js';
import { ALIAS, records, startPlane, type TapLike } from '../helpers/harness.js';
import { acceptKey, readBytes, readHead, wsUpgradeHandler } from '../fixtures/ws.js';

const H = `api-${ALIAS}.app.localhost`;

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** An upstream that records ordinary requests (answering `ok` after the body) and takes WebSocket upgrades. */
async function upstream(t: TapLike): Promise<{ port: number; seen: Seen[]; upgrades: http.IncomingMessage[] }> {
  const seen: Seen[] = [];
  const upgrades: http.IncomingMessage[] = [];
  const server = http.createServer((req, res) => {
    const entry: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: '' };
    req.on('data', (c: Buffer) => (entry.body += c.toString('latin1')));
    req.on('end', () => {
      seen.push(entry);
      res.end('ok');
    });
  });
  server.on('upgrade', wsUpgradeHandler(upgrades));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  return { port: (server.address() as net.AddressInfo).port, seen, upgrades };
}

/** Writes `bytes` on `socket` and reads one answer: its head, and a Content-Length body. */
async function exchange(socket: net.Socket, bytes: string): Promise<{ status: number; headers: Record<string, string>; body: string }> {
  socket.write(bytes, 'latin1');
  const head = await readHead(socket);
  const length = Number(head.headers['content-length'] ?? 0);
  const body = length > 0 ? (await readBytes(socket, length, head.rest)).subarray(0, length) : Buffer.alloc(0);
  return { status: head.status, headers: head.headers, body: body.toString('latin1') };
}

async function connect(t: TapLike, port: number): Promise<net.Socket> {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  await once(socket, 'connect');
  return socket;
}

const POST_UPGRADE = `POST /x HTTP/1.1\r\nHost: ${H}\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\nhello`;
const ORDINARY: [name: string, bytes: string, body: string][] = [
  ['POST, Upgrade: websocket, a Content-Length body', POST_UPGRADE, 'hello'],
  ['the same with Connection: keep-alive', `POST /x HTTP/1.1\r\nHost: ${H}\r\nConnection: keep-alive\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\nhello`, 'hello'],
  ['GET, Upgrade: h2c, no body', `GET /x HTTP/1.1\r\nHost: ${H}\r\nUpgrade: h2c\r\n\r\n`, ''],
  ['GET, Upgrade: websocket with its key, no Connection', `GET /x HTTP/1.1\r\nHost: ${H}\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`, ''],
  ['a chunked body (Node\'s server on every listener)', `POST /x HTTP/1.1\r\nHost: ${H}\r\nUpgrade: websocket\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n`, 'hello'],
  ['Connection naming another field', `POST /x HTTP/1.1\r\nHost: ${H}\r\nConnection: X-Hop\r\nX-Hop: 1\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\nhello`, 'hello'],
];

t.test('the quick reader serves an Upgrade field that Connection does not list', async (t) => {
  t.ok(readPlainRequestHead(Buffer.from(POST_UPGRADE, 'latin1'), 64 * 1024), 'the issue\'s request is the quick path\'s');
  t.notOk(readPlainRequestHead(Buffer.from(`GET / HTTP/1.1\r\nHost: ${H}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n`, 'latin1'), 64 * 1024), 'an upgrade is Node\'s');
});

for (const [path, limits] of [['the quick path', {}], ['Node\'s path', { maxRequestsPerConnection: 1000 }]] as const) {
  t.test(`${path}: forwarded as an ordinary request, without Upgrade`, async (t) => {
    const up = await upstream(t);
    const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), { limits });
    await plane.ready();
    for (const [name, bytes, body] of ORDINARY) {
      const socket = await connect(t, plane.port);
      const before = up.seen.length;
      const answer = await exchange(socket, bytes);
      t.equal(answer.status, 200, `${name}: 200`);
      t.equal(answer.body, 'ok', `${name}: the upstream's answer`);
      const got = up.seen.slice(before);
      t.equal(got.length, 1, `${name}: one request upstream`);
      t.equal(got[0]?.body, body, `${name}: the body arrived`);
      t.equal(got[0]?.headers.upgrade, undefined, `${name}: no Upgrade upstream`);
      t.notMatch(String(got[0]?.headers.connection ?? ''), /upgrade|x-hop/i, `${name}: nor a Connection naming it`);
      t.equal(got[0]?.headers['x-hop'], undefined, `${name}: a field Connection names is hop-by-hop`);
      // The same connection serves the next request: the body was read as this request's body.
      const next = await exchange(socket, `GET /after HTTP/1.1\r\nHost: ${H}\r\n\r\n`);
      t.equal(next.status, 200, `${name}: the connection serves the next request`);
      t.same(up.seen.slice(before).map((s) => s.url), ['/x', '/after'], `${name}: nothing else reached the upstream`);
    }
    t.equal(up.upgrades.length, 0, 'no upgrade reached the upstream');
  });

  t.test(`${path}: a genuine upgrade switches protocols; one with a body is still refused`, async (t) => {
    const up = await upstream(t);
    const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), { limits });
    await plane.ready();
    const key = 'dGhlIHNhbXBsZSBub25jZQ==';
    const socket = await connect(t, plane.port);
    socket.write(`GET /raw HTTP/1.1\r\nHost: ${H}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\n\r\n`);
    const head = await readHead(socket);
    t.equal(head.status, 101);
    t.equal(head.headers['sec-websocket-accept'], acceptKey(key));
    socket.write('ping');
    t.equal((await readBytes(socket, 4, head.rest)).toString(), 'ping', 'the tunnel carries bytes both ways');
    t.equal(up.upgrades[0]?.headers.upgrade, 'websocket', 'the upstream got the upgrade');

    const refused = await connect(t, plane.port);
    const before = up.seen.length + up.upgrades.length;
    refused.write(`GET /ws HTTP/1.1\r\nHost: ${H}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ${key}\r\nContent-Length: 5\r\n\r\nhello`);
    const answer = await readHead(refused);
    t.equal(answer.status, 400, 'an upgrade with a body: 400, as before');
    t.equal(up.seen.length + up.upgrades.length, before, 'nothing forwarded');
  });
}
