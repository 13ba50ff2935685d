/**
 * Memory beside every replica (`memory`): the resident memory of an untagged standalone sidecar,
 * idle and at a fixed rate, against Node alone (bench/README.md). Operators pay it once per replica.
 *
 * `--memory-processes` fresh sidecars (and as many bare Node processes) are started together; each
 * sidecar answers one request, then its VmRSS is read 5 s and 30 s later (V8's memory reducer may
 * shrink the heap in between: its first try comes 8 s after a full collection, and it waits for the
 * allocation rate to fall). Then, one sidecar at a time, `--memory-rate` requests a second for
 * `--memory-seconds` (bench/clients/paced.ts) and its VmRSS at the end and at its peak. Medians over
 * the processes, each process's figures in the results file.
 */
import os from 'node:os';
import { readFileSync } from 'node:fs';
import { Fleet, script } from '../lib/fleet.js';
import { freePorts, httpRequest, processTree, RssSampler, runCommand, sleep, spawnProc, type Proc } from '../lib/proc.js';
import { fmtInt } from '../lib/report.js';
import { median } from '../lib/stats.js';
import { launchSvc, sidecarArgs, waitReady } from '../lib/svc.js';
import { errText, log, opts } from '../options.js';

/** One process's readings (MiB of VmRSS; RssAnon and RssFile split it). */
export interface MemoryReading {
  idle5?: number;
  idle30?: number;
  anon5?: number;
  file5?: number;
  loaded?: number;
  peak?: number;
  rate?: number;
}

export interface MemoryResult {
  sidecars: MemoryReading[];
  node: MemoryReading[];
  loadAverage: number[];
  error?: string;
}

const MiB = 1024 * 1024;

function status(pid: number): { rss: number; anon: number; file: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  return { rss: kb('VmRSS'), anon: kb('RssAnon'), file: kb('RssFile') };
}

export async function runMemory(fleet: Fleet): Promise<MemoryResult> {
  const n = opts.memoryProcesses;
  log(`\n== memory: ${n} untagged sidecars and ${n} bare Node processes, idle, then ${opts.memoryRate} req/s for ${opts.memorySeconds} s`);
  const result: MemoryResult = { sidecars: [], node: [], loadAverage: os.loadavg() };
  const procs: Proc[] = [];
  try {
    const up = await fleet.get('up-http');
    const ports = await freePorts(2 * n);
    const sidecars = Array.from({ length: n }, (_, i) => launchSvc({
      name: `memory-sidecar-${i}`, role: 'sidecar', args: sidecarArgs([fleet.config.records], 'plain', `127.0.0.1:${up.port}`),
      port: ports[2 * i]!, adminPort: ports[2 * i + 1]!, logDir: fleet.logDir, shedding: true,
    }));
    procs.push(...sidecars.map((s) => s.proc));
    const bare = Array.from({ length: n }, (_, i) => spawnProc(`memory-node-${i}`, process.execPath, ['-e', 'setInterval(() => {}, 1e6)'], { logDir: fleet.logDir }));
    procs.push(...bare);
    await Promise.all(sidecars.map(async (s) => {
      await waitReady(s);
      const r = await httpRequest(s.port);
      if (r.status !== 200) throw new Error(`${s.proc.name} answered ${r.status}`);
    }));
    await sleep(5000);
    for (const p of [...sidecars.map((s) => s.proc), ...bare]) {
      const st = status(p.pid);
      (p.name.startsWith('memory-node') ? result.node : result.sidecars).push({ idle5: st.rss / MiB, anon5: st.anon / MiB, file5: st.file / MiB });
    }
    await sleep(25_000);
    [...sidecars.map((s) => s.proc), ...bare].forEach((p, i) => {
      const list = i < n ? result.sidecars : result.node;
      list[i % n]!.idle30 = status(p.pid).rss / MiB;
    });
    log(`  idle after 5 s / 30 s: sidecars ${result.sidecars.map((r) => `${r.idle5!.toFixed(1)}/${r.idle30!.toFixed(1)}`).join(', ')} MiB; Node alone ${result.node.map((r) => r.idle5!.toFixed(1)).join(', ')} MiB`);
    await Promise.all(bare.map((p) => p.stop()));
    for (const [i, s] of sidecars.entries()) {
      const pids = processTree([s.proc.pid]);
      const sampler = new RssSampler(pids, 250);
      const r = await runCommand(process.execPath, [script('clients/paced.js'), String(s.port), 'localhost', String(opts.memoryRate), String(opts.memorySeconds)], { timeoutMs: (opts.memorySeconds + 60) * 1000 });
      const reading = result.sidecars[i]!;
      reading.loaded = status(s.proc.pid).rss / MiB;
      reading.peak = sampler.stop() / MiB;
      const line = JSON.parse(r.stdout.trim().split('\n').pop() ?? '{}') as { ok?: number; rps?: number };
      reading.rate = line.rps ?? 0;
      log(`  ${s.proc.name}: ${fmtInt(line.rps)} req/s (${fmtInt(line.ok)} ok): RSS ${reading.loaded.toFixed(1)} MiB at the end, peak ${reading.peak.toFixed(1)}`);
      await s.proc.stop();
    }
  } catch (err) {
    result.error = errText(err);
    log(`  ${result.error}`);
  } finally {
    await Promise.all(procs.map((p) => p.stop()));
  }
  return result;
}

const fmt = (x: number | undefined): string => (x === undefined || !Number.isFinite(x) ? '—' : `${x.toFixed(1)} MiB`);
const med = (list: MemoryReading[], key: keyof MemoryReading): number | undefined => median(list.map((r) => r[key]).filter((x): x is number => x !== undefined));
const each = (list: MemoryReading[], key: keyof MemoryReading): string => list.map((r) => (r[key] === undefined ? '—' : r[key]!.toFixed(1))).join(', ');

export function memoryMarkdown(m: MemoryResult): string {
  if (m.error && m.sidecars.length === 0) return `n/a (${m.error})`;
  const out = [
    '| process | idle, 5 s after its first request | of which anonymous / file-backed | idle, 30 s after | at the fixed rate (end) | peak at the fixed rate | rate achieved |',
    '|---|---:|---:|---:|---:|---:|---:|',
    `| svcproxy sidecar, no tags | ${fmt(med(m.sidecars, 'idle5'))} | ${fmt(med(m.sidecars, 'anon5'))} / ${fmt(med(m.sidecars, 'file5'))} | ${fmt(med(m.sidecars, 'idle30'))} | ${fmt(med(m.sidecars, 'loaded'))} | ${fmt(med(m.sidecars, 'peak'))} | ${fmtInt(med(m.sidecars, 'rate'))} req/s |`,
    `| Node alone (\`node -e 'setInterval(() => {}, 1e6)'\`) | ${fmt(med(m.node, 'idle5'))} | ${fmt(med(m.node, 'anon5'))} / ${fmt(med(m.node, 'file5'))} | ${fmt(med(m.node, 'idle30'))} | | | |`,
    '',
    `VmRSS from /proc/PID/status, medians of ${m.sidecars.length} processes of each (every process, in MiB: sidecars idle ${each(m.sidecars, 'idle5')}; 30 s later ${each(m.sidecars, 'idle30')}; at the rate ${each(m.sidecars, 'loaded')}; Node alone ${each(m.node, 'idle5')}). The sidecar is \`svcproxy sidecar\` for the workload \`plain\` (no tags) in front of the bench's upstream, at --log-level warn; the fixed rate is bench/clients/paced.ts (up to 64 keep-alive connections). File-backed pages are mostly Node's own binary (its code and built-in modules), shared between the processes of a machine. Load average when the section started: ${m.loadAverage.map((x) => x.toFixed(2)).join(', ')}.`,
  ];
  if (m.error) out.push('', `Stopped early: ${m.error}`);
  return out.join('\n');
}
