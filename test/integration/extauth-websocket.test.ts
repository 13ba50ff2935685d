/**
 * WebSocket upgrades are authorized like any request: a denied upgrade gets the denial on the raw
 * socket and never reaches the app; an allowed one reaches it with the auth server's header and
 * query mutations; exclusions apply; through a standalone sidecar too. (A request with
 * `Upgrade: websocket` must not be a way around external authorization.)
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { ALIAS, records, startPlane, startSidecarBehindIngress } from '../helpers/harness.js';
import { allow, startGrpcAuth, type GrpcAnswer } from '../fixtures/extauth/servers.js';
import { encodeFrame, readBytes, readHead, wsUpgradeHandler } from '../fixtures/ws.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

async function wsApp(t: Test): Promise<{ port: number; seen: http.IncomingMessage[]; plain: string[] }> {
  const seen: http.IncomingMessage[] = [];
  const plain: string[] = [];
  const server = http.createServer((req, res) => {
    plain.push(req.url ?? '');
    res.end('secret admin page');
  });
  server.on('upgrade', wsUpgradeHandler(seen));
  // Upgraded sockets are not the server's any more (closeAllConnections skips them).
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => sockets.add(s));
  t.teardown(() => new Promise<void>((resolve) => {
    for (const s of sockets) s.destroy();
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, seen, plain };
}

async function upgrade(port: number, path: string, extra = ''): Promise<{ socket: net.Socket; status: number; headers: Record<string, string>; rest: Buffer }> {
  const socket = net.connect(port, '127.0.0.1');
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: ${CANONICAL}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${extra}\r\n`,
  );
  const head = await readHead(socket);
  return { socket, ...head };
}

function tags(authPort: number) {
  return { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': authPort, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false };
}

t.test('upgrades through the ingress: denied, allowed with mutations, excluded', async (t) => {
  const app = await wsApp(t);
  let answer: GrpcAnswer = { status: { code: 7 } };
  const auth = await startGrpcAuth(t, () => answer);
  const plane = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
      tags: tags(auth.port),
      workloadSpec: { sidecar: { envoy: { excludedExternalAuth: [{ match: { prefix: '/public' } }] } } },
    }),
  );
  await plane.ready();

  const denied = await upgrade(plane.port, '/admin');
  t.equal(denied.status, 403, 'a denied upgrade gets 403');
  t.equal(app.seen.length + app.plain.length, 0, 'the app saw nothing');
  t.equal(auth.calls.length, 1);
  t.equal(auth.calls[0]!.attributes.request.http.path, '/admin');
  t.equal(auth.calls[0]!.attributes.request.http.headers.upgrade, undefined, 'hop-by-hop headers are not in the check');
  denied.socket.destroy();

  answer = { status: { code: 16 }, denied_response: { status: { code: 'Unauthorized' }, headers: [{ header: { key: 'www-authenticate', value: 'Bearer' } }], body: 'login' } };
  const custom = await upgrade(plane.port, '//admin/../admin');
  t.equal(custom.status, 401);
  t.equal(custom.headers['www-authenticate'], 'Bearer');
  t.equal(auth.calls.at(-1)!.attributes.request.http.path, '/admin', 'the normalized path');
  custom.socket.destroy();

  answer = allow({ headers: [{ header: { key: 'x-user', value: 'dana' } }], query_parameters_to_set: [{ key: 'who', value: 'dana' }] });
  const allowed = await upgrade(plane.port, '/chat?room=1');
  t.equal(allowed.status, 101, 'an allowed upgrade switches protocols');
  t.equal(app.seen.at(-1)!.headers['x-user'], 'dana', 'with the header mutation');
  t.equal(app.seen.at(-1)!.url, '/chat?room=1&who=dana', 'and the query mutation');
  const frame = encodeFrame(1, Buffer.from('ping'));
  allowed.socket.write(Buffer.concat([frame.subarray(0, 1), Buffer.from([0x80 | 4, 1, 2, 3, 4]), Buffer.from('ping').map((b, i) => b ^ [1, 2, 3, 4][i % 4]!)]));
  const echoed = await readBytes(allowed.socket, 6, allowed.rest);
  t.equal(echoed.subarray(2, 6).toString(), 'ping', 'frames flow both ways');
  allowed.socket.destroy();

  const before = auth.calls.length;
  answer = { status: { code: 7 } };
  const excluded = await upgrade(plane.port, '/public/feed');
  t.equal(excluded.status, 101, 'an excluded path is not checked');
  t.equal(auth.calls.length, before);
  excluded.socket.destroy();
});

t.test('upgrades through a standalone sidecar are checked there, once', async (t) => {
  const app = await wsApp(t);
  const auth = await startGrpcAuth(t, () => ({ status: { code: 7 } }));
  const base = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags: tags(auth.port) });
  const { ingress } = await startSidecarBehindIngress(t, base, app.port);
  await ingress.ready();
  const res = await upgrade(ingress.port, '/admin');
  t.equal(res.status, 403);
  t.equal(auth.calls.length, 1, 'checked by the sidecar only');
  t.equal(app.seen.length + app.plain.length, 0);
  res.socket.destroy();
});
