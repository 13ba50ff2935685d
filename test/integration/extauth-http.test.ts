/**
 * External authorization in HTTP mode (Envoy's "HTTP service"), end to end with a real HTTP
 * authorization server: what it receives (original method, path prefix + normalized path and
 * query, original Host, only `authorization` and `content-length`, the body prefix), 200 allowing
 * with upstream header prefixes and `x-envoy-auth-headers-to-remove`, any other status denying
 * verbatim, 5xx / transport errors / timeouts following the failure mode.
 */
import t, { type Test } from 'tap';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
import { deadPort, startHttpAuth, type HttpAnswer, type HttpCall } from '../fixtures/extauth/servers.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

async function setup(t: Test, tags: Record<string, unknown>, handler: (call: HttpCall) => HttpAnswer, authPort?: number) {
  const app = await startHttpServer(t, echoHandler('app'));
  const auth = await startHttpAuth(t, handler);
  const plane = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
      tags: {
        'svc/externalAuthAddress': '127.0.0.1',
        'svc/externalAuthPort': authPort ?? auth.port,
        'svc/externalAuthProtocol': 'http',
        'svc/externalAuthScheme': 'http',
        ...tags,
      },
    }),
  );
  await plane.ready();
  return { auth, plane };
}

t.test('allow: what the auth server receives, and the headers copied upstream', async (t) => {
  const { auth, plane } = await setup(
    t,
    { 'svc/externalAuthPathPrefix': '/authz', 'svc/externalAuthUpstreamHeaderPrefixes': 'x-auth-, X-Tenant' },
    () => ({
      status: 200,
      headers: {
        'x-auth-user': 'bob',
        'x-tenant-id': 'acme',
        'x-other': 'not copied',
        'x-envoy-auth-headers-to-remove': 'x-remove-me, authorization',
      },
      body: 'ignored',
    }),
  );
  const res = await request(plane.port, CANONICAL, '/api//v1/./items?q=1&r=%20', {
    method: 'POST',
    body: 'payload',
    headers: { authorization: 'Bearer t0ken', 'x-custom': 'private', 'x-auth-user': 'mallory', 'x-remove-me': 'bye', cookie: 'session=1' },
  });
  t.equal(res.status, 200);
  const seen = JSON.parse(res.body) as { headers: Record<string, string>; body: string };
  t.equal(seen.headers['x-auth-user'], 'bob', 'a prefixed auth header overrides the client value');
  t.equal(seen.headers['x-tenant-id'], 'acme', 'prefixes are case-insensitive and comma-separated');
  t.notOk('x-other' in seen.headers, 'headers without a listed prefix are not copied');
  t.notOk('x-remove-me' in seen.headers, 'x-envoy-auth-headers-to-remove removes');
  t.notOk('authorization' in seen.headers);
  t.notOk('x-envoy-auth-headers-to-remove' in seen.headers);
  t.equal(seen.body, 'payload', 'the app gets the body');

  t.equal(auth.calls.length, 1, 'one round trip per request');
  const call = auth.calls[0]!;
  t.equal(call.method, 'POST', 'the original method');
  t.equal(call.url, '/authz/api/v1/items?q=1&r=%20', 'path prefix + normalized path + query as sent');
  t.equal(call.headers.host, CANONICAL, 'the original Host');
  t.equal(call.headers.authorization, 'Bearer t0ken');
  t.equal(call.headers['content-length'], '7');
  t.equal(call.body.toString(), 'payload', 'the body prefix');
  for (const name of Object.keys(call.headers)) {
    t.ok(['host', 'authorization', 'content-length', 'connection'].includes(name), `only the allowed headers (${name})`);
  }
});

t.test('remove request body: no body, content-length 0', async (t) => {
  const { auth, plane } = await setup(t, { 'svc/externalAuthRemoveRequestBody': true }, () => ({ status: 200 }));
  const res = await request(plane.port, CANONICAL, '/x', { method: 'PUT', body: 'not for the auth server' });
  t.equal(JSON.parse(res.body).body, 'not for the auth server');
  t.equal(auth.calls[0]!.body.length, 0);
  t.equal(auth.calls[0]!.headers['content-length'], '0');
  t.notOk('authorization' in auth.calls[0]!.headers, 'no authorization header when the client sent none');
  const big = Buffer.alloc(30_000, 'y');
  const noRemove = await setup(t, {}, () => ({ status: 200 }));
  const res2 = await request(noRemove.plane.port, CANONICAL, '/big', { method: 'POST', body: big });
  t.equal(JSON.parse(res2.body).body.length, 30_000);
  t.equal(noRemove.auth.calls[0]!.body.length, 8192, 'the first 8 KiB');
  t.equal(noRemove.auth.calls[0]!.headers['content-length'], '8192', 'content-length of what is sent');
});

t.test('deny: any other status passes its status, headers and body to the client', async (t) => {
  let answer: HttpAnswer = { status: 401 };
  const { plane } = await setup(t, {}, () => answer);
  answer = { status: 401, headers: { 'www-authenticate': 'Basic realm="x"', 'content-type': 'text/plain', 'x-why': 'expired' }, body: 'who are you?' };
  const denied = await request(plane.port, CANONICAL, '/');
  t.equal(denied.status, 401);
  t.equal(denied.headers['www-authenticate'], 'Basic realm="x"');
  t.equal(denied.headers['x-why'], 'expired');
  t.equal(denied.body, 'who are you?');

  answer = { status: 302, headers: { location: 'https://login.example/?next=/' } };
  const redirect = await request(plane.port, CANONICAL, '/');
  t.equal(redirect.status, 302);
  t.equal(redirect.headers.location, 'https://login.example/?next=/');
  t.equal(JSON.parse(redirect.body).code, 'AUTH_DENIED', 'no body from the server: the JSON shape');

  answer = { status: 204 };
  t.equal((await request(plane.port, CANONICAL, '/')).status, 204, 'only 200 allows');
});

t.test('5xx, connection refused and timeouts are errors: the failure mode decides', async (t) => {
  const five = await setup(t, {}, () => ({ status: 503, body: 'down' }));
  const res = await request(five.plane.port, CANONICAL, '/');
  t.equal(res.status, 200, 'fail-open by default');
  t.equal(JSON.parse(res.body).headers['x-envoy-auth-failure-mode-allowed'], 'true');

  const fiveClosed = await setup(t, { 'svc/externalAuthFailureAllow': false }, () => ({ status: 500 }));
  const res2 = await request(fiveClosed.plane.port, CANONICAL, '/');
  t.equal(res2.status, 403);
  t.equal(JSON.parse(res2.body).message, 'external authorization failed');

  const port = await deadPort();
  const down = await setup(t, { 'svc/externalAuthFailureAllow': false }, () => ({ status: 200 }), port);
  t.equal((await request(down.plane.port, CANONICAL, '/')).status, 403, 'server down, fail-closed');
  const downOpen = await setup(t, {}, () => ({ status: 200 }), port);
  t.equal((await request(downOpen.plane.port, CANONICAL, '/')).status, 200, 'server down, fail-open');

  const slow = await setup(t, { 'svc/externalAuthTimeout': '100ms', 'svc/externalAuthFailureAllow': false }, () => ({ status: 200, delayMs: 1000 }));
  const started = Date.now();
  t.equal((await request(slow.plane.port, CANONICAL, '/')).status, 403, 'slower than the timeout, fail-closed');
  t.ok(Date.now() - started < 900);
  const slowOpen = await setup(t, { 'svc/externalAuthTimeout': '0.1' }, () => ({ status: 200, delayMs: 1000 }));
  const res3 = await request(slowOpen.plane.port, CANONICAL, '/');
  t.equal(res3.status, 200, 'slower than the timeout, fail-open');
  t.equal(JSON.parse(res3.body).headers['x-envoy-auth-failure-mode-allowed'], 'true');
});
