/**
 * The telemetry hooks without sockets: a workload that does not trace costs no state and no header
 * parsing (its trace headers pass untouched); a config without tracing or access logs leaves every
 * exchange alone; a traced exchange gets a server span, an attempt span whose context is injected,
 * and spans end with the request. Also a rough per-request cost, bounded generously.
 */
import t from 'tap';
import { performance } from 'node:perf_hooks';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import type { WorkloadModel } from '../../src/config/model.js';
import type { Exchange } from '../../src/proxy/exchange.js';
import { createTelemetry, childSpan } from '../../src/tracing/index.js';
import { splitHost } from '../../src/tracing/telemetry.js';
import { silentLogger } from '../../src/log.js';
import { records } from '../helpers/harness.js';

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
  const memory = new InMemorySpanExporter();
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
  const spans = memory.getFinishedSpans();
  t.same(spans.map((s) => s.name).sort(), ['GET', 'GET', 'ratelimit']);
  const server = spans.find((s) => s.kind === 1)!;
  t.equal(server.parentSpanContext?.spanId, '00f067aa0ba902b7');
  t.equal(spans.find((s) => s.name === 'ratelimit')!.status.code, 2, 'a child ended with error');
});

t.test('per-request cost stays small', async (t) => {
  const snapshot = buildSnapshot(recs(true), defaultSettings);
  const memory = new InMemorySpanExporter();
  const telemetry = await createTelemetry(snapshot, { role: 'ingress', logger: silentLogger(), registry: new Registry(), exporterFactory: () => memory, batch: { scheduledDelayMillis: 10, maxQueueSize: 100_000 } });
  t.teardown(() => telemetry.close());
  const run = (workload: string, n: number): number => {
    const model = snapshot.workloads.get(workload);
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const ex = exchange(model, { traceparent: TP, 'user-agent': 'bench' });
      telemetry.requestStart(ex, 'ingress');
      telemetry.attemptStart(ex, { host: '127.0.0.1', port: 1 }, { traceparent: TP });
      telemetry.attemptEnd(ex, { status: 200, retried: false });
      (ex as { status: number }).status = 200;
      telemetry.requestEnd(ex);
    }
    return ((performance.now() - start) * 1000) / n;
  };
  run('shop/api', 2000);
  run('shop/web', 2000);
  const traced = run('shop/api', 5000);
  const untraced = run('shop/web', 5000);
  t.comment(`traced: ${traced.toFixed(2)} µs per request (server + attempt span), untraced: ${untraced.toFixed(3)} µs (includes building the fake exchange)`);
  t.ok(traced < 100, 'traced requests cost microseconds');
  t.ok(untraced < traced, 'untraced requests cost less');
  memory.reset();
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
