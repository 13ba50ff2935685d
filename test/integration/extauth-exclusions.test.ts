/**
 * `excludedExternalAuth` from the GVC and the workload, end to end, and the one normalized path:
 * each spelling of a protected path that tries to look like an excluded one is either checked (and
 * denied) or rejected with 400 — never forwarded unchecked.
 */
import t, { type Test } from 'tap';
import net from 'node:net';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
import { startGrpcAuth } from '../fixtures/extauth/servers.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

async function setup(t: Test, gvcExclusions: unknown[] | undefined, workloadExclusions: unknown[] | undefined) {
  const app = await startHttpServer(t, echoHandler('app'));
  // Denies everything: a request that reaches the app was not checked.
  const auth = await startGrpcAuth(t, () => ({ status: { code: 7 } }));
  const plane = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
      tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': auth.port, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false },
      ...(gvcExclusions ? { gvcSpec: { sidecar: { envoy: { excludedExternalAuth: gvcExclusions } } } } : {}),
      ...(workloadExclusions ? { workloadSpec: { sidecar: { envoy: { excludedExternalAuth: workloadExclusions } } } } : {}),
    }),
  );
  await plane.ready();
  return { auth, plane };
}

/** Send a request target byte for byte (no client-side normalization). */
function rawRequest(port: number, target: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`GET ${target} HTTP/1.1\r\nHost: ${CANONICAL}\r\nConnection: close\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (c: Buffer) => (data += c.toString('latin1')));
    socket.on('end', () => resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(data)?.[1] ?? 0)));
    socket.on('error', reject);
  });
}

t.test('exclusions from the GVC and the workload', async (t) => {
  const { auth, plane } = await setup(
    t,
    [{ match: { prefix: '/public' } }],
    [
      { match: { path: '/health' } },
      { match: { safe_regex: { regex: '/static/[a-z]+\\.css' } } },
      { match: { prefix: '/api', headers: [{ name: 'x-skip-auth', exact_match: 'yes' }] } },
      { match: { prefix: '/q', query_parameters: [{ name: 'token', present_match: true }] } },
      { match: { prefix: '/Mixed', case_sensitive: false } },
    ],
  );
  const cases: [path: string, headers: Record<string, string>, status: number][] = [
    ['/public/page', {}, 200],
    ['/public', {}, 200],
    ['/health', {}, 200],
    ['/health/deep', {}, 403],
    ['/healthz', {}, 403],
    ['/static/site.css', {}, 200],
    ['/static/site.css.map', {}, 403],
    ['/api/x', { 'x-skip-auth': 'yes' }, 200],
    ['/api/x', { 'x-skip-auth': 'no' }, 403],
    ['/api/x', {}, 403],
    ['/q?token=1', {}, 200],
    ['/q?other=1', {}, 403],
    ['/mixed/ok', {}, 200],
    ['/MIXED/ok', {}, 200],
    ['/admin', {}, 403],
  ];
  for (const [path, headers, status] of cases) {
    const before = auth.calls.length;
    const res = await request(plane.port, CANONICAL, path, { headers });
    t.equal(res.status, status, `${path} ${JSON.stringify(headers)} → ${status}`);
    t.equal(auth.calls.length - before, status === 200 ? 0 : 1, status === 200 ? 'no call' : 'checked once');
  }
});

t.test('svcPort exclusion: the container port the request is for', async (t) => {
  const { auth, plane } = await setup(t, undefined, [{ svcPort: 8080 }]);
  t.equal((await request(plane.port, CANONICAL, '/anything')).status, 200);
  t.equal(auth.calls.length, 0);
  const other = await setup(t, undefined, [{ svcPort: 9090 }]);
  t.equal((await request(other.plane.port, CANONICAL, '/anything')).status, 403);
});

t.test('a protected path never passes as an excluded one', async (t) => {
  const { auth, plane } = await setup(t, [{ match: { prefix: '/public' } }], undefined);
  t.equal(await rawRequest(plane.port, '/public/ok'), 200, 'the exclusion works');
  for (const target of ['/admin', '//admin', '/public/../admin', '/public/%2e%2e/admin', '/public/%2E%2E/admin', '/public/./../admin', '/ADMIN', '/PUBLIC/x', '/public/../../admin']) {
    const before = auth.calls.length;
    t.equal(await rawRequest(plane.port, target), 403, `${target} is checked (and denied)`);
    t.equal(auth.calls.length - before, 1);
    if (target.toLowerCase().includes('admin')) {
      t.match(auth.calls.at(-1)!.attributes.request.http.path, /^\/(admin|ADMIN)$/, 'the auth server sees the normalized path');
    }
  }
  for (const target of ['/public%2F..%2Fadmin', '/public%2f..%2fadmin', '/public/..;/admin', '/public/..%3B/admin', '/public%5C..%5Cadmin']) {
    const before = auth.calls.length;
    t.equal(await rawRequest(plane.port, target), 400, `${target} is rejected`);
    t.equal(auth.calls.length - before, 0);
  }
});
