/**
 * How many replicas `svcproxy up` wants for one workload in one location (DESIGN §10 `autoscaling`),
 * as a pure function of the previous decision, the workload's `autoscaling` options, the requests it
 * has now and an injected clock. Nothing here reads a clock, starts a timer or throws: odd inputs
 * (NaN, negative, infinite, missing) are read as the nearest sane value, stated below per input.
 *
 * The model is the platform's (docs.controlplane.com/reference/workload/autoscaling): `metric`
 * `concurrency` scales on the concurrent requests per replica with `target` as the goal, and
 * `maxConcurrency` is the hard cap of requests one replica gets at once (the rest wait). The platform
 * averages over time as Knative's KPA does (a 60 s stable window, a 6 s panic window); `up` sees the
 * exact counts at each call instead, so it:
 *
 * - wants ceil((in flight + waiting) / per replica) replicas, per replica being the lower of `target`
 *   and `maxConcurrency` (a replica can never take more than `maxConcurrency`, so a higher `target`
 *   could never be met; `target` absent or not positive: `DEFAULT_CONCURRENCY_TARGET`);
 * - scales up at once (the exact count is already the panic-mode reading: Knative's panic mode only
 *   exists to react faster than the stable window's average);
 * - scales down only when the wanted count stayed lower for `SCALE_DOWN_WINDOW_MS` (Knative's stable
 *   window, 60 s), and then to the highest count wanted during that window, so a saw-tooth load does
 *   not stop and start replicas;
 * - with `minScale` 0, wants nothing until a request comes (one waiting or in flight means at least
 *   1), and nothing again once none is in flight and the last one arrived `scaleToZeroDelay` ago
 *   (platform default 300 s); that drop to zero skips the window, the idle delay being its own;
 * - keeps at least 1 replica while traffic is recent (a request in the last `scaleToZeroDelay`), at
 *   least `minScale`, and at most `maxScale` (`minScale` wins if the two are inverted, which the
 *   validator rejects anyway).
 *
 * Other metrics (`cpu`, `memory`, `rps`, `latency`, `keda`, `multi`, `disabled`, anything unknown)
 * measure what `up` does not: they keep max(`minScale`, 1 while traffic is recent), never more on
 * load. A suspended workload or `maxScale` 0 is the caller's: it must not call this (or ignore it),
 * and must never wake such a workload; given `maxScale` 0 this answers 0 anyway.
 */

/** `autoscaling.target` for `concurrency` when absent or not positive (Knative's default, 100). */
export const DEFAULT_CONCURRENCY_TARGET = 100;

/** `autoscaling.maxScale` when not a number ≥ 0, as the config compiler's default (max(5, minScale)). */
export const DEFAULT_MAX_SCALE = 5;

/** `autoscaling.scaleToZeroDelay` when absent or not a number ≥ 0: the platform's 300 s. */
export const DEFAULT_SCALE_TO_ZERO_DELAY_MS = 300_000;

/** How long the wanted count must stay lower before replicas stop: Knative's stable window. */
export const SCALE_DOWN_WINDOW_MS = 60_000;

export interface ScaleInputs {
  /** `autoscaling.minScale`; not a finite number ≥ 0: 0. Fractions round down. */
  readonly minScale: number;
  /** `autoscaling.maxScale`; not a finite number ≥ 0: `DEFAULT_MAX_SCALE`. Below `minScale`: `minScale`. */
  readonly maxScale: number;
  /** `autoscaling.metric`; absent: `concurrency` (the serverless default). */
  readonly metric: string | undefined;
  /** `autoscaling.target`: for `concurrency`, the concurrent requests each replica should carry. */
  readonly target: number | undefined;
  /** `autoscaling.maxConcurrency`: the most requests one replica takes at once; absent or 0: no cap. */
  readonly maxConcurrency?: number | undefined;
  /** `autoscaling.scaleToZeroDelay` in ms; absent, NaN or negative: `DEFAULT_SCALE_TO_ZERO_DELAY_MS`. */
  readonly scaleToZeroDelayMs: number | undefined;
  /** The stable window in ms; absent, NaN or negative: `SCALE_DOWN_WINDOW_MS`. */
  readonly scaleDownWindowMs?: number | undefined;
  /** The injected clock, in ms; not finite: no time has passed (nothing scales down). */
  readonly now: number;
  /** Requests of this workload and location forwarded to a replica and not finished. */
  readonly inFlight: number;
  /** Requests held for a replica (none ready, or every ready one at `maxConcurrency`). */
  readonly waiting: number;
  /** When the last request arrived (ms, same clock), or undefined when none has since `up` started. */
  readonly lastRequestAt: number | undefined;
}

/** What one decision leaves for the next; a new object each time, never changed. */
export interface ScaleState {
  /** The replicas wanted: the caller starts or stops replicas to match it. */
  readonly desired: number;
  /** Since when the wanted count has been below `desired` (undefined: it is not). */
  readonly lowSince: number | undefined;
  /** The highest count wanted since `lowSince`: where the window's end scales down to. */
  readonly lowPeak: number;
}

/** The state before the first decision: `minScale` replicas, as `up` starts them. */
export function INITIAL_SCALE_STATE(minScale: number): ScaleState {
  return freeze(count(minScale), undefined, 0);
}

/** The next decision: scale up at once, down after the window, to zero after the idle delay. */
export function decideScale(state: ScaleState, inputs: ScaleInputs): ScaleState {
  const { low, high, load, recent, now } = read(inputs);
  const floor = Math.max(low, recent ? 1 : 0);
  const wanted = Math.min(high, Math.max(floor, loadReplicas(inputs, load)));
  const current = Math.min(high, count(state.desired));
  if (wanted >= current) return freeze(wanted, undefined, 0);
  // Wanting 0 means minScale 0 and idle past scaleToZeroDelay: that delay was the window.
  if (wanted === 0) return freeze(0, undefined, 0);
  const lowSince = state.lowSince !== undefined && Number.isFinite(state.lowSince) ? state.lowSince : undefined;
  // The clock is not usable: hold the count rather than guess how long the load has been low.
  if (!Number.isFinite(now)) return freeze(current, lowSince, Math.min(current, Math.max(count(state.lowPeak), wanted)));
  // A window that starts after now (the clock went back) restarts now.
  const since = lowSince !== undefined && lowSince <= now ? lowSince : now;
  const peak = since === lowSince ? Math.max(count(state.lowPeak), wanted) : wanted;
  if (now - since >= windowMs(inputs)) return freeze(Math.min(current, peak), undefined, 0);
  return freeze(current, since, peak);
}

/**
 * When the decision can next change without a request arriving or finishing: the end of the
 * scale-down window, or the end of the idle delay while replicas run. Undefined: only a request
 * changes it. The caller arms one timer for it instead of polling; call it on the state `decideScale`
 * just returned for the same inputs (a deadline already past is dropped, as that decision took it).
 */
export function nextDecisionAt(state: ScaleState, inputs: ScaleInputs): number | undefined {
  const { load, now } = read(inputs);
  const times: number[] = [];
  if (state.lowSince !== undefined && Number.isFinite(state.lowSince)) times.push(state.lowSince + windowMs(inputs));
  const last = inputs.lastRequestAt;
  if (count(state.desired) > 0 && load === 0 && last !== undefined && Number.isFinite(last)) times.push(last + delayMs(inputs));
  const future = times.filter((t) => !Number.isFinite(now) || t > now);
  return future.length === 0 ? undefined : Math.min(...future);
}

interface Reading {
  readonly low: number;
  readonly high: number;
  readonly load: number;
  /** A request is in flight or waiting, or one arrived within the idle delay. */
  readonly recent: boolean;
  readonly now: number;
}

function read(inputs: ScaleInputs): Reading {
  const low = count(inputs.minScale);
  const max = Number(inputs.maxScale);
  const high = Math.max(low, Number.isFinite(max) && max >= 0 ? Math.floor(max) : DEFAULT_MAX_SCALE);
  const load = amount(inputs.inFlight) + amount(inputs.waiting);
  const now = Number(inputs.now);
  const last = inputs.lastRequestAt;
  // A request time the clock cannot compare (NaN) counts as recent: keeping a replica is the safe error.
  const quiet = last === undefined || (Number.isFinite(now) && now - last >= delayMs(inputs));
  return { low, high, load, recent: load > 0 || !quiet, now };
}

/** Replicas the load asks for, by the metric; 0 for metrics `up` cannot measure. */
function loadReplicas(inputs: ScaleInputs, load: number): number {
  const metric = inputs.metric ?? 'concurrency';
  if (metric !== 'concurrency' || load === 0) return 0;
  const target = positive(inputs.target) ?? DEFAULT_CONCURRENCY_TARGET;
  const cap = positive(inputs.maxConcurrency);
  const perReplica = cap === undefined ? target : Math.min(target, cap);
  return Math.ceil(load / perReplica);
}

function delayMs(inputs: ScaleInputs): number {
  const d = Number(inputs.scaleToZeroDelayMs);
  return d >= 0 ? d : DEFAULT_SCALE_TO_ZERO_DELAY_MS;
}

function windowMs(inputs: ScaleInputs): number {
  const w = Number(inputs.scaleDownWindowMs);
  return w >= 0 ? w : SCALE_DOWN_WINDOW_MS;
}

/** A replica count: a whole number ≥ 0; NaN, negative or infinite: 0. */
function count(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** A request count: ≥ 0 (NaN or negative: 0; +Infinity: the largest safe integer, capped by `maxScale`). */
function amount(n: number): number {
  return n > 0 ? Math.min(n, Number.MAX_SAFE_INTEGER) : 0;
}

function positive(n: number | undefined): number | undefined {
  return n !== undefined && n > 0 ? n : undefined;
}

function freeze(desired: number, lowSince: number | undefined, lowPeak: number): ScaleState {
  return Object.freeze({ desired, lowSince, lowPeak });
}
