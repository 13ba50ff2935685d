/**
 * The counter store contract shared by the in-memory and Redis stores, and the arithmetic both use
 * so they agree to the second:
 *
 * - `fixed-window` (the reference server's): one counter per descriptor and window, the window aligned
 *   to the unit on the epoch (a minute window starts at :00, a day window at 00:00 UTC). Every hit is
 *   counted, allowed or not; over when the count after adding exceeds the limit. Reset: whole seconds
 *   to the window's end.
 * - `sliding-window` (svcproxy's): a log of the allowed hits' times; a hit is allowed only when the
 *   hits logged in the last window (both ends included) plus it stay within the limit, and only
 *   allowed hits are logged. So no window of that length, wherever it starts, ever holds more than the
 *   limit. Reset: seconds until the oldest logged hit leaves the window (when quota frees up).
 *
 * A store that cannot answer throws `StoreError`; the service turns it into UNAVAILABLE.
 */
import type { Algorithm } from './rules.js';

export interface CounterCheck {
  /** Identifies the descriptor's counter (domain and entries); the store adds the window. */
  readonly key: string;
  readonly limit: number;
  readonly windowSeconds: number;
  readonly algorithm: Algorithm;
}

export interface CounterResult {
  readonly over: boolean;
  readonly remaining: number;
  readonly resetSeconds: number;
}

export interface Store {
  readonly kind: 'memory' | 'redis';
  /** Count `hits` against every check at `nowMs` (epoch milliseconds), atomically per check. */
  check(checks: readonly CounterCheck[], hits: number, nowMs: number): Promise<CounterResult[]>;
  /** Whether the store can answer now (Redis connected). */
  ready(): boolean;
  close(): Promise<void>;
}

export class StoreError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'StoreError';
  }
}

/** Start of the fixed window holding `nowMs`, in epoch seconds. */
export function windowStart(nowMs: number, windowSeconds: number): number {
  const nowSec = Math.floor(nowMs / 1000);
  return nowSec - (nowSec % windowSeconds);
}

/** Whole seconds to the end of the fixed window (1..window), as the reference server computes it. */
export function fixedReset(nowMs: number, windowSeconds: number): number {
  const nowSec = Math.floor(nowMs / 1000);
  return windowSeconds - (nowSec % windowSeconds);
}

/** The counter key of a fixed window; the window start makes each window a fresh counter. */
export function fixedKey(check: CounterCheck, nowMs: number): string {
  return `f${check.windowSeconds}:${check.key}:${windowStart(nowMs, check.windowSeconds)}`;
}

/** The log key of a sliding window; the window length in it keeps a changed rule from reading an old log. */
export function slidingKey(check: CounterCheck): string {
  return `s${check.windowSeconds}:${check.key}`;
}

/** Seconds until the oldest logged hit leaves the window (at least 1). */
export function slidingReset(oldestMs: number | undefined, nowMs: number, windowSeconds: number): number {
  if (oldestMs === undefined) return windowSeconds;
  return Math.max(1, Math.ceil((oldestMs + windowSeconds * 1000 - nowMs) / 1000));
}

/** The descriptor part of a counter key: domain and entries, each escaped so no two descriptors share one. */
export function descriptorKey(domain: string, entries: readonly { key: string; value: string }[]): string {
  let out = encodeURIComponent(domain);
  for (const e of entries) out += `/${encodeURIComponent(e.key)}=${encodeURIComponent(e.value)}`;
  return out;
}
