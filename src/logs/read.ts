/**
 * Reading what `svcproxy up` wrote (see files.ts): one workload's lines from every location and
 * replica, current and rotated files, filtered by location, replica, container and a time range,
 * merged in time order (stable, so lines with the same timestamp keep their file order). Lines that
 * are not JSON or have no time are skipped. Files are streamed line by line, not read whole.
 */
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { workloadFiles } from './files.js';

/** Access-log lines are shown as this container (they come from the proxy, not an app container). */
export const PROXY_CONTAINER = 'svcproxy';

export interface LogQuery {
  readonly dir: string;
  readonly workload: string;
  readonly gvc: string;
  readonly location?: string;
  readonly replica?: string;
  readonly container?: string;
  /** Epoch ms, inclusive. */
  readonly since?: number;
  /** Epoch ms, inclusive. */
  readonly until?: number;
}

export interface LogLine {
  /** Epoch ms. */
  readonly at: number;
  readonly record: Record<string, unknown>;
}

/** The GVCs that have logs for `workload`. */
export function gvcsWithLogs(dir: string, workload: string): string[] {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  return entries
    .filter((e) => e.isDirectory() && workloadFiles(dir, e.name, workload).some((f) => fs.existsSync(f)))
    .map((e) => e.name)
    .sort();
}

function timeOf(record: Record<string, unknown>): number {
  const t = record.time;
  if (typeof t === 'number') return t;
  if (typeof t === 'string') return Date.parse(t);
  return Number.NaN;
}

export function containerOf(record: Record<string, unknown>): string {
  return typeof record.container === 'string' ? record.container : PROXY_CONTAINER;
}

function matches(q: LogQuery, record: Record<string, unknown>, at: number): boolean {
  if (record.workload !== q.workload || record.gvc !== q.gvc) return false;
  if (q.location !== undefined && record.location !== q.location) return false;
  if (q.replica !== undefined && record.replica !== q.replica) return false;
  if (q.container !== undefined && containerOf(record) !== q.container) return false;
  if (q.since !== undefined && at < q.since) return false;
  if (q.until !== undefined && at > q.until) return false;
  return true;
}

export async function readLogs(q: LogQuery): Promise<LogLine[]> {
  const out: LogLine[] = [];
  for (const file of workloadFiles(q.dir, q.gvc, q.workload)) {
    if (!fs.existsSync(file)) continue;
    const lines = readline.createInterface({ input: fs.createReadStream(file), crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line) continue;
      let record: unknown;
      try {
        record = JSON.parse(line);
      } catch {
        continue;
      }
      if (typeof record !== 'object' || record === null) continue;
      const r = record as Record<string, unknown>;
      const at = timeOf(r);
      if (!Number.isFinite(at) || !matches(q, r, at)) continue;
      out.push({ at, record: r });
    }
  }
  // Array.prototype.sort is stable: equal times keep the order they were written in.
  return out.sort((a, b) => a.at - b.at);
}

export function logDirExists(dir: string): boolean {
  return fs.existsSync(path.resolve(dir));
}
