/**
 * The span processor of each tracer: the SDK's `BatchSpanProcessor` contract (a bounded queue, a
 * batch sent when it is full or `scheduledDelayMillis` after its first span, one export at a time, an
 * export given up after `exportTimeoutMillis` so the next can start, everything flushed on shutdown)
 * with spans encoded into their batch as they end (otlp.ts `SpanBatch`) instead of being kept as
 * objects until the export. A span kept for up to a second outlives many young-generation GCs and is
 * copied into the old generation with everything it references; encoded, it is garbage when its
 * request is.
 *
 * Only sampled spans are taken. Spans beyond `maxQueueSize` waiting for export are dropped and counted
 * (`svcproxy_tracing_spans_dropped_total{reason="queue_full"}`); so are the spans of a batch whose
 * export failed (`export_failed`, after the OTLP exporter's own retries), with the failures in
 * `svcproxy_tracing_export_errors_total`, logged at most every 30 s.
 */
import { TraceFlags } from '@opentelemetry/api';
import type { ReadableSpan, SpanProcessor } from '@opentelemetry/sdk-trace-base';
import type { Counter } from 'prom-client';
import type { Logger } from 'pino';
import { SpanBatch, type SpanSink } from './otlp.js';

export interface TracingMetrics {
  readonly exported: Counter;
  readonly dropped: Counter<'reason'>;
  readonly exportErrors: Counter;
}

export interface BatchLimits {
  readonly scheduledDelayMillis: number;
  readonly maxQueueSize: number;
  readonly maxExportBatchSize: number;
  readonly exportTimeoutMillis: number;
}

export class BatchProcessor implements SpanProcessor {
  /** Batches waiting for export, oldest first; spans are added to the last. */
  private readonly batches: SpanBatch[] = [];
  /**
   * Batches whose spans went out, kept for the next spans: a batch's buffer lives as long as the
   * tracer instead of a new one growing to a batch's size (and being promoted) for every batch.
   */
  private readonly spare: SpanBatch[] = [];
  /** Spans in `batches`. */
  private queued = 0;
  private exporting = false;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private shutdownPromise: Promise<void> | undefined;
  private readonly inFlight = new Set<Promise<void>>();
  private sink: Promise<SpanSink> | undefined;
  private lastLog = 0;
  private failedSinceLog = 0;

  constructor(
    private readonly resource: ReadableSpan['resource'],
    private readonly scope: ReadableSpan['instrumentationScope'],
    /** The exporter, made at the first export (a tracer nobody uses never connects). */
    private readonly makeSink: () => SpanSink | Promise<SpanSink>,
    private readonly limits: BatchLimits,
    private readonly metrics: TracingMetrics,
    private readonly log: Logger,
    private readonly url: string,
  ) {}

  onStart(): void {}

  onEnd(span: ReadableSpan): void {
    if (this.stopped || (span.spanContext().traceFlags & TraceFlags.SAMPLED) === 0) return;
    if (this.queued >= this.limits.maxQueueSize) {
      this.metrics.dropped.labels('queue_full').inc();
      return;
    }
    let batch = this.batches[this.batches.length - 1];
    if (!batch || batch.count >= this.limits.maxExportBatchSize) this.batches.push((batch = this.spare.pop() ?? new SpanBatch(this.resource, this.scope)));
    batch.add(span);
    this.queued++;
    this.schedule();
  }

  /** Send now if a batch is full, else when the oldest has waited `scheduledDelayMillis`. */
  private schedule(): void {
    if (this.exporting) return;
    if (this.batches[0]!.count >= this.limits.maxExportBatchSize) return this.next();
    if (this.timer) return;
    this.timer = setTimeout(() => this.next(), this.limits.scheduledDelayMillis);
    this.timer.unref();
  }

  /** Send the oldest batch, and when it is done, whatever has queued meanwhile. */
  private next(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.take();
    if (!batch) return;
    this.exporting = true;
    void this.send(batch).then(() => {
      this.exporting = false;
      if (this.batches.length > 0) this.schedule();
    });
  }

  private take(): SpanBatch | undefined {
    const batch = this.batches.shift();
    if (batch) this.queued -= batch.count;
    return batch;
  }

  /** Export one batch; settles (never rejects) when it was delivered, failed or timed out. */
  private send(batch: SpanBatch): Promise<void> {
    const count = batch.count;
    const request = batch.request();
    batch.clear();
    this.spare.push(batch);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`export timed out after ${this.limits.exportTimeoutMillis} ms`)), this.limits.exportTimeoutMillis);
      timer.unref();
    });
    const p = Promise.race([this.sinkNow().then((sink) => sink.export(request, count)), timeout]).then(
      () => void this.metrics.exported.inc(count),
      (err: Error) => this.failed(count, err),
    ).finally(() => {
      clearTimeout(timer);
      this.inFlight.delete(p);
    });
    this.inFlight.add(p);
    return p;
  }

  private failed(count: number, error: Error): void {
    this.metrics.exportErrors.inc();
    this.metrics.dropped.labels('export_failed').inc(count);
    this.failedSinceLog += count;
    const now = Date.now();
    if (now - this.lastLog < 30_000) return;
    this.lastLog = now;
    this.log.warn({ exporter: this.url, dropped: this.failedSinceLog, err: error.message }, 'span export failed; spans dropped');
    this.failedSinceLog = 0;
  }

  /** Send every queued batch now and wait for all exports in flight. */
  async forceFlush(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (let batch = this.take(); batch; batch = this.take()) void this.send(batch);
    await Promise.all([...this.inFlight]);
  }

  /** Take no more spans, flush, and shut the exporter down (if it was ever made). */
  shutdown(): Promise<void> {
    this.shutdownPromise ??= (async () => {
      this.stopped = true;
      await this.forceFlush();
      const sink = await this.sink?.catch(() => undefined);
      await sink?.shutdown();
    })();
    return this.shutdownPromise;
  }

  private sinkNow(): Promise<SpanSink> {
    this.sink ??= Promise.resolve().then(this.makeSink);
    return this.sink;
  }
}
