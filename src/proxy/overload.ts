/**
 * Load shedding and the overload counters (Envoy's overload manager, for one event loop). While the
 * event loop lags more than `maxEventLoopDelayMs`, new requests get a fast 503 `overloaded` (code
 * OVERLOADED) instead of queueing behind work the process cannot keep up with; requests already
 * admitted go on. The admin listener is never shed, so `/ready` stays 200 (the process is healthy,
 * only busy) and `/metrics` keeps answering.
 *
 * The lag is measured by a timer that should fire every `sampleIntervalMs`: how late it fires is the
 * loop's delay. A request is shed when the last sample was over the threshold, or when the next
 * sample is already overdue by more than the threshold (the loop is blocked right now, so the
 * sampler itself could not run; this catches the requests that queued up during a stall before the
 * sampler gets its turn). Shedding stops at the first sample under the threshold. Cost per request:
 * one `performance.now()`. Nothing here throws; a threshold of 0 turns shedding off.
 *
 * Metrics: `svcproxy_overload_shed_total` (requests answered `overloaded`),
 * `svcproxy_overload_event_loop_delay_seconds` (the last sample),
 * `svcproxy_overload_connections_rejected_total` (closed on accept: the listener's connection limit)
 * and `svcproxy_overload_sessions_closed_total` (HTTP/2 sessions closed for rapid resets).
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** Shed while the event loop lags more than this, by default (ms). */
export const DEFAULT_MAX_EVENT_LOOP_DELAY_MS = 250;
/** How often the lag is sampled (ms). */
export const DEFAULT_SAMPLE_INTERVAL_MS = 100;

export interface OverloadOptions {
  /** Shed new requests while the loop lags more than this (ms); 0: never shed. */
  readonly maxEventLoopDelayMs?: number;
  readonly sampleIntervalMs?: number;
  /** Where the counters go (a runtime's `metrics.registry`); none: not exported. */
  readonly registry?: Registry;
  /** Monotonic milliseconds (tests drive it); `performance.now` by default. */
  readonly now?: () => number;
}

export class OverloadGuard {
  readonly maxDelayMs: number;
  private readonly intervalMs: number;
  private readonly now: () => number;
  private lastDelayMs = 0;
  /** When the next sample is due. */
  private due: number;
  private timer: NodeJS.Timeout | undefined;
  private started = false;
  private readonly shedTotal: Counter;
  private readonly rejectedConnections: Counter;
  private readonly closedSessions: Counter;

  constructor(opts: OverloadOptions = {}) {
    this.maxDelayMs = opts.maxEventLoopDelayMs ?? DEFAULT_MAX_EVENT_LOOP_DELAY_MS;
    this.intervalMs = opts.sampleIntervalMs ?? DEFAULT_SAMPLE_INTERVAL_MS;
    this.now = opts.now ?? (() => performance.now());
    this.due = this.now() + this.intervalMs;
    const registers = opts.registry ? [opts.registry] : [];
    this.shedTotal = new Counter({
      name: 'svcproxy_overload_shed_total',
      help: 'Requests answered 503 overloaded because the event loop lagged past the threshold',
      registers,
    });
    const guard = this;
    new Gauge({
      name: 'svcproxy_overload_event_loop_delay_seconds',
      help: 'Event-loop delay at the last sample',
      registers,
      // Under --workers: the most delayed worker.
      aggregator: 'max',
      collect() {
        this.set(guard.lastDelayMs / 1000);
      },
    });
    this.rejectedConnections = new Counter({
      name: 'svcproxy_overload_connections_rejected_total',
      help: 'Connections closed on accept because the listener had its maximum open',
      registers,
    });
    this.closedSessions = new Counter({
      name: 'svcproxy_overload_sessions_closed_total',
      help: 'HTTP/2 sessions closed with ENHANCE_YOUR_CALM for resetting too many streams (rapid reset)',
      registers,
    });
  }

  /**
   * Start sampling, with an unref'd timer (it never keeps the process alive). `timer: false`: the
   * caller drives `sample()` itself (tests in fake time).
   */
  start(opts: { timer?: boolean } = {}): void {
    if (this.maxDelayMs <= 0 || this.started) return;
    this.started = true;
    this.due = this.now() + this.intervalMs;
    if (opts.timer === false) return;
    this.timer = setInterval(() => this.sample(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.started = false;
    this.lastDelayMs = 0;
  }

  /** One sampler tick: how late it came is the loop's delay. The timer calls it; tests may too. */
  sample(now = this.now()): void {
    this.lastDelayMs = Math.max(0, now - this.due);
    this.due = now + this.intervalMs;
  }

  /** The event-loop delay the next decision uses (ms): the last sample, or the current overdue time. */
  delayMs(now = this.now()): number {
    return Math.max(this.lastDelayMs, now - this.due);
  }

  /** Decide for one new request: true means answer it `overloaded` now (and it is counted). */
  shed(): boolean {
    if (this.maxDelayMs <= 0 || !this.started) return false;
    if (this.delayMs() <= this.maxDelayMs) return false;
    this.shedTotal.inc();
    return true;
  }

  connectionRejected(): void {
    this.rejectedConnections.inc();
  }

  sessionClosed(): void {
    this.closedSessions.inc();
  }
}
