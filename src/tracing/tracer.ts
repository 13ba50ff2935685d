/**
 * The tracing side: one tracer per distinct exporter (protocol, URL, authorization, sampling): the
 * proxy's own spans (./span.ts) with the SDK's `ParentBased(TraceIdRatioBased)` sampling and its
 * `BatchSpanProcessor`, so export is batched and off the request path, through our OTLP exporter
 * (./otlp.ts). This module is loaded only when some GVC traces (the SDK costs start-up time a proxy
 * without tracing should not pay).
 *
 * Failure modes: an exporter that is down or slow never fails or delays a request. Spans beyond the
 * queue bound (2048) are dropped, and so are spans of a batch whose export failed (after the OTLP
 * exporter's retries); both are counted in `svcproxy_tracing_spans_dropped_total{reason}` and the
 * failures in `svcproxy_tracing_export_errors_total`, and logged at most every 30 s per exporter.
 * On reload, tracers nobody needs any more are shut down (flushing what they hold) once their
 * requests in flight have ended, or after 30 s.
 */
import { createRequire } from 'node:module';
import { createContextKey, TraceFlags, type Attributes, type Context, type Link, type SpanKind, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, TraceState, type ExportResult } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import {
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';
import type { Counter, Registry } from 'prom-client';
import { sharedCounter } from '../admin/registered.js';
import type { Logger } from 'pino';
import type { ExporterSpec } from './config.js';
import { LeanTracer } from './span.js';

const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

/** Set on the parent context when the caller sent trace ids without a sampling decision (B3). */
export const DEFERRED_DECISION = createContextKey('svcproxy deferred sampling decision');
/** Set on the root context when the caller sent only a decision (`b3: 1` / `b3: 0`). */
export const FORCED_DECISION = createContextKey('svcproxy forced sampling decision');

/**
 * A `tracestate` value, read as @opentelemetry/core reads it: invalid members and members past 512
 * characters or 32 entries are skipped, the rest kept in order.
 */
export function traceStateOf(raw: string): TraceState {
  return new TraceState(raw);
}

const NOT_RECORD: SamplingResult = Object.freeze({ decision: SamplingDecision.NOT_RECORD });
const SAMPLE: SamplingResult = Object.freeze({ decision: SamplingDecision.RECORD_AND_SAMPLED });

/** Roots: a forced decision if the caller sent one, else the ratio on the trace id. */
class RootSampler implements Sampler {
  constructor(private readonly ratio: Sampler) {}
  shouldSample(context: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    const forced = context.getValue(FORCED_DECISION);
    if (forced === true) return SAMPLE;
    if (forced === false) return NOT_RECORD;
    return this.ratio.shouldSample(context, traceId, name, kind, attributes, links);
  }
  toString(): string {
    return `Root{${this.ratio.toString()}}`;
  }
}

/** A remote parent that is not sampled: honored, unless it made no decision at all (then: the ratio). */
class RemoteUnsampledSampler implements Sampler {
  constructor(private readonly ratio: Sampler) {}
  shouldSample(context: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (context.getValue(DEFERRED_DECISION) !== true) return NOT_RECORD;
    return this.ratio.shouldSample(context, traceId, name, kind, attributes, links);
  }
  toString(): string {
    return `RemoteUnsampled{${this.ratio.toString()}}`;
  }
}

/**
 * `ParentBased(TraceIdRatioBased(ratio))` with the forced and deferred decisions above. At 100% the
 * ratio is AlwaysOn, the same decision without hashing every trace id.
 */
export function samplerFor(ratio: number): Sampler {
  const byRatio = ratio >= 1 ? new AlwaysOnSampler() : new TraceIdRatioBasedSampler(ratio);
  return new ParentBasedSampler({ root: new RootSampler(byRatio), remoteParentNotSampled: new RemoteUnsampledSampler(byRatio) });
}

export interface TracingMetrics {
  readonly exported: Counter;
  readonly dropped: Counter<'reason'>;
  readonly exportErrors: Counter;
}

export function tracingMetrics(registry: Registry): TracingMetrics {
  return {
    exported: sharedCounter(registry, 'svcproxy_tracing_spans_exported_total', 'Spans the collector accepted'),
    dropped: sharedCounter(registry, 'svcproxy_tracing_spans_dropped_total', 'Spans dropped: queue_full (export too slow) or export_failed', ['reason']),
    exportErrors: sharedCounter(registry, 'svcproxy_tracing_export_errors_total', 'Span batches whose export failed'),
  };
}

/** The OTLP exporter for a spec (./otlp.ts: gRPC or HTTP/protobuf). */
async function loadExporter(spec: ExporterSpec, timeoutMillis: number): Promise<SpanExporter> {
  const { OtlpExporter } = await import('./otlp.js');
  return new OtlpExporter(spec, timeoutMillis);
}

export type ExporterFactory = (spec: ExporterSpec) => SpanExporter | Promise<SpanExporter>;

/**
 * Wraps the real exporter: created lazily, every batch's outcome counted, failures logged at most
 * every 30 s. `queue.pending` mirrors the batch processor's queue length (spans handed over minus
 * spans taken for export), which is how drops at the queue bound are seen and counted.
 */
class CountingExporter implements SpanExporter {
  private inner: SpanExporter | undefined;
  private loading: Promise<SpanExporter> | undefined;
  private lastLog = 0;
  private failedSinceLog = 0;

  constructor(
    private readonly spec: ExporterSpec,
    private readonly factory: ExporterFactory,
    private readonly queue: { pending: number },
    private readonly metrics: TracingMetrics,
    private readonly log: Logger,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.queue.pending -= spans.length;
    const finish = (result: ExportResult): void => {
      if (result.code === ExportResultCode.SUCCESS) this.metrics.exported.inc(spans.length);
      else this.failed(spans.length, result.error);
      done(result);
    };
    if (this.inner) return this.inner.export(spans, finish);
    this.loading ??= Promise.resolve(this.factory(this.spec));
    this.loading.then(
      (exporter) => {
        this.inner = exporter;
        exporter.export(spans, finish);
      },
      (error: Error) => finish({ code: ExportResultCode.FAILED, error }),
    );
  }

  private failed(count: number, error: Error | undefined): void {
    this.metrics.exportErrors.inc();
    this.metrics.dropped.labels('export_failed').inc(count);
    this.failedSinceLog += count;
    const now = Date.now();
    if (now - this.lastLog < 30_000) return;
    this.lastLog = now;
    this.log.warn({ exporter: this.spec.url, dropped: this.failedSinceLog, err: error?.message }, 'span export failed; spans dropped');
    this.failedSinceLog = 0;
  }

  async shutdown(): Promise<void> {
    const exporter = this.inner ?? (this.loading ? await this.loading.catch(() => undefined) : undefined);
    await exporter?.shutdown();
  }

  async forceFlush(): Promise<void> {
    await this.inner?.forceFlush?.();
  }
}

/** In front of the batch processor: counts (and drops) what its full queue would drop silently. */
class BoundedProcessor implements SpanProcessor {
  constructor(
    private readonly inner: SpanProcessor,
    private readonly queue: { pending: number },
    private readonly maxQueueSize: number,
    private readonly metrics: TracingMetrics,
  ) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queue.pending >= this.maxQueueSize) {
      this.metrics.dropped.labels('queue_full').inc();
      return;
    }
    this.queue.pending++;
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

export interface BatchOptions {
  /** How long spans wait for a batch (default 1000 ms). */
  readonly scheduledDelayMillis?: number;
  readonly maxQueueSize?: number;
  readonly maxExportBatchSize?: number;
  /** One export's bound, the OTLP exporter's retries included (default 10 s). */
  readonly exportTimeoutMillis?: number;
}

export interface TracerPoolOptions {
  readonly logger: Logger;
  readonly metrics: TracingMetrics;
  /** Resource attributes: `service.name` and whatever else identifies this proxy. */
  readonly resource: Readonly<Record<string, string>>;
  readonly batch?: BatchOptions;
  /** Replaces the OTLP exporters (tests). */
  readonly exporterFactory?: ExporterFactory;
}

/** One exporter's tracer and span processor, with the count of requests in flight that use it. */
export class TracerEntry {
  active = 0;
  retired = false;
  private shutdownPromise: Promise<void> | undefined;
  private timer: NodeJS.Timeout | undefined;
  private resolveClosed!: () => void;
  /** Resolves once the processor has been shut down. */
  readonly closed = new Promise<void>((resolve) => (this.resolveClosed = resolve));

  constructor(readonly spec: ExporterSpec, readonly tracer: Tracer, private readonly processor: { shutdown(): Promise<void>; forceFlush(): Promise<void> }) {}

  release(): void {
    if (--this.active === 0 && this.retired) void this.shutdown();
  }

  retire(maxWaitMs: number): void {
    this.retired = true;
    if (this.active === 0) return void this.shutdown();
    this.timer = setTimeout(() => void this.shutdown(), maxWaitMs);
    this.timer.unref();
  }

  shutdown(): Promise<void> {
    clearTimeout(this.timer);
    this.shutdownPromise ??= this.processor.shutdown().catch(() => undefined).then(() => this.resolveClosed());
    return this.shutdownPromise;
  }

  forceFlush(): Promise<void> {
    return this.processor.forceFlush().catch(() => undefined);
  }
}

export class TracerPool {
  private readonly entries = new Map<string, TracerEntry>();
  private readonly retired = new Set<TracerEntry>();
  private readonly log: Logger;

  constructor(private readonly opts: TracerPoolOptions) {
    this.log = opts.logger.child({ component: 'tracing' });
  }

  /** Bring the tracers in line with `specs`: new ones created, unchanged ones kept, gone ones retired. */
  apply(specs: ReadonlyMap<string, ExporterSpec>): void {
    for (const [key, spec] of specs) if (!this.entries.has(key)) this.entries.set(key, this.create(spec));
    for (const [key, entry] of this.entries) {
      if (specs.has(key)) continue;
      this.entries.delete(key);
      this.retired.add(entry);
      entry.retire(30_000);
      void entry.closed.then(() => this.retired.delete(entry));
    }
  }

  get(key: string): TracerEntry | undefined {
    return this.entries.get(key);
  }

  /** Export what is queued now (tests, and shutdown). */
  async flush(): Promise<void> {
    await Promise.all([...this.entries.values()].map((e) => e.forceFlush()));
  }

  /** Shut every tracer's processor down, flushing what it holds, within `timeoutMs`. */
  async close(timeoutMs = 3000): Promise<void> {
    const all = [...this.entries.values(), ...this.retired];
    this.entries.clear();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(all.map((e) => e.shutdown())),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
    ]);
    clearTimeout(timer);
  }

  private create(spec: ExporterSpec): TracerEntry {
    const batch = this.opts.batch ?? {};
    const maxQueueSize = batch.maxQueueSize ?? 2048;
    const exportTimeoutMillis = batch.exportTimeoutMillis ?? 10_000;
    const queue = { pending: 0 };
    const exporter = new CountingExporter(spec, this.opts.exporterFactory ?? ((s) => loadExporter(s, exportTimeoutMillis)), queue, this.opts.metrics, this.log);
    const processor = new BatchSpanProcessor(exporter, {
      scheduledDelayMillis: batch.scheduledDelayMillis ?? 1000,
      maxQueueSize,
      maxExportBatchSize: Math.min(batch.maxExportBatchSize ?? 512, maxQueueSize),
      exportTimeoutMillis,
    });
    const bounded = new BoundedProcessor(processor, queue, maxQueueSize, this.opts.metrics);
    const resource = defaultResource().merge(resourceFromAttributes({ ...this.opts.resource, 'service.version': VERSION }));
    const tracer = new LeanTracer(resource, { name: 'svcproxy', version: VERSION }, samplerFor(spec.ratio), bounded);
    this.log.info({ exporter: spec.url, protocol: spec.protocol, sampling: spec.ratio * 100 }, 'tracing exporter ready');
    return new TracerEntry(spec, tracer, bounded);
  }
}
