/**
 * Trace-context headers, read and written: W3C `traceparent` / `tracestate` and B3, both the single
 * `b3` header and the `x-b3-*` set. Extraction is pure and never throws: a malformed header is as good
 * as none (W3C trace-context §3.2.2: start a new trace). When several formats are present, a valid
 * `traceparent` wins, then `b3`, then `x-b3-*` (B3's own rule puts the single header first).
 *
 * The parsed `sampled` is `true`/`false` for an explicit decision and `undefined` when the caller sent
 * ids without one (B3's deferred decision), which the sampler treats like a request without a decision.
 * B3 ids of 64 bits are widened to 128 with leading zeros, as OpenTelemetry's B3 propagator does.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';

/** Which format the trace context came in; the proxy injects W3C plus this one. */
export type Format = 'w3c' | 'b3' | 'b3multi';

export interface Extracted {
  readonly format: Format;
  /** 32 lower-case hex digits; absent when the caller sent only a sampling decision (B3 `b3: 1`). */
  readonly traceId?: string;
  /** 16 lower-case hex digits. */
  readonly spanId?: string;
  /** The caller's decision; `undefined`: none (deferred). */
  readonly sampled: boolean | undefined;
  /** B3 debug (`d` / `x-b3-flags: 1`): sampled, and said so downstream. */
  readonly debug: boolean;
  /** The raw `tracestate` (W3C only; meaningful only with a valid traceparent). */
  readonly traceState?: string;
}

const INVALID_TRACE_ID = '00000000000000000000000000000000';
const INVALID_SPAN_ID = '0000000000000000';
const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
/** W3C trace-context level 1, as @opentelemetry/core reads it: one optional space each side, any future version but ff. */
const TRACEPARENT = /^\s?((?!ff)[0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?\s?$/;

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** A `traceparent` value → ids and the sampled flag, or `undefined` when it is not valid. */
export function parseTraceparent(value: string): { traceId: string; spanId: string; flags: number } | undefined {
  const m = TRACEPARENT.exec(value);
  if (!m) return undefined;
  // Version 00 has exactly four fields; later versions may append more after a dash.
  if (m[1] === '00' && m[5] !== undefined) return undefined;
  const traceId = m[2]!;
  const spanId = m[3]!;
  if (traceId === INVALID_TRACE_ID || spanId === INVALID_SPAN_ID) return undefined;
  return { traceId, spanId, flags: parseInt(m[4]!, 16) };
}

/** B3 trace id: 16 or 32 hex digits (any case), widened to 32 lower-case ones. */
function b3TraceId(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  const id = v.length === 16 ? `0000000000000000${v}` : v;
  return HEX32.test(id) && id !== INVALID_TRACE_ID ? id : undefined;
}

function b3SpanId(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const v = value.trim().toLowerCase();
  return HEX16.test(v) && v !== INVALID_SPAN_ID ? v : undefined;
}

/** `b3: {TraceId}-{SpanId}[-{SamplingState}[-{ParentSpanId}]]`, or a bare sampling state. */
export function parseB3Single(value: string): Extracted | undefined {
  const parts = value.trim().split('-');
  if (parts.length === 1) {
    const state = parts[0]!.toLowerCase();
    if (state === '0') return { format: 'b3', sampled: false, debug: false };
    if (state === '1') return { format: 'b3', sampled: true, debug: false };
    if (state === 'd') return { format: 'b3', sampled: true, debug: true };
    return undefined;
  }
  if (parts.length > 4) return undefined;
  const traceId = b3TraceId(parts[0]);
  const spanId = b3SpanId(parts[1]);
  if (!traceId || !spanId) return undefined;
  let sampled: boolean | undefined;
  let debug = false;
  if (parts.length >= 3) {
    const state = parts[2]!.toLowerCase();
    if (state === '1') sampled = true;
    else if (state === '0') sampled = false;
    else if (state === 'd') (sampled = true), (debug = true);
    else return undefined;
  }
  if (parts.length === 4 && !b3SpanId(parts[3])) return undefined;
  return { format: 'b3', traceId, spanId, sampled, debug };
}

/** `x-b3-traceid`, `x-b3-spanid`, `x-b3-sampled` (`1`/`0`, `true`/`false`), `x-b3-flags: 1` (debug). */
export function parseB3Multi(headers: IncomingHttpHeaders): Extracted | undefined {
  const rawTrace = first(headers['x-b3-traceid']);
  const rawSpan = first(headers['x-b3-spanid']);
  const rawSampled = first(headers['x-b3-sampled'])?.trim().toLowerCase();
  const debug = first(headers['x-b3-flags'])?.trim() === '1';
  let sampled: boolean | undefined = debug ? true : undefined;
  if (!debug && rawSampled !== undefined) {
    if (rawSampled === '1' || rawSampled === 'true') sampled = true;
    else if (rawSampled === '0' || rawSampled === 'false') sampled = false;
    // Any other value makes the whole context invalid (as OpenTelemetry's B3 propagator reads it).
    else return undefined;
  }
  if (rawTrace === undefined && rawSpan === undefined) {
    return sampled === undefined ? undefined : { format: 'b3multi', sampled, debug };
  }
  const traceId = b3TraceId(rawTrace);
  const spanId = b3SpanId(rawSpan);
  if (!traceId || !spanId) return undefined;
  return { format: 'b3multi', traceId, spanId, sampled, debug };
}

/** The trace context of an incoming request, or `undefined` when it carries none (or none valid). */
export function extract(headers: IncomingHttpHeaders): Extracted | undefined {
  const tp = first(headers.traceparent);
  if (tp !== undefined) {
    const parsed = parseTraceparent(tp);
    if (parsed) {
      const ts = headers.tracestate;
      const traceState = Array.isArray(ts) ? ts.join(',') : ts;
      return {
        format: 'w3c',
        traceId: parsed.traceId,
        spanId: parsed.spanId,
        sampled: (parsed.flags & 1) === 1,
        debug: false,
        ...(traceState ? { traceState } : {}),
      };
    }
  }
  const single = first(headers.b3);
  if (single !== undefined) {
    const parsed = parseB3Single(single);
    if (parsed) return parsed;
  }
  if (headers['x-b3-traceid'] !== undefined || headers['x-b3-sampled'] !== undefined || headers['x-b3-flags'] !== undefined) {
    return parseB3Multi(headers);
  }
  return undefined;
}

export interface Outgoing {
  readonly traceId: string;
  readonly spanId: string;
  readonly sampled: boolean;
  readonly debug: boolean;
  /** Serialized `tracestate`, when there is one. */
  readonly traceState?: string;
}

/**
 * Write the context of the span that makes the upstream request: always W3C, plus the B3 form the
 * request came in with. Stale headers of the formats written are replaced, B3 ones not rewritten are
 * removed (so an app never sees two contexts that disagree).
 */
export function inject(headers: OutgoingHttpHeaders, ctx: Outgoing, incoming: Format | undefined): void {
  headers.traceparent = `00-${ctx.traceId}-${ctx.spanId}-${ctx.sampled ? '01' : '00'}`;
  if (ctx.traceState) headers.tracestate = ctx.traceState;
  else delete headers.tracestate;
  if (incoming === 'b3') {
    headers.b3 = `${ctx.traceId}-${ctx.spanId}-${ctx.debug ? 'd' : ctx.sampled ? '1' : '0'}`;
  } else if (incoming === 'b3multi') {
    headers['x-b3-traceid'] = ctx.traceId;
    headers['x-b3-spanid'] = ctx.spanId;
    delete headers['x-b3-parentspanid'];
    if (ctx.debug) {
      headers['x-b3-flags'] = '1';
      delete headers['x-b3-sampled'];
    } else {
      headers['x-b3-sampled'] = ctx.sampled ? '1' : '0';
      delete headers['x-b3-flags'];
    }
  }
}
