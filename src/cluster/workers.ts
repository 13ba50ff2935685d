/**
 * `--workers N|auto`: how many processes serve the listeners. Pure parsing; the caller turns an
 * error string into a usage error (exit 2). `1` (the default) means today's single process, with no
 * cluster at all; `auto` is the number of cores this process may use (`os.availableParallelism()`).
 */

/** At most this many workers: beyond a few per core the primary's IPC, not the cores, is the limit. */
export const MAX_WORKERS = 256;

export function parseWorkers(text: string | undefined, cores: () => number): number | { error: string } {
  if (text === undefined) return 1;
  const value = text.trim().toLowerCase();
  if (value === 'auto') return Math.max(1, Math.min(MAX_WORKERS, cores()));
  if (!/^\d+$/.test(value)) return { error: `--workers must be a whole number from 1 to ${MAX_WORKERS}, or auto, not ${JSON.stringify(text)}` };
  const n = Number(value);
  if (n < 1 || n > MAX_WORKERS) return { error: `--workers must be a whole number from 1 to ${MAX_WORKERS}, or auto, not ${JSON.stringify(text)}` };
  return n;
}
