/**
 * The rate-limit filter in a real data plane (startPlane) against a real gRPC rate-limit server built
 * from Envoy's own rls.proto: the domain and the descriptor entries for every descriptor name and
 * order, a missing header, `excludedRateLimit[]` of the GVC and the workload, OVER_LIMIT (429 with
 * x-envoy-ratelimited, x-ratelimit-* and the service's response headers; grpc-status 14 for gRPC
 * clients), OK (headers on the response, `request_headers_to_add` upstream), fail-closed, fail-open,
 * the 1 s timeout, and the checks metric.
 */
import t from 'tap';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, type TapLike } from '../helpers/harness.js';
import { startEnvoyRls, type Answer } from '../fixtures/ratelimit/servers.js';

const HOST = `api-${ALIAS}.app.localhost`;

const OK = { overall_code: 'OK', statuses: [{ code: 'OK', current_limit: { requests_per_unit: 10, unit: 'MINUTE', name: '' }, limit_remaining: 9, duration_until_reset: { seconds: 42 } }] };

async function setup(t: TapLike, answer: Answer, tags: Record<string, unknown> = {}, extra: { workloadSpec?: Record<string, unknown>; gvcSpec?: Record<string, unknown> } = {}) {
  const rls = await startEnvoyRls(t, answer);
  const app = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    tags: { 'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': rls.port, 'svc/rateLimitScheme': 'http', ...tags },
    ...extra,
  }));
  await plane.ready();
  return { rls, plane, app };
}

t.test('default: domain "svc", one descriptor [authority], hits_addend 1, a 1 s deadline', async (t) => {
  const { rls, plane } = await setup(t, () => OK);
  const res = await request(plane.port, HOST, '/x?y=1');
  t.equal(res.status, 200);
  t.equal(rls.seen.length, 1);
  const seen = rls.seen[0]!;
  t.same({ domain: seen.domain, descriptors: seen.descriptors.map((d) => d.entries.map((e) => [e.key, e.value])), hits: seen.hits_addend }, {
    domain: 'svc', descriptors: [[['authority', HOST]]], hits: 1,
  });
  const left = seen.deadline - Date.now();
  t.ok(left > 0 && left <= 1000, `deadline about 1 s away (${left} ms left after the call)`);
});

t.test('every descriptor name, in the order listed, keyed as written', async (t) => {
  const orders: [string, (h: Record<string, string>) => [string, string][]][] = [
    ['authority,host,authorization,path,method,remote_address,header:X-Tenant', () => [
      ['authority', HOST], ['host', HOST], ['authorization', 'Bearer t0k'], ['path', '/a/c'], ['method', 'PUT'], ['remote_address', '127.0.0.1'], ['x-tenant', 'acme'],
    ]],
    ['header:x-tenant,method,path', () => [['x-tenant', 'acme'], ['method', 'PUT'], ['path', '/a/c']]],
    ['remote_address', () => [['remote_address', '127.0.0.1']]],
  ];
  for (const [list, want] of orders) {
    const { rls, plane } = await setup(t, () => OK, { 'svc/rateLimitDescriptors': list, 'svc/rateLimitDomain': 'edge' });
    // The path is the normalized one, without the query.
    const res = await request(plane.port, HOST, '/a/./b/../c?q=1', { method: 'PUT', headers: { authorization: 'Bearer t0k', 'X-Tenant': 'acme' } });
    t.equal(res.status, 200, list);
    t.equal(rls.seen[0]?.domain, 'edge');
    t.same(rls.seen[0]?.descriptors.map((d) => d.entries.map((e) => [e.key, e.value])), [want({})], list);
  }
});

t.test('remote_address is the client address after trustedProxies', async (t) => {
  const { rls, plane } = await setup(t, () => OK, { 'svc/rateLimitDescriptors': 'remote_address' }, { gvcSpec: { loadBalancer: { trustedProxies: 1 } } });
  await request(plane.port, HOST, '/', { headers: { 'x-forwarded-for': '198.51.100.7' } });
  t.same(rls.seen[0]?.descriptors[0]?.entries, [{ key: 'remote_address', value: '198.51.100.7' }]);
});

t.test('a request missing a listed header (or authorization) is not checked', async (t) => {
  const { rls, plane } = await setup(t, () => ({ overall_code: 'OVER_LIMIT' }), { 'svc/rateLimitDescriptors': 'authority,header:x-api-key' });
  t.equal((await request(plane.port, HOST, '/')).status, 200);
  t.equal(rls.seen.length, 0);
  t.equal((await request(plane.port, HOST, '/', { headers: { 'x-api-key': 'k1' } })).status, 429, 'with the header it is checked');
  const auth = await setup(t, () => ({ overall_code: 'OVER_LIMIT' }), { 'svc/rateLimitDescriptors': 'authorization' });
  t.equal((await request(auth.plane.port, HOST, '/')).status, 200);
  t.equal(auth.rls.seen.length, 0);
});

t.test('excludedRateLimit of the GVC and the workload: excluded requests are not checked', async (t) => {
  const { rls, plane } = await setup(t, () => ({ overall_code: 'OVER_LIMIT' }), {}, {
    workloadSpec: { sidecar: { envoy: { excludedRateLimit: [{ match: { prefix: '/health' } }, { match: { safe_regex: { regex: '/static/.*\\.css' } } }] } } },
    gvcSpec: { sidecar: { envoy: { excludedRateLimit: [{ match: { path: '/metrics', headers: [{ name: 'x-probe', exact_match: 'yes' }] } }, { match: { prefix: '/q', query_parameters: [{ name: 'free', string_match: { exact: '1' } }] } }] } } },
  });
  const cases: [string, Record<string, string>, number][] = [
    ['/health/live', {}, 200],
    ['/static/site.css', {}, 200],
    ['/static/site.js', {}, 429],
    ['/metrics', { 'x-probe': 'yes' }, 200],
    ['/metrics', {}, 429],
    ['/q?free=1', {}, 200],
    ['/q?free=0', {}, 429],
    ['/api', {}, 429],
    ['/x/../health', {}, 200], // the normalized path is matched
  ];
  for (const [path, headers, status] of cases) t.equal((await request(plane.port, HOST, path, { headers })).status, status, `${path} ${JSON.stringify(headers)}`);
  t.equal(rls.seen.length, 4, 'only the non-excluded requests reached the service');
});

t.test('OVER_LIMIT: 429 with x-envoy-ratelimited, x-ratelimit-* and the service headers; the app is not called', async (t) => {
  let appCalls = 0;
  const rls = await startEnvoyRls(t, () => ({
    overall_code: 'OVER_LIMIT',
    statuses: [
      { code: 'OVER_LIMIT', current_limit: { requests_per_unit: 5, unit: 'SECOND', name: 'per-host' }, limit_remaining: 0, duration_until_reset: { seconds: 1 } },
      { code: 'OK', current_limit: { requests_per_unit: 1000, unit: 'HOUR' }, limit_remaining: 400, duration_until_reset: { seconds: 1800 } },
    ],
    response_headers_to_add: [{ key: 'X-RateLimit-Policy', value: 'strict' }, { key: 'retry-after', value: '1' }],
    request_headers_to_add: [{ key: 'x-never', value: 'sent' }],
  }));
  const app = await startHttpServer(t, (req, res) => {
    appCalls++;
    echoHandler()(req, res);
  });
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    tags: { 'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': String(rls.port), 'svc/rateLimitScheme': 'http' },
  }));
  await plane.ready();
  const res = await request(plane.port, HOST, '/', { headers: { 'x-request-id': 'rl-1' } });
  t.equal(res.status, 429);
  t.same(JSON.parse(res.body), { status: 429, message: 'rate limited', code: 'RATE_LIMITED', details: {}, id: 'rl-1' });
  t.equal(res.headers['x-envoy-ratelimited'], 'true');
  t.equal(res.headers['x-ratelimit-limit'], '5, 5;w=1;name="per-host", 1000;w=3600');
  t.equal(res.headers['x-ratelimit-remaining'], '0');
  t.equal(res.headers['x-ratelimit-reset'], '1');
  t.equal(res.headers['x-ratelimit-policy'], 'strict');
  t.equal(res.headers['retry-after'], '1');
  t.equal(res.headers['content-type'], 'application/json');
  t.equal(appCalls, 0);

  // gRPC clients get a trailers-only answer with grpc-status 14.
  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.close());
  const stream = session.request({ ':method': 'POST', ':path': '/pkg.Svc/Call', ':authority': HOST, 'content-type': 'application/grpc', te: 'trailers' });
  stream.end(Buffer.alloc(5));
  const headers = await new Promise<http2.IncomingHttpHeaders>((resolve) => stream.once('response', resolve));
  stream.resume();
  t.equal(headers[':status'], 200);
  t.equal(headers['grpc-status'], String(grpc.status.UNAVAILABLE));
  t.equal(headers['x-envoy-ratelimited'], 'true');
  t.equal(headers['grpc-message'], 'rate limited');

  const metrics = await (await fetch(`${plane.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_ratelimit_checks_total\{workload="shop\/api",result="over_limit"\} 2/);
  t.match(metrics, /svcproxy_ratelimit_check_duration_seconds_count\{workload="shop\/api"\} 2/);
});

t.test('OK: x-ratelimit-* and response_headers_to_add on the response, request_headers_to_add upstream', async (t) => {
  const { plane } = await setup(t, () => ({
    ...OK,
    response_headers_to_add: [{ key: 'x-quota-tier', value: 'gold' }],
    request_headers_to_add: [{ key: 'X-User-Plan', value: 'pro' }, { key: 'x-raw', raw_value: Buffer.from('bytes') }],
  }));
  const res = await request(plane.port, HOST, '/ok', { headers: { 'x-user-plan': 'forged-by-client' } });
  t.equal(res.status, 200);
  t.equal(res.headers['x-ratelimit-limit'], '10, 10;w=60');
  t.equal(res.headers['x-ratelimit-remaining'], '9');
  t.equal(res.headers['x-ratelimit-reset'], '42');
  t.equal(res.headers['x-quota-tier'], 'gold');
  t.equal(res.headers['x-envoy-ratelimited'], undefined);
  const seen = JSON.parse(res.body);
  t.equal(seen.headers['x-user-plan'], 'pro', 'the service header replaces what the client sent');
  t.equal(seen.headers['x-raw'], 'bytes');
  const metrics = await (await fetch(`${plane.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_ratelimit_checks_total\{workload="shop\/api",result="ok"\} 1/);
});

t.test('service failing: 503 (fail-closed) by default, through with rateLimitFailureAllow', async (t) => {
  const closed = await setup(t, () => ({ error: grpc.status.INTERNAL }));
  const res = await request(closed.plane.port, HOST, '/', { headers: { 'x-request-id': 'rl-2' } });
  t.equal(res.status, 503);
  t.same(JSON.parse(res.body), { status: 503, message: 'rate limit service unavailable', code: 'RATE_LIMIT_UNAVAILABLE', details: {}, id: 'rl-2' });
  await closed.rls.close();
  t.equal((await request(closed.plane.port, HOST, '/')).status, 503, 'service gone: still fail-closed');
  const metrics = await (await fetch(`${closed.plane.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_ratelimit_checks_total\{workload="shop\/api",result="error"\} 2/);

  const open = await setup(t, () => ({ error: grpc.status.UNAVAILABLE }), { 'svc/rateLimitFailureAllow': true });
  t.equal((await request(open.plane.port, HOST, '/')).status, 200);
  await open.rls.close();
  t.equal((await request(open.plane.port, HOST, '/')).status, 200, 'service gone: still fail-open');
});

t.test('timeout: no answer within 1 s counts as a failure', async (t) => {
  const slow = await setup(t, () => ({ delayMs: 3000, answer: OK }));
  const started = Date.now();
  const res = await request(slow.plane.port, HOST, '/');
  const took = Date.now() - started;
  t.equal(res.status, 503);
  t.ok(took >= 950 && took < 2000, `answered after ${took} ms`);
  const open = await setup(t, () => ({ delayMs: 3000, answer: { overall_code: 'OVER_LIMIT' } }), { 'svc/rateLimitFailureAllow': 'true' });
  t.equal((await request(open.plane.port, HOST, '/')).status, 200, 'fail-open lets it through after the timeout');
});
