/**
 * The tracing side: one tracer per distinct exporter (protocol, URL, authorization, sampling): the
 * proxy's own spans (./span.ts) with the SDK's `ParentBased(TraceIdRatioBased)` sampling, encoded
 * into batches as they end (./batch.ts), so export is batched and off the request path, through our
 * OTLP exporter (./otlp.ts). This module is loaded only when some GVC traces (the SDK costs start-up time a proxy
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
import { createContextKey, type Attributes, type Context, type Link, type SpanKind, type Tracer } from '@opentelemetry/api';
import { TraceState } from '@opentelemetry/core';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOnSampler, ParentBasedSampler, SamplingDecision, TraceIdRatioBasedSampler, type Sampler, type SamplingResult } from '@opentelemetry/sdk-trace-base';
import type { Registry } from 'prom-client';
import { sharedCounter } from '../admin/registered.js';
import type { Logger } from 'pino';
import type { ExporterSpec } from './config.js';
import { BatchProcessor, type TracingMetrics } from './batch.js';
import { OtlpExporter, type SpanSink } from './otlp.js';
import { LeanTracer } from './span.js';

export type { TracingMetrics } from './batch.js';

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

export function tracingMetrics(registry: Registry): TracingMetrics {
  return {
    exported: sharedCounter(registry, 'svcproxy_tracing_spans_exported_total', 'Spans the collector accepted'),
    dropped: sharedCounter(registry, 'svcproxy_tracing_spans_dropped_total', 'Spans dropped: queue_full (export too slow) or export_failed', ['reason']),
    exportErrors: sharedCounter(registry, 'svcproxy_tracing_export_errors_total', 'Span batches whose export failed'),
  };
}

export type ExporterFactory = (spec: ExporterSpec) => SpanSink | Promise<SpanSink>;

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

  constructor(readonly spec: ExporterSpec, readonly tracer: LeanTracer, private readonly processor: { shutdown(): Promise<void>; forceFlush(): Promise<void> }) {}

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
    const limits = {
      scheduledDelayMillis: batch.scheduledDelayMillis ?? 1000,
      maxQueueSize,
      maxExportBatchSize: Math.min(batch.maxExportBatchSize ?? 512, maxQueueSize),
      exportTimeoutMillis: batch.exportTimeoutMillis ?? 10_000,
    };
    const factory = this.opts.exporterFactory ?? ((s: ExporterSpec) => new OtlpExporter(s, limits.exportTimeoutMillis));
    const resource = defaultResource().merge(resourceFromAttributes({ ...this.opts.resource, 'service.version': VERSION }));
    const scope = { name: 'svcproxy', version: VERSION };
    const processor = new BatchProcessor(resource, scope, () => factory(spec), limits, this.opts.metrics, this.log, spec.url);
    const tracer = new LeanTracer(resource, scope, samplerFor(spec.ratio), processor, true);
    this.log.info({ exporter: spec.url, protocol: spec.protocol, sampling: spec.ratio * 100 }, 'tracing exporter ready');
    return new TracerEntry(spec, tracer, processor);
  }
}
