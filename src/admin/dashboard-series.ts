/**
 * The numbers behind the dashboard's sparklines: per-interval rates, error shares and latency
 * quantiles computed from the cumulative counters the metrics already keep, and the bounded rings
 * that hold the last minutes of them. Nothing here touches the request path: `readCounters` reads
 * metric families as prom-client's `get()` returns them (one process's, or every `--workers`
 * worker's, which are summed), once per sampling tick. Quantiles are estimated as Prometheus'
 * `histogram_quantile` does, from the interval's bucket deltas with linear interpolation inside the
 * bucket; an interval without observations has none (NaN), never a made-up zero.
 */

/** A metric family as prom-client's `get()` / `getMetricsAsJSON()` gives it. */
export interface MetricFamily {
  readonly name: string;
  readonly values: readonly { readonly value: number; readonly labels: Readonly<Record<string, string | number>>; readonly metricName?: string }[];
}

export const REQUESTS = 'svcproxy_requests_total';
export const LATENCY = 'svcproxy_upstream_latency_seconds';
export const EJECTIONS = 'svcproxy_outlier_ejections_total';
export const HEALTH = 'svcproxy_workload_health';

const CLASS_INDEX: Readonly<Record<string, number>> = { '1xx': 0, '2xx': 1, '3xx': 2, '4xx': 3, '5xx': 4 };

/** Cumulative counts read at one tick. */
export interface Counters {
  /** `workload\0location` → requests answered by status class (1xx..5xx). */
  readonly requests: Map<string, number[]>;
  /** workload → cumulative bucket counts, one per bound of `bounds` and the last for +Inf. */
  readonly latency: Map<string, number[]>;
  /** The histogram's finite upper bounds, ascending (empty before any observation). */
  bounds: number[];
  /** workload → ejections so far, every location. */
  readonly ejections: Map<string, number>;
}

export function pairKey(workload: string, location: string): string {
  return `${workload}\u0000${location}`;
}

/**
 * The counters of the families given, label sets that appear more than once (one per worker)
 * summed. Families of other names are ignored, so a worker's whole registry can be passed.
 */
export function readCounters(families: readonly MetricFamily[]): Counters {
  const out: Counters = { requests: new Map(), latency: new Map(), bounds: [], ejections: new Map() };
  for (const family of families) {
    if (family.name === REQUESTS) {
      for (const v of family.values) {
        const cls = CLASS_INDEX[String(v.labels.status_class)];
        if (cls === undefined) continue;
        const key = pairKey(String(v.labels.workload ?? ''), String(v.labels.location ?? ''));
        let counts = out.requests.get(key);
        if (!counts) out.requests.set(key, (counts = [0, 0, 0, 0, 0]));
        counts[cls]! += v.value;
      }
    } else if (family.name === LATENCY) {
      readHistogram(family, out);
    } else if (family.name === EJECTIONS) {
      for (const v of family.values) {
        const workload = String(v.labels.workload ?? '');
        out.ejections.set(workload, (out.ejections.get(workload) ?? 0) + v.value);
      }
    }
  }
  return out;
}

function readHistogram(family: MetricFamily, out: Counters): void {
  // Bucket samples carry `le`; `_sum` and `_count` do not. The bounds are the same for every label set.
  const bounds = new Set<number>();
  for (const v of family.values) {
    const le = v.labels.le;
    if (le !== undefined && le !== '+Inf') bounds.add(Number(le));
  }
  const sorted = [...bounds].sort((a, b) => a - b);
  if (sorted.length > out.bounds.length) out.bounds = sorted;
  const slot = new Map(sorted.map((b, i) => [b, i]));
  for (const v of family.values) {
    const le = v.labels.le;
    if (le === undefined) continue;
    const i = le === '+Inf' ? sorted.length : slot.get(Number(le));
    if (i === undefined) continue;
    const workload = String(v.labels.workload ?? '');
    let counts = out.latency.get(workload);
    if (!counts) out.latency.set(workload, (counts = new Array<number>(sorted.length + 1).fill(0)));
    counts[i]! += v.value;
  }
}

/**
 * The `q` quantile (0..1) of the observations counted by cumulative buckets `cumulative` (one per
 * finite upper bound in `bounds`, then +Inf), as Prometheus' `histogram_quantile`: the rank `q·n`
 * falls in the first bucket whose cumulative count reaches it, and the estimate is interpolated
 * linearly between that bucket's lower and upper bound (the lowest bucket starts at 0 when its
 * bound is positive). A rank in the +Inf bucket answers the highest finite bound. NaN without
 * observations.
 */
export function histogramQuantile(q: number, bounds: readonly number[], cumulative: readonly number[]): number {
  const total = cumulative[cumulative.length - 1] ?? 0;
  if (!(total > 0) || Number.isNaN(q)) return NaN;
  if (q < 0) return -Infinity;
  if (q > 1) return Infinity;
  const rank = q * total;
  let b = 0;
  while (b < cumulative.length - 1 && cumulative[b]! < rank) b++;
  if (b === bounds.length) return bounds[bounds.length - 1] ?? NaN;
  const upper = bounds[b]!;
  let lower = 0;
  let below = 0;
  if (b > 0) {
    lower = bounds[b - 1]!;
    below = cumulative[b - 1]!;
  } else if (upper <= 0) {
    return upper;
  }
  const inBucket = cumulative[b]! - below;
  return inBucket > 0 ? lower + (upper - lower) * ((rank - below) / inBucket) : upper;
}

/** `now - before`, element by element, never below 0 (a restarted worker's counters start again). */
export function deltas(now: readonly number[], before: readonly number[] | undefined): number[] {
  return now.map((n, i) => Math.max(0, n - (before?.[i] ?? 0)));
}

/** A running sum of per-bucket counts: the cumulative form `histogramQuantile` reads. */
export function cumulate(counts: readonly number[]): number[] {
  let acc = 0;
  return counts.map((c) => (acc += c));
}

/**
 * A fixed number of the latest values, oldest first when read. NaN marks a tick without data (no
 * request, so no error share or latency), which a sparkline leaves as a gap.
 */
export class Ring {
  private readonly buf: Float64Array;
  private next = 0;
  private size = 0;

  constructor(readonly capacity: number) {
    this.buf = new Float64Array(capacity);
  }

  push(value: number): void {
    this.buf[this.next] = value;
    this.next = (this.next + 1) % this.capacity;
    if (this.size < this.capacity) this.size++;
  }

  get length(): number {
    return this.size;
  }

  /** The values, oldest first; NaN written as null (JSON has no NaN). */
  values(): (number | null)[] {
    const out: (number | null)[] = [];
    const start = (this.next - this.size + this.capacity) % this.capacity;
    for (let i = 0; i < this.size; i++) {
      const v = this.buf[(start + i) % this.capacity]!;
      out.push(Number.isNaN(v) ? null : v);
    }
    return out;
  }

  /** The newest value (NaN when empty). */
  last(): number {
    return this.size === 0 ? NaN : this.buf[(this.next - 1 + this.capacity) % this.capacity]!;
  }
}
