/**
 * The issue's ratio targets measured in pairs. The HTTP table measures every row once per round, so
 * a row and its reference can be a minute apart, and this machine's speed moves on that scale (the
 * same build's Node rows a third slower half an hour later). Here each target compares two rows back
 * to back in blocks of four runs, reference-subject-subject-reference then the mirror order
 * (subject-reference-reference-subject), so a drift that is linear over a block cancels out: a
 * block's ratio is the sum of the subject's two runs over the sum of the reference's two. The result
 * is the median of the blocks' ratios, with every block's ratio shown.
 */
import type { Load } from './load.js';
import { median } from './stats.js';

export interface PairSpec {
  /** What the issue asks, as the report names it. */
  target: string;
  subject: { key: string; name: string };
  reference: { key: string; name: string };
  /** Requests/s of subject over reference must be at least this. */
  minRatio: number;
  /** p99 of subject over reference must be at most this (measured on the same runs), if set. */
  maxP99Ratio?: number;
}

export interface PairRun {
  load: Load;
  /** Proxy CPU seconds over the measured run. */
  cpuSeconds: number;
}

export interface PairBlock {
  subject: PairRun[];
  reference: PairRun[];
}

export interface PairResult {
  spec: PairSpec;
  blocks: PairBlock[];
  /** Why the pair was not measured. */
  na?: string;
}

/** The runs of block `i` in order: the reference first (R S S R) in even blocks, the subject first (S R R S) in odd ones. */
export function blockOrder(i: number): ('r' | 's')[] {
  return i % 2 === 0 ? ['r', 's', 's', 'r'] : ['s', 'r', 'r', 's'];
}

const sum = (runs: readonly PairRun[], f: (r: PairRun) => number): number => runs.reduce((s, r) => s + f(r), 0);

export function rpsRatio(b: PairBlock): number {
  return sum(b.subject, (r) => r.load.rps) / sum(b.reference, (r) => r.load.rps);
}

export function p99Ratio(b: PairBlock): number {
  return sum(b.subject, (r) => r.load.p99) / sum(b.reference, (r) => r.load.p99);
}

/** CPU seconds per 1,000 requests over a side's runs in the block. */
export function cpuPer1k(runs: readonly PairRun[]): number {
  return sum(runs, (r) => r.cpuSeconds) / (sum(runs, (r) => r.load.requests) / 1000);
}

const x = (v: number | undefined): string => (v === undefined || !Number.isFinite(v) ? '—' : `${v.toFixed(2)}×`);

export function pairsMarkdown(results: readonly PairResult[]): string {
  const lines = [
    '| target | subject / reference | blocks | median | met |',
    '|---|---|---|---:|:---:|',
  ];
  for (const r of results) {
    const names = `${r.spec.subject.name} / ${r.spec.reference.name}`;
    if (r.na || r.blocks.length === 0) {
      lines.push(`| ${r.spec.target} | ${names} | n/a (${r.na ?? 'no block'}) | — | — |`);
      continue;
    }
    const rps = r.blocks.map(rpsRatio);
    const m = median(rps)!;
    lines.push(`| ${r.spec.target} | ${names}, requests/s | ${rps.map(x).join(' ')} | **${x(m)}** | ${m >= r.spec.minRatio ? 'yes' : 'no'} |`);
    if (r.spec.maxP99Ratio !== undefined) {
      const p = r.blocks.map(p99Ratio);
      const mp = median(p)!;
      lines.push(`| p99 ≤ ${r.spec.maxP99Ratio}× | ${names}, p99 | ${p.map(x).join(' ')} | **${x(mp)}** | ${mp <= r.spec.maxP99Ratio ? 'yes' : 'no'} |`);
    }
  }
  return lines.join('\n');
}

/** Per pair: the sides' requests/s and CPU per 1,000 requests, medians over the blocks. */
export function pairsDetail(results: readonly PairResult[]): string[] {
  const out: string[] = [];
  for (const r of results) {
    if (r.na || r.blocks.length === 0) continue;
    const side = (k: 'subject' | 'reference'): string => {
      const rps = median(r.blocks.flatMap((b) => b[k].map((run) => run.load.rps)))!;
      const cpu = median(r.blocks.map((b) => cpuPer1k(b[k])));
      return `${Math.round(rps).toLocaleString('en-US')} req/s${cpu !== undefined && Number.isFinite(cpu) && cpu > 0 ? `, ${cpu.toFixed(3)} s CPU / 1k` : ''}`;
    };
    out.push(`${r.spec.target}: ${r.spec.subject.name} ${side('subject')}; ${r.spec.reference.name} ${side('reference')} (medians of the runs).`);
  }
  return out;
}
