/**
 * 10,000 workloads (`scale`, run last): validate, start-up and reload times, memory, and the
 * ingress's throughput with that configuration, also in pairs (bench/README.md).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Fleet, scaleTarget } from '../lib/fleet.js';
import { wrk } from '../lib/load.js';
import type { PairResult } from '../lib/pairs.js';
import { httpRequest, rssBytes, runCommand, sleep, waitUntil } from '../lib/proc.js';
import { fmtInt, fmtMB, type SectionResult } from '../lib/report.js';
import { median } from '../lib/stats.js';
import { CLI, GVC, hostOf, ingressArgs, launchSvc, ROOT, scaleName, sidecarArgs, waitReady } from '../lib/svc.js';
import { errText, log, opts } from '../options.js';
import { expectOk } from './checks.js';
import { runSection } from './table.js';
import { runTargets } from './targets.js';

interface ScaleStartup {
  label: string;
  role: 'ingress' | 'sidecar';
  dir: string;
  /** The workload whose 200 is waited for; none: only /ready. */
  target?: string;
  runs: number;
  ready: number[];
  ok: number[];
  rss: number[];
  error?: string;
}

export interface ScaleResult {
  validate: { label: string; ms?: number; out: string }[];
  startup: ScaleStartup[];
  throughput?: SectionResult;
  /** The throughput goal measured in pairs (runTargets). */
  pairs?: PairResult[];
  notes: string[];
}

async function startOnce(fleet: Fleet, c: ScaleStartup, timeoutMs: number): Promise<void> {
  const [port, admin] = [fleet.ports['ingress-10k'], fleet.ports['ingress-10k-admin']];
  const t0 = performance.now();
  const svc = launchSvc({
    name: `start-${c.role}-${path.basename(c.dir)}`, role: c.role, port, adminPort: admin, logDir: fleet.logDir,
    args: c.role === 'ingress' ? ingressArgs([c.dir]) : sidecarArgs([c.dir], c.target ?? scaleName(0), `127.0.0.1:${fleet.ports['up-http']}`, GVC),
  });
  try {
    await waitReady(svc, timeoutMs);
    const ready = performance.now() - t0;
    let ok: number | undefined;
    if (c.target) {
      await waitUntil(async () => (await httpRequest(port, { host: hostOf(c.target!) })).status === 200, timeoutMs, `${c.role} answering 200`, svc.proc);
      ok = performance.now() - t0;
    }
    await sleep(500);
    const rss = rssBytes([svc.proc.pid]);
    c.ready.push(ready);
    if (ok !== undefined) c.ok.push(ok);
    c.rss.push(rss);
    log(`  ${c.role}, ${c.label}: ready ${ready.toFixed(0)} ms${ok !== undefined ? `, first 200 ${ok.toFixed(0)} ms` : ''}, rss ${fmtMB(rss)}`);
  } catch (err) {
    c.error = errText(err);
    log(`  ${c.role}, ${c.label}: ${c.error}`);
  } finally {
    await svc.proc.stop();
  }
}

export async function runScale(fleet: Fleet): Promise<ScaleResult> {
  const started = Date.now();
  const N = opts.workloads;
  const n = fmtInt(N);
  log(`\n== ${n} workloads`);
  const res: ScaleResult = { validate: [], startup: [], notes: [] };
  await fleet.get('up-http');
  const small = fleet.scaleDir(10);
  const big = fleet.scaleDir(N);
  const bigJson = fleet.scaleDir(N, { format: 'json' });
  const bigNoDeploy = fleet.scaleDir(N, { deployments: 0 });

  // validate: wall time of the whole command (Node start-up included; the 10-workload run shows it).
  const configs = [
    { label: '10 workloads + deployments (YAML)', dir: small },
    { label: `${n} workloads + ${n} deployments (YAML, one document each)`, dir: big },
    { label: `${n} workloads + ${n} deployments (one JSON array)`, dir: bigJson },
  ];
  const times = new Map<string, number[]>();
  const outs = new Map<string, string>();
  for (let round = 0; round < opts.rounds; round++) {
    for (const c of configs) {
      const r = await runCommand(process.execPath, [CLI, 'validate', '--config', c.dir], { cwd: ROOT, timeoutMs: 300_000 });
      outs.set(c.label, r.code === 0 ? r.stdout.trim() : `exit ${r.code}: ${r.stderr.trim().split('\n').slice(-2).join(' ')}`);
      if (r.code === 0) times.set(c.label, [...(times.get(c.label) ?? []), r.ms]);
      log(`  validate, ${c.label}: ${r.ms.toFixed(0)} ms (exit ${r.code})`);
    }
  }
  for (const c of configs) res.validate.push({ label: c.label, ...(times.get(c.label)?.length ? { ms: median(times.get(c.label)!)! } : {}), out: outs.get(c.label) ?? '' });

  // Start-up: configuration load alone (no deployments to probe) in rounds; then, once each,
  // with every workload deployed (the readiness probes of 10,000 replicas start with the process).
  const mk = (label: string, role: 'ingress' | 'sidecar', dir: string, target: string | undefined): ScaleStartup => ({ label, role, dir, ...(target ? { target } : {}), runs: 0, ready: [], ok: [], rss: [] });
  const rounds = [
    mk('10 workloads + deployments', 'ingress', small, scaleTarget(10)),
    mk('10 workloads + deployments', 'sidecar', small, scaleName(5)),
    mk(`${n} workloads, no deployments`, 'ingress', bigNoDeploy, undefined),
    mk(`${n} workloads, no deployments`, 'sidecar', bigNoDeploy, scaleName(Math.floor(N / 2))),
  ];
  for (let round = 0; round < opts.rounds; round++) {
    for (const c of rounds) if (!c.error) await startOnce(fleet, c, 60_000);
  }
  const once = [
    mk(`${n} workloads + ${n} deployments`, 'sidecar', big, scaleName(Math.floor(N / 2))),
    mk(`${n} workloads + ${n} deployments`, 'ingress', big, scaleTarget(N)),
  ];
  for (const c of once) await startOnce(fleet, c, 180_000);
  res.startup.push(...rounds, ...once);
  log(`  (${((Date.now() - started) / 1000).toFixed(0)} s so far)`);

  res.throughput = await runSection(fleet, {
    id: 'scale',
    title: `Ingress throughput, 10 vs ${n} workloads`,
    description: `wrk as in the HTTP table (${opts.duration} s runs), against ingresses whose configuration has 10 or ${n} workloads; each deployment points at the same upstream; the requests go to one deployed workload. The middle row has the large route table but deploys only 10 of the workloads, which separates the size of the configuration from the readiness probing of its replicas.`,
    unit: 'req/s',
    refs: [{ key: 'ingress-10', label: '10 workloads' }],
    rows: [
      { key: 'ingress-10', name: 'svcproxy ingress, 10 workloads, 10 deployed', proxy: ['ingress-10'], target: (f) => ({ port: f.ports['ingress-10'], host: hostOf(scaleTarget(10)) }) },
      { key: 'ingress-10k-10', name: `svcproxy ingress, ${n} workloads, 10 deployed`, proxy: ['ingress-10k-10'], target: (f) => ({ port: f.ports['ingress-10k-10'], host: hostOf(scaleTarget(N, 10)) }) },
      { key: 'ingress-10k', name: `svcproxy ingress, ${n} workloads, ${n} deployed`, proxy: ['ingress-10k'], target: (f) => ({ port: f.ports['ingress-10k'], host: hostOf(scaleTarget(N)) }) },
    ],
    drive: (t, seconds) => wrk({ url: `http://127.0.0.1:${t.port}/`, connections: opts.connections, seconds, ...(t.host ? { host: t.host } : {}) }),
    check: expectOk,
    // The HTTP table's run length, not the short one: its goal is a ratio of 0.95, and 3 s rounds of
    // these rows spread by ±15%.
    duration: opts.duration,
    exclusive: true,
    notes: [
      "While one ingress is measured the others are paused (SIGSTOP), so the large one's readiness probes do not load the machine during the others' runs.",
      `Each ingress is measured once every deployed replica has passed its first readiness check (its svcproxy_replicas_ready gauges add up to its deployments): a router that just started checks all of them within its first 10 s, ${n} connects in those seconds.`,
    ],
  });
  // The goal's ratio again with its two rows back to back (as the targets section), the other paused.
  res.pairs = await runTargets(
    fleet,
    [{
      target: `${n} workloads ≥ 0.95× 10 workloads`,
      subject: { key: 'ingress-10k', name: `ingress, ${n} workloads deployed` },
      reference: { key: 'ingress-10', name: 'ingress, 10 workloads' },
      minRatio: 0.95,
      services: { subject: 'ingress-10k', reference: 'ingress-10' },
      hosts: { subject: hostOf(scaleTarget(N)), reference: hostOf(scaleTarget(10)) },
    }],
    `${n} workloads, paired`,
    opts.duration,
    true,
  );
  res.notes.push(
    `The ingress probes every deployment replica for readiness (a TCP connect per replica and probe period when the workload sets no readinessProbe): with ${n} deployed workloads the last row includes that probing, and each probe leaves a socket in TIME_WAIT for 60 s (this machine has ${ephemeralPorts()} ephemeral ports).`,
  );
  return res;
}

function ephemeralPorts(): string {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    return fmtInt(hi! - lo! + 1);
  } catch {
    return '~28,000';
  }
}

export function scaleMarkdown(s: ScaleResult): string {
  const out: string[] = [];
  out.push('| configuration | `svcproxy validate` wall time | output |', '|---|---:|---|');
  for (const v of s.validate) out.push(`| ${v.label} | ${v.ms !== undefined ? `${v.ms.toFixed(0)} ms` : 'n/a'} | ${v.out.replace(/\|/g, '\\|')} |`);
  out.push('', '| process | configuration | runs | start → /ready | start → first 200 | RSS after start |', '|---|---|---:|---:|---:|---:|');
  for (const st of s.startup) {
    const ready = st.ready.length ? `${median(st.ready)!.toFixed(0)} ms` : `n/a (${st.error ?? 'not run'})`;
    const ok = st.ok.length ? `${median(st.ok)!.toFixed(0)} ms` : st.target ? '—' : 'no deployment to route to';
    out.push(`| ${st.role} | ${st.label} | ${st.ready.length} | ${ready} | ${ok} | ${fmtMB(median(st.rss))} |`);
  }
  out.push(
    '',
    'Wall times include starting Node (the 10-workload rows show how much that is; medians when there are several runs). `/ready` answers once the configuration is loaded and the listeners are bound; an ingress answers 200 for a workload once that replica has passed its first readiness probe; a sidecar forwards to its `--app` without probing it.',
  );
  return out.join('\n');
}
