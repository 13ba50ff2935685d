/**
 * The OTLP encoder (src/tracing/otlp.ts) against the OpenTelemetry project's own serializer
 * (@opentelemetry/otlp-transformer's ProtobufTraceSerializer): the same spans, made by the SDK with
 * every kind of attribute, events, links, statuses, remote and local parents, trace state and two
 * resources, encoded by both and decoded with the upstream opentelemetry-proto definitions, must be
 * the same message. Delivery (retries, authorization, both protocols) is covered end to end by
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
import { encodeExportRequest } from '../../src/tracing/otlp.js';

const OTLP_DIR = fileURLToPath(new URL('./otlp/', import.meta.url));
const definition = protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
  keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [OTLP_DIR],
});
const method = (definition['opentelemetry.proto.collector.trace.v1.TraceService'] as protoLoader.ServiceDefinition).Export!;
const decode = (b: Uint8Array) => method.requestDeserialize(Buffer.from(b));

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
  const spans = [...a, ...b];
  t.equal(spans.length, 4);
  const ours = decode(encodeExportRequest(spans));
  const theirs = decode(ProtobufTraceSerializer.serializeRequest(spans)!);
  t.same(ours, theirs);
  t.equal((ours as { resource_spans: unknown[] }).resource_spans.length, 2, 'one ResourceSpans per resource');
});

t.test('a large batch grows the buffer and still decodes', async (t) => {
  const spans = spansFrom({ 'service.name': 'big' }, (tracer) => {
    for (let i = 0; i < 500; i++) tracer.startSpan(`span-${i}`, { attributes: { payload: 'x'.repeat(200 + i) } }).end();
  });
  const ours = decode(encodeExportRequest(spans));
  const theirs = decode(ProtobufTraceSerializer.serializeRequest(spans)!);
  t.same(ours, theirs);
});
