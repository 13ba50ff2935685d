/**
 * CONNECT tunnels to `tcp` ports are authorized and rate-limited like any request (as WebSocket
 * upgrades are): a real ingress, a real TCP echo app, a real authorization server built from Envoy's
 * external_auth.proto (and an HTTP-mode one), a real rate-limit server built from Envoy's rls.proto.
 * The check sees method CONNECT, no path and the authority; a denial (the server's status, headers
 * and body) or a failed check under fail-closed is answered before the tunnel opens and the app
 * never sees a connection; fail-open lets it through; `svcPort` exclusions apply and path rules never
 * match a CONNECT; through a standalone sidecar the sidecar checks it, once, and its answer reaches
 * the client.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import type net from 'node:net';
import type { AddressInfo } from 'node:net';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { allow, deadPort, startGrpcAuth, type GrpcAnswer } from '../fixtures/extauth/servers.js';
import { startEnvoyRls } from '../fixtures/ratelimit/servers.js';
import { readAll, readBytes, readHead, type RawHead } from '../fixtures/ws.js';
import { connectRequest, rawConnect, startTcpEcho } from '../fixtures/tunnels.js';

const LOCATION = 'aws-us-east-2';
const DB = `db-${ALIAS}.app.localhost:5432`;

function authTags(port: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': port, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false, ...extra };
}

function dbRecords(appPort: number, tags: Record<string, unknown>, workloadSpec: Record<string, unknown> = {}): Record<string, unknown>[] {
  return records({ workload: 'db', ports: [{ number: 5432, protocol: 'tcp' }], replicas: { [LOCATION]: [`127.0.0.1:${appPort}`] }, tags, workloadSpec });
}

/**
 * A CONNECT with bytes right behind its head, as clients that do not wait for the 200 send them: a
 * tunnel that opened delivers them to the echo app (and gets them back first).
 */
async function tunnel(t: Test, port: number, extra = ''): Promise<{ socket: net.Socket; head: RawHead }> {
  const socket = await rawConnect(t, port);
  socket.write(`${connectRequest(DB, extra)}early`);
  const head = await readHead(socket);
  if (head.status !== 200) return { socket, head };
  const early = await readBytes(socket, 5, head.rest);
  return { socket, head: { ...head, rest: early.subarray(5) } };
}

/** The tunnel works: bytes sent come back from the echo app. */
async function echoes(socket: net.Socket, head: RawHead): Promise<boolean> {
  socket.write('ping');
  return (await readBytes(socket, 4, head.rest)).toString() === 'ping';
}

t.test('gRPC mode: the check Envoy sends for a CONNECT; deny, allow, failure modes', async (t) => {
  const echo = await startTcpEcho(t);
  let answer: GrpcAnswer = { status: { code: 7 } };
  const auth = await startGrpcAuth(t, () => answer);
  const plane = await startPlane(t, dbRecords(echo.port, authTags(auth.port)));
  await plane.ready();

  const denied = await tunnel(t, plane.port, 'authorization: Bearer abc\r\nx-request-id: tun-1\r\n');
  t.equal(denied.head.status, 403, 'denied before the tunnel opens');
  t.match(JSON.parse(Buffer.concat([denied.head.rest, await readAll(denied.socket)]).toString()), { code: 'AUTH_DENIED', id: 'tun-1' });
  t.equal(echo.carried(), 0, 'the app saw no connection');
  t.equal(auth.calls.length, 1);
  const h = auth.calls[0]!.attributes.request.http;
  t.equal(h.method, 'CONNECT');
  t.equal(h.path, '', 'a CONNECT has no path');
  t.equal(h.host, DB, 'the authority');
  t.equal(h.id, 'tun-1');
  t.equal(h.headers[':method'], 'CONNECT');
  t.equal(h.headers[':authority'], DB);
  t.notOk(':path' in h.headers, 'no :path header');
  t.equal(h.headers.authorization, 'Bearer abc', 'the client\'s headers');
  t.equal(h.headers['x-forwarded-for'], '127.0.0.1');
  t.equal(auth.calls[0]!.attributes.destination.address?.socket_address.port_value, plane.port);

  answer = { status: { code: 16 }, denied_response: { status: { code: 'Unauthorized' }, headers: [{ header: { key: 'proxy-authenticate', value: 'Bearer' } }], body: 'who are you' } };
  const custom = await tunnel(t, plane.port);
  t.equal(custom.head.status, 401, 'the server\'s status');
  t.equal(custom.head.headers['proxy-authenticate'], 'Bearer', 'its headers');
  t.equal(Buffer.concat([custom.head.rest, await readAll(custom.socket)]).toString(), 'who are you', 'its body');

  answer = allow();
  const allowed = await tunnel(t, plane.port);
  t.equal(allowed.head.status, 200, 'allowed: the tunnel opens');
  t.ok(await echoes(allowed.socket, allowed.head), 'and carries bytes');
  allowed.socket.destroy();

  answer = { grpcError: 14 };
  const failed = await tunnel(t, plane.port);
  t.equal(failed.head.status, 403, 'a failed check under fail-closed');
  t.match(JSON.parse(Buffer.concat([failed.head.rest, await readAll(failed.socket)]).toString()), { code: 'AUTH_FAILED', message: 'external authorization failed' });
});

t.test('fail-open lets a CONNECT through when the service is down', async (t) => {
  const echo = await startTcpEcho(t);
  const plane = await startPlane(t, dbRecords(echo.port, authTags(await deadPort(), { 'svc/externalAuthFailureAllow': true })));
  await plane.ready();
  const open = await tunnel(t, plane.port);
  t.equal(open.head.status, 200);
  t.ok(await echoes(open.socket, open.head));
});

t.test('exclusions: svcPort excludes a tunnel; path rules never match a CONNECT', async (t) => {
  const echo = await startTcpEcho(t);
  const auth = await startGrpcAuth(t, () => ({ status: { code: 7 } }));
  const byPort = await startPlane(t, dbRecords(echo.port, authTags(auth.port), { sidecar: { envoy: { excludedExternalAuth: [{ svcPort: 5432 }] } } }));
  await byPort.ready();
  const excluded = await tunnel(t, byPort.port);
  t.equal(excluded.head.status, 200, 'svcPort 5432 is excluded');
  t.equal(auth.calls.length, 0, 'not checked');
  excluded.socket.destroy();

  const byPath = await startPlane(t, dbRecords(echo.port, authTags(auth.port), { sidecar: { envoy: { excludedExternalAuth: [{ match: { prefix: '/' } }] } } }));
  await byPath.ready();
  const checked = await tunnel(t, byPath.port);
  t.equal(checked.head.status, 403, 'prefix "/" does not match a request without a path');
  t.equal(auth.calls.length, 1);
});

t.test('through a standalone sidecar: checked there, once; its answer reaches the client', async (t) => {
  const echo = await startTcpEcho(t);
  let answer: GrpcAnswer = { status: { code: 7 } };
  const auth = await startGrpcAuth(t, () => answer);
  const base = dbRecords(echo.port, authTags(auth.port));
  const sidecar = await startPlane(t, base, { role: 'sidecar', sidecar: { workload: 'shop/db', location: LOCATION, replica: 'db-0', app: `127.0.0.1:${echo.port}` } });
  const withSidecar = base.map((r) => (r.kind === 'deployment'
    ? { ...r, status: { locations: [{ name: LOCATION, replicas: [{ name: 'db-0', address: `127.0.0.1:${echo.port}`, sidecar: `127.0.0.1:${sidecar.port}` }] }] } }
    : r));
  const ingress = await startPlane(t, withSidecar, { location: LOCATION });
  await ingress.ready();

  const denied = await tunnel(t, ingress.port, 'authorization: Bearer abc\r\n');
  t.equal(denied.head.status, 403, 'the sidecar\'s denial, relayed');
  t.match(JSON.parse(Buffer.concat([denied.head.rest, await readAll(denied.socket)]).toString()), { code: 'AUTH_DENIED' });
  t.equal(auth.calls.length, 1, 'checked once, by the sidecar');
  const h = auth.calls[0]!.attributes.request.http;
  t.match(h, { method: 'CONNECT', path: '', host: DB });
  t.equal(h.headers.authorization, 'Bearer abc', 'the client\'s headers reach the sidecar');
  t.equal(auth.calls[0]!.attributes.source.address?.socket_address.address, '127.0.0.1', 'the client address, through the ingress');
  t.equal(echo.carried(), 0);

  answer = allow();
  const allowed = await tunnel(t, ingress.port);
  t.equal(allowed.head.status, 200);
  t.ok(await echoes(allowed.socket, allowed.head), 'client → ingress → sidecar → app and back');
  t.equal(auth.calls.length, 2);
});

t.test('HTTP mode: the check is a CONNECT to the authority, as Envoy sends it', async (t) => {
  const echo = await startTcpEcho(t);
  const calls: http.IncomingMessage[] = [];
  let status = 403;
  const server = http.createServer((_req, res) => res.writeHead(500).end());
  server.on('connect', (req: http.IncomingMessage, socket: net.Socket) => {
    calls.push(req);
    const body = status === 200 ? '' : 'no tunnels for you';
    socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nx-auth: checked\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  });
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const plane = await startPlane(t, dbRecords(echo.port, authTags(port, { 'svc/externalAuthProtocol': 'http', 'svc/externalAuthPathPrefix': '/auth' })));
  await plane.ready();

  const denied = await tunnel(t, plane.port, 'authorization: Basic eA==\r\n');
  t.equal(denied.head.status, 403);
  t.equal(denied.head.headers['x-auth'], 'checked', 'the auth server\'s headers');
  t.equal(Buffer.concat([denied.head.rest, await readAll(denied.socket)]).toString(), 'no tunnels for you', 'and body');
  t.equal(calls.length, 1);
  t.equal(calls[0]!.url, DB, 'CONNECT to the authority (no path, so no prefix)');
  t.equal(calls[0]!.headers.authorization, 'Basic eA==');
  t.equal(calls[0]!.headers.host, DB);

  status = 200;
  const allowed = await tunnel(t, plane.port);
  t.equal(allowed.head.status, 200);
  t.ok(await echoes(allowed.socket, allowed.head));
});

t.test('rate limiting applies to CONNECT as to upgrades: the authority descriptor, 429 over the limit', async (t) => {
  const echo = await startTcpEcho(t);
  let over = true;
  const rls = await startEnvoyRls(t, () => ({ overall_code: over ? 'OVER_LIMIT' : 'OK', statuses: [] }));
  const plane = await startPlane(t, dbRecords(echo.port, { 'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': rls.port, 'svc/rateLimitScheme': 'http' }));
  await plane.ready();
  const limited = await tunnel(t, plane.port);
  t.equal(limited.head.status, 429);
  t.equal(limited.head.headers['x-envoy-ratelimited'], 'true');
  t.same(rls.seen[0]!.descriptors.map((d) => d.entries.map((e) => [e.key, e.value])), [[['authority', DB]]]);
  t.equal(echo.carried(), 0);

  over = false;
  const open = await tunnel(t, plane.port);
  t.equal(open.head.status, 200);
  t.ok(await echoes(open.socket, open.head));
});
