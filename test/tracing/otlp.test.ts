/**
 * The OTLP encoder (src/tracing/otlp.ts) against the OpenTelemetry project's own serializer
 * (@opentelemetry/otlp-transformer's ProtobufTraceSerializer): the same spans, made by the SDK with
 * every kind of attribute, events, links, statuses, remote and local parents, trace state, in two
 * resources, encoded by both (ours: one SpanBatch per resource and scope, as the batch processor
 * makes them) and decoded with the upstream opentelemetry-proto definitions, must be the same message. Delivery (retries, authorization, both protocols) is covered end to end by
 * test/integration/tracing.test.ts against real OTLP receivers.
 */
import t from 'tap';
import { fileURLToPath } from 'node:url';
import * as protoLoader from '@grpc/proto-loader';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { Registry } from 'prom-client';
import { SpanBatch } from '../../src/tracing/otlp.js';
import { BatchProcessor } from '../../src/tracing/batch.js';
import { LeanTracer } from '../../src/tracing/span.js';
import { samplerFor, tracingMetrics } from '../../src/tracing/tracer.js';
import { silentLogger } from '../../src/log.js';

const OTLP_DIR = fileURLToPath(new URL('./otlp/', import.meta.url));
const definition = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
  keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [OTLP_DIR],
});
const method = (definition['opentelemetry.proto.collector.trace.v1.TraceService'] as protoLoader.ServiceDefinition).Export!;
interface Decoded {
  resource_spans: { scope_spans: { spans: unknown[] }[] }[];
}
const decode = (b: Uint8Array) => method.requestDeserialize(Buffer.from(b)) as Decoded;

/** The spans (of one resource and scope) as one batch's request. */
function batchOf(spans: readonly ReadableSpan[], batch = new SpanBatch(spans[0]!.resource, spans[0]!.instrumentationScope)): Buffer {
  for (const s of spans) batch.add(s);
  return batch.request();
}

function spansFrom(resource: Record<string, string>, make: (tracer: ReturnType<BasicTracerProvider['getTracer']>) => void): ReadableSpan[] {
  const memory = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ resource: resourceFromAttributes(resource), spanProcessors: [new SimpleSpanProcessor(memory)] });
  make(provider.getTracer('svcproxy', '9.9.9'));
  return memory.getFinishedSpans();
}

t.test('the same message as the OpenTelemetry serializer', async (t) => {
  const a = spansFrom({ 'service.name': 'a', 'k8s.pod': 'p-1' }, (tracer) => {
    const remote = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true,
      traceState: new TraceState('vendor=opaque,other=1'),
    });
    const server = tracer.startSpan('GET', { kind: SpanKind.SERVER, startTime: [1764130000, 123456789] }, remote);
    server.setAttributes({
      'http.request.method': 'GET', 'url.path': '/ünïcode', 'server.port': 8080, negative: -42, big: 2 ** 40, ratio: 0.25,
      flag: true, off: false, list: ['a', 'b'], numbers: [1, 2.5], empty: '',
    });
    server.addEvent('retry', { 'attempt.count': 2 }, [1764130000, 500000000]);
    const client = tracer.startSpan('GET', { kind: SpanKind.CLIENT, links: [{ context: { traceId: '1'.repeat(32), spanId: '2'.repeat(16), traceFlags: 1 }, attributes: { why: 'x' } }] }, trace.setSpan(ROOT_CONTEXT, server));
    client.setStatus({ code: SpanStatusCode.ERROR, message: 'upstream reset' });
    client.end([1764130001, 5]);
    server.setStatus({ code: SpanStatusCode.OK });
    server.end([1764130002, 999999999]);
    tracer.startSpan('internal').end();
  });
  const b = spansFrom({ 'service.name': 'b' }, (tracer) => {
    const s = tracer.startSpan('POST', { kind: SpanKind.PRODUCER });
    s.end();
  });
  t.equal(a.length + b.length, 4);
  for (const [name, spans] of [['resource a', a], ['resource b', b]] as const) {
    const ours = decode(batchOf(spans));
    t.same(ours, decode(ProtobufTraceSerializer.serializeRequest(spans)!), name);
    t.equal(ours.resource_spans.length, 1, `${name}: one ResourceSpans`);
  }
});

t.test('a large batch grows the buffer, and a cleared batch encodes anew', async (t) => {
  const spans = spansFrom({ 'service.name': 'big' }, (tracer) => {
    for (let i = 0; i < 500; i++) tracer.startSpan(`span-${i}`, { attributes: { payload: 'x'.repeat(200 + i) } }).end();
  });
  const theirs = decode(ProtobufTraceSerializer.serializeRequest(spans)!);
  const batch = new SpanBatch(spans[0]!.resource, spans[0]!.instrumentationScope);
  t.same(decode(batchOf(spans, batch)), theirs);
  batch.clear();
  t.equal(batch.count, 0);
  t.same(decode(batchOf(spans.slice(0, 3), batch)), decode(ProtobufTraceSerializer.serializeRequest(spans.slice(0, 3))!), 'only the spans added since');
});

t.test('batches encoded as spans end: the same message as the serializer for the same spans', async (t) => {
  const resource = resourceFromAttributes({ 'service.name': 'lean', 'service.version': '1.2.3' });
  const scope = { name: 'svcproxy', version: '1.2.3' };
  const requests: Buffer[] = [];
  const sink = { export: async (request: Buffer) => void requests.push(Buffer.from(request)), shutdown: async () => undefined };
  const registry = new Registry();
  const batches = new BatchProcessor(resource, scope, () => sink, { scheduledDelayMillis: 60_000, maxQueueSize: 100, maxExportBatchSize: 3, exportTimeoutMillis: 1000 }, tracingMetrics(registry), silentLogger(), 'test');
  const memory = new InMemorySpanExporter();
  const simple = new SimpleSpanProcessor(memory);
  const tee = { onStart: () => undefined, onEnd: (s: ReadableSpan) => (simple.onEnd(s), batches.onEnd(s)), forceFlush: async () => undefined, shutdown: async () => undefined };
  const tracer = new LeanTracer(resource, scope, samplerFor(1), tee);
  const remote = trace.setSpanContext(ROOT_CONTEXT, { traceId: '0af7651916cd43dd8448eb211c80319c', spanId: 'b7ad6b7169203331', traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('v=1') });
  for (let i = 0; i < 4; i++) {
    const server = tracer.startSpan('GET', { kind: SpanKind.SERVER, startTime: 1764130000123.456 + i }, remote);
    server.setAttribute('url.path', `/p/${i}`);
    server.setAttribute('server.port', 8080);
    const client = tracer.startSpan('GET', { kind: SpanKind.CLIENT, startTime: 1764130000124 + i }, trace.setSpan(ROOT_CONTEXT, server));
    client.setAttribute('http.response.status_code', 503);
    client.setStatus({ code: SpanStatusCode.ERROR });
    client.end(1764130000125.5 + i);
    server.end(1764130000126 + i);
  }
  await batches.forceFlush();
  const spans = memory.getFinishedSpans();
  t.equal(spans.length, 8);
  t.same(requests.map((r) => decode(r).resource_spans[0]!.scope_spans[0]!.spans.length), [3, 3, 2], 'batches of at most 3');
  for (let i = 0; i < requests.length; i++) {
    t.same(decode(requests[i]!), decode(ProtobufTraceSerializer.serializeRequest(spans.slice(i * 3, i * 3 + 3))!), `batch ${i + 1}`);
  }
});
