/**
 * Turning rounds into rows: per row the median over rounds of requests/s, p50, p99, peak RSS and CPU
 * seconds per 1,000 requests, and the median of its per-round ratios to the reference rows (direct,
 * http-proxy-3) measured in the same round. Markdown tables for stdout and the results file.
 */
import type { Load } from './load.js';
import { median } from './stats.js';

export interface RoundResult {
  load?: Load;
  /** Proxy CPU seconds (utime + stime) during the measured run. */
  cpuSeconds?: number;
  /** Peak summed RSS of the proxy processes during warm-up and run. */
  rssPeak?: number;
  /** Why this round does not count. */
  invalid?: string;
  note?: string;
  /** Cores used by other processes on the machine during the measured run. */
  foreign?: number;
  /** CPU seconds of the row's side services (not the proxy) during the measured run. */
  sideCpuSeconds?: number;
  /** Growth of the row's counters (BenchRow.counters) over the measured run. */
  counters?: Record<string, number>;
}

export interface RowSpec {
  key: string;
  name: string;
  /** No proxy process of its own (direct): no RSS or CPU. */
  direct?: boolean;
}

export interface RowResult {
  key: string;
  name: string;
  na?: string;
  rounds: RoundResult[];
  rps?: number;
  p50?: number;
  p99?: number;
  rss?: number;
  cpuPer1k?: number;
  ratios: Record<string, number | undefined>;
  /** Median over rounds of this row's CPU per request over the reference's in the same round. */
  cpuRatios: Record<string, number | undefined>;
  notes: string[];
}

export interface SectionResult {
  id: string;
  title: string;
  description: string;
  /** Label of the throughput column ("req/s", "msg/s", "calls/s"). */
  unit: string;
  /** Bytes per request: adds an MB/s column. */
  bytesPerRequest?: number;
  refs: { key: string; label: string }[];
  /** Rows whose CPU per request every row's is divided by (a column each). */
  cpuRefs?: { key: string; label: string }[];
  rows: RowResult[];
  notes: string[];
}

export function valid(r: RoundResult): r is RoundResult & { load: Load } {
  return r.load !== undefined && r.invalid === undefined;
}

/** CPU seconds per request of a valid round with its proxy's CPU measured. */
function cpuPerRequest(r: RoundResult | undefined): number | undefined {
  return r && valid(r) && r.cpuSeconds !== undefined && r.load.requests > 0 ? r.cpuSeconds / r.load.requests : undefined;
}

export function summarizeRows(specs: readonly RowSpec[], rounds: Map<string, RoundResult[]>, na: Map<string, string>, refs: readonly string[], cpuRefs: readonly string[] = []): RowResult[] {
  const rows: RowResult[] = [];
  for (const spec of specs) {
    const rs = rounds.get(spec.key) ?? [];
    const good = rs.filter(valid);
    const notes = [...new Set(rs.map((r) => r.invalid ?? r.note).filter((x): x is string => Boolean(x)))];
    const row: RowResult = { key: spec.key, name: spec.name, rounds: rs, ratios: {}, cpuRatios: {}, notes };
    const reason = na.get(spec.key);
    if (reason) {
      row.na = reason;
    } else if (good.length === 0) {
      row.na = rs.find((r) => r.invalid)?.invalid ?? 'no valid round';
    } else {
      row.rps = median(good.map((r) => r.load.rps));
      row.p50 = median(good.map((r) => r.load.p50));
      row.p99 = median(good.map((r) => r.load.p99));
      if (!spec.direct) {
        row.rss = median(good.map((r) => r.rssPeak ?? NaN));
        row.cpuPer1k = median(good.map((r) => (r.cpuSeconds !== undefined && r.load.requests > 0 ? r.cpuSeconds / (r.load.requests / 1000) : NaN)));
      }
    }
    rows.push(row);
  }
  const ratiosTo = (ref: string, value: (r: RoundResult | undefined) => number | undefined, into: (row: RowResult) => Record<string, number | undefined>): void => {
    const refRounds = rounds.get(ref) ?? [];
    for (const row of rows) {
      if (row.na) continue;
      const ratios: number[] = [];
      row.rounds.forEach((r, i) => {
        const mine = value(r);
        const theirs = value(refRounds[i]);
        if (mine !== undefined && theirs !== undefined && theirs > 0) ratios.push(mine / theirs);
      });
      into(row)[ref] = na.has(ref) ? undefined : median(ratios);
    }
  };
  const rps = (r: RoundResult | undefined): number | undefined => (r && valid(r) ? r.load.rps : undefined);
  for (const ref of refs) ratiosTo(ref, rps, (row) => row.ratios);
  for (const ref of cpuRefs) ratiosTo(ref, cpuPerRequest, (row) => row.cpuRatios);
  return rows;
}

// ---- formatting ----------------------------------------------------------------------------------

export function fmtInt(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return '—';
  return Math.round(n).toLocaleString('en-US');
}

export function fmtMs(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms)) return '—';
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  return `${ms.toFixed(2)} ms`;
}

export function fmtMB(bytes: number | undefined): string {
  if (bytes === undefined || !Number.isFinite(bytes) || bytes <= 0) return '—';
  return `${(bytes / (1024 * 1024)).toFixed(0)} MiB`;
}

export function fmtRatio(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return '—';
  return `${x >= 10 ? x.toFixed(1) : x.toFixed(2)}×`;
}

export function fmtCpu(x: number | undefined): string {
  if (x === undefined || !Number.isFinite(x)) return '—';
  return x.toFixed(3);
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function sectionTable(s: SectionResult): string {
  const head = ['row', s.unit];
  if (s.bytesPerRequest) head.push('MB/s');
  head.push('p50', 'p99', 'peak RSS', `CPU s / 1k ${s.unit.replace(/\/s$/, '').replace(/^req$/, 'req')}`);
  for (const ref of s.refs) head.push(`vs ${ref.label}`);
  for (const ref of s.cpuRefs ?? []) head.push(`CPU / req vs ${ref.label}`);
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const row of s.rows) {
    if (row.na) {
      lines.push(`| ${cell(row.name)} | n/a (${cell(row.na)}) |${' |'.repeat(head.length - 2)}`);
      continue;
    }
    const cells = [cell(row.name), fmtInt(row.rps)];
    if (s.bytesPerRequest) cells.push(row.rps !== undefined ? ((row.rps * s.bytesPerRequest) / 1e6).toFixed(0) : '—');
    cells.push(fmtMs(row.p50), fmtMs(row.p99), fmtMB(row.rss), fmtCpu(row.cpuPer1k));
    for (const ref of s.refs) cells.push(ref.key === row.key ? '1.00×' : fmtRatio(row.ratios[ref.key]));
    for (const ref of s.cpuRefs ?? []) cells.push(ref.key === row.key ? '1.00×' : fmtRatio(row.cpuRatios[ref.key]));
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

export function sectionNotes(s: SectionResult): string[] {
  const out = [...s.notes];
  for (const row of s.rows) if (!row.na && row.notes.length) out.push(`${row.name}: ${row.notes.join('; ')}`);
  return out;
}

/** Every round's numbers, for anyone checking the medians. */
export function roundsTable(s: SectionResult): string {
  const n = Math.max(0, ...s.rows.map((r) => r.rounds.length));
  const head = ['row', ...Array.from({ length: n }, (_, i) => `round ${i + 1}`)];
  const lines = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const row of s.rows) {
    const cells = [cell(row.name)];
    for (let i = 0; i < n; i++) {
      const r = row.rounds[i];
      if (!r) cells.push('');
      else if (!r.load) cells.push(`failed: ${cell(r.invalid ?? '')}`);
      else {
        const l = r.load;
        const cpu = r.cpuSeconds !== undefined && l.requests ? ` ${(r.cpuSeconds / (l.requests / 1000)).toFixed(3)} cpu` : '';
        const bg = r.foreign !== undefined ? `, bg ${r.foreign.toFixed(2)}` : '';
        cells.push(`${fmtInt(l.rps)} / ${fmtMs(l.p99)}${cpu}${bg}${r.invalid ? ` (invalid: ${cell(r.invalid)})` : ''}`);
      }
    }
    lines.push(`| ${cells.join(' | ')} |`);
  }
  return lines.join('\n');
}

/** The row's counters over its valid rounds: median per second and per 1,000 requests, and every round's count. */
export function countersNote(rounds: readonly RoundResult[]): string {
  const good = rounds.filter((r): r is RoundResult & { load: Load; counters: Record<string, number> } => valid(r) && r.counters !== undefined);
  const keys = [...new Set(good.flatMap((r) => Object.keys(r.counters)))];
  return keys.map((k) => {
    const perSecond = median(good.map((r) => (r.counters[k] ?? 0) / r.load.seconds))!;
    const per1k = median(good.map((r) => (r.counters[k] ?? 0) / (r.load.requests / 1000)))!;
    return `${k}: a median of ${perSecond.toFixed(2)} a second, ${per1k.toFixed(3)} per 1,000 requests during the measured runs (per round: ${good.map((r) => fmtInt(r.counters[k] ?? 0)).join(', ')})`;
  }).join('; ') + '.';
}
