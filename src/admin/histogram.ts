/**
 * A histogram for the request path, exposed exactly as prom-client's `Histogram` (`_bucket` with
 * cumulative `le` buckets and `+Inf`, `_sum`, `_count`; summed across `--workers`). prom-client's
 * `observe` builds a label object, validates and hashes it on every call, even through a bound
 * child: about a microsecond, several times a proxied request. Here a child is bound once per label
 * set and an observation is a bucket search and three additions.
 */
import type { Registry } from 'prom-client';
import { registered } from './registered.js';

export interface Observer {
  observe(value: number): void;
}

interface Child extends Observer {
  readonly labels: Readonly<Record<string, string>>;
  /** Per bucket, not cumulative; the last slot is above every bound (+Inf). */
  readonly counts: Float64Array;
  sum: number;
  count: number;
}

interface MetricValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
}

export class FastHistogram<L extends string = string> {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  private readonly children = new Map<string, Child>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly L[],
    private readonly upperBounds: readonly number[],
  ) {}

  /** The child for these label values (in `labelNames` order); bind it once, observe many times. */
  labels(...values: string[]): Observer {
    const key = values.join('\u0000');
    let child = this.children.get(key);
    if (!child) {
      const labels: Record<string, string> = {};
      this.labelNames.forEach((n, i) => (labels[n] = values[i] ?? ''));
      const bounds = this.upperBounds;
      const counts = new Float64Array(bounds.length + 1);
      const c: Child = {
        labels,
        counts,
        sum: 0,
        count: 0,
        observe(value: number): void {
          if (!Number.isFinite(value)) return;
          let i = 0;
          while (i < bounds.length && value > bounds[i]!) i++;
          counts[i]!++;
          c.sum += value;
          c.count++;
        },
      };
      child = c;
      this.children.set(key, child);
    }
    return child;
  }

  /** What prom-client's registry reads (the same values as prom-client's Histogram.get()). */
  async get(): Promise<{ name: string; help: string; type: string; values: MetricValue[]; aggregator: string }> {
    const values: MetricValue[] = [];
    const bucket = `${this.name}_bucket`;
    for (const c of this.children.values()) {
      // As prom-client: a label set appears with its first observation.
      if (c.count === 0) continue;
      let acc = 0;
      this.upperBounds.forEach((le, i) => {
        acc += c.counts[i]!;
        values.push({ value: acc, labels: { le, ...c.labels }, metricName: bucket });
      });
      values.push({ value: c.count, labels: { le: '+Inf', ...c.labels }, metricName: bucket });
      values.push({ value: c.sum, labels: { ...c.labels }, metricName: `${this.name}_sum` });
      values.push({ value: c.count, labels: { ...c.labels }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, values, aggregator: this.aggregator };
  }

  /** Zero every label set; children already bound keep counting. */
  reset(): void {
    for (const c of this.children.values()) {
      c.counts.fill(0);
      c.sum = 0;
      c.count = 0;
    }
  }
}

/** The registry's histogram of this name, created (and registered) the first time. */
export function fastHistogram<L extends string>(registry: Registry, name: string, help: string, labelNames: readonly L[], buckets: readonly number[]): FastHistogram<L> {
  return registered(registry, name, () => {
    const h = new FastHistogram<L>(name, help, labelNames, [...buckets].sort((a, b) => a - b));
    registry.registerMetric(h as never);
    return h;
  });
}
