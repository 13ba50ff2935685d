/**
 * A table of rows (a section of bench/README.md's "Tables and rows"): every row once per round,
 * rounds interleaved with the row order rotated, each run a warm-up then a measured run after the
 * machine is quiet; the proxy's CPU and RSS measured over it, the services' reported beside, the
 * rows' checks run before and after. Returns what bench/lib/report.ts prints.
 */
import { Fleet } from '../lib/fleet.js';
import type { Load } from '../lib/load.js';
import { CLK_TCK, cpuTicks, ForeignCpu, waitQuiet, processTree, RssSampler, sleep } from '../lib/proc.js';
import { countersNote, fmtCpu, fmtInt, fmtMB, fmtMs, sectionTable, summarizeRows, type RoundResult, type RowSpec, type SectionResult } from '../lib/report.js';
import { median } from '../lib/stats.js';
import { type SectionId, errText, log, opts } from '../options.js';

export interface Target {
  port: number;
  host?: string;
  /** Every port the load goes to (the rate-limit rows with two instances); default [port]. */
  ports?: number[];
  /** The client speaks TLS to the port (https:// for wrk). */
  tls?: boolean;
  /** Every request asks for `Connection: close`: a new connection (and TLS handshake) per request. */
  close?: boolean;
}

export interface BenchRow extends RowSpec {
  /** Fleet services whose processes are the proxy: their CPU and memory are measured. */
  proxy: string[];
  /** Other services the row needs (not measured). */
  deps?: string[];
  target(f: Fleet): Target;
  /** A reason the row cannot be measured, found before the rounds. */
  check?(f: Fleet, t: Target): Promise<string | undefined>;
  /** A reason the measured row does not count, found after the rounds. */
  after?(f: Fleet): Promise<string | undefined>;
  /** A note on the row for the report (what the feature did meanwhile), read after the rounds. */
  summary?(f: Fleet): Promise<string | undefined>;
  /**
   * Services the row depends on whose CPU is measured over the same runs but not counted in the
   * table (the auth server, the rate-limit service, Redis, the sinks): reported in a note.
   */
  sideCpu?: { label: string; services: string[] };
  /**
   * Counters read before and after each measured run (the mesh rows: mTLS handshakes from the
   * sidecars' admin /metrics); each round keeps the differences, and a note gives their median rate
   * per second and per 1,000 requests.
   */
  counters?(f: Fleet): Promise<Record<string, number>>;
  skip?: string;
}

export interface SectionSpec {
  id: SectionId;
  title: string;
  description: string;
  unit: string;
  refs: { key: string; label: string }[];
  /** Rows every row's CPU per request is compared with (SectionResult.cpuRefs). */
  cpuRefs?: { key: string; label: string }[];
  rows: BenchRow[];
  drive(t: Target, seconds: number): Promise<Load>;
  check?(t: Target): Promise<string | undefined>;
  bytesPerRequest?: number;
  notes?: string[];
  /**
   * Pause (SIGSTOP) the section's other proxies while a row is measured: for proxies that keep
   * working when idle (the 10,000-workload ingress probes 10,000 replicas a second).
   */
  exclusive?: boolean;
  /** Measured seconds per run (default --duration). */
  duration?: number;
}

export function badness(load: Load): string | undefined {
  if (load.requests === 0) return `no request completed${load.errorText ? ` (${load.errorText})` : ''}`;
  const bad = load.non2xx + load.errors;
  if (bad > load.requests * 0.001) {
    return `${load.non2xx} non-2xx answers and ${load.errors} errors in ${load.requests} requests${load.errorText ? ` (${load.errorText})` : ''}`;
  }
  return undefined;
}

/**
 * A run whose proxy processes spent no CPU on a thousand requests or more was answered by some other
 * process: the port was taken by another program after the bench chose it (on a machine shared with
 * other work), and the row's proxy could not listen. Such a run measures nothing of the row.
 */
export function answeredElsewhere(load: Load, cpuSeconds: number | undefined): string | undefined {
  if (cpuSeconds === undefined || cpuSeconds > 0 || load.requests < 1000) return undefined;
  return `its processes used no CPU for ${load.requests} requests: the port is answered by another process`;
}

/**
 * Wait for the machine to be quiet before a run. When the last wait ran out (other processes keep
 * the machine busy), the next waits are short, so a busy machine does not stretch the bench by
 * minutes; one quiet reading restores the full wait.
 */
let quietRanOut = false;
export async function settle(): Promise<void> {
  const q = await waitQuiet(opts.quietCores, quietRanOut ? Math.min(1000, opts.quietMaxMs) : opts.quietMaxMs);
  quietRanOut = q.cores >= opts.quietCores;
}

function rotate<T>(list: readonly T[], by: number): T[] {
  if (list.length === 0) return [];
  const k = by % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

export async function runSection(fleet: Fleet, spec: SectionSpec): Promise<SectionResult> {
  const started = Date.now();
  log(`\n== ${spec.title}`);
  const na = new Map<string, string>();
  const targets = new Map<string, Target>();
  const roots = new Map<string, number[]>();
  const sideRoots = new Map<string, number[]>();
  await Promise.all(
    spec.rows.map(async (row) => {
      if (row.skip) return void na.set(row.key, row.skip);
      try {
        const handles = await Promise.all([...row.proxy, ...(row.deps ?? [])].map((n) => fleet.get(n)));
        const target = row.target(fleet);
        const check = row.check ?? ((_f: Fleet, t: Target) => spec.check?.(t) ?? Promise.resolve(undefined));
        // A replica behind an ingress is usable once its first readiness probe passed: retry a
        // failing check for a while before calling the row n/a.
        let reason: string | undefined;
        const deadline = Date.now() + 15_000;
        do {
          try {
            reason = await check(fleet, target);
          } catch (err) {
            reason = errText(err);
          }
          if (reason) await sleep(250);
        } while (reason && Date.now() < deadline);
        if (reason) return void na.set(row.key, reason);
        targets.set(row.key, target);
        roots.set(row.key, handles.slice(0, row.proxy.length).flatMap((h) => h.procs.map((p) => p.pid)));
        if (row.sideCpu) sideRoots.set(row.key, (await Promise.all(row.sideCpu.services.map((n) => fleet.get(n)))).flatMap((h) => h.procs.map((p) => p.pid)));
      } catch (err) {
        na.set(row.key, `did not start: ${errText(err)}`);
      }
    }),
  );
  for (const [key, reason] of na) log(`  ${spec.rows.find((r) => r.key === key)!.name}: n/a (${reason})`);
  const active = spec.rows.filter((r) => !na.has(r.key));
  const rounds = new Map<string, RoundResult[]>();
  for (let round = 0; round < opts.rounds; round++) {
    for (const row of rotate(active, round)) {
      const target = targets.get(row.key)!;
      const pids = processTree(roots.get(row.key) ?? []);
      const sidePids = processTree(sideRoots.get(row.key) ?? []);
      const paused = spec.exclusive ? [...roots.entries()].filter(([k]) => k !== row.key).flatMap(([, r]) => r).filter((pid) => !pids.includes(pid)) : [];
      for (const pid of paused) process.kill(pid, 'SIGSTOP');
      let result: RoundResult;
      const sampler = pids.length ? new RssSampler(pids) : undefined;
      try {
        await settle();
        await spec.drive(target, opts.warmup);
        const counters0 = await row.counters?.(fleet);
        const cpu0 = cpuTicks(pids);
        const side0 = cpuTicks(sidePids);
        const foreign = new ForeignCpu();
        const load = await spec.drive(target, spec.duration ?? opts.duration);
        const bg = foreign.read();
        const cpu1 = cpuTicks(pids);
        const side1 = cpuTicks(sidePids);
        const counters1 = await row.counters?.(fleet);
        const peak = sampler?.stop();
        result = {
          load,
          foreign: bg,
          ...(counters0 && counters1 ? { counters: Object.fromEntries(Object.entries(counters1).map(([k, v]) => [k, v - (counters0[k] ?? 0)])) } : {}),
          ...(pids.length ? { cpuSeconds: (cpu1 - cpu0) / CLK_TCK, rssPeak: peak } : {}),
          ...(sidePids.length ? { sideCpuSeconds: (side1 - side0) / CLK_TCK } : {}),
        };
        const bad = badness(load) ?? answeredElsewhere(load, result.cpuSeconds);
        if (bad) result.invalid = bad;
        else if (load.non2xx + load.errors > 0) result.note = `${load.non2xx} non-2xx, ${load.errors} errors in some round`;
      } catch (err) {
        sampler?.stop();
        result = { invalid: errText(err) };
      } finally {
        for (const pid of paused) process.kill(pid, 'SIGCONT');
      }
      const list = rounds.get(row.key) ?? [];
      list[round] = result;
      rounds.set(row.key, list);
      const l = result.load;
      log(`  round ${round + 1}/${opts.rounds} ${row.name}: ${l ? `${fmtInt(l.rps)} ${spec.unit}, p50 ${fmtMs(l.p50)}, p99 ${fmtMs(l.p99)}` : ''}${result.cpuSeconds !== undefined && l ? `, cpu ${fmtCpu(result.cpuSeconds / (l.requests / 1000))} s/1k, rss ${fmtMB(result.rssPeak)}` : ''}${result.foreign !== undefined ? `, other processes ${result.foreign.toFixed(2)} cores` : ''}${result.invalid ? ` INVALID: ${result.invalid}` : ''}`);
    }
  }
  for (const row of active) {
    if (!row.after) continue;
    try {
      const reason = await row.after(fleet);
      if (reason) na.set(row.key, reason);
    } catch (err) {
      na.set(row.key, errText(err));
    }
  }
  const rowNotes: string[] = [];
  for (const row of active) {
    if (na.has(row.key)) continue;
    const good = (rounds.get(row.key) ?? []).filter((r) => r && r.load && !r.invalid && r.sideCpuSeconds !== undefined);
    if (row.sideCpu && good.length) {
      const cores = median(good.map((r) => r.sideCpuSeconds! / r.load!.seconds))!;
      const per1k = median(good.map((r) => r.sideCpuSeconds! / (r.load!.requests / 1000)))!;
      rowNotes.push(`${row.name}: ${row.sideCpu.label} (not counted in the table) used a median of ${cores.toFixed(2)} cores, ${fmtCpu(per1k)} s CPU / 1k ${spec.unit.replace(/\/s$/, '')}.`);
    }
    const counted = (rounds.get(row.key) ?? []).filter((r) => r && r.load && !r.invalid && r.counters);
    if (row.counters && counted.length) rowNotes.push(`${row.name}: ${countersNote(counted)}`);
    if (row.summary) {
      try {
        const note = await row.summary(fleet);
        if (note) rowNotes.push(`${row.name}: ${note}`);
      } catch (err) {
        rowNotes.push(`${row.name}: ${errText(err)}`);
      }
    }
  }
  for (const row of active) rounds.set(row.key, (rounds.get(row.key) ?? []).map((r) => r ?? { invalid: 'not run' }));
  const result: SectionResult = {
    id: spec.id,
    title: spec.title,
    description: spec.description,
    unit: spec.unit,
    ...(spec.bytesPerRequest ? { bytesPerRequest: spec.bytesPerRequest } : {}),
    refs: spec.refs,
    ...(spec.cpuRefs ? { cpuRefs: spec.cpuRefs } : {}),
    rows: summarizeRows(spec.rows, rounds, na, spec.refs.map((r) => r.key), (spec.cpuRefs ?? []).map((r) => r.key)),
    notes: [...(spec.notes ?? []), ...rowNotes],
  };
  const bg = [...rounds.values()].flat().map((r) => r.foreign).filter((x): x is number => x !== undefined);
  if (bg.length) {
    result.notes.push(`Other processes on the machine used a median of ${median(bg)!.toFixed(2)} cores (max ${Math.max(...bg).toFixed(2)}) during the measured runs (machine busy time from /proc/stat minus the bench's own processes).`);
  }
  await fleet.stopProxies();
  log(`\n${sectionTable(result)}\n(${((Date.now() - started) / 1000).toFixed(0)} s)`);
  return result;
}
