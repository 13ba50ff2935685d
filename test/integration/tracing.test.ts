/**
 * Tracing end to end, against real OTLP receivers (gRPC and HTTP/protobuf) on loopback: the trace a
 * caller started (W3C or B3) continues through the ingress, a standalone sidecar and the app, with
 * parent/child links between the server and attempt spans of each hop; attributes and custom tags;
 * sampling 0, 50 and 100 and the caller's decision honored; `svc/tracingDisabled`; a collector that
 * is down costs spans, never requests; reloads move spans to the new exporter; controlplane with and
 * without `--tracing-collector`; filters' child spans; retries' resend count.
 */
import t from 'tap';
import type http from 'node:http';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { createTelemetry, childSpan } from '../../src/tracing/index.js';
import type { BatchOptions } from '../../src/tracing/tracer.js';
import { silentLogger } from '../../src/log.js';
import { Registry } from 'prom-client';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, startSidecarBehindIngress, type TapLike } from '../helpers/harness.js';
import { PARENT_ID, TRACE_ID, startOtlpGrpc, startOtlpHttp, tracingSpec, waitForSpans, type ReceivedSpan } from '../tracing/fixtures.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';

async function app(t: TapLike, handler: http.RequestListener = echoHandler('app')): Promise<{ port: number }> {
  return startHttpServer(t, handler);
}

function byKind(spans: ReceivedSpan[], kind: string, service?: string): ReceivedSpan[] {
  return spans.filter((s) => s.kind === `SPAN_KIND_${kind}` && (service === undefined || s.resource['service.name'] === service));
}

t.test('a W3C trace continues through ingress → sidecar → app with linked spans', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const upstream = await app(t);
  const base = records({
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    gvcSpec: tracingSpec(otlp.endpoint, { customTags: { team: 'payments', tier: { literal: { value: 'gold' } } } }),
  });
  const { sidecar, ingress } = await startSidecarBehindIngress(t, base, upstream.port, { location: LOCATION, sidecar: { location: LOCATION } });
  await ingress.ready();

  const res = await request(ingress.port, CANONICAL, '/orders/7?x=1', {
    headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01`, tracestate: 'vendor=abc', 'user-agent': 'tracing-test/1' },
  });
  t.equal(res.status, 200);
  const seen = JSON.parse(res.body).headers as Record<string, string>;
  t.match(seen.traceparent, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`), 'the app sees the same trace');
  t.equal(seen.tracestate, 'vendor=abc', 'tracestate is passed on');

  const spans = await waitForSpans(otlp, 4);
  t.ok(spans.every((s) => s.traceId === TRACE_ID), 'every span is in the caller\'s trace');
  const [ingressServer] = byKind(spans, 'SERVER', 'svcproxy-ingress');
  const [ingressClient] = byKind(spans, 'CLIENT', 'svcproxy-ingress');
  const [sidecarServer] = byKind(spans, 'SERVER', 'api');
  const [sidecarClient] = byKind(spans, 'CLIENT', 'api');
  t.ok(ingressServer && ingressClient && sidecarServer && sidecarClient, 'server and client spans at both hops');
  t.equal(ingressServer!.parentSpanId, PARENT_ID, 'the ingress span is a child of the caller');
  t.equal(ingressClient!.parentSpanId, ingressServer!.spanId, 'the attempt is a child of the ingress span');
  t.equal(sidecarServer!.parentSpanId, ingressClient!.spanId, 'the sidecar continues the ingress attempt');
  t.equal(sidecarClient!.parentSpanId, sidecarServer!.spanId);
  t.equal(seen.traceparent, `00-${TRACE_ID}-${sidecarClient!.spanId}-01`, 'the app\'s parent is the sidecar attempt');
  t.equal(ingressServer!.traceState, 'vendor=abc');
  t.equal(ingressServer!.name, 'GET');

  t.match(ingressServer!.attributes, {
    'http.request.method': 'GET',
    'url.path': '/orders/7',
    'url.query': 'x=1',
    'url.scheme': 'http',
    'server.address': CANONICAL,
    'http.response.status_code': 200,
    'network.protocol.version': '1.1',
    'client.address': '127.0.0.1',
    'user_agent.original': 'tracing-test/1',
    'svc.workload': 'api',
    'svc.gvc': 'shop',
    'svc.location': LOCATION,
    'svc.replica': 'api-0',
    team: 'payments',
    tier: 'gold',
  });
  t.match(ingressClient!.attributes, { 'server.address': '127.0.0.1', 'server.port': sidecar.port, 'http.response.status_code': 200, 'svc.replica': 'api-0' });
  t.notOk('http.request.resend_count' in ingressClient!.attributes, 'a first attempt has no resend count');
  t.match(sidecarServer!.attributes, { 'svc.workload': 'api', 'svc.replica': 'api-0', 'svc.location': LOCATION, team: 'payments' });
  t.match(sidecarServer!.resource, { 'service.name': 'api', 'service.namespace': 'shop' });
  t.ok(ingressServer!.endNs >= ingressClient!.endNs && ingressServer!.startNs <= ingressClient!.startNs, 'the attempt lies within the request');
});

t.test('B3 single and multi headers continue the trace and are injected back with W3C', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const upstream = await app(t);
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: tracingSpec(otlp.endpoint) }));
  await plane.ready();

  const single = await request(plane.port, CANONICAL, '/', { headers: { b3: `${TRACE_ID}-${PARENT_ID}-1` } });
  const s = JSON.parse(single.body).headers as Record<string, string>;
  t.match(s.b3, new RegExp(`^${TRACE_ID}-[0-9a-f]{16}-1$`), 'b3 single is written back');
  t.match(s.traceparent, new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`), 'and W3C too');
  t.equal(s.b3.split('-')[1], s.traceparent.split('-')[2], 'both name the same span');

  const short = '463ac35c9f6413ad';
  const multi = await request(plane.port, CANONICAL, '/', {
    headers: { 'x-b3-traceid': short, 'x-b3-spanid': 'a2fb4a1d1a96d312', 'x-b3-parentspanid': '0020000000000001', 'x-b3-sampled': '1' },
  });
  const m = JSON.parse(multi.body).headers as Record<string, string>;
  t.equal(m['x-b3-traceid'], `0000000000000000${short}`, 'a 64-bit B3 trace id continues, widened');
  t.match(m['x-b3-spanid'], /^[0-9a-f]{16}$/);
  t.not(m['x-b3-spanid'], 'a2fb4a1d1a96d312', 'the span id is the proxy\'s attempt');
  t.equal(m['x-b3-sampled'], '1');
  t.notOk('x-b3-parentspanid' in m, 'a stale parent id is not passed on');
  t.equal(m.traceparent, `00-0000000000000000${short}-${m['x-b3-spanid']}-01`);
  t.notOk('b3' in m, 'no format the caller did not use but W3C');

  const spans = await waitForSpans(otlp, 2, 30_000, (x) => x.kind === 'SPAN_KIND_SERVER');
  t.same(spans.map((x) => x.traceId).sort(), [TRACE_ID, `0000000000000000${short}`].sort());
  t.equal(spans.find((x) => x.traceId === TRACE_ID)!.parentSpanId, PARENT_ID);
  t.equal(spans.find((x) => x.traceId !== TRACE_ID)!.parentSpanId, 'a2fb4a1d1a96d312');
});

/** Requests in parallel batches; returns the statuses. */
async function many(port: number, n: number, headers: http.OutgoingHttpHeaders = {}): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i += 25) {
    const batch = await Promise.all(Array.from({ length: Math.min(25, n - i) }, () => request(port, CANONICAL, '/', { headers })));
    statuses.push(...batch.map((r) => r.status));
  }
  return statuses;
}

async function planeWithTelemetry(t: TapLike, recs: Record<string, unknown>[], batch: BatchOptions = { scheduledDelayMillis: 50 }) {
  const registry = new Registry();
  const telemetry = await createTelemetry(buildSnapshot(recs, defaultSettings), { role: 'ingress', logger: silentLogger(), registry, batch });
  const plane = await startPlane(t, recs, { telemetry });
  await plane.ready();
  return { plane, telemetry, registry };
}

t.test('sampling: 0, 50 and 100 percent for requests without a decision; a caller\'s decision is honored', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const upstream = await app(t);
  const servers = (): ReceivedSpan[] => byKind(otlp.spans, 'SERVER');

  for (const [sampling, low, high] of [[0, 0, 0], [50, 140, 260], [100, 400, 400]] as const) {
    otlp.spans.length = 0;
    const { plane, telemetry } = await planeWithTelemetry(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: tracingSpec(otlp.endpoint, { sampling }) }));
    const statuses = await many(plane.port, 400);
    t.ok(statuses.every((s) => s === 200), `sampling ${sampling}: every request answered`);
    await telemetry.flush();
    if (high > 0) await waitForSpans(otlp, low, 30_000, (s) => s.kind === 'SPAN_KIND_SERVER');
    const n = servers().length;
    t.ok(n >= low && n <= high, `sampling ${sampling}: ${n} of 400 requests traced (expected ${low}–${high})`);
    if (sampling === 50) t.equal(byKind(otlp.spans, 'CLIENT').length, n, 'an attempt span for each sampled request, none for the others');

    // The caller's decision wins either way.
    otlp.spans.length = 0;
    await request(plane.port, CANONICAL, '/', { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } });
    const other = '11111111111111111111111111111111';
    const unsampled = await request(plane.port, CANONICAL, '/', { headers: { traceparent: `00-${other}-${PARENT_ID}-00` } });
    t.match(JSON.parse(unsampled.body).headers.traceparent, new RegExp(`^00-${other}-[0-9a-f]{16}-00$`), 'an unsampled context is still propagated');
    await telemetry.flush();
    await waitForSpans(otlp, 1, 30_000, (s) => s.traceId === TRACE_ID && s.kind === 'SPAN_KIND_SERVER');
    await new Promise((r) => setTimeout(r, 100));
    t.notOk(otlp.spans.some((s) => s.traceId === other), `sampling ${sampling}: a caller's "not sampled" is honored`);
  }
});

t.test('svc/tracingDisabled: no spans, trace headers passed through untouched', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const upstream = await app(t);
  const { plane, telemetry } = await planeWithTelemetry(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    gvcSpec: tracingSpec(otlp.endpoint),
    tags: { 'svc/tracingDisabled': true },
  }));
  const traceparent = `00-${TRACE_ID}-${PARENT_ID}-01`;
  const res = await request(plane.port, CANONICAL, '/', { headers: { traceparent } });
  t.equal(JSON.parse(res.body).headers.traceparent, traceparent, 'the caller\'s header reaches the app as sent');
  await many(plane.port, 20);
  await telemetry.flush();
  await new Promise((r) => setTimeout(r, 200));
  t.equal(otlp.spans.length, 0, 'nothing exported');
});

t.test('a collector that is down costs spans, not requests', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const gone = otlp.port;
  await otlp.close();
  const upstream = await app(t);
  const { plane, registry } = await planeWithTelemetry(
    t,
    records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: tracingSpec(`http://127.0.0.1:${gone}`) }),
    { scheduledDelayMillis: 20, exportTimeoutMillis: 300, maxQueueSize: 64, maxExportBatchSize: 16 },
  );
  const started = Date.now();
  const statuses = await many(plane.port, 200);
  t.ok(statuses.every((s) => s === 200), 'every request answered 200');
  t.ok(Date.now() - started < 10_000, 'and without waiting on the exporter');
  let metrics = '';
  for (const deadline = Date.now() + 10_000; Date.now() < deadline && !/export_errors_total [1-9]/.test(metrics);) {
    await new Promise((r) => setTimeout(r, 50));
    metrics = await registry.metrics();
  }
  t.match(metrics, /svcproxy_tracing_export_errors_total [1-9]/);
  t.match(metrics, /svcproxy_tracing_spans_dropped_total\{reason="(export_failed|queue_full)"\} [1-9]/);
});

t.test('OTLP/HTTP with a vendor member: /v1/traces, credentials as authorization', async (t) => {
  const otlp = await startOtlpHttp(t);
  const upstream = await app(t);
  const { plane, telemetry } = await planeWithTelemetry(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    gvcSpec: { tracing: { sampling: 100, lightstep: { endpoint: otlp.endpoint, credentials: 'tok3n' } } },
  }));
  t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  await telemetry.flush();
  await waitForSpans(otlp, 2);
  t.equal(otlp.paths[0], '/v1/traces', 'the default OTLP/HTTP path');
  t.equal(otlp.authorizations[0], 'Bearer tok3n', 'credentials sent as a bearer token');
});

t.test('the org\'s tracing applies to a GVC without its own; a reload moves spans to the new exporter', async (t) => {
  const first = await startOtlpGrpc(t);
  const second = await startOtlpHttp(t);
  const upstream = await app(t);
  const recs = records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } });
  const org = recs.find((r) => r.kind === 'org')!;
  org.spec = tracingSpec(first.endpoint);
  const { plane, telemetry } = await planeWithTelemetry(t, recs);
  await request(plane.port, CANONICAL, '/one');
  await telemetry.flush();
  await waitForSpans(first, 2);

  const reloaded = recs.map((r) => (r.kind === 'gvc' ? { ...r, spec: { ...(r.spec as object), ...tracingSpec(second.endpoint, { customTags: { stage: 'two' } }) } } : r));
  plane.runtime.dataplane.update(buildSnapshot(reloaded, defaultSettings, 2));
  await request(plane.port, CANONICAL, '/two');
  await telemetry.flush();
  const spans = await waitForSpans(second, 2);
  t.equal(byKind(spans, 'SERVER')[0]!.attributes.stage, 'two', 'new custom tags apply');
  t.notOk(first.spans.some((s) => s.attributes['url.path'] === '/two'), 'the old exporter gets nothing new');
});

t.test('provider.controlplane sends to --tracing-collector, and without one does not trace', async (t) => {
  const collector = await startOtlpGrpc(t);
  const upstream = await app(t);
  const recs = records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: { tracing: { sampling: 100, provider: { controlplane: {} } } } });
  const withCollector = await startPlane(t, recs, { tracingCollector: collector.endpoint });
  await withCollector.ready();
  t.equal((await request(withCollector.port, CANONICAL, '/')).status, 200);
  await waitForSpans(collector, 2, 30_000);

  const without = await startPlane(t, recs);
  await without.ready();
  const res = await request(without.port, CANONICAL, '/', { headers: { traceparent: `00-${TRACE_ID}-${PARENT_ID}-01` } });
  t.equal(res.status, 200);
  t.equal(JSON.parse(res.body).headers.traceparent, `00-${TRACE_ID}-${PARENT_ID}-01`, 'not tracing: headers untouched');
});

t.test('filters record child spans; a retried attempt carries its resend count', async (t) => {
  const otlp = await startOtlpGrpc(t);
  let calls = 0;
  const upstream = await app(t, (req, res) => {
    calls++;
    if (calls === 1) return void res.writeHead(503).end('busy');
    echoHandler('app')(req, res);
  });
  const recs = records({
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    gvcSpec: tracingSpec(otlp.endpoint),
    workloadSpec: { requestRetryPolicy: { attempts: 2, retryOn: ['5xx'] } },
  });
  const registry = new Registry();
  const telemetry = await createTelemetry(buildSnapshot(recs, defaultSettings), { role: 'ingress', logger: silentLogger(), registry, batch: { scheduledDelayMillis: 50 } });
  const plane = await startPlane(t, recs, {
    telemetry,
    factories: {
      ingress: [],
      sidecar: [() => ({
        name: 'fake-auth',
        run: async (ex) => {
          const span = childSpan(ex, 'ext_authz', { 'rpc.system': 'grpc' });
          t.match(span.traceparent, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/, 'a child span has a traceparent to send on');
          await new Promise((r) => setTimeout(r, 5));
          span.end('ok', { 'svc.auth.decision': 'allow' });
          span.end('error');
          return undefined;
        },
      })],
    },
  });
  await plane.ready();
  t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  await telemetry.flush();
  const spans = await waitForSpans(otlp, 4);
  const server = byKind(spans, 'SERVER')[0]!;
  const auth = spans.find((s) => s.name === 'ext_authz')!;
  t.equal(auth.parentSpanId, server.spanId, 'the filter\'s span is a child of the request');
  t.match(auth.attributes, { 'rpc.system': 'grpc', 'svc.auth.decision': 'allow' });
  t.equal(auth.status, 'STATUS_CODE_OK', 'a second end() does nothing');
  const attempts = byKind(spans, 'CLIENT').filter((s) => s.name === 'GET').sort((a, b) => Number(a.startNs - b.startNs));
  t.equal(attempts.length, 2, 'one span per attempt');
  t.match(attempts[0]!.attributes, { 'http.response.status_code': 503, 'error.type': '503' });
  t.equal(attempts[0]!.status, 'STATUS_CODE_ERROR');
  t.match(attempts[1]!.attributes, { 'http.response.status_code': 200, 'http.request.resend_count': 1 });
  t.ok(attempts.every((a) => a.parentSpanId === server.spanId));

  // Unsampled requests get no child spans.
  const noop = childSpan({ telemetry: undefined } as never, 'x');
  t.equal(noop.traceparent, undefined);
  noop.end('error');
});
