/**
 * `ok_response.response_headers_to_add` meets the app's own response headers as Envoy's
 * `HeaderValueOption` says: `append: true` adds another value next to the app's (a second header
 * line), `append: false` or neither field set replaces it, and without `append` the `append_action`
 * decides (ADD_IF_ABSENT, OVERWRITE_IF_EXISTS, OVERWRITE_IF_EXISTS_OR_ADD) — on the app's answer, a
 * local reply and the 101 of a WebSocket upgrade. A real app, a real ingress and a real
 * authorization server built from Envoy's own protos.
 */
import t from 'tap';
import http from 'node:http';
import { ALIAS, records, startHttpServer, startPlane, type TapLike } from '../helpers/harness.js';
import { allow, startGrpcAuth } from '../fixtures/extauth/servers.js';
import { rawConnect, startWsApp, upgradeRequest } from '../fixtures/tunnels.js';
import { readHead } from '../fixtures/ws.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

/** Every value of `name` among the raw header lines, in order. */
function lines(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if (raw[i]!.toLowerCase() === name) out.push(raw[i + 1]!);
  return out;
}

function get(port: number, path: string): Promise<{ status: number; raw: string[] }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, agent: false, headers: { host: CANONICAL } }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode ?? 0, raw: res.rawHeaders }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** An ingress in front of the app on `appPort`, checking every request with the gRPC auth server on `authPort`. */
async function authorizedPlane(t: TapLike, appPort: number, authPort: number) {
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${appPort}`] },
    tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': authPort, 'svc/externalAuthScheme': 'http' },
  }));
  await plane.ready();
  return plane;
}

t.test('response_headers_to_add: append adds a value, set replaces, append_action is honored', async (t) => {
  const app = await startHttpServer(t, (_req, res) => {
    res.setHeader('x-tag', 'app');
    res.setHeader('set-cookie', ['a=1']);
    res.setHeader('x-replace', 'app');
    res.setHeader('x-default', 'app');
    res.setHeader('x-keep', 'app');
    res.setHeader('x-only', 'app');
    res.setHeader('x-overwrite', 'app');
    res.end('ok');
  });
  const auth = await startGrpcAuth(t, () => allow({
    response_headers_to_add: [
      { header: { key: 'x-tag', value: 'auth' }, append: { value: true } },
      { header: { key: 'Set-Cookie', value: 'b=2' }, append: { value: true } },
      { header: { key: 'x-replace', value: 'auth' }, append: { value: false } },
      { header: { key: 'x-default', value: 'auth' } },
      { header: { key: 'x-keep', value: 'auth' }, append_action: 'ADD_IF_ABSENT' },
      { header: { key: 'x-new', value: 'auth' }, append_action: 'ADD_IF_ABSENT' },
      { header: { key: 'x-only', value: 'auth' }, append_action: 'OVERWRITE_IF_EXISTS' },
      { header: { key: 'x-not-there', value: 'auth' }, append_action: 'OVERWRITE_IF_EXISTS' },
      { header: { key: 'x-overwrite', value: 'auth' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' },
      { header: { key: 'x-twice', value: 'one' }, append: { value: true } },
      { header: { key: 'x-twice', value: 'two' }, append: { value: true } },
      // The deprecated `append` wins over `append_action` when both are sent.
      { header: { key: 'x-both', value: 'auth' }, append: { value: false }, append_action: 'ADD_IF_ABSENT' },
    ],
  }));
  const plane = await authorizedPlane(t, app.port, auth.port);

  const res = await get(plane.port, '/');
  t.equal(res.status, 200);
  t.same(lines(res.raw, 'x-tag'), ['app', 'auth'], 'append: true keeps the app\'s value and adds one');
  t.same(lines(res.raw, 'set-cookie'), ['a=1', 'b=2'], 'a second Set-Cookie, not a replaced one');
  t.same(lines(res.raw, 'x-replace'), ['auth'], 'append: false replaces');
  t.same(lines(res.raw, 'x-default'), ['auth'], 'neither field set replaces (ext_authz: append defaults to false)');
  t.same(lines(res.raw, 'x-keep'), ['app'], 'ADD_IF_ABSENT leaves the app\'s header');
  t.same(lines(res.raw, 'x-new'), ['auth'], 'ADD_IF_ABSENT adds a missing one');
  t.same(lines(res.raw, 'x-only'), ['auth'], 'OVERWRITE_IF_EXISTS replaces an existing header');
  t.same(lines(res.raw, 'x-not-there'), [], 'OVERWRITE_IF_EXISTS does not add');
  t.same(lines(res.raw, 'x-overwrite'), ['auth'], 'OVERWRITE_IF_EXISTS_OR_ADD replaces');
  t.same(lines(res.raw, 'x-twice'), ['one', 'two'], 'two appends of an absent header: both values');
  t.same(lines(res.raw, 'x-both'), ['auth'], 'append wins over append_action');
});

t.test('response_headers_to_add also reach a local reply after an allowed check', async (t) => {
  const auth = await startGrpcAuth(t, () => allow({
    response_headers_to_add: [{ header: { key: 'x-auth', value: 'one' }, append: { value: true } }, { header: { key: 'x-auth', value: 'two' }, append: { value: true } }],
  }));
  // An app that resets every request: the allowed request ends in the proxy's own 503.
  const app = await startHttpServer(t, (req) => req.socket.destroy());
  const plane = await authorizedPlane(t, app.port, auth.port);
  const res = await get(plane.port, '/');
  t.equal(res.status, 503);
  t.same(lines(res.raw, 'x-auth'), ['one', 'two']);
});

t.test('response_headers_to_add reach the 101 of an allowed WebSocket upgrade, over the app\'s', async (t) => {
  const ws = await startWsApp(t);
  const auth = await startGrpcAuth(t, () => allow({
    response_headers_to_add: [
      { header: { key: 'x-auth', value: 'yes' } },
      { header: { key: 'x-upstream-path', value: 'replaced' }, append_action: 'OVERWRITE_IF_EXISTS' },
    ],
  }));
  const plane = await authorizedPlane(t, ws.port, auth.port);
  const socket = await rawConnect(t, plane.port);
  socket.write(upgradeRequest(CANONICAL, '/chat'));
  const head = await readHead(socket);
  t.equal(head.status, 101);
  t.equal(head.headers['x-auth'], 'yes');
  t.equal(head.headers['x-upstream-path'], 'replaced', 'the app\'s header, overwritten');
  t.ok(head.headers['sec-websocket-accept'], 'the app\'s handshake headers are kept');
});
