/**
 * Hostile headers: a spoofed `x-forwarded-for` (with `trustedProxies` 0 it decides nothing: not the
 * firewall, not the rate-limit key, not the address the authorization server sees), invalid
 * `x-request-id`s (replaced, also in the proxy's own answers), client `x-svc-*` / `x-envoy-*`
 * headers (stripped on HTTP/1.1 and HTTP/2, also when a `Connection` header tries to protect or
 * remove headers), and invalid UTF-8 sent toward the authorization service: the check still
 * happens, so a fail-open workload never opens by accident.
 */
import t from 'tap';
import http2 from 'node:http2';
import { ALIAS, records, request, startPlane } from '../helpers/harness.js';
import { startGrpcAuth, startHttpAuth, allow } from '../fixtures/extauth/servers.js';
import { startEnvoyRls } from '../fixtures/ratelimit/servers.js';
import { raw, startRecorder } from './fixtures.js';

const H = `api-${ALIAS}.app.localhost`;

t.test('a spoofed x-forwarded-for decides nothing with trustedProxies 0', async (t) => {
  const app = await startRecorder(t);
  const rls = await startEnvoyRls(t, () => ({ overall_code: 'OK' }));
  const auth = await startGrpcAuth(t, () => allow());
  const tags = {
    'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': rls.port, 'svc/rateLimitScheme': 'http', 'svc/rateLimitDescriptors': 'remote_address',
    'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': auth.port, 'svc/externalAuthScheme': 'http',
  };
  // Only 203.0.113.0/24 may come in: the test client (127.0.0.1) may not, whatever it claims.
  const onlyDocNet = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    workloadSpec: { firewallConfig: { external: { inboundAllowCIDR: ['203.0.113.0/24'] } } },
  }));
  await onlyDocNet.ready();
  for (const xff of ['203.0.113.7', '10.0.0.1, 203.0.113.7', '203.0.113.7, 203.0.113.8', 'garbage', '']) {
    const res = await request(onlyDocNet.port, H, '/', { headers: { 'x-forwarded-for': xff } });
    t.equal(res.status, 403, `x-forwarded-for ${JSON.stringify(xff)}: still blocked (the peer is 127.0.0.1)`);
  }
  // 127.0.0.1 blocked outright: no x-forwarded-for gets it in.
  const blocked = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    workloadSpec: { firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'], inboundBlockedCIDR: ['127.0.0.1'] } } },
  }));
  await blocked.ready();
  t.equal((await request(blocked.port, H, '/', { headers: { 'x-forwarded-for': '198.51.100.1' } })).status, 403, 'a blocked peer claiming another address: 403');
  t.equal(app.seen.length, 0, 'nothing reached the app');

  // Rate-limit key and the auth server's source address: the peer, not the claim.
  const open = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags }));
  await open.ready();
  const res = await request(open.port, H, '/', { headers: { 'x-forwarded-for': '203.0.113.7' } });
  t.equal(res.status, 200);
  t.same(rls.seen.at(-1)?.descriptors[0]?.entries, [{ key: 'remote_address', value: '127.0.0.1' }], 'the rate-limit descriptor carries the peer');
  t.equal(auth.calls.at(-1)?.attributes.source.address?.socket_address.address, '127.0.0.1', 'the auth server sees the peer as source');
  t.equal(app.seen.at(-1)?.headers['x-forwarded-for'], '203.0.113.7, 127.0.0.1', 'the app sees the claim with the peer appended');

  // The contrast: with one trusted proxy the last entry is the client.
  const trusting = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    gvcSpec: { loadBalancer: { trustedProxies: 1 } },
    workloadSpec: { firewallConfig: { external: { inboundAllowCIDR: ['203.0.113.0/24'] } } },
  }));
  await trusting.ready();
  t.equal((await request(trusting.port, H, '/', { headers: { 'x-forwarded-for': '203.0.113.7' } })).status, 200, 'trustedProxies 1: the forwarded address is used');
});

t.test('x-request-id: invalid ones are replaced, in forwarded requests and local answers', async (t) => {
  const app = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }));
  await plane.ready();
  const VALID = /^[A-Za-z0-9._-]{1,128}$/;
  const invalid = ['', 'a'.repeat(129), 'has space', 'semi;colon', '../../etc/passwd', 'a,b', '<script>', 'tab\there', 'ünïcode', '%41%42'];
  for (const id of invalid) {
    const before = app.seen.length;
    const res = await raw(plane.port, `GET / HTTP/1.1\r\nHost: ${H}\r\nX-Request-Id: ${id}\r\nConnection: close\r\n\r\n`);
    t.same(res.statuses, [200], `${JSON.stringify(id)}: served`);
    const got = app.seen[before]?.headers['x-request-id'];
    t.ok(typeof got === 'string' && VALID.test(got) && got !== id, `${JSON.stringify(id.slice(0, 20))}: replaced by ${got}`);
  }
  const two = await raw(plane.port, `GET / HTTP/1.1\r\nHost: ${H}\r\nX-Request-Id: one\r\nX-Request-Id: two\r\nConnection: close\r\n\r\n`);
  t.same(two.statuses, [200]);
  t.ok(VALID.test(String(app.seen.at(-1)?.headers['x-request-id'])) && !/one|two/.test(String(app.seen.at(-1)?.headers['x-request-id'])), 'two x-request-id headers: replaced');
  const local = await request(plane.port, 'nowhere.example', '/', { headers: { 'x-request-id': 'bad id' } });
  t.equal(local.status, 404);
  const id = JSON.parse(local.body).id as string;
  t.ok(VALID.test(id) && id !== 'bad id', `a local answer carries the replacement (${id})`);
  const kept = await request(plane.port, H, '/', { headers: { 'x-request-id': 'Valid-id_1.2' } });
  t.equal(kept.status, 200);
  t.equal(app.seen.at(-1)?.headers['x-request-id'], 'Valid-id_1.2', 'a valid one is kept');
});

t.test('client x-svc-* and x-envoy-* headers are stripped, on HTTP/1.1 and HTTP/2', async (t) => {
  const app = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }));
  await plane.ready();
  const spoofed = {
    'X-SVC-REPLICA': 'api-9', 'x-svc-location': 'elsewhere', 'X-Svc-Debug': 'true', 'x-svc-anything': '1',
    'X-Envoy-Original-Path': '/admin', 'x-envoy-auth-failure-mode-allowed': 'true', 'x-envoy-ratelimited': 'true',
    'x-envoy-expected-rq-timeout-ms': '1', 'X-ENVOY-RETRY-ON': '5xx', 'x-envoy-auth-partial-body': 'false',
  };
  const check = (headers: Record<string, unknown>, via: string): void => {
    const leaked = Object.keys(headers).filter((n) => n.startsWith('x-svc-') || n.startsWith('x-envoy-'));
    // x-envoy-attempt-count is the proxy's own.
    t.same(leaked.filter((n) => n !== 'x-envoy-attempt-count'), [], `${via}: none of the client's x-svc-*/x-envoy-* reached the app`);
  };
  const h1 = await request(plane.port, H, '/', { headers: spoofed });
  t.equal(h1.status, 200);
  check(app.seen.at(-1)!.headers, 'HTTP/1.1');

  // A Connection header naming headers the proxy sets must not make it drop its own.
  const hop = await raw(plane.port, `GET / HTTP/1.1\r\nHost: ${H}\r\nConnection: x-forwarded-for, x-request-id, x-forwarded-proto, close\r\nX-Forwarded-For: 203.0.113.9\r\n\r\n`);
  t.same(hop.statuses, [200]);
  const seen = app.seen.at(-1)!.headers;
  t.equal(seen['x-forwarded-for'], '127.0.0.1', 'Connection: x-forwarded-for drops the client\'s value, the proxy still sets its own');
  t.ok(seen['x-request-id'] && seen['x-forwarded-proto'] === 'http', 'x-request-id and x-forwarded-proto are set');

  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.destroy());
  await new Promise<void>((resolve, reject) => {
    const stream = session.request({ ':path': '/', ':authority': H, ...Object.fromEntries(Object.entries(spoofed).map(([k, v]) => [k.toLowerCase(), v])) });
    stream.on('response', () => undefined);
    stream.resume();
    stream.on('end', resolve);
    stream.on('error', reject);
    stream.end();
  });
  check(app.seen.at(-1)!.headers, 'HTTP/2');
});

t.test('invalid UTF-8 toward the authorization service never makes a fail-open check open', async (t) => {
  const app = await startRecorder(t);
  // Both deny everything and the workloads are fail-open: a 200 would mean the check failed.
  const grpcAuth = await startGrpcAuth(t, () => ({ status: { code: 7 } }));
  const httpAuth = await startHttpAuth(t, () => ({ status: 403, body: 'denied' }));
  const planeFor = async (tags: Record<string, unknown>) => {
    const p = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': true, ...tags } }));
    await p.ready();
    return p;
  };
  const grpcPlane = await planeFor({ 'svc/externalAuthPort': grpcAuth.port });
  const httpPlane = await planeFor({ 'svc/externalAuthPort': httpAuth.port, 'svc/externalAuthProtocol': 'http' });
  const bad = ['\xc3\x28', '\xff\xfe', '\xed\xa0\x80', '\xc0\xaf', '\xf4\x90\x80\x80', 'ok\x80end'];
  const requests: [name: string, bytes: (v: string) => Buffer][] = [
    ['a header value', (v) => Buffer.from(`GET /p HTTP/1.1\r\nHost: ${H}\r\nX-Evil: ${v}\r\nConnection: close\r\n\r\n`, 'latin1')],
    ['the Authorization header', (v) => Buffer.from(`GET /p HTTP/1.1\r\nHost: ${H}\r\nAuthorization: Bearer ${v}\r\nConnection: close\r\n\r\n`, 'latin1')],
    ['the query', (v) => Buffer.from(`GET /p?q=${v} HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`, 'latin1')],
    ['a percent-encoded query', () => Buffer.from(`GET /p?q=%ff%fe&r=%c0%af HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`, 'latin1')],
    ['a percent-encoded path', () => Buffer.from(`GET /p/%ff%fe%c0%af HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`, 'latin1')],
    ['the body', (v) => Buffer.from(`POST /p HTTP/1.1\r\nHost: ${H}\r\nContent-Length: ${Buffer.byteLength(v, 'latin1')}\r\nConnection: close\r\n\r\n${v}`, 'latin1')],
  ];
  let sent = 0;
  for (const [mode, plane, calls] of [['gRPC', grpcPlane, () => grpcAuth.calls.length], ['HTTP', httpPlane, () => httpAuth.calls.length]] as const) {
    for (const [name, bytes] of requests) {
      for (const v of bad) {
        const before = calls();
        const answer = await raw(plane.port, bytes(v));
        sent++;
        const status = answer.statuses[0];
        t.ok(status === 403 || status === 400, `${mode}, ${name} ${JSON.stringify(v)}: ${status} — denied or rejected, never let through`);
        if (status === 403) t.equal(calls() - before, 1, `${mode}, ${name}: the check reached the server`);
      }
    }
  }
  t.equal(app.seen.length, 0, `none of ${sent} requests reached the app`);
  const sanitized = grpcAuth.calls.find((c) => c.attributes.request.http.headers['x-evil'] !== undefined);
  t.match(sanitized?.attributes.request.http.headers['x-evil'], /\ufffd/, 'the gRPC check carries the value UTF-8-sanitized (U+FFFD)');
});
