/**
 * A long-running command's start-up summary: what it serves, said once when it is listening. On a
 * terminal (where the logger pretty-prints) a block of aligned lines on stdout, as `up` prints its
 * own; otherwise one structured log line (`msg: "<role> started"`) with the same facts as fields, so
 * a container's log has them in one record. The roles build their summary (src/roles/summary.ts,
 * src/ratelimit/service/summary.ts); this module only says it, and sits below both.
 */
import type { Logger } from 'pino';
import { formatHostPort } from './address.js';

export interface StartSummary {
  readonly role: string;
  /** The block's lines after its title: label, value. */
  readonly rows: readonly (readonly [string, string])[];
  /** The log line's fields. */
  readonly fields: Readonly<Record<string, unknown>>;
}

export function formatStartSummary(summary: StartSummary): string {
  const width = Math.max(12, ...summary.rows.map(([label]) => label.length + 1));
  return [`svcproxy ${summary.role}`, ...summary.rows.map(([label, value]) => `  ${label.padEnd(width)} ${value}`)].join('\n') + '\n';
}

/** `pretty`: the logger's own choice (src/log.ts pretty-prints when stdout is a terminal). */
export function announceStart(summary: StartSummary, logger: Logger, pretty = Boolean(process.stdout.isTTY)): void {
  if (pretty) process.stdout.write(formatStartSummary(summary));
  else logger.info({ ...summary.fields }, `${summary.role} started`);
}

/** `1 workload`, `2 workloads`. */
export function count(n: number, noun: string): string {
  return `${n} ${noun}${n === 1 ? '' : 's'}`;
}

/** The rows of the status and metrics listeners, when they run. */
export function probeRows(status: string | undefined, metrics: string | undefined): [string, string][] {
  const rows: [string, string][] = [];
  if (status !== undefined) rows.push(['status', `http://${status}  (/healthz /ready)`]);
  if (metrics !== undefined) rows.push(['metrics', `http://${metrics}  (/metrics)`]);
  return rows;
}

type Bound = { readonly address: { readonly host: string; readonly port: number } } | undefined;

/** One log line for each of the admin, status and metrics listeners that runs. */
export function logAdminListeners(logger: Logger, listeners: { readonly admin?: Bound; readonly status?: Bound; readonly metrics?: Bound } | undefined): void {
  for (const name of ['admin', 'status', 'metrics'] as const) {
    const l = listeners?.[name];
    if (l) logger.info({ address: formatHostPort(l.address) }, `${name} listening`);
  }
}
