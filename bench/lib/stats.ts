/** Small statistics for the bench: median and percentiles (nearest rank), on copies. */

export function median(values: readonly number[]): number | undefined {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return undefined;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1]! + v[mid]!) / 2;
}

/** Nearest-rank percentile of already sorted values. */
export function percentileSorted(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank]!;
}

export function percentiles(values: Float64Array | number[], ps: readonly number[]): number[] {
  const sorted = Float64Array.from(values).sort();
  return ps.map((p) => percentileSorted(sorted, p));
}

/** A growable Float64Array of samples (latencies in ms). */
export class Samples {
  private data = new Float64Array(1 << 16);
  length = 0;

  push(v: number): void {
    if (this.length === this.data.length) {
      const next = new Float64Array(this.data.length * 2);
      next.set(this.data);
      this.data = next;
    }
    this.data[this.length++] = v;
  }

  values(): Float64Array {
    return this.data.subarray(0, this.length);
  }
}
