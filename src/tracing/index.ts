/**
 * Tracing and access-log services for the data plane (DESIGN §7, issue 6). `createTelemetry` builds
 * the `RequestTelemetry` a role hands its data plane; `childSpan` lets a filter record its outside
 * call (ext_authz, rate limit) as a child of the request's server span.
 */
import type { Attributes } from '@opentelemetry/api';
import { SpanStatusCode } from '@opentelemetry/api';
import type { Snapshot } from '../config/model.js';
import type { ExchangeInfo } from '../observe/index.js';
import type { ExchangeView } from '../filter/index.js';
import { Telemetry, telemetryOf, type TelemetryOptions } from './telemetry.js';

export { Telemetry, type TelemetryOptions } from './telemetry.js';
export type { BatchOptions, ExporterFactory } from './tracer.js';

/**
 * The telemetry layer for `snapshot`, its tracer providers ready (the SDK is loaded only when some GVC
 * traces). Later snapshots arrive through `update()` (the data plane calls it on every reload).
 */
export async function createTelemetry(snapshot: Snapshot, opts: TelemetryOptions): Promise<Telemetry> {
  const telemetry = new Telemetry(opts);
  telemetry.update(snapshot);
  await telemetry.ready();
  return telemetry;
}

export interface ChildSpan {
  /** End the span; `'error'` marks it failed. Further calls do nothing. */
  end(status?: 'ok' | 'error', attributes?: Attributes): void;
  /**
   * The W3C `traceparent` of this span, to send to the called service (so its spans join the trace);
   * `undefined` when the request is not being traced.
   */
  readonly traceparent: string | undefined;
}

const NOOP: ChildSpan = Object.freeze({ end: () => undefined, traceparent: undefined });

/**
 * A child span of the request's server span, named `name` (e.g. `ext_authz`, `ratelimit`), with
 * `attributes`. A no-op (and allocation-free) when the request is not traced or not sampled.
 * Filters hold the request as the contract's ExchangeView; one whose `telemetry` this layer put
 * there is the proxy's Exchange, which is the observers' ExchangeInfo too (only the data plane hands
 * exchanges to the layer).
 */
export function childSpan(exchange: ExchangeView, name: string, attributes?: Attributes): ChildSpan {
  if (exchange.telemetry === undefined) return NOOP;
  const child = telemetryOf(exchange)?.child(exchange as unknown as ExchangeInfo, name, attributes);
  if (!child) return NOOP;
  const span = child.span;
  let ended = false;
  return {
    end(status, attrs) {
      if (ended) return;
      ended = true;
      if (attrs) span.setAttributes(attrs);
      if (status === 'error') span.setStatus({ code: SpanStatusCode.ERROR });
      else if (status === 'ok') span.setStatus({ code: SpanStatusCode.OK });
      span.end(child.now());
    },
    get traceparent() {
      const sc = span.spanContext();
      return `00-${sc.traceId}-${sc.spanId}-0${sc.traceFlags & 1}`;
    },
  };
}
