/**
 * The in-memory counter store (the default): counters of one process, lost on restart, not shared
 * between instances (use `--redis` for that). Time is the caller's `nowMs` (the injected clock), so
 * both algorithms run in fake time. Expired counters and logs are swept at most once a minute of that
 * time, on the next check; memory is one number per fixed-window counter and one entry per allowed
 * check (at most the limit) per sliding-window log. Never fails.
 */
import {
  fixedKey, fixedReset, slidingKey, slidingReset,
  type CounterCheck, type CounterResult, type Store,
} from './store.js';

interface FixedCounter {
  kind: 'f';
  count: number;
  expiresAt: number;
}

interface SlidingLog {
  kind: 's';
  /** Allowed hits, oldest first: [time ms, hits]. */
  times: number[];
  hits: number[];
  total: number;
  expiresAt: number;
}

const SWEEP_EVERY_MS = 60_000;

export class MemoryStore implements Store {
  readonly kind = 'memory';
  private readonly counters = new Map<string, FixedCounter | SlidingLog>();
  private nextSweep = Number.NEGATIVE_INFINITY;

  ready(): boolean {
    return true;
  }

  /** Counters held (tests check that sweeping frees them). */
  get size(): number {
    return this.counters.size;
  }

  check(checks: readonly CounterCheck[], hits: number, nowMs: number): Promise<CounterResult[]> {
    return Promise.resolve(this.checkNow(checks, hits, nowMs));
  }

  checkNow(checks: readonly CounterCheck[], hits: number, nowMs: number): CounterResult[] {
    if (nowMs >= this.nextSweep) this.sweep(nowMs);
    return checks.map((c) => (c.algorithm === 'sliding-window' ? this.sliding(c, hits, nowMs) : this.fixed(c, hits, nowMs)));
  }

  private fixed(c: CounterCheck, hits: number, nowMs: number): CounterResult {
    const key = fixedKey(c, nowMs);
    let counter = this.counters.get(key) as FixedCounter | undefined;
    if (!counter || counter.expiresAt <= nowMs) {
      const reset = fixedReset(nowMs, c.windowSeconds);
      counter = { kind: 'f', count: 0, expiresAt: (Math.floor(nowMs / 1000) + reset) * 1000 };
      this.counters.set(key, counter);
    }
    counter.count += hits;
    const over = counter.count > c.limit;
    return { over, remaining: over ? 0 : c.limit - counter.count, resetSeconds: fixedReset(nowMs, c.windowSeconds) };
  }

  private sliding(c: CounterCheck, hits: number, nowMs: number): CounterResult {
    const key = slidingKey(c);
    const windowMs = c.windowSeconds * 1000;
    let log = this.counters.get(key) as SlidingLog | undefined;
    if (!log) {
      log = { kind: 's', times: [], hits: [], total: 0, expiresAt: 0 };
      this.counters.set(key, log);
    }
    // Keep hits at or after now - window: the window's both ends count.
    let drop = 0;
    while (drop < log.times.length && log.times[drop]! < nowMs - windowMs) log.total -= log.hits[drop++]!;
    if (drop > 0) {
      log.times.splice(0, drop);
      log.hits.splice(0, drop);
    }
    const over = log.total + hits > c.limit;
    if (!over) {
      log.times.push(nowMs);
      log.hits.push(hits);
      log.total += hits;
      log.expiresAt = nowMs + windowMs;
    }
    return {
      over,
      remaining: over ? 0 : c.limit - log.total,
      resetSeconds: slidingReset(log.times[0], nowMs, c.windowSeconds),
    };
  }

  private sweep(nowMs: number): void {
    this.nextSweep = nowMs + SWEEP_EVERY_MS;
    for (const [key, counter] of this.counters) {
      if (counter.expiresAt < nowMs) this.counters.delete(key);
    }
  }

  async close(): Promise<void> {
    this.counters.clear();
  }
}
