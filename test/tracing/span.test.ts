/**
 * The proxy's own spans (src/tracing/span.ts) against the OpenTelemetry SDK's: the same calls on a
 * LeanTracer and on an SDK tracer (same sampler, same processor kind) must export the same spans —
 * parents, trace state, flags, attributes (and the 128 limit), statuses (UNSET ignored, OK final,
 * message only with ERROR), events, links, times (an end before the start clamps to it) — and the
 * same sampling decisions, including the non-recording spans that only carry a context. `startChild`
 * (the proxy's attempt spans) gives the span `startSpan` gives for the same parent.
 */
import t from 'tap';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Tracer } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { LeanSpan, LeanTracer } from '../../src/tracing/span.js';
import { samplerFor } from '../../src/tracing/tracer.js';

const resource = resourceFromAttributes({ 'service.name': 'x' });

function both(ratio: number): { lean: Tracer; sdk: Tracer; spans: () => [ReadableSpan[], ReadableSpan[]] } {
  const a = new InMemorySpanExporter();
  const b = new InMemorySpanExporter();
  const lean = new LeanTracer(resource, { name: 'svcproxy', version: '1' }, samplerFor(ratio), new SimpleSpanProcessor(a));
  const sdk = new BasicTracerProvider({ resource, sampler: samplerFor(ratio), spanProcessors: [new SimpleSpanProcessor(b)] }).getTracer('svcproxy', '1');
  return { lean, sdk, spans: () => [a.getFinishedSpans(), b.getFinishedSpans()] };
}

const view = (s: ReadableSpan) => ({
  name: s.name, kind: s.kind, traceId: s.spanContext().traceId, flags: s.spanContext().traceFlags, state: s.spanContext().traceState?.serialize(),
  attributes: s.attributes, dropped: s.droppedAttributesCount, status: s.status,
  events: s.events.map((e) => ({ name: e.name, attributes: e.attributes, time: e.time })), links: s.links, start: s.startTime, end: s.endTime, duration: s.duration,
  scope: s.instrumentationScope.name, resource: s.resource.attributes,
});

t.test('the same spans as the SDK for the same calls', async (t) => {
  const { lean, sdk, spans } = both(1);
  const remote = trace.setSpanContext(ROOT_CONTEXT, { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('v=1') });
  for (const tracer of [lean, sdk]) {
    const server = tracer.startSpan('GET', { kind: SpanKind.SERVER, startTime: 1764130000123.456, attributes: { initial: 'yes' } }, remote);
    server.setAttribute('url.path', '/x');
    server.setAttribute('server.port', 8080);
    server.setAttribute('ignored', undefined as unknown as string);
    server.setAttributes({ a: true, list: ['p', 'q'] });
    server.setAttribute('url.path', '/x/again'); // set again: the new value, in the key's first place
    server.setStatus({ code: SpanStatusCode.UNSET });
    server.setStatus({ code: SpanStatusCode.OK, message: 'dropped with OK' });
    server.setStatus({ code: SpanStatusCode.ERROR, message: 'OK is final' });
    server.addEvent('retry', { n: 1 }, 1764130000200);
    const client = tracer.startSpan('GET', { kind: SpanKind.CLIENT, startTime: 1764130000130, links: [{ context: { traceId: 'c'.repeat(32), spanId: 'd'.repeat(16), traceFlags: 1 } }] }, trace.setSpan(ROOT_CONTEXT, server));
    client.setStatus({ code: SpanStatusCode.ERROR, message: 'reset' });
    for (let i = 0; i < 140; i++) client.setAttribute(`k${i}`, i);
    client.end(1764130000100); // before its start: clamped
    server.end(1764130000999.5);
    server.setAttribute('after.end', 'ignored');
  }
  const [a, b] = spans();
  t.equal(a.length, 2);
  t.same(a.map(view), b.map(view));
  for (const [client, server] of [a, b]) t.equal(client!.parentSpanContext?.spanId, server!.spanContext().spanId, 'the client span is the server span\'s child');
  t.equal(a[1]!.parentSpanContext?.spanId, 'b'.repeat(16), 'the remote parent');
  t.equal(a[0]!.droppedAttributesCount, 12, 'attributes beyond 128 dropped');
  const leanServer = a[1] as LeanSpan;
  t.same(leanServer.attributeKeys, Object.keys(leanServer.attributes), 'each key once, in the order first set (what the OTLP encoder writes)');
});

t.test('sampling: the same decisions as the SDK, and non-recording spans that carry a context', async (t) => {
  for (const ratio of [0, 0.5, 1]) {
    const { lean, sdk } = both(ratio);
    for (let i = 1; i <= 64; i++) {
      const traceId = (i * 2654435761 >>> 0).toString(16).padStart(8, '0').repeat(4);
      for (const flags of [TraceFlags.SAMPLED, TraceFlags.NONE]) {
        const ctx = trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: '1'.repeat(16), traceFlags: flags, isRemote: true });
        const x = lean.startSpan('s', {}, ctx);
        const y = sdk.startSpan('s', {}, ctx);
        t.equal(x.isRecording(), y.isRecording(), `ratio ${ratio}, trace ${traceId}, parent flags ${flags}`);
        t.equal(x.spanContext().traceFlags, y.spanContext().traceFlags);
        t.equal(x.spanContext().traceId, traceId);
        t.match(x.spanContext().spanId, /^[0-9a-f]{16}$/);
      }
    }
    const root = lean.startSpan('root', {}, ROOT_CONTEXT);
    t.match(root.spanContext().traceId, /^[0-9a-f]{32}$/, 'a root gets a new trace id');
  }
});

t.test('startChild: the span startSpan makes for the same parent, sampled or not', async (t) => {
  for (const ratio of [0, 1]) {
    const a = new InMemorySpanExporter();
    const b = new InMemorySpanExporter();
    const direct = new LeanTracer(resource, { name: 'svcproxy', version: '1' }, samplerFor(ratio), new SimpleSpanProcessor(a), true);
    const general = new LeanTracer(resource, { name: 'svcproxy', version: '1' }, samplerFor(ratio), new SimpleSpanProcessor(b), false);
    const callers: [string, typeof ROOT_CONTEXT][] = [
      ['a sampled caller', trace.setSpanContext(ROOT_CONTEXT, { traceId: 'e'.repeat(32), spanId: 'f'.repeat(16), traceFlags: TraceFlags.SAMPLED, isRemote: true, traceState: new TraceState('k=v') })],
      ['an unsampled caller', trace.setSpanContext(ROOT_CONTEXT, { traceId: 'e'.repeat(32), spanId: 'f'.repeat(16), traceFlags: TraceFlags.NONE, isRemote: true, traceState: new TraceState('k=v') })],
      ['no caller', ROOT_CONTEXT],
    ];
    for (const [caller, remote] of callers) {
      const parents: ReturnType<Tracer['startSpan']>[] = [];
      for (const tracer of [direct, general]) {
        const server = tracer.startSpan('GET', { kind: SpanKind.SERVER, startTime: 1764130000000 }, remote);
        parents.push(server);
        const child = tracer.startChild(server, 'GET', SpanKind.CLIENT, 1764130000001.5, trace.setSpan(remote, server));
        t.equal(child.isRecording(), server.isRecording(), `ratio ${ratio}, ${caller}: recorded as its parent`);
        t.equal(child.spanContext().traceId, server.spanContext().traceId, 'the parent\'s trace');
        t.equal(child.spanContext().traceFlags, server.spanContext().traceFlags, 'the parent\'s decision');
        t.not(child.spanContext().spanId, server.spanContext().spanId, 'a span id of its own');
        child.end(1764130000002);
        server.end(1764130000003);
      }
      t.equal(parents[0]!.isRecording(), parents[1]!.isRecording());
    }
    const [x, y] = [a.getFinishedSpans(), b.getFinishedSpans()];
    t.equal(x.length, ratio === 0 ? 2 : 4, 'a sampled caller\'s trace kept at any ratio, a new trace at 100%, an unsampled caller\'s never');
    // A new trace's id is random: the rest must match.
    const idless = (s: ReadableSpan) => ({ ...view(s), traceId: s.spanContext().traceId === 'e'.repeat(32) ? 'caller' : 'new' });
    t.same(x.map(idless), y.map(idless));
    for (const spans of [x, y]) {
      for (let i = 0; i < spans.length; i += 2) {
        t.equal(spans[i]!.parentSpanContext?.spanId, spans[i + 1]!.spanContext().spanId, 'the child\'s parent is the server span');
        t.equal(spans[i]!.spanContext().traceState?.serialize(), spans[i + 1]!.spanContext().traceState?.serialize(), 'the parent\'s trace state');
      }
    }
    t.equal(x[0]!.spanContext().traceState?.serialize(), 'k=v', 'the caller\'s trace state carried to the child');
  }
});
