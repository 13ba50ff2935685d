/**
 * The SDK side: ParentBased(TraceIdRatioBased) with B3's forced and deferred decisions; the batch
 * processor's contract (full batches sent at once, one export at a time, an unanswered export given
 * up at its timeout, only sampled spans); the span queue bound and failed exports counted as dropped
 * spans; providers of a reload retired only once the requests using them are over.
 */
import t from 'tap';
import { ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import { SamplingDecision } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { DEFERRED_DECISION, FORCED_DECISION, TracerPool, samplerFor, tracingMetrics } from '../../src/tracing/tracer.js';
import type { ExporterSpec } from '../../src/tracing/config.js';
import type { SpanSink } from '../../src/tracing/otlp.js';
import { silentLogger } from '../../src/log.js';
import { decodeExport, memorySink } from './fixtures.js';

const TID = '4bf92f3577b34da6a3ce929d0e0e4736';
const remote = (sampled: boolean) =>
  trace.setSpanContext(ROOT_CONTEXT, { traceId: TID, spanId: '00f067aa0ba902b7', traceFlags: sampled ? TraceFlags.SAMPLED : TraceFlags.NONE, isRemote: true });

t.test('sampling decisions', async (t) => {
  const decide = (ratio: number, ctx = ROOT_CONTEXT, traceId = TID): SamplingDecision =>
    samplerFor(ratio).shouldSample(ctx, traceId, 'GET', SpanKind.SERVER, {}, []).decision;
  t.equal(decide(1), SamplingDecision.RECORD_AND_SAMPLED, 'root at 100%');
  t.equal(decide(0), SamplingDecision.NOT_RECORD, 'root at 0%');
  t.equal(decide(0, remote(true)), SamplingDecision.RECORD_AND_SAMPLED, 'a sampled parent wins over 0%');
  t.equal(decide(1, remote(false)), SamplingDecision.NOT_RECORD, 'an unsampled parent wins over 100%');
  t.equal(decide(1, remote(false).setValue(DEFERRED_DECISION, true)), SamplingDecision.RECORD_AND_SAMPLED, 'a deferred decision is the ratio\'s');
  t.equal(decide(0, remote(false).setValue(DEFERRED_DECISION, true)), SamplingDecision.NOT_RECORD);
  t.equal(decide(0, ROOT_CONTEXT.setValue(FORCED_DECISION, true)), SamplingDecision.RECORD_AND_SAMPLED, '`b3: 1` forces sampling');
  t.equal(decide(1, ROOT_CONTEXT.setValue(FORCED_DECISION, false)), SamplingDecision.NOT_RECORD, '`b3: 0` forbids it');
  let sampled = 0;
  const random = (): string => Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(Math.random() * 16)]).join('');
  for (let i = 0; i < 2000; i++) if (decide(0.25, ROOT_CONTEXT, random()) === SamplingDecision.RECORD_AND_SAMPLED) sampled++;
  t.ok(sampled > 380 && sampled < 620, `25% of 2000 root decisions: ${sampled}`);
});

const SPEC: ExporterSpec = { key: 'k', protocol: 'grpc', url: 'http://127.0.0.1:1', ratio: 1 };

function pool(sink: SpanSink, batch: Record<string, number>) {
  const registry = new Registry();
  const p = new TracerPool({ logger: silentLogger(), metrics: tracingMetrics(registry), resource: { 'service.name': 'test' }, batch, exporterFactory: () => sink });
  return { pool: p, registry };
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await registry.getSingleMetric(name)!.get();
  return metric.values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((n, v) => n + v.value, 0);
}

// A hang guard only: on a busy machine the exporter's timers fire late.
const until = async (ok: () => boolean, ms = 30_000): Promise<void> => {
  for (const end = Date.now() + ms; !ok(); ) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 5));
  }
};

t.test('a stalled exporter: spans beyond the queue bound are dropped and counted', async (t) => {
  const stalled: SpanSink = { export: () => new Promise<void>(() => undefined), shutdown: async () => undefined };
  const { pool: p, registry } = pool(stalled, { maxQueueSize: 10, maxExportBatchSize: 5, scheduledDelayMillis: 10, exportTimeoutMillis: 300 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  const tracer = p.get('k')!.tracer;
  for (let i = 0; i < 50; i++) tracer.startSpan('s', {}, ROOT_CONTEXT).end();
  const dropped = await value(registry, 'svcproxy_tracing_spans_dropped_total', { reason: 'queue_full' });
  t.equal(dropped, 35, 'a full batch of 5 taken for export, 10 queued behind it, 35 dropped');
});

t.test('batches: sent when full without waiting, one at a time, the next after an export that timed out', async (t) => {
  const requests: { spans: number; settle: () => void }[] = [];
  const sink: SpanSink = {
    export: (request, spans) => {
      t.equal(decodeExport(request).length, spans, 'the request holds the spans it is said to');
      return new Promise<void>((resolve) => requests.push({ spans, settle: resolve }));
    },
    shutdown: async () => undefined,
  };
  const { pool: p, registry } = pool(sink, { maxQueueSize: 100, maxExportBatchSize: 5, scheduledDelayMillis: 60_000, exportTimeoutMillis: 200 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  const tracer = p.get('k')!.tracer;
  for (let i = 0; i < 17; i++) tracer.startSpan(`s${i}`, {}, ROOT_CONTEXT).end();
  await until(() => requests.length === 1);
  t.equal(requests[0]!.spans, 5, 'the first full batch went at once (the delay is a minute)');
  requests[0]!.settle();
  await until(() => requests.length === 2);
  t.equal(requests[1]!.spans, 5, 'the second only once the first was answered');
  await until(() => requests.length === 3);
  t.equal(requests[2]!.spans, 5, 'the second, unanswered, was given up at its timeout and the third went');
  t.equal(await value(registry, 'svcproxy_tracing_spans_exported_total'), 5);
  t.equal(await value(registry, 'svcproxy_tracing_spans_dropped_total', { reason: 'export_failed' }), 5, 'the timed-out batch counted as failed');
  requests[1]!.settle();
  requests[2]!.settle();
  await new Promise((r) => setTimeout(r, 50));
  t.equal(requests.length, 3, 'the last 2 spans, less than a batch, wait for the delay');
  const flushed = p.flush();
  await until(() => requests.length === 4);
  t.equal(requests[3]!.spans, 2, 'or a flush');
  requests[3]!.settle();
  await flushed;
  t.equal(await value(registry, 'svcproxy_tracing_spans_exported_total'), 12, 'a late answer to a timed-out export is not counted');
});

t.test('unsampled spans are not exported', async (t) => {
  const sink = memorySink();
  const { pool: p } = pool(sink, { scheduledDelayMillis: 10 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  const tracer = p.get('k')!.tracer;
  tracer.startSpan('unsampled', {}, remote(false)).end();
  tracer.startSpan('sampled', {}, remote(true)).end();
  await p.flush();
  t.same(sink.spans.map((s) => s.name), ['sampled']);
  t.equal(sink.spans[0]!.parentSpanId, '00f067aa0ba902b7');
});

t.test('failed exports: spans counted as dropped, errors counted', async (t) => {
  const seen: string[] = [];
  const failing: SpanSink = {
    export: async (request) => {
      seen.push(...decodeExport(request).map((s) => s.name));
      throw new Error('collector down');
    },
    shutdown: async () => undefined,
  };
  const { pool: p, registry } = pool(failing, { scheduledDelayMillis: 10 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  for (let i = 0; i < 7; i++) p.get('k')!.tracer.startSpan('s', {}, ROOT_CONTEXT).end();
  await p.flush();
  t.equal(seen.length, 7);
  t.equal(await value(registry, 'svcproxy_tracing_spans_dropped_total', { reason: 'export_failed' }), 7);
  t.ok((await value(registry, 'svcproxy_tracing_export_errors_total')) >= 1);
  t.equal(await value(registry, 'svcproxy_tracing_spans_exported_total'), 0);
});

t.test('a retired provider is shut down once its requests are over', async (t) => {
  const sink = memorySink();
  const { pool: p, registry } = pool(sink, { scheduledDelayMillis: 10_000 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  const entry = p.get('k')!;
  entry.active++;
  const span = entry.tracer.startSpan('in-flight', {}, ROOT_CONTEXT);
  p.apply(new Map());
  t.equal(p.get('k'), undefined, 'new requests no longer get it');
  await new Promise((r) => setTimeout(r, 20));
  t.equal(sink.shutdowns, 0, 'not shut down while a request uses it');
  span.end();
  entry.release();
  await entry.closed;
  t.equal(sink.shutdowns, 1);
  t.same(sink.spans.map((s) => s.name), ['in-flight'], 'the last span was flushed on shutdown');
  t.equal(await value(registry, 'svcproxy_tracing_spans_exported_total'), 1);
  entry.tracer.startSpan('after', {}, ROOT_CONTEXT).end();
  await p.flush();
  t.equal(sink.spans.length, 1, 'a span ended after the shutdown is not taken');
});
