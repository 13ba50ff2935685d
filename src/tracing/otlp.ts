/**
 * The OTLP trace exporter: finished spans encoded straight into an `ExportTraceServiceRequest`
 * (opentelemetry-proto's collector/trace/v1) and sent over OTLP/gRPC (on our unary gRPC client) or
 * OTLP/HTTP with protobuf bodies (undici). It replaces @opentelemetry/exporter-trace-otlp-* because
 * their serializer measures every message before writing it and converts ids and times through
 * intermediate objects, which cost the proxy about as much per request as making the spans. Here a
 * span is written into its batch's buffer when it ends (`SpanBatch`, fed by ./batch.ts), so spans do
 * not outlive their request waiting for the export, and the batch is wrapped once when it is sent.
 *
 * Delivery as the OTLP spec says (and as the OpenTelemetry exporters do): a failed export is retried
 * when the answer is retryable (gRPC CANCELLED, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, ABORTED,
 * OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS; HTTP 429, 502, 503, 504; a connection that failed), up to 5
 * attempts with exponential backoff (1 s × 1.5ⁿ, jittered, at most 5 s; HTTP Retry-After honored),
 * all within the export's timeout; anything else fails the batch at once.
 */
import type { ReadableSpan } from '@opentelemetry/sdk-trace-base';
import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { Agent } from 'undici';
import { systemClock, type Clock } from '../deps.js';
import { ProtoWriter as Writer } from '../grpc/proto-writer.js';
import { Status, UnaryChannel } from '../grpc/unary.js';
import type { ExporterSpec } from './config.js';
import { loadUndici } from '../undici.js';
import { LeanSpan } from './span.js';

export const EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

/** AnyValue: string 1, bool 2, int 3, double 4, array 5 (ArrayValue.values 1), bytes 7. */
function anyValue(w: Writer, field: number, v: AttributeValue | Uint8Array | null | undefined): void {
  const start = w.begin(field);
  if (typeof v === 'string') w.string(1, v);
  else if (typeof v === 'number') {
    if (Number.isInteger(v)) w.int64(3, v);
    else w.double(4, v);
  } else if (typeof v === 'boolean') {
    w.uint(2, v ? 1 : 0);
  } else if (v instanceof Uint8Array) w.bytes(7, v);
  else if (Array.isArray(v)) {
    const array = w.begin(5);
    for (const item of v) anyValue(w, 1, item);
    w.end(array);
  }
  w.end(start);
}

/** KeyValue { key 1, value 2 } for each attribute. */
function attributes(w: Writer, field: number, attrs: Attributes): void {
  for (const key in attrs) {
    const v = attrs[key];
    if (v === undefined) continue;
    const start = w.begin(field);
    w.string(1, key);
    anyValue(w, 2, v);
    w.end(start);
  }
}

/** The same from a `LeanSpan`'s parallel lists. */
function attributeLists(w: Writer, field: number, keys: readonly string[], values: readonly AttributeValue[]): void {
  for (let i = 0; i < keys.length; i++) {
    const start = w.begin(field);
    w.string(1, keys[i]!);
    anyValue(w, 2, values[i]);
    w.end(start);
  }
}

/** OTel JS SpanKind (INTERNAL 0 …) → OTLP (UNSPECIFIED 0, INTERNAL 1 …). */
const kindOf = (k: number): number => k + 1;

function span(w: Writer, field: number, s: ReadableSpan): void {
  const start = w.begin(field);
  const ctx = s.spanContext();
  w.hex(1, ctx.traceId);
  w.hex(2, ctx.spanId);
  const state = ctx.traceState?.serialize();
  if (state) w.string(3, state);
  const parent = s.parentSpanContext;
  if (parent?.spanId) w.hex(4, parent.spanId);
  w.string(5, s.name);
  w.uint(6, kindOf(s.kind));
  w.time(7, s.startTime);
  w.time(8, s.endTime);
  if (s instanceof LeanSpan) attributeLists(w, 9, s.attributeKeys, s.attributeValues);
  else attributes(w, 9, s.attributes);
  if (s.droppedAttributesCount) {
    w.uint(10, s.droppedAttributesCount);
  }
  for (const e of s.events) {
    const ev = w.begin(11);
    w.time(1, e.time);
    w.string(2, e.name);
    if (e.attributes) attributes(w, 3, e.attributes);
    if (e.droppedAttributesCount) {
      w.uint(4, e.droppedAttributesCount);
    }
    w.end(ev);
  }
  if (s.droppedEventsCount) {
    w.uint(12, s.droppedEventsCount);
  }
  for (const l of s.links) {
    const link = w.begin(13);
    w.hex(1, l.context.traceId);
    w.hex(2, l.context.spanId);
    const ls = l.context.traceState?.serialize();
    if (ls) w.string(3, ls);
    if (l.attributes) attributes(w, 4, l.attributes);
    w.end(link);
  }
  if (s.droppedLinksCount) {
    w.uint(14, s.droppedLinksCount);
  }
  // Always present, as the OpenTelemetry serializer writes it (empty when unset).
  const st = w.begin(15);
  if (s.status.message) w.string(2, s.status.message);
  if (s.status.code) {
    w.uint(3, s.status.code);
  }
  w.end(st);
  // SpanFlags: the W3C trace flags, and whether the parent is known remote (HAS_IS_REMOTE | IS_REMOTE).
  w.fixed32(16, (ctx.traceFlags & 0xff) | 0x100 | (parent?.isRemote ? 0x200 : 0));
  w.end(start);
}

/** What a batch writes of its scope (InstrumentationScope name 1, version 2) and resource. */
interface ScopeLike {
  readonly name: string;
  readonly version?: string;
  readonly schemaUrl?: string;
}

interface ResourceLike {
  readonly attributes: Attributes;
  readonly schemaUrl?: string;
}

/**
 * Spans of one resource and one scope, each encoded as it is added (a `ScopeSpans.spans` field), so a
 * finished span is garbage at once instead of waiting for its batch's export; `request()` wraps them
 * in an `ExportTraceServiceRequest` (a new buffer of exactly that size), after which `clear()` lets
 * the batch's buffer, grown to a batch's size once, be used again.
 */
export class SpanBatch {
  private readonly w = new Writer(16 * 1024);
  count = 0;

  constructor(private readonly resource: ResourceLike, private readonly scope: ScopeLike) {}

  add(s: ReadableSpan): void {
    span(this.w, 2, s);
    this.count++;
  }

  /** ExportTraceServiceRequest { resource_spans 1: { resource 1, scope_spans 2: { scope 1, spans 2…, schema_url 3 }, schema_url 3 } } */
  request(): Buffer {
    const { resource, scope } = this;
    const w = new Writer(this.w.pos + 1024);
    const rs = w.begin(1);
    const res = w.begin(1);
    attributes(w, 1, resource.attributes);
    w.end(res);
    const ss = w.begin(2);
    const sc = w.begin(1);
    w.string(1, scope.name);
    if (scope.version) w.string(2, scope.version);
    w.end(sc);
    w.raw(this.w.view());
    if (scope.schemaUrl) w.string(3, scope.schemaUrl);
    w.end(ss);
    if (resource.schemaUrl) w.string(3, resource.schemaUrl);
    w.end(rs);
    return w.view();
  }

  clear(): void {
    this.w.pos = 0;
    this.count = 0;
  }
}

/** Where batches of encoded spans go: `export` settles once the batch was delivered or given up on. */
export interface SpanSink {
  /** One `ExportTraceServiceRequest` of `spans` spans. */
  export(request: Buffer, spans: number): Promise<void>;
  shutdown(): Promise<void>;
}

const RETRYABLE_GRPC = new Set<number>([Status.CANCELLED, Status.DEADLINE_EXCEEDED, Status.RESOURCE_EXHAUSTED, 10 /* ABORTED */, 11 /* OUT_OF_RANGE */, Status.UNAVAILABLE, 15 /* DATA_LOSS */]);
const RETRYABLE_HTTP = new Set([429, 502, 503, 504]);
const MAX_ATTEMPTS = 5;

/** One attempt's outcome: done, or retry (after `afterMs` if the server said when). */
type Attempt = { ok: true } | { ok: false; retry: boolean; afterMs?: number; error: string };

export class OtlpExporter implements SpanSink {
  private readonly channel: UnaryChannel | undefined;
  /** OTLP/HTTP: undici's request and an agent, once undici is loaded (src/undici.ts). */
  private readonly http: Promise<{ request: typeof import('undici').request; agent: Agent }> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;

  /** `clock` times the export's deadline, its retry waits and the gRPC call's own timeout. */
  constructor(
    private readonly spec: ExporterSpec,
    private readonly timeoutMillis: number,
    private readonly clock: Clock = systemClock,
  ) {
    if (spec.protocol === 'grpc') {
      const url = new URL(spec.url);
      this.channel = new UnaryChannel({
        host: url.hostname.replace(/^\[|\]$/g, ''),
        port: Number(url.port || 80),
        tls: false,
        maxResponseBytes: 64 * 1024,
        clock,
        ...(spec.authorization ? { metadata: [['authorization', spec.authorization]] as const } : {}),
      });
    } else {
      this.http = loadUndici().then(({ Agent, request }) => ({ request, agent: new Agent({ connections: 2, keepAliveTimeout: 30_000 }) }));
      // A failed import fails each export (counted and logged by the batch), never goes unhandled.
      this.http.catch(() => undefined);
    }
  }

  export(request: Buffer): Promise<void> {
    if (this.stopped) return Promise.reject(new Error('exporter shut down'));
    const p = this.deliver(request);
    const tracked = p.catch(() => undefined);
    this.inFlight.add(tracked);
    void tracked.finally(() => this.inFlight.delete(tracked));
    return p;
  }

  private async deliver(body: Buffer): Promise<void> {
    const clock = this.clock;
    const deadline = clock.now() + this.timeoutMillis;
    let backoff = 1000;
    for (let attempt = 1; ; attempt++) {
      const left = deadline - clock.now();
      const r = await this.send(body, left);
      if (r.ok) return;
      if (!r.retry || attempt >= MAX_ATTEMPTS) throw new Error(r.error);
      const wait = r.afterMs ?? Math.min(5000, backoff) * (0.8 + Math.random() * 0.4);
      backoff *= 1.5;
      if (clock.now() + wait >= deadline) throw new Error(`${r.error} (no time left to retry)`);
      // A wait between attempts never keeps the process alive by itself.
      await new Promise<void>((resolve) => clock.setTimeout(resolve, wait).unref?.());
    }
  }

  private async send(body: Buffer, timeoutMs: number): Promise<Attempt> {
    if (this.channel) {
      const r = await this.channel.call(EXPORT_PATH, body, Math.max(1, timeoutMs));
      if (r.ok) return { ok: true };
      return { ok: false, retry: RETRYABLE_GRPC.has(r.code), error: `OTLP/gRPC export failed: ${r.message} (gRPC status ${r.code})` };
    }
    try {
      const { request, agent } = await this.http!;
      const res = await request(this.spec.url, {
        method: 'POST',
        body,
        headers: { 'content-type': 'application/x-protobuf', ...(this.spec.authorization ? { authorization: this.spec.authorization } : {}) },
        dispatcher: agent,
        headersTimeout: Math.max(1, timeoutMs),
        bodyTimeout: Math.max(1, timeoutMs),
      });
      await res.body.dump();
      if (res.statusCode >= 200 && res.statusCode < 300) return { ok: true };
      const after = Number(res.headers['retry-after']);
      return {
        ok: false,
        retry: RETRYABLE_HTTP.has(res.statusCode),
        ...(Number.isFinite(after) && after >= 0 ? { afterMs: after * 1000 } : {}),
        error: `OTLP/HTTP export failed: HTTP ${res.statusCode}`,
      };
    } catch (err) {
      return { ok: false, retry: true, error: `OTLP/HTTP export failed: ${(err as Error).message}` };
    }
  }

  async shutdown(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.inFlight]);
    this.channel?.close();
    if (this.http) await this.http.then(({ agent }) => agent.close(), () => undefined);
  }
}
