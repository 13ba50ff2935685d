/**
 * The telemetry hooks without sockets: a workload that does not trace costs no state and no header
 * parsing (its trace headers pass untouched); a config without tracing or access logs leaves every
 * exchange alone; a traced exchange gets a server span, an attempt span whose context is injected,
 * and spans end with the request; an access log on one workload leaves the others' requests alone.
 */
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import type { WorkloadModel } from '../../src/config/model.js';
import type { Exchange } from '../../src/proxy/exchange.js';
import { createTelemetry, childSpan } from '../../src/tracing/index.js';
import { splitHost } from '../../src/tracing/spans.js';
import { silentLogger } from '../../src/log.js';
import { records } from '../helpers/harness.js';
import { accessLog, cluster } from '../accesslog/fixtures.js';
import { memorySink } from './fixtures.js';

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

function recs(tracing: boolean): Record<string, unknown>[] {
  const web = { kind: 'workload', name: 'web', gvc: 'shop', tags: { 'svc/tracingDisabled': 'true' }, spec: { type: 'standard', containers: [{ name: 'app', image: 'x', ports: [{ number: 80, protocol: 'http' }] }] } };
  return records({ replicas: { 'aws-us-east-2': ['127.0.0.1:1'] }, ...(tracing ? { gvcSpec: { tracing: { sampling: 100, provider: { otel: { endpoint: '127.0.0.1:1' } } } } } : {}), extra: [web] });
}

function exchange(workload: WorkloadModel | undefined, headers: Record<string, string> = {}): Exchange {
  const ex = {
    req: { headers, method: 'GET', httpVersion: '1.1', rawHeaders: [], socket: {} },
    res: {},
    requestId: 'r1', path: '/p', query: '', host: 'h.example', peer: '127.0.0.1', clientAddress: '127.0.0.1',
    workload: undefined as WorkloadModel | undefined, location: 'aws-us-east-2', replica: undefined, status: 0, bytesSent: 0,
    startedAt: performance.now(), upstreamStartedAt: 0, upstreamHeadersAt: 0, errorCode: undefined, telemetry: undefined,
    attempts: 1, listenerKind: 'external', listenerPort: 8080, tls: false, timedOut: false, pathWithQuery: '/p',
  };
  (ex as { workload: WorkloadModel | undefined }).workload = workload;
  return ex as unknown as Exchange;
}

t.test('nothing configured: hooks leave exchanges alone', async (t) => {
  const snapshot = buildSnapshot(recs(false), defaultSettings);
  const telemetry = await createTelemetry(snapshot, { role: 'ingress', logger: silentLogger(), registry: new Registry() });
  t.teardown(() => telemetry.close());
  const ex = exchange(snapshot.workloads.get('shop/api'), { traceparent: TP });
  telemetry.requestStart(ex, 'ingress');
  t.equal(ex.telemetry, undefined, 'no per-request state');
  const headers = { traceparent: TP };
  telemetry.attemptStart(ex, { host: '127.0.0.1', port: 1 }, headers);
  telemetry.requestEnd(ex);
  t.same(headers, { traceparent: TP });
  t.equal(childSpan(ex, 'ext_authz').traceparent, undefined);
});

t.test('traced and untraced workloads side by side', async (t) => {
  const snapshot = buildSnapshot(recs(true), defaultSettings);
  const memory = memorySink();
  const telemetry = await createTelemetry(snapshot, { role: 'ingress', logger: silentLogger(), registry: new Registry(), exporterFactory: () => memory, batch: { scheduledDelayMillis: 10 } });
  t.teardown(() => telemetry.close());

  const web = exchange(snapshot.workloads.get('shop/web'), { traceparent: TP });
  telemetry.requestStart(web, 'ingress');
  t.equal(web.telemetry, telemetry, 'only a marker until the workload is known');
  const webHeaders = { traceparent: TP };
  telemetry.attemptStart(web, { host: '127.0.0.1', port: 1 }, webHeaders);
  t.equal(web.telemetry, telemetry, 'a workload that does not trace gets no state');
  t.same(webHeaders, { traceparent: TP }, 'and its headers pass untouched');
  telemetry.requestEnd(web);

  const api = exchange(snapshot.workloads.get('shop/api'), { traceparent: TP });
  telemetry.requestStart(api, 'ingress');
  const child = childSpan(api, 'ratelimit', { 'rpc.system': 'grpc' });
  child.end('error');
  const headers: Record<string, string> = { traceparent: TP };
  telemetry.attemptStart(api, { host: '127.0.0.1', port: 9 }, headers);
  t.match(headers.traceparent, /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
  t.not(headers.traceparent, TP);
  telemetry.attemptEnd(api, { status: 200, retried: false });
  (api as { status: number }).status = 200;
  telemetry.requestEnd(api);
  await telemetry.flush();
  const spans = memory.spans;
  t.same(spans.map((s) => s.name).sort(), ['GET', 'GET', 'ratelimit']);
  const server = spans.find((s) => s.kind === 'SPAN_KIND_SERVER')!;
  t.equal(server.parentSpanId, '00f067aa0ba902b7');
  t.equal(server.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
  t.equal(spans.find((s) => s.name === 'ratelimit')!.status, 'STATUS_CODE_ERROR', 'a child ended with error');
});

t.test("a standalone sidecar follows its own workload's tracing only", async (t) => {
  const snapshot = buildSnapshot(recs(true), defaultSettings);
  let exporters = 0;
  const memory = memorySink();
  const exporterFactory = () => (exporters++, memory);
  const untraced = await createTelemetry(snapshot, { role: 'sidecar', sidecar: { workload: 'shop/web', replica: 'web-0' }, onlyWorkload: 'shop/web', logger: silentLogger(), registry: new Registry(), exporterFactory });
  t.teardown(() => untraced.close());
  const ex = exchange(snapshot.workloads.get('shop/web'), { traceparent: TP });
  untraced.requestStart(ex, 'sidecar');
  t.equal(ex.telemetry, undefined, "the sidecar of an untraced workload is inert, though its config traces another workload");
  await untraced.ready();
  await untraced.flush();
  const traced = await createTelemetry(snapshot, { role: 'sidecar', sidecar: { workload: 'shop/api', replica: 'api-0' }, onlyWorkload: 'shop/api', logger: silentLogger(), registry: new Registry(), exporterFactory, batch: { scheduledDelayMillis: 10 } });
  t.teardown(() => traced.close());
  await traced.ready();
  const api = exchange(snapshot.workloads.get('shop/api'));
  traced.requestStart(api, 'sidecar');
  (api as { status: number }).status = 200;
  traced.requestEnd(api);
  await traced.flush();
  t.same(memory.spans.map((s) => s.name), ['GET'], 'its server span (no upstream attempt was made)');
  t.equal(exporters, 1, "one exporter: the traced workload's sidecar's");
});

t.test('many requests: two spans each when traced, no state and no span when not', async (t) => {
  const snapshot = buildSnapshot(recs(true), defaultSettings);
  const memory = memorySink();
  const telemetry = await createTelemetry(snapshot, { role: 'ingress', logger: silentLogger(), registry: new Registry(), exporterFactory: () => memory, batch: { scheduledDelayMillis: 10, maxQueueSize: 100_000 } });
  t.teardown(() => telemetry.close());
  const run = (workload: string, n: number): { ms: number; states: number } => {
    const model = snapshot.workloads.get(workload);
    let states = 0;
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const ex = exchange(model, { traceparent: TP, 'user-agent': 'bench' });
      telemetry.requestStart(ex, 'ingress');
      telemetry.attemptStart(ex, { host: '127.0.0.1', port: 1 }, { traceparent: TP });
      if (ex.telemetry !== telemetry) states++;
      telemetry.attemptEnd(ex, { status: 200, retried: false });
      (ex as { status: number }).status = 200;
      telemetry.requestEnd(ex);
    }
    return { ms: performance.now() - start, states };
  };
  const traced = run('shop/api', 3000);
  await telemetry.flush();
  t.equal(memory.spans.length, 6000, 'a server span and an attempt span per traced request');
  t.equal(memory.spans.filter((s) => s.kind === 'SPAN_KIND_SERVER').length, 3000);
  t.equal(traced.states, 3000);
  memory.spans.length = 0;
  const untraced = run('shop/web', 3000);
  await telemetry.flush();
  t.equal(memory.spans.length, 0, 'no span for the workload that does not trace');
  t.equal(untraced.states, 0, 'and no per-request state');
  // For the record only (timings are the bench's business, never a test's).
  t.comment(`traced: ${((traced.ms * 1000) / 3000).toFixed(2)} µs per request, untraced: ${((untraced.ms * 1000) / 3000).toFixed(3)} µs (fake exchange included)`);
});

t.test('an access log on one workload: only its requests are followed and have their bodies counted', async (t) => {
  const web = { kind: 'workload', name: 'web', gvc: 'shop', spec: { type: 'standard', containers: [{ name: 'app', image: 'x', ports: [{ number: 80, protocol: 'http' }] }] } };
  const snapshot = buildSnapshot(records({
    replicas: { 'aws-us-east-2': ['127.0.0.1:1'] },
    gvcSpec: { sidecar: { envoy: { accessLog: [accessLog('als', { excludedWorkloads: ['web'] })], clusters: [cluster('als', 1)] } } },
    extra: [web],
  }), defaultSettings);
  const telemetry = await createTelemetry(snapshot, { role: 'ingress', logger: silentLogger(), registry: new Registry() });
  t.teardown(() => telemetry.close());
  const routed = (workload: string) => {
    const ex = exchange(snapshot.workloads.get(workload));
    const push = () => true;
    Object.assign(ex.req, { push, readableLength: 0 });
    telemetry.requestStart(ex, 'ingress');
    telemetry.routed?.(ex);
    return { ex, wrapped: (ex.req as unknown as { push: unknown }).push !== push };
  };
  const api = routed('shop/api');
  t.not(api.ex.telemetry, telemetry, 'the logged workload has per-request state');
  t.ok(api.wrapped, 'and its body is counted');
  const other = routed('shop/web');
  t.equal(other.ex.telemetry, telemetry, 'the excluded workload: only the marker');
  t.notOk(other.wrapped, 'and its body stream is left alone');
});

t.test('server.address and server.port from the Host header', async (t) => {
  const cases: [string, string, number | undefined][] = [
    ['api.example.com', 'api.example.com', undefined],
    ['api.example.com:8443', 'api.example.com', 8443],
    ['10.0.0.1:80', '10.0.0.1', 80],
    ['[::1]:8080', '::1', 8080],
    ['[::1]', '::1', undefined],
    ['::1', '::1', undefined],
    ['host:', 'host', undefined],
  ];
  for (const [host, address, port] of cases) t.same(splitHost(host), { address, port }, host);
});
