/**
 * The proxy's own spans: a `Tracer` and `Span` with the OpenTelemetry API's contract (the same
 * sampling with the SDK's samplers, ids from the SDK's generator, span context, attributes, status,
 * events, links, end) that hand finished spans to an SDK `SpanProcessor` as `ReadableSpan`s. They
 * replace the SDK's `Tracer`/`SpanImpl` on the request path because those cost more per request than
 * the rest of tracing together: every span reads two clocks and computes a performance-time offset,
 * validates each attribute value deeply, and records self-observability metrics.
 *
 * Differences from the SDK, none visible in what is exported for our spans: times are taken as given
 * (the proxy always passes epoch milliseconds); attribute values are kept as they are given (the
 * proxy's own strings, numbers and booleans; null and undefined are ignored, as in the SDK), up to the
 * SDK's default limit of 128 attributes a span (more are counted as dropped); events and links keep
 * the SDK's default limits of 128.
 *
 * Attributes are kept as two parallel lists (`attributeKeys`, `attributeValues`) in the order they
 * were first set, which the OTLP encoder reads directly; `attributes` builds the SDK's object from
 * them when some other reader asks. Adding a dozen keys one at a time to an object costs a hidden-class
 * transition and a megamorphic keyed store each, which `perf` showed as several microseconds a
 * request in V8's runtime (map migration, transition lookups) on a traced sidecar.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
  type Attributes,
  type AttributeValue,
  type Context,
  type Exception,
  type HrTime,
  type Link,
  type Span,
  type SpanContext,
  type SpanOptions,
  type SpanStatus,
  type TimeInput,
  type TraceState,
  type Tracer,
} from '@opentelemetry/api';
import { hrTimeDuration, millisToHrTime } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import { RandomIdGenerator, SamplingDecision, type ReadableSpan, type Sampler, type SpanProcessor, type TimedEvent } from '@opentelemetry/sdk-trace-base';

const LIMIT = 128;
const ids = new RandomIdGenerator();

function timeOf(t: TimeInput | undefined): HrTime {
  if (t === undefined) return millisToHrTime(Date.now());
  if (typeof t === 'number') return millisToHrTime(t);
  if (t instanceof Date) return millisToHrTime(t.getTime());
  return t;
}

export interface Scope {
  readonly name: string;
  readonly version?: string;
}

export class LeanSpan implements Span, ReadableSpan {
  /** Attribute keys in the order they were first set, with their values at the same index. */
  readonly attributeKeys: string[] = [];
  readonly attributeValues: AttributeValue[] = [];
  readonly links: Link[] = [];
  readonly events: TimedEvent[] = [];
  status: SpanStatus = { code: SpanStatusCode.UNSET };
  endTime: HrTime = [0, 0];
  duration: HrTime = [0, 0];
  ended = false;
  droppedAttributesCount = 0;
  droppedEventsCount = 0;
  droppedLinksCount = 0;

  constructor(
    private readonly ctx: SpanContext,
    public name: string,
    readonly kind: SpanKind,
    readonly startTime: HrTime,
    readonly parentSpanContext: SpanContext | undefined,
    readonly resource: Resource,
    readonly instrumentationScope: Scope,
    private readonly processor: SpanProcessor,
  ) {}

  spanContext(): SpanContext {
    return this.ctx;
  }

  /** The attributes as the SDK's object (built on each call; the proxy's own encoder reads the lists). */
  get attributes(): Attributes {
    const out: Attributes = {};
    const keys = this.attributeKeys;
    for (let i = 0; i < keys.length; i++) out[keys[i]!] = this.attributeValues[i];
    return out;
  }

  setAttribute(key: string, value: AttributeValue | undefined): this {
    if (value == null || this.ended || key.length === 0) return this;
    const keys = this.attributeKeys;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === key) {
        this.attributeValues[i] = value;
        return this;
      }
    }
    if (keys.length >= LIMIT) {
      this.droppedAttributesCount++;
      return this;
    }
    keys.push(key);
    this.attributeValues.push(value);
    return this;
  }

  setAttributes(attributes: Attributes): this {
    for (const key in attributes) this.setAttribute(key, attributes[key]);
    return this;
  }

  addEvent(name: string, attributesOrTime?: Attributes | TimeInput, time?: TimeInput): this {
    if (this.ended) return this;
    let attributes: Attributes = {};
    if (attributesOrTime !== undefined && (typeof attributesOrTime === 'number' || attributesOrTime instanceof Date || Array.isArray(attributesOrTime))) {
      time ??= attributesOrTime as TimeInput;
    } else if (attributesOrTime) {
      attributes = { ...(attributesOrTime as Attributes) };
    }
    if (this.events.length >= LIMIT) {
      this.events.shift();
      this.droppedEventsCount++;
    }
    this.events.push({ name, attributes, time: timeOf(time), droppedAttributesCount: 0 });
    return this;
  }

  addLink(link: Link): this {
    if (this.ended) return this;
    if (this.links.length >= LIMIT) {
      this.links.shift();
      this.droppedLinksCount++;
    }
    this.links.push(link.attributes ? { context: link.context, attributes: { ...link.attributes } } : { context: link.context });
    return this;
  }

  addLinks(links: Link[]): this {
    for (const l of links) this.addLink(l);
    return this;
  }

  /** As the SDK: UNSET is ignored, OK is final, a message is kept only with ERROR. */
  setStatus(status: SpanStatus): this {
    if (this.ended || status.code === SpanStatusCode.UNSET || this.status.code === SpanStatusCode.OK) return this;
    this.status = status.code === SpanStatusCode.ERROR && typeof status.message === 'string' ? { code: status.code, message: status.message } : { code: status.code };
    return this;
  }

  updateName(name: string): this {
    if (!this.ended) this.name = name;
    return this;
  }

  end(endTime?: TimeInput): void {
    if (this.ended) return;
    this.endTime = timeOf(endTime);
    this.duration = hrTimeDuration(this.startTime, this.endTime);
    if (this.duration[0] < 0) {
      this.endTime = [this.startTime[0], this.startTime[1]];
      this.duration = [0, 0];
    }
    this.ended = true;
    this.processor.onEnd(this);
  }

  isRecording(): boolean {
    return !this.ended;
  }

  recordException(exception: Exception, time?: TimeInput): void {
    const attributes: Attributes = {};
    if (typeof exception === 'string') attributes['exception.message'] = exception;
    else {
      const type = exception.code !== undefined ? String(exception.code) : exception.name;
      if (type) attributes['exception.type'] = type;
      if (exception.message) attributes['exception.message'] = exception.message;
      if (exception.stack) attributes['exception.stacktrace'] = exception.stack;
    }
    this.addEvent('exception', attributes, time);
  }
}

/** Starts `LeanSpan`s with the SDK's sampling rules (`Tracer.startSpan` of sdk-trace-base 2.x). */
export class LeanTracer implements Tracer {
  /**
   * `parentDecides`: the sampler keeps a sampled local parent's decision and adds neither attributes
   * nor trace state to it (tracer.ts `samplerFor`: parent-based with the SDK's defaults for local
   * parents), which lets `startChild` skip it.
   */
  constructor(
    private readonly resource: Resource,
    private readonly scope: Scope,
    private readonly sampler: Sampler,
    private readonly processor: SpanProcessor,
    private readonly parentDecides = false,
  ) {}

  /**
   * A child of `parent`, where `context` holds `parent`: the span `startSpan(name, { kind, startTime },
   * context)` makes. When `parent` is a sampled span of this tracer and the sampler lets the parent
   * decide, the child is made directly (sampled, in the parent's trace, with its trace state),
   * without looking the parent up in the context or calling the sampler; otherwise as `startSpan`.
   */
  startChild(parent: Span, name: string, kind: SpanKind, startTime: number, context: Context): Span {
    const p = parent.spanContext();
    if (!this.parentDecides || !(parent instanceof LeanSpan) || (p.traceFlags & TraceFlags.SAMPLED) === 0) {
      return this.startSpan(name, { kind, startTime }, context);
    }
    const sc: SpanContext = { traceId: p.traceId, spanId: ids.generateSpanId(), traceFlags: TraceFlags.SAMPLED };
    if (p.traceState) sc.traceState = p.traceState;
    const span = new LeanSpan(sc, name, kind, timeOf(startTime), p, this.resource, this.scope, this.processor);
    this.processor.onStart(span, context);
    return span;
  }

  startSpan(name: string, options: SpanOptions = {}, context?: Context): Span {
    const parentSpan = context && !options.root ? trace.getSpan(context) : undefined;
    const parent = parentSpan?.spanContext();
    const spanId = ids.generateSpanId();
    let traceId: string;
    let traceState: TraceState | undefined;
    let validParent: SpanContext | undefined;
    // A parent made here has valid ids; only another's (a remote caller's) are checked.
    if (parent && (parentSpan instanceof LeanSpan || trace.isSpanContextValid(parent))) {
      traceId = parent.traceId;
      traceState = parent.traceState;
      validParent = parent;
    } else {
      traceId = ids.generateTraceId();
    }
    const kind = options.kind ?? SpanKind.INTERNAL;
    const links = options.links ?? [];
    const attributes = options.attributes ?? {};
    const sampling = this.sampler.shouldSample(context ?? ROOT_CONTEXT, traceId, name, kind, attributes, links);
    // Written out rather than spread: an object literal with a spread is built in V8's runtime.
    const sc: SpanContext = { traceId, spanId, traceFlags: sampling.decision === SamplingDecision.RECORD_AND_SAMPLED ? TraceFlags.SAMPLED : TraceFlags.NONE };
    const state = sampling.traceState ?? traceState;
    if (state) sc.traceState = state;
    if (sampling.decision === SamplingDecision.NOT_RECORD) return trace.wrapSpanContext(sc);
    const span = new LeanSpan(sc, name, kind, timeOf(options.startTime), validParent, this.resource, this.scope, this.processor);
    span.setAttributes(attributes);
    if (sampling.attributes) span.setAttributes(sampling.attributes);
    for (const l of links) span.addLink(l);
    this.processor.onStart(span, context ?? ROOT_CONTEXT);
    return span;
  }

  startActiveSpan<F extends (span: Span) => unknown>(): ReturnType<F> {
    throw new Error('startActiveSpan is not used by the proxy');
  }
}
