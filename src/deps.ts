/**
 * The dependencies every component takes instead of reaching for globals (STYLE §4, §7): a clock and
 * timers that tests can replace with fake time, a random source, and a logger. Only `cli.ts` builds
 * the real ones.
 */
import type { Logger } from 'pino';

export interface Timer {
  unref?(): unknown;
}

export interface Clock {
  /** Milliseconds, monotonic enough for durations (`performance.now()` in production). */
  now(): number;
  /** Wall-clock milliseconds since the epoch (for timestamps). */
  wallNow(): number;
  setTimeout(fn: () => void, ms: number): Timer;
  clearTimeout(timer: Timer | undefined): void;
}

export interface Deps {
  readonly clock: Clock;
  readonly random: () => number;
  readonly logger: Logger;
}

export const systemClock: Clock = {
  now: () => performance.now(),
  wallNow: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (timer) => clearTimeout(timer as ReturnType<typeof setTimeout> | undefined),
};
