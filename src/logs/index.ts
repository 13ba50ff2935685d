/**
 * `svcproxy logs --workload W [--gvc G] [--location L] [--replica R] [--container C] [--since 10m]
 * [--until T] [-o text|json] [--log-dir DIR]`: one workload's logs as `svcproxy up` wrote them,
 * consolidated across locations and replicas, in time order. `--since`/`--until` take a duration
 * back from now (`10m`, `1h30m`, `45s`) or a timestamp (`2026-01-02T15:04:05Z`). Text output is one
 * line per record (time, location, replica, container, message); `-o json` prints the records as
 * JSON lines. Exit 0 (even when nothing matches), 1 when there are no logs for the workload, 2 for
 * a usage error.
 */
import type { Flags } from '../flags.js';
import { parseDuration } from '../config/values.js';
import { DEFAULT_LOG_DIR } from './files.js';
import { containerOf, gvcsWithLogs, readLogs, type LogLine } from './read.js';

export { WorkloadLogFiles, teeLogger, DEFAULT_LOG_DIR, workloadFiles, type LogFilesOptions } from './files.js';
export { readLogs, gvcsWithLogs, PROXY_CONTAINER, type LogQuery, type LogLine } from './read.js';

/** A time bound: a duration back from `now`, or an absolute timestamp; `undefined` when it is neither. */
export function parseTimeBound(value: string, now: number): number | undefined {
  const ago = /^\d/.test(value) && !/^\d{4}-/.test(value) ? parseDuration(value) : undefined;
  if (ago !== undefined) return now - ago;
  const at = Date.parse(value);
  return Number.isFinite(at) ? at : undefined;
}

function text(line: LogLine): string {
  const r = line.record;
  const time = typeof r.time === 'string' ? r.time : new Date(line.at).toISOString();
  let message: string;
  if (r.component === 'access') {
    const ms = typeof r.durationMs === 'number' ? ` ${r.durationMs}ms` : '';
    message = `${String(r.method ?? '')} ${String(r.host ?? '')}${String(r.path ?? '')} ${String(r.status ?? '')}${ms}${r.error ? ` ${String(r.error)}` : ''}`;
  } else {
    message = String(r.msg ?? '');
  }
  const cols = [time, String(r.location ?? '-').padEnd(14), String(r.replica ?? '-').padEnd(10), containerOf(r).padEnd(10)];
  return `${cols.join('  ')}  ${message}`;
}

export interface LogsIo {
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  readonly now?: number;
}

const defaultIo: LogsIo = { out: (s) => void process.stdout.write(s), err: (s) => void process.stderr.write(s) };

export async function runLogs(flags: Flags, io: LogsIo = defaultIo): Promise<number> {
  const usage = (message: string): number => {
    io.err(`svcproxy logs: ${message}\nusage: svcproxy logs --workload W [--gvc G] [--location L] [--replica R] [--container C] [--since 10m] [--until T] [-o text|json] [--log-dir DIR]\n`);
    return 2;
  };
  const workload = flags.workload;
  if (!workload) return usage('--workload W is required');
  const format = flags.output ?? 'text';
  if (format !== 'text' && format !== 'json') return usage(`--output must be text or json, not ${JSON.stringify(format)}`);
  const now = io.now ?? Date.now();
  let since: number | undefined;
  let until: number | undefined;
  if (flags.since !== undefined && (since = parseTimeBound(flags.since, now)) === undefined) return usage(`--since ${JSON.stringify(flags.since)} is neither a duration (10m) nor a timestamp`);
  if (flags.until !== undefined && (until = parseTimeBound(flags.until, now)) === undefined) return usage(`--until ${JSON.stringify(flags.until)} is neither a duration (10m) nor a timestamp`);
  const dir = flags['log-dir'] ?? DEFAULT_LOG_DIR;
  let gvc = flags.gvc;
  if (gvc === undefined) {
    const found = gvcsWithLogs(dir, workload);
    if (found.length === 0) {
      io.err(`svcproxy logs: no logs for workload ${workload} in ${dir} (svcproxy up writes them there)\n`);
      return 1;
    }
    if (found.length > 1) return usage(`workload ${workload} has logs in several GVCs (${found.join(', ')}): pass --gvc`);
    gvc = found[0]!;
  } else if (!gvcsWithLogs(dir, workload).includes(gvc)) {
    io.err(`svcproxy logs: no logs for workload ${gvc}/${workload} in ${dir}\n`);
    return 1;
  }
  const lines = await readLogs({
    dir, workload, gvc,
    ...(flags.location ? { location: flags.location } : {}),
    ...(flags.replica ? { replica: flags.replica } : {}),
    ...(flags.container ? { container: flags.container } : {}),
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
  });
  let chunk = '';
  for (const line of lines) {
    chunk += (format === 'json' ? JSON.stringify({ ...line.record, container: containerOf(line.record) }) : text(line)) + '\n';
    if (chunk.length > 64 * 1024) {
      io.out(chunk);
      chunk = '';
    }
  }
  if (chunk) io.out(chunk);
  return 0;
}
