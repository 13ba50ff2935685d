/**
 * The SDK side: ParentBased(TraceIdRatioBased) with B3's forced and deferred decisions; the span
 * queue bound and failed exports counted as dropped spans; providers of a reload retired only once
 * the requests using them are over.
 */
import t from 'tap';
import { ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import { SamplingDecision, type ReadableSpan, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { Registry } from 'prom-client';
import { DEFERRED_DECISION, FORCED_DECISION, TracerPool, samplerFor, tracingMetrics } from '../../src/tracing/tracer.js';
import type { ExporterSpec } from '../../src/tracing/config.js';
import { silentLogger } from '../../src/log.js';

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

function pool(exporter: SpanExporter, batch: Record<string, number>) {
  const registry = new Registry();
  const p = new TracerPool({ logger: silentLogger(), metrics: tracingMetrics(registry), resource: { 'service.name': 'test' }, batch, exporterFactory: () => exporter });
  return { pool: p, registry };
}

async function value(registry: Registry, name: string, labels: Record<string, string> = {}): Promise<number> {
  const metric = await registry.getSingleMetric(name)!.get();
  return metric.values.filter((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l)).reduce((n, v) => n + v.value, 0);
}

t.test('a stalled exporter: spans beyond the queue bound are dropped and counted', async (t) => {
  const stalled: SpanExporter = { export: () => undefined, shutdown: async () => undefined };
  const { pool: p, registry } = pool(stalled, { maxQueueSize: 10, maxExportBatchSize: 5, scheduledDelayMillis: 10, exportTimeoutMillis: 300 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  const tracer = p.get('k')!.tracer;
  for (let i = 0; i < 50; i++) tracer.startSpan('s', {}, ROOT_CONTEXT).end();
  const dropped = await value(registry, 'svcproxy_tracing_spans_dropped_total', { reason: 'queue_full' });
  t.ok(dropped >= 35 && dropped <= 40, `${dropped} of 50 dropped at a queue of 10`);
});

t.test('failed exports: spans counted as dropped, errors counted', async (t) => {
  const seen: ReadableSpan[] = [];
  const failing: SpanExporter = {
    export: (spans, done) => {
      seen.push(...spans);
      done({ code: ExportResultCode.FAILED, error: new Error('collector down') });
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
  let shutdowns = 0;
  const exported: string[] = [];
  const exporter: SpanExporter = {
    export: (spans, done) => {
      exported.push(...spans.map((s) => s.name));
      done({ code: ExportResultCode.SUCCESS });
    },
    shutdown: async () => void shutdowns++,
  };
  const { pool: p, registry } = pool(exporter, { scheduledDelayMillis: 10_000 });
  t.teardown(() => p.close(100));
  p.apply(new Map([[SPEC.key, SPEC]]));
  const entry = p.get('k')!;
  entry.active++;
  const span = entry.tracer.startSpan('in-flight', {}, ROOT_CONTEXT);
  p.apply(new Map());
  t.equal(p.get('k'), undefined, 'new requests no longer get it');
  await new Promise((r) => setTimeout(r, 20));
  t.equal(shutdowns, 0, 'not shut down while a request uses it');
  span.end();
  entry.release();
  await entry.closed;
  t.equal(shutdowns, 1);
  t.same(exported, ['in-flight'], 'the last span was flushed on shutdown');
  t.equal(await value(registry, 'svcproxy_tracing_spans_exported_total'), 1);
});
