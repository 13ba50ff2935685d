/**
 * The data plane's observability layer (`RequestTelemetry`): OpenTelemetry spans and Envoy access-log
 * service entries, from the GVC's and workload's configuration, swapped on every reload.
 *
 * Per request: one server span (ingress, or a standalone sidecar) that continues the caller's trace
 * (W3C or B3), one client span per upstream attempt whose context is injected into the upstream
 * request (W3C plus the format that came in; ./spans.ts makes them), child spans for the filters' outside calls
 * (`childSpan`), and one access-log entry per configured log when the request is over. A WebSocket
 * upgrade or CONNECT tunnel is one such request that ends when its connection closes.
 *
 * Cost: a workload whose GVC neither traces nor logs pays a property write and a map lookup; the
 * incoming trace headers are parsed and span objects made only for traced workloads, lazily, at the
 * first hook that knows the workload (a request rejected before routing has no workload and no span).
 * The OpenTelemetry SDK is loaded only when some GVC traces. Hooks never throw and never wait.
 *
 * Access logs are written where Envoy's sidecar would write them: by a standalone sidecar, and by an
 * ingress for requests that no standalone sidecar sees (replicas without their own sidecar, as in
 * `svcproxy up`, and requests answered before a replica was chosen), so each request is logged once.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, type Attributes, type Context, type Span } from '@opentelemetry/api';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import type { Snapshot } from '../config/model.js';
import { systemClock, type Clock } from '../deps.js';
import type { AttemptEnd, ExchangeInfo, RequestTelemetry, Role } from '../observe/index.js';
import type { HostPort } from '../routing/replicas.js';
import { AccessLogService, compileAccessLogPlan, type AccessLogPlan, type AccessLogSpec, type AccessLogStreamOptions, type RequestFacts } from '../accesslog/index.js';
import { compileTracingPlan, type TracingPlan, type WorkloadTracing } from './config.js';
import type { Format } from './propagation.js';
import { endSpans, startAttemptSpan, startServerSpan, vendorKeys, type SdkModule, type SpanState } from './spans.js';
import type { BatchOptions, ExporterFactory, TracerEntry, TracerPool } from './tracer.js';

export interface TelemetryOptions {
  /** The process's role: names the tracing service (`svcproxy-ingress`, or the sidecar's workload). */
  readonly role: 'up' | 'ingress' | 'sidecar';
  readonly logger: Logger;
  /** Where the tracing and access-log counters are registered. */
  readonly registry: Registry;
  readonly clock?: Clock;
  /** `--tracing-collector`: the collector `provider.controlplane` sends to. */
  readonly collector?: string;
  /** The location this ingress or sidecar serves. */
  readonly location?: string;
  /** A standalone sidecar's identity (`gvc/name` and replica). */
  readonly sidecar?: { readonly workload: string; readonly replica: string };
  /** A standalone sidecar without a mesh listener: only this workload's tracing and access logs. */
  readonly onlyWorkload?: string;
  /** Span batching (tests shorten the delay). */
  readonly batch?: BatchOptions;
  /** Replaces the OTLP exporters (tests). */
  readonly exporterFactory?: ExporterFactory;
  /** Access-log stream bounds and backoff (tests shorten them). */
  readonly accessLog?: AccessLogStreamOptions;
}

const EMPTY_TRACING: TracingPlan = { exporters: new Map(), workloads: new Map(), notes: [] };
const EMPTY_ALS: AccessLogPlan = { specs: new Map(), workloads: new Map(), notes: [] };

/** Per-request state, in `ExchangeInfo.telemetry`. */
class RequestState implements RequestFacts, SpanState {
  constructor(readonly owner: Telemetry) {}
  /** Tracing and access logs were looked up for the workload. */
  resolved = false;
  entry: TracerEntry | undefined = undefined;
  tracing: WorkloadTracing | undefined = undefined;
  span: Span | undefined = undefined;
  ctx: Context = ROOT_CONTEXT;
  attempt: Span | undefined = undefined;
  format: Format | undefined = undefined;
  debug = false;
  als: readonly AccessLogSpec[] | undefined = undefined;
  upstream: HostPort | undefined = undefined;
  firstUpstreamTxAt = 0;
  lastRxAt = 0;
  requestBodyBytes = -1;
  trailers: Record<string, string | string[] | undefined> | undefined = undefined;
  failure: string | undefined = undefined;
  /** Wall-clock ms minus clock ms, fixed for the request so its spans' times are consistent. */
  anchor = 0;
}

function narrowTracing(plan: TracingPlan, workload: string | undefined): TracingPlan {
  if (workload === undefined) return plan;
  const mine = plan.workloads.get(workload);
  const exporter = mine && plan.exporters.get(mine.exporter);
  return {
    exporters: exporter ? new Map([[exporter.key, exporter]]) : new Map(),
    workloads: mine ? new Map([[workload, mine]]) : new Map(),
    notes: plan.notes,
  };
}

function narrowAccessLogs(plan: AccessLogPlan, workload: string | undefined): AccessLogPlan {
  if (workload === undefined) return plan;
  const mine = plan.workloads.get(workload) ?? [];
  return {
    specs: new Map(mine.map((spec) => [spec.key, spec])),
    workloads: mine.length > 0 ? new Map([[workload, mine]]) : new Map(),
    notes: plan.notes,
  };
}

export class Telemetry implements RequestTelemetry {
  private tracing: TracingPlan = EMPTY_TRACING;
  private accessLogs: AccessLogPlan = EMPTY_ALS;
  /** The vendor and its span attribute keys, made once per configuration rather than per span. */
  private keys = vendorKeys('svc');
  /** Some workload traces or logs: requests are followed at all. */
  private active = false;
  /** Some workload logs: request bodies are counted from the start. */
  private logging = false;
  private sdk: SdkModule | undefined;
  private sdkLoading: Promise<void> | undefined;
  private pool: TracerPool | undefined;
  private als: AccessLogService | undefined;
  private readonly noted = new Set<string>();
  private readonly clock: Clock;
  private readonly log: Logger;
  private closed = false;
  private anchorValue = 0;
  private anchorAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly opts: TelemetryOptions) {
    this.clock = opts.clock ?? systemClock;
    this.log = opts.logger.child({ component: 'telemetry' });
  }

  // ---- configuration ---------------------------------------------------------------------------

  update(snapshot: Snapshot): void {
    if (this.closed) return;
    if (this.keys.vendor !== snapshot.settings.vendor) this.keys = vendorKeys(snapshot.settings.vendor);
    // Other workloads' exporters and access-log streams are not opened here (nor the tracing SDK
    // loaded for them) when this process serves one workload.
    const own = this.opts.onlyWorkload;
    const tracing = narrowTracing(compileTracingPlan(snapshot, this.opts.collector ? { collector: this.opts.collector } : {}), own);
    const accessLogs = narrowAccessLogs(compileAccessLogPlan(snapshot), own);
    for (const note of [...tracing.notes, ...accessLogs.notes]) {
      if (this.noted.has(note)) continue;
      this.noted.add(note);
      this.log.warn(note);
    }
    this.tracing = tracing;
    this.accessLogs = accessLogs;
    if (tracing.exporters.size > 0 || this.pool) {
      if (this.sdk) this.applyTracing();
      else this.sdkLoading ??= this.loadSdk();
    }
    if (accessLogs.specs.size > 0 || this.als) {
      this.als ??= new AccessLogService({
        logger: this.opts.logger,
        registry: this.opts.registry,
        nodeId: this.opts.sidecar?.replica ?? `svcproxy-${this.opts.role}${this.opts.location ? `.${this.opts.location}` : ''}`,
        ...(this.opts.location ? { location: this.opts.location } : {}),
        ...(this.opts.accessLog ? { stream: this.opts.accessLog } : {}),
      });
      this.als.apply(accessLogs);
    }
    this.active = tracing.workloads.size > 0 || accessLogs.workloads.size > 0;
    this.logging = accessLogs.workloads.size > 0;
  }

  /** Resolves when the tracer providers of the current configuration exist. */
  async ready(): Promise<void> {
    await this.sdkLoading;
  }

  private async loadSdk(): Promise<void> {
    try {
      this.sdk = await import('./tracer.js');
    } catch (err) {
      this.log.error({ err }, 'the OpenTelemetry SDK could not be loaded; not tracing');
      return;
    }
    if (!this.closed) this.applyTracing();
  }

  private applyTracing(): void {
    const sdk = this.sdk!;
    if (!this.pool) {
      const sidecarWorkload = this.opts.sidecar?.workload;
      const slash = sidecarWorkload?.indexOf('/') ?? -1;
      const resource: Record<string, string> = sidecarWorkload
        ? { 'service.name': sidecarWorkload.slice(slash + 1), 'service.namespace': sidecarWorkload.slice(0, Math.max(slash, 0)) }
        : { 'service.name': 'svcproxy-ingress' };
      if (this.opts.location) resource[this.keys.location] = this.opts.location;
      this.pool = new sdk.TracerPool({
        logger: this.opts.logger,
        metrics: sdk.tracingMetrics(this.opts.registry),
        resource,
        ...(this.opts.batch ? { batch: this.opts.batch } : {}),
        ...(this.opts.exporterFactory ? { exporterFactory: this.opts.exporterFactory } : {}),
      });
    }
    this.pool.apply(this.tracing.exporters);
  }

  /** Export queued spans and write buffered access-log entries now (tests and shutdown). */
  async flush(): Promise<void> {
    this.als?.flush();
    await this.pool?.flush();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.active = false;
    await this.sdkLoading;
    await Promise.all([this.pool?.close(3000), this.als?.close(2000)]);
  }

  // ---- per request -----------------------------------------------------------------------------

  requestStart(ex: ExchangeInfo, _role: Role): void {
    // The state is made only if the workload, once known, traces or logs.
    if (this.active) ex.telemetry = this;
  }

  routed(ex: ExchangeInfo): void {
    if (ex.telemetry !== this || !this.logging) return;
    const st = this.state(ex);
    // Only a workload with an access log counts its request body (a tunnel's payload is counted off
    // its upstream socket when it closes, proxy/tunnel.ts).
    if (st?.als && ex.tunnel === undefined && st.requestBodyBytes < 0) this.countBody(ex, st);
  }

  /**
   * Body bytes and the time of the last one, counted where the HTTP parser hands them to the request
   * stream, so no consumer's flow (undici, a pipe, the replay buffer) is disturbed.
   */
  private countBody(ex: ExchangeInfo, st: RequestState): void {
    const req = ex.req as unknown as Readable & { push(chunk: unknown, encoding?: BufferEncoding): boolean };
    const push = req.push;
    const clock = this.clock;
    // Routing happens in the request's first tick, before the parser hands over any body bytes;
    // whatever is buffered already (nothing has read it yet) counts too.
    st.requestBodyBytes = req.readableLength;
    req.push = function countingPush(this: Readable, chunk: unknown, encoding?: BufferEncoding): boolean {
      if (chunk === null) st.lastRxAt = clock.now();
      else if (chunk) st.requestBodyBytes += (chunk as { length: number }).length;
      return push.call(this, chunk, encoding);
    };
  }

  /**
   * Span times are the clock's monotonic readings plus an anchor to wall-clock time, refreshed every
   * second: sub-millisecond and consistent within a request (the SDK's own timestamps mix in
   * `Date.now()`, whose millisecond steps can put a child span before its parent).
   */
  private anchor(): number {
    const now = this.clock.now();
    if (now - this.anchorAt > 1000) {
      this.anchorAt = now;
      this.anchorValue = this.clock.wallNow() - now;
    }
    return this.anchorValue;
  }

  /** Wall-clock time (epoch ms) of the request's spans, now. */
  time(st: RequestState): number {
    return st.anchor + this.clock.now();
  }

  /** The request's state once its workload is known; `undefined` when the workload neither traces nor logs. */
  state(ex: ExchangeInfo): RequestState | undefined {
    const t = ex.telemetry;
    let st: RequestState;
    if (t instanceof RequestState) {
      if (t.resolved) return t;
      st = t;
    } else {
      if (t !== this) return undefined;
      const w = ex.workload;
      if (!w || (!this.tracing.workloads.has(w.key) && !this.accessLogs.workloads.has(w.key))) return undefined;
      st = new RequestState(this);
      ex.telemetry = st;
    }
    const w = ex.workload;
    if (!w) return st;
    st.resolved = true;
    st.als = this.accessLogs.workloads.get(w.key);
    const tracing = this.tracing.workloads.get(w.key);
    const entry = tracing && this.pool?.get(tracing.exporter);
    if (tracing && entry && this.sdk) startServerSpan(ex, st, tracing, entry, this.sdk, this.keys, this.anchor(), this.opts.sidecar?.replica);
    return st;
  }

  traceIdOf(ex: ExchangeInfo): string | undefined {
    const st = ex.telemetry === undefined ? undefined : this.state(ex);
    return st?.span?.spanContext().traceId;
  }

  tracesWorkload(workload: string): boolean {
    return this.tracing.workloads.has(workload);
  }

  attemptStart(ex: ExchangeInfo, target: HostPort, headers: OutgoingHttpHeaders): void {
    if (ex.telemetry === undefined) return;
    const st = this.state(ex);
    if (!st) return;
    if (st.firstUpstreamTxAt === 0) st.firstUpstreamTxAt = this.clock.now();
    st.upstream = target;
    st.failure = undefined;
    if (st.als && st.als.some((s) => s.responseTrailers.length > 0) && st.trailers === undefined) this.captureTrailers(ex, st);
    const entry = st.entry;
    if (!entry || !st.tracing || !st.span) return;
    startAttemptSpan(ex, st, target, headers, this.keys, this.clock);
  }

  /** Trailers the log asks for are seen where they are added to the downstream response. */
  private captureTrailers(ex: ExchangeInfo, st: RequestState): void {
    const res = ex.res as unknown as { addTrailers(headers: Record<string, string | string[] | undefined>): void };
    const add = res.addTrailers;
    st.trailers = {};
    res.addTrailers = function capturingAddTrailers(this: unknown, trailers) {
      Object.assign(st.trailers!, trailers);
      return add.call(this, trailers);
    };
  }

  attemptEnd(ex: ExchangeInfo, end: AttemptEnd): void {
    const st = ex.telemetry;
    if (!(st instanceof RequestState)) return;
    if (end.failure !== undefined) st.failure = end.failure;
    const span = st.attempt;
    if (!span) return;
    if (span.isRecording()) {
      if (end.status !== undefined) span.setAttribute('http.response.status_code', end.status);
      if (end.failure !== undefined) {
        span.setAttribute('error.type', end.failure);
        span.setStatus({ code: SpanStatusCode.ERROR, message: end.failure });
      } else if (end.status !== undefined && end.status >= 500) {
        span.setAttribute('error.type', String(end.status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    // The answer that is delivered keeps its span open until the response has been streamed.
    if (end.retried || end.failure !== undefined) {
      span.end(this.time(st));
      st.attempt = undefined;
    }
  }

  requestEnd(ex: ExchangeInfo): void {
    if (ex.telemetry === undefined) return;
    const st = this.state(ex);
    if (!st) return;
    // A tunnel's last byte from the client came at the latest when it closed.
    if (ex.tunnel && st.lastRxAt === 0) st.lastRxAt = this.clock.now();
    if (st.span) endSpans(ex, st, this.keys, this.clock);
    if (st.als && this.als && !(ex.listenerKind !== 'sidecar' && ex.replica?.sidecar)) {
      this.als.record(ex, st, st.als, this.clock.now(), this.clock.wallNow());
    }
  }

  /** A child span of the request's server span, or `undefined` when the request is not being recorded. */
  child(ex: ExchangeInfo, name: string, attributes?: Attributes): { span: Span; now: () => number } | undefined {
    const st = this.state(ex);
    const entry = st?.entry;
    if (!entry || !st.span?.isRecording()) return undefined;
    const span = entry.tracer.startSpan(name, { kind: SpanKind.CLIENT, startTime: this.time(st), ...(attributes ? { attributes } : {}) }, st.ctx);
    return { span, now: () => this.time(st) };
  }
}

/** The telemetry object following an exchange, if any (for `childSpan`). */
export function telemetryOf(ex: { readonly telemetry: unknown }): Telemetry | undefined {
  const t = ex.telemetry;
  if (t instanceof Telemetry) return t;
  if (t instanceof RequestState) return t.owner;
  return undefined;
}
