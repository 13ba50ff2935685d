/**
 * `x-svc-debug` answers (DESIGN §11) with real peers: Server-Timing with the time in external
 * authorization (a real HTTP ext_authz server) and rate limiting (a gRPC RLS built from Envoy's
 * proto), each upstream attempt and the total; `x-svc-route`; `x-svc-attempts` with the retry's
 * reason; `x-envoy-upstream-service-time`; on the proxy's own refusals too. With `trace`: the trace id,
 * sampled by a GVC whose sampling is 0 (a real OTLP receiver gets the span), or, when nothing traces,
 * the caller's trace id or a new one the app receives. Never on other endpoints, other workloads,
 * other header values, or without debug on.
 */
import t from 'tap';
import type http from 'node:http';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
import { startHttpAuth } from '../fixtures/extauth/servers.js';
import { startEnvoyRls } from '../fixtures/ratelimit/servers.js';
import { startOtlpGrpc, tracingSpec, waitForSpans, TRACE_ID, PARENT_ID } from '../tracing/fixtures.js';

const LOCATION = 'aws-us-east-2';
const CANONICAL = `api-${ALIAS}.app.localhost`;
const DEBUG = { 'x-svc-debug': 'true' };

/** Server-Timing entries as `name` → list of `{dur, desc}` (RFC-less but W3C: `name;dur=1.2;desc="x"`, comma-separated). */
function timings(header: string | string[] | undefined): Map<string, { dur: number; desc?: string }[]> {
  const out = new Map<string, { dur: number; desc?: string }[]>();
  for (const entry of String(header ?? '').split(/,(?=(?:[^"]*"[^"]*")*[^"]*$)/)) {
    const [name, ...params] = entry.trim().split(';');
    if (!name) continue;
    const item: { dur: number; desc?: string } = { dur: NaN };
    for (const p of params) {
      const [k, v] = p.split('=');
      if (k === 'dur') item.dur = Number(v);
      if (k === 'desc') item.desc = v?.replace(/^"|"$/g, '');
    }
    out.set(name, [...(out.get(name) ?? []), item]);
  }
  return out;
}

const withDebug = (spec: Record<string, unknown> = {}): Record<string, unknown> => ({ ...spec, defaultOptions: { debug: true } });

t.test('an answer from the app: timings, route, attempts, upstream service time', async (t) => {
  const app = await startHttpServer(t, (req, res) => {
    res.writeHead(200, { 'server-timing': 'db;dur=3' });
    res.end('ok');
  });
  const plane = await startPlane(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] }, workloadSpec: withDebug(), gvcSpec: { aliasWorkloadLink: '//workload/api' },
  }), { location: LOCATION });
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/', { headers: DEBUG });
  t.equal(res.status, 200);
  const st = timings(res.headers['server-timing']);
  t.same([...st.keys()], ['upstream', 'total', 'db'], 'the proxy\'s timings, then the app\'s own');
  t.ok(st.get('upstream')![0]!.dur >= 0 && st.get('total')![0]!.dur >= st.get('upstream')![0]!.dur, 'total covers the upstream time');
  t.equal(st.get('upstream')![0]!.desc, 'attempt 1 api-0 200');
  t.equal(res.headers['x-svc-route'], 'canonical; gvc=shop; workload=api; port=8080');
  t.equal(res.headers['x-svc-attempts'], `1; 1=api-0@${LOCATION} 200`);
  t.match(res.headers['x-envoy-upstream-service-time'], /^\d+$/);
  t.equal(res.headers['x-svc-location'], LOCATION);
  t.equal(res.headers['x-svc-replica'], 'api-0');
  t.notOk(res.headers['x-svc-trace-id'], 'no trace id without trace');

  const alias = await request(plane.port, `${ALIAS}.app.localhost`, '/', { headers: DEBUG });
  t.equal(alias.headers['x-svc-route'], 'alias; gvc=shop; workload=api; port=8080', 'the GVC alias name');

  for (const [what, host, headers] of [
    ['no header', CANONICAL, {}],
    ['another value', CANONICAL, { 'x-svc-debug': '1' }],
    ['the location name', `api-${ALIAS}.${LOCATION}.direct.localhost`, DEBUG],
  ] as const) {
    const plain = await request(plane.port, host, '/', { headers });
    t.equal(plain.status, 200, what);
    t.same(timings(plain.headers['server-timing']), new Map([['db', [{ dur: 3 }]]]), `${what}: only the app's timing`);
    for (const h of ['x-svc-route', 'x-svc-attempts', 'x-envoy-upstream-service-time', 'x-svc-location']) t.notOk(plain.headers[h], `${what}: no ${h}`);
  }
});

t.test('debug off: nothing, whatever the client asks', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] } }), { location: LOCATION });
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'trace' } });
  t.equal(res.status, 200);
  for (const h of ['server-timing', 'x-svc-route', 'x-svc-attempts', 'x-envoy-upstream-service-time', 'x-svc-trace-id']) t.notOk(res.headers[h], h);
  t.notOk((JSON.parse(res.body) as { headers: http.IncomingHttpHeaders }).headers['x-svc-debug'], 'the header is not passed to the app');
});

t.test('a retry, and why it happened', async (t) => {
  let calls = 0;
  const app = await startHttpServer(t, (_req, res) => {
    calls++;
    res.writeHead(calls === 1 ? 503 : 200).end();
  });
  const plane = await startPlane(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] },
    workloadSpec: withDebug({ requestRetryPolicy: { attempts: 2, retryOn: ['5xx'] } }),
  }), { location: LOCATION });
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/', { headers: DEBUG });
  t.equal(res.status, 200);
  t.equal(res.headers['x-svc-attempts'], `2; 1=api-0@${LOCATION} 503 retried, 2=api-0@${LOCATION} 200`);
  const upstream = timings(res.headers['server-timing']).get('upstream')!;
  t.same(upstream.map((u) => u.desc), ['attempt 1 api-0 503', 'attempt 2 api-0 200']);
});

t.test('external authorization and rate limiting are timed; a refusal carries the answers too', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  let deny = false;
  const auth = await startHttpAuth(t, () => (deny ? { status: 403, body: 'no' } : { status: 200 }));
  const rls = await startEnvoyRls(t, () => ({ overall_code: 'OK' }));
  const plane = await startPlane(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] },
    workloadSpec: withDebug(),
    tags: {
      'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': auth.port, 'svc/externalAuthProtocol': 'http', 'svc/externalAuthScheme': 'http',
      'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': rls.port, 'svc/rateLimitScheme': 'http',
    },
  }), { location: LOCATION });
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/', { headers: DEBUG });
  t.equal(res.status, 200);
  t.equal(auth.calls.length, 1);
  t.equal(rls.seen.length, 1);
  const st = timings(res.headers['server-timing']);
  for (const name of ['extauth', 'ratelimit', 'upstream', 'total']) t.ok(st.get(name)?.[0]!.dur! >= 0, `${name} timed`);
  t.ok(st.get('total')![0]!.dur >= st.get('extauth')![0]!.dur + st.get('ratelimit')![0]!.dur, 'the total covers the filters');

  deny = true;
  const refused = await request(plane.port, CANONICAL, '/', { headers: DEBUG });
  t.equal(refused.status, 403);
  const rst = timings(refused.headers['server-timing']);
  t.same([...rst.keys()], ['extauth', 'total'], 'the filter that said no, and nothing after it');
  t.equal(refused.headers['x-svc-attempts'], '0');
  t.equal(refused.headers['x-svc-route'], 'canonical; gvc=shop; workload=api; port=8080');
});

t.test('trace: sampled at sampling 0, and the span\'s trace id answered', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const app = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] },
    workloadSpec: withDebug(),
    gvcSpec: tracingSpec(otlp.endpoint, { sampling: 0 }),
  }), { location: LOCATION });
  await plane.ready();
  const unsampled = await request(plane.port, CANONICAL, '/', { headers: { ...DEBUG, traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` } });
  t.notOk(unsampled.headers['x-svc-trace-id'], 'true: no trace id');
  const res = await request(plane.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'trace', traceparent: `00-${TRACE_ID}-${PARENT_ID}-00` } });
  t.equal(res.status, 200);
  t.equal(res.headers['x-svc-trace-id'], TRACE_ID, 'the caller\'s trace continues, and is named');
  const seen = (JSON.parse(res.body) as { headers: http.IncomingHttpHeaders }).headers;
  t.match(seen.traceparent, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`), 'sent upstream as sampled');
  const fresh = await request(plane.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'trace' } });
  const freshId = String(fresh.headers['x-svc-trace-id']);
  t.match(freshId, /^[0-9a-f]{32}$/);
  const spans = await waitForSpans(otlp, 4);
  t.ok(spans.some((s) => s.traceId === TRACE_ID && s.kind === 'SPAN_KIND_SERVER'), 'the caller\'s unsampled trace was recorded');
  t.ok(spans.some((s) => s.traceId === freshId && s.kind === 'SPAN_KIND_SERVER'), 'a new trace was recorded under the id answered');
  t.notOk(spans.some((s) => s.traceId !== TRACE_ID && s.traceId !== freshId), 'nothing else was sampled (sampling 0)');
});

t.test('trace when nothing traces: the caller\'s id, or a new one the app receives', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] }, workloadSpec: withDebug() }), { location: LOCATION });
  await plane.ready();
  const given = await request(plane.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'trace', traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } });
  t.equal(given.headers['x-svc-trace-id'], TRACE_ID);
  t.equal((JSON.parse(given.body) as { headers: http.IncomingHttpHeaders }).headers.traceparent, `00-${TRACE_ID}-${PARENT_ID}-01`, 'passed on untouched');
  const fresh = await request(plane.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'trace' } });
  const id = String(fresh.headers['x-svc-trace-id']);
  t.match(id, /^[0-9a-f]{32}$/);
  t.match((JSON.parse(fresh.body) as { headers: http.IncomingHttpHeaders }).headers.traceparent, new RegExp(`^00-${id}-[0-9a-f]{16}-01$`), 'the app receives it');
});
