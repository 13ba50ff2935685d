/**
 * Fully jittered exponential backoff (Envoy's: base 25 ms, cap 250 ms): before retry n (1-based) wait
 * a uniformly random time in [0, min(cap, base · (2^n − 1))]. A `Retry-After` answer (seconds, or an
 * HTTP date) is honoured up to the cap. Pure: the random source and the clock come in.
 */
export const BACKOFF_BASE_MS = 25;
export const BACKOFF_CAP_MS = 250;

export function backoffMs(retry: number, random: () => number, baseMs = BACKOFF_BASE_MS, capMs = BACKOFF_CAP_MS): number {
  const ceiling = Math.min(capMs, baseMs * (2 ** Math.max(1, retry) - 1));
  return Math.floor(random() * ceiling);
}

/** Milliseconds a `Retry-After` value asks for, capped; undefined when absent or unreadable. */
export function retryAfterMs(value: string | string[] | undefined, nowWallMs: number, capMs = BACKOFF_CAP_MS): number | undefined {
  const v = Array.isArray(value) ? value[0] : value;
  if (v === undefined || v.trim() === '') return undefined;
  let ms: number;
  if (/^\s*\d+\s*$/.test(v)) ms = Number(v) * 1000;
  else {
    const at = Date.parse(v);
    if (Number.isNaN(at)) return undefined;
    ms = at - nowWallMs;
  }
  return Math.min(capMs, Math.max(0, ms));
}
