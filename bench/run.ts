/**
 * `npm run bench`: the same load against svcproxy and its alternatives, in interleaved rounds (every
 * row once per round; the median of the rounds is reported, with each row's ratio to the reference
 * rows measured in the same round), then the 10,000-workload, idle-connection and soak measurements
 * and two CPU profiles of svcproxy under load. Prints each table as it is done and writes everything
 * to bench/results/<date>.md. See bench/README.md for the rows and the flags.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { BACKENDS, Fleet, scaleTarget, script, stats, type MeshService, type PortName } from './lib/fleet.js';
import { handshakes, internalHost, meshRequests, MESH_ORG } from './lib/mesh.js';
import { h2load, nodeClient, postScript, wrk, type Load } from './lib/load.js';
import { ensureTools, toolVersions } from './lib/peers.js';
import {
  CLK_TCK, commandExists, cpuTicks, ForeignCpu, h2Get, threadTicks, waitQuiet, httpRequest, killAllSync, processTree, RssSampler, rssBytes, runCommand, sleep, stopAll, waitUntil,
} from './lib/proc.js';
import { blockOrder, pairsDetail, pairsMarkdown, rpsRatio, type PairResult, type PairRun, type PairSpec } from './lib/pairs.js';
import { summarize, summaryMarkdown, type ProfileSummary } from './lib/profile.js';
import {
  countersNote, fmtCpu, fmtInt, fmtMB, fmtMs, roundsTable, sectionNotes, sectionTable, summarizeRows, type RoundResult, type RowSpec, type SectionResult,
} from './lib/report.js';
import { median } from './lib/stats.js';
import { APP_ROOT, CLI, GVC, hostOf, ingressArgs, launchSvc, type SvcProc, RLS_DOMAIN, RLS_KEY, ROOT, scaleName, sidecarArgs, snapshotApp, waitReady } from './lib/svc.js';

// ---- flags ---------------------------------------------------------------------------------------

// The 10,000-workload section runs last: its readiness probes leave tens of thousands of sockets in
// TIME_WAIT for a minute, which would disturb whatever ran next.
const SECTIONS = ['http', 'targets', 'mesh', 'body', 'h2', 'grpc', 'rls', 'ws', 'idle', 'soak', 'profile', 'scale'] as const;
type SectionId = (typeof SECTIONS)[number];

const HELP = `npm run bench -- [options]

  --rounds N            rounds per table (median reported; at least 3)        default 5
  --duration S          measured seconds per row and round (HTTP, 10k throughput, profiles) default 5
  --short-duration S    … for the other tables (1 MiB, h2, gRPC, WebSocket)     default 3
  --warmup S            warm-up seconds before each measured run                default 1
  --connections N       wrk connections (1 thread)                              default 50
  --body-connections N  wrk connections for the 1 MiB POST rows                 default 10
  --h2-clients N / --h2-streams M   h2load connections / streams per connection default 10 / 10
  --grpc-concurrency N  unary calls in flight (one channel)                     default 50
  --rls-concurrency N   rate-limit service: ShouldRateLimit calls in flight      default 50
  --rls-channels N      … spread over N channels (connections)                  default 2
  --rls-keys N          … over N distinct descriptor values                      default 1000
  --ws-connections N    WebSocket connections doing ping-pong                   default 50
  --target-blocks N     blocks of four back-to-back runs per paired target     default 4
  --workloads N         workloads in the large configuration                    default 10000
  --idle-connections N  idle keep-alive connections                             default 1000
  --soak-seconds S      fixed-rate soak length (the issue's 10 minutes: 600)    default 60
  --soak-rate R         requests per second during the soak                     default 2000
  --only LIST           comma-separated sections: ${SECTIONS.join(',')}
  --out FILE            results file (default bench/results/<date>.md; <date>-partial.md with --only)
  --quiet-cores C       before each run, wait until other processes use < C cores  default 0.3
  --quiet-max S         … but no longer than S seconds                          default 10
  --no-install          never apt-get install missing tools
  --keep                keep the temporary folder (configs, logs)
`;

const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '5' },
    'short-duration': { type: 'string', default: '3' },
    warmup: { type: 'string', default: '1' },
    connections: { type: 'string', default: '50' },
    'body-connections': { type: 'string', default: '10' },
    'h2-clients': { type: 'string', default: '10' },
    'h2-streams': { type: 'string', default: '10' },
    'grpc-concurrency': { type: 'string', default: '50' },
    'rls-concurrency': { type: 'string', default: '50' },
    'rls-channels': { type: 'string', default: '2' },
    'rls-keys': { type: 'string', default: '1000' },
    'ws-connections': { type: 'string', default: '50' },
    'target-blocks': { type: 'string', default: '4' },
    workloads: { type: 'string', default: '10000' },
    'idle-connections': { type: 'string', default: '1000' },
    'soak-seconds': { type: 'string', default: '60' },
    'soak-rate': { type: 'string', default: '2000' },
    'quiet-cores': { type: 'string', default: '0.3' },
    'quiet-max': { type: 'string', default: '10' },
    only: { type: 'string' },
    out: { type: 'string' },
    'no-install': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (flags.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
const num = (name: keyof typeof flags): number => {
  const v = Number(flags[name]);
  if (!Number.isFinite(v) || v <= 0) {
    process.stderr.write(`--${name} must be a positive number\n`);
    process.exit(2);
  }
  return v;
};
const opts = {
  rounds: Math.max(1, Math.floor(num('rounds'))),
  duration: num('duration'),
  shortDuration: num('short-duration'),
  warmup: num('warmup'),
  connections: num('connections'),
  bodyConnections: num('body-connections'),
  h2Clients: num('h2-clients'),
  h2Streams: num('h2-streams'),
  grpcConcurrency: num('grpc-concurrency'),
  rlsConcurrency: Math.floor(num('rls-concurrency')),
  rlsChannels: Math.floor(num('rls-channels')),
  rlsKeys: Math.floor(num('rls-keys')),
  wsConnections: num('ws-connections'),
  targetBlocks: Math.floor(num('target-blocks')),
  workloads: Math.floor(num('workloads')),
  idleConnections: Math.floor(num('idle-connections')),
  soakSeconds: num('soak-seconds'),
  soakRate: num('soak-rate'),
  quietCores: num('quiet-cores'),
  quietMaxMs: num('quiet-max') * 1000,
};
const only = flags.only ? new Set(flags.only.split(',').map((s) => s.trim())) : undefined;
for (const s of only ?? []) {
  if (!(SECTIONS as readonly string[]).includes(s)) {
    process.stderr.write(`--only: unknown section ${s} (sections: ${SECTIONS.join(', ')})\n`);
    process.exit(2);
  }
}
const wanted = (s: SectionId): boolean => !only || only.has(s);

const BODY_BYTES = 1024 * 1024;

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

const errText = (err: unknown): string => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);

// ---- rows and sections ---------------------------------------------------------------------------

interface Target {
  port: number;
  host?: string;
  /** Every port the load goes to (the rate-limit rows with two instances); default [port]. */
  ports?: number[];
}

interface BenchRow extends RowSpec {
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

interface SectionSpec {
  id: SectionId;
  title: string;
  description: string;
  unit: string;
  refs: { key: string; label: string }[];
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

function badness(load: Load): string | undefined {
  if (load.requests === 0) return `no request completed${load.errorText ? ` (${load.errorText})` : ''}`;
  const bad = load.non2xx + load.errors;
  if (bad > load.requests * 0.001) {
    return `${load.non2xx} non-2xx answers and ${load.errors} errors in ${load.requests} requests${load.errorText ? ` (${load.errorText})` : ''}`;
  }
  return undefined;
}

/**
 * Wait for the machine to be quiet before a run. When the last wait ran out (other processes keep
 * the machine busy), the next waits are short, so a busy machine does not stretch the bench by
 * minutes; one quiet reading restores the full wait.
 */
let quietRanOut = false;
async function settle(): Promise<void> {
  const q = await waitQuiet(opts.quietCores, quietRanOut ? Math.min(1000, opts.quietMaxMs) : opts.quietMaxMs);
  quietRanOut = q.cores >= opts.quietCores;
}

function rotate<T>(list: readonly T[], by: number): T[] {
  if (list.length === 0) return [];
  const k = by % list.length;
  return [...list.slice(k), ...list.slice(0, k)];
}

async function runSection(fleet: Fleet, spec: SectionSpec): Promise<SectionResult> {
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
        const bad = badness(load);
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
    rows: summarizeRows(spec.rows, rounds, na, spec.refs.map((r) => r.key)),
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

// ---- paired targets ------------------------------------------------------------------------------

/** A paired target: the fleet services of its two rows and, for an ingress, the Host to ask for. */
type TargetPair = PairSpec & { services: Record<'subject' | 'reference', string>; hosts?: Partial<Record<'subject' | 'reference', string>> };

/** The issue's request-rate targets, each a subject row against its reference row of the HTTP table. */
function targetPairs(tools: Record<string, string | undefined>): TargetPair[] {
  const sidecar = { key: 'sidecar', name: 'sidecar no tags' };
  const pairs: TargetPair[] = [
    { target: 'untagged ≥ 2.0× http-proxy-3', subject: sidecar, reference: { key: 'hp3', name: 'http-proxy-3' }, minRatio: 2.0, services: { subject: 'sc-plain', reference: 'hp3' } },
    { target: 'untagged ≥ 0.6× nginx', subject: sidecar, reference: { key: 'nginx', name: 'nginx' }, minRatio: 0.6, maxP99Ratio: 1.5, services: { subject: 'sc-plain', reference: 'nginx' } },
    { target: 'ext auth + rate limit ≥ 0.5× no tags', subject: { key: 'guarded', name: 'ext auth (gRPC) + rate limit' }, reference: sidecar, minRatio: 0.5, services: { subject: 'sc-guarded', reference: 'sc-plain' } },
    { target: 'tracing 100% ≥ 0.7× no tags', subject: { key: 'traced', name: 'tracing 100%' }, reference: sidecar, minRatio: 0.7, services: { subject: 'sc-traced', reference: 'sc-plain' } },
  ];
  return tools.nginx ? pairs : pairs.filter((p) => p.reference.key !== 'nginx');
}

/**
 * Each target's two rows back to back (bench/lib/pairs.ts): fresh proxies, then per block four runs
 * of warm-up + `seconds` measured, in R S S R or S R R S order. `exclusive`: the side not being
 * measured is paused (SIGSTOP) meanwhile, for proxies that keep working when idle.
 */
async function runTargets(fleet: Fleet, pairs: readonly TargetPair[], title: string, seconds: number, exclusive = false): Promise<PairResult[]> {
  log(`\n== ${title}`);
  const drive = (port: number, host: string | undefined, s: number): Promise<Load> => wrk({ url: `http://127.0.0.1:${port}/`, connections: opts.connections, seconds: s, ...(host ? { host } : {}) });
  const results: PairResult[] = [];
  for (const pair of pairs) {
    const { services, hosts, ...spec } = pair;
    const result: PairResult = { spec, blocks: [] };
    results.push(result);
    try {
      const handles = { subject: await fleet.get(services.subject), reference: await fleet.get(services.reference) };
      const reason = (await expectOk({ port: handles.subject.port, ...(hosts?.subject ? { host: hosts.subject } : {}) }))
        ?? (await expectOk({ port: handles.reference.port, ...(hosts?.reference ? { host: hosts.reference } : {}) }));
      if (reason) {
        result.na = reason;
        continue;
      }
      for (let b = 0; b < opts.targetBlocks; b++) {
        const block = { subject: [] as PairRun[], reference: [] as PairRun[] };
        for (const side of blockOrder(b)) {
          const key = side === 's' ? 'subject' : 'reference';
          const h = handles[key];
          const pids = processTree(h.procs.map((p) => p.pid));
          const paused = exclusive ? processTree(handles[side === 's' ? 'reference' : 'subject'].procs.map((p) => p.pid)) : [];
          for (const pid of paused) process.kill(pid, 'SIGSTOP');
          try {
            await settle();
            await drive(h.port, hosts?.[key], opts.warmup);
            const cpu0 = cpuTicks(pids);
            const load = await drive(h.port, hosts?.[key], seconds);
            const cpuSeconds = (cpuTicks(pids) - cpu0) / CLK_TCK;
            const bad = badness(load);
            if (bad) throw new Error(`${spec[key].name}: ${bad}`);
            block[key].push({ load, cpuSeconds });
          } finally {
            for (const pid of paused) process.kill(pid, 'SIGCONT');
          }
        }
        result.blocks.push(block);
        log(`  ${spec.target}: block ${b + 1}/${opts.targetBlocks} ${blockOrder(b).join('')} ${block.subject.map((r) => fmtInt(r.load.rps)).join('+')} / ${block.reference.map((r) => fmtInt(r.load.rps)).join('+')} = ${rpsRatio(block).toFixed(2)}×`);
      }
    } catch (err) {
      result.na = errText(err);
    }
  }
  await fleet.stopProxies();
  log(`\n${pairsMarkdown(results)}`);
  return results;
}

// ---- checks --------------------------------------------------------------------------------------

async function expectOk(t: Target): Promise<string | undefined> {
  const r = await httpRequest(t.port, { ...(t.host ? { host: t.host } : {}) });
  if (r.status !== 200 || r.body !== 'ok') return `a GET answered ${r.status} ${r.body.slice(0, 120)}`;
  return undefined;
}

async function expectBody(t: Target): Promise<string | undefined> {
  const r = await httpRequest(t.port, { method: 'POST', body: Buffer.alloc(BODY_BYTES, 0x78), headers: { 'content-type': 'application/octet-stream' }, timeoutMs: 10_000, ...(t.host ? { host: t.host } : {}) });
  if (r.status !== 200) return `a 1 MiB POST answered ${r.status} ${r.body.slice(0, 120)}`;
  if (r.headers['x-received'] !== String(BODY_BYTES)) return `the upstream received ${String(r.headers['x-received'])} bytes of ${BODY_BYTES}`;
  return undefined;
}

/** The sidecar's filters in the path: a denied request gets the auth server's 403; answers carry the rate limit. */
async function expectFilters(t: Target, want: { auth: boolean; rateLimit: boolean }): Promise<string | undefined> {
  const ok = await httpRequest(t.port);
  if (ok.status !== 200) return `a GET answered ${ok.status} ${ok.body.slice(0, 120)}`;
  const denied = await httpRequest(t.port, { headers: { 'x-bench-deny': '1' } });
  if (want.auth && denied.status !== 403) return `external auth is not in the path (a request the auth server denies answered ${denied.status})`;
  if (!want.auth && denied.status !== 200) return `a request with x-bench-deny answered ${denied.status}: external auth is in the path of a row without it`;
  const limited = ok.headers['x-ratelimit-limit'] !== undefined;
  if (want.rateLimit && !limited) return 'rate limiting is not in the path (no x-ratelimit-limit on the answer)';
  if (!want.rateLimit && limited) return 'x-ratelimit-limit on the answer: rate limiting is in the path of a row without it';
  return undefined;
}

/** Access-log lines (pino JSON, `"component":"access"`) in a sidecar's log file, and their bytes. */
function accessLines(file: string): { lines: number; bytes: number } {
  let lines = 0;
  let bytes = 0;
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return { lines, bytes };
  }
  for (const line of text.split('\n')) {
    if (!line.includes('"component":"access"')) continue;
    lines++;
    bytes += line.length + 1;
  }
  return { lines, bytes };
}

/** The access-log sink's counts once they stop growing (the sidecar flushes every second). */
async function settledEntries(f: Fleet): Promise<Awaited<ReturnType<typeof stats>>> {
  let s = await stats(f.ports['als-stats']);
  for (let i = 0; i < 20; i++) {
    await sleep(250);
    const next = await stats(f.ports['als-stats']);
    if (next.entries === s.entries && (next.entries ?? 0) > 0 && i >= 5) return next;
    s = next;
  }
  return s;
}

/** Prometheus text → metric name → sum over its label sets. */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    out.set(m[1]!, (out.get(m[1]!) ?? 0) + Number(m[3]));
  }
  return out;
}

async function expectH2(t: Target): Promise<string | undefined> {
  const status = await h2Get(t.port, t.host);
  return status === 200 ? undefined : `an h2c GET answered ${status}`;
}

// ---- the tables ----------------------------------------------------------------------------------

function httpRows(tools: Record<string, string | undefined>): BenchRow[] {
  const missing = (tool: string): string | undefined => (tools[tool] ? undefined : `${tool} not installed`);
  const nginx = missing('nginx');
  const haproxy = missing('haproxy');
  return [
    { key: 'direct', name: 'direct (no proxy)', direct: true, proxy: [], deps: ['up-http'], target: (f) => ({ port: f.ports['up-http'] }) },
    { key: 'nginx', name: 'nginx, 1 worker, upstream keep-alive', proxy: ['nginx'], target: (f) => ({ port: f.ports.nginx }), ...(nginx ? { skip: nginx } : {}) },
    { key: 'haproxy', name: 'HAProxy, nbthread 1, http-reuse always', proxy: ['haproxy'], target: (f) => ({ port: f.ports.haproxy }), ...(haproxy ? { skip: haproxy } : {}) },
    { key: 'hp3', name: 'http-proxy-3 1.23, keep-alive agent', proxy: ['hp3'], target: (f) => ({ port: f.ports.hp3 }) },
    { key: 'fastify', name: '@fastify/http-proxy 11 (fastify 5)', proxy: ['fastify'], target: (f) => ({ port: f.ports.fastify }) },
    { key: 'sidecar', name: 'svcproxy sidecar, no tags', proxy: ['sc-plain'], target: (f) => ({ port: f.ports['sc-plain'] }) },
    { key: 'ingress', name: 'svcproxy ingress → app', proxy: ['ingress'], target: (f) => ({ port: f.ports.ingress, host: hostOf('api') }) },
  ];
}

function httpSection(tools: Record<string, string | undefined>): SectionSpec {
  const rows: BenchRow[] = [
    ...httpRows(tools),
    { key: 'workers', name: 'svcproxy sidecar, no tags, --workers 2 (primary + 2 workers)', proxy: ['sc-workers'], target: (f) => ({ port: f.ports['sc-workers'] }) },
    { key: 'chain', name: 'svcproxy ingress → sidecar → app (2 processes)', proxy: ['ingress', 'sc-chain'], target: (f) => ({ port: f.ports.ingress, host: hostOf('chain') }) },
    {
      key: 'guarded',
      name: 'svcproxy sidecar, ext auth (gRPC) + rate limit',
      proxy: ['sc-guarded'],
      deps: ['authz', 'ratelimit'],
      sideCpu: { label: 'the auth server and the rate-limit service', services: ['authz', 'ratelimit'] },
      target: (f) => ({ port: f.ports['sc-guarded'] }),
      check: (_f, t) => expectFilters(t, { auth: true, rateLimit: true }),
    },
    {
      key: 'limited',
      name: 'svcproxy sidecar, rate limit only (svcproxy ratelimit, memory)',
      proxy: ['sc-limited'],
      deps: ['ratelimit'],
      sideCpu: { label: 'the rate-limit service', services: ['ratelimit'] },
      target: (f) => ({ port: f.ports['sc-limited'] }),
      check: (_f, t) => expectFilters(t, { auth: false, rateLimit: true }),
    },
    {
      key: 'authed',
      name: 'svcproxy sidecar, ext auth (gRPC) only',
      proxy: ['sc-authed'],
      deps: ['authz'],
      sideCpu: { label: 'the auth server', services: ['authz'] },
      target: (f) => ({ port: f.ports['sc-authed'] }),
      check: (_f, t) => expectFilters(t, { auth: true, rateLimit: false }),
    },
    {
      key: 'logged',
      name: 'svcproxy sidecar, access log (JSON lines to a file)',
      proxy: ['sc-logged'],
      target: (f) => ({ port: f.ports['sc-logged'] }),
      check: async (f, t) => {
        const ok = await expectOk(t);
        if (ok) return ok;
        // pino writes in 4 KiB batches: enough requests for a batch, then the lines must be there.
        const file = (await f.get('sc-logged')).procs[0]!.logFile;
        const before = accessLines(file).lines;
        for (let i = 0; i < 40; i++) await httpRequest(t.port);
        await sleep(200);
        const after = accessLines(file).lines;
        return after > before ? undefined : `no access-log line in ${path.basename(file)} after 40 requests`;
      },
      summary: async (f) => {
        const { lines, bytes } = accessLines((await f.get('sc-logged')).procs[0]!.logFile);
        return lines ? `${fmtInt(lines)} access-log lines (JSON, ${Math.round(bytes / lines)} bytes each) written to the sidecar's stdout, a file (pino, asynchronous, 4 KiB writes), over the section.` : undefined;
      },
      after: async (f) => (accessLines((await f.get('sc-logged')).procs[0]!.logFile).lines ? undefined : 'the sidecar wrote no access-log line'),
    },
    {
      key: 'als',
      name: 'svcproxy sidecar, Envoy access-log service (gRPC stream)',
      proxy: ['sc-als'],
      deps: ['als'],
      sideCpu: { label: 'the access-log sink', services: ['als'] },
      target: (f) => ({ port: f.ports['sc-als'] }),
      after: async (f) => {
        const s = await settledEntries(f);
        return s.entries ? undefined : 'the access-log sink received no entry';
      },
      summary: async (f) => {
        const s = await settledEntries(f);
        const m = parseMetrics((await httpRequest(f.ports['sc-als-admin'], { path: '/metrics' })).body);
        const sent = m.get('svcproxy_accesslog_entries_sent_total') ?? 0;
        const dropped = m.get('svcproxy_accesslog_entries_dropped_total') ?? 0;
        const failures = m.get('svcproxy_accesslog_stream_failures_total') ?? 0;
        return `the sink received ${fmtInt(s.entries)} entries in ${fmtInt(s.calls)} messages on ${s.streams ?? '?'} stream(s) (${s.calls ? Math.round(s.bytes / s.calls) : 0} bytes a message); the sidecar counted ${fmtInt(sent)} sent, ${fmtInt(dropped)} dropped, ${fmtInt(failures)} stream failures.`;
      },
    },
    {
      key: 'traced',
      name: 'svcproxy sidecar, tracing 100% (OTLP/gRPC sink)',
      proxy: ['sc-traced'],
      deps: ['otlp'],
      sideCpu: { label: 'the OTLP sink', services: ['otlp'] },
      target: (f) => ({ port: f.ports['sc-traced'] }),
      after: async (f) => {
        // The batch span processor exports every few seconds: give it time for the last batch.
        let s = await stats(f.ports['otlp-stats']);
        for (let i = 0; i < 30 && s.calls === 0; i++) {
          await sleep(200);
          s = await stats(f.ports['otlp-stats']);
        }
        return s.calls === 0 ? 'tracing not active in this build: the OTLP sink received no export' : undefined;
      },
    },
  ];
  return {
    id: 'http',
    title: 'HTTP/1.1, tiny responses',
    description: `wrk, 1 thread, ${opts.connections} connections, GET of a 2-byte answer from a Node upstream in its own process.`,
    unit: 'req/s',
    refs: [{ key: 'direct', label: 'direct' }, { key: 'hp3', label: 'http-proxy-3' }, { key: 'sidecar', label: 'sidecar no tags' }],
    rows,
    drive: (t, seconds) => wrk({ url: `http://127.0.0.1:${t.port}/`, connections: opts.connections, seconds, ...(t.host ? { host: t.host } : {}) }),
    check: expectOk,
    notes: [
      'The ext auth, rate limit, access-log service and tracing rows count only the sidecar process; the auth server, the rate-limit service (in-memory counters) and the sinks run in their own processes on the same 2 cores (their CPU is in the notes below).',
      'nginx runs without an access log and svcproxy at --log-level warn (no access log either), except the access-log rows; HAProxy logs nothing.',
    ],
  };
}

/** A mesh row's hop is what it claims: mTLS handshakes and admitted mesh requests on the target, or none of either. */
async function expectMesh(f: Fleet, t: Target, admins: { caller: PortName; target: PortName }, tls: boolean): Promise<string | undefined> {
  const before = await meshRequests(f.ports[admins.target]);
  const ok = await expectOk(t);
  if (ok) return ok;
  const [admitted, caller, target] = [(await meshRequests(f.ports[admins.target])) - before, await handshakes(f.ports[admins.caller]), await handshakes(f.ports[admins.target])];
  if (tls && (admitted < 1 || caller.client < 1 || target.server < 1)) return `the request did not cross mTLS (target admitted ${admitted}, caller dialled ${caller.client}, target accepted ${target.server} handshakes)`;
  if (!tls && (admitted > 0 || caller.client + target.server > 0)) return 'the plaintext control went over mTLS';
  return undefined;
}

function meshSection(): SectionSpec {
  const host = internalHost();
  const hs = (caller: PortName, target: PortName) => async (f: Fleet): Promise<Record<string, number>> => ({
    'client handshakes (caller)': (await handshakes(f.ports[caller])).client,
    'server handshakes (target)': (await handshakes(f.ports[target])).server,
  });
  const total = (caller: PortName, target: PortName) => async (f: Fleet): Promise<string> => {
    const [c, t] = [await handshakes(f.ports[caller]), await handshakes(f.ports[target])];
    return `since start (warm-ups and checks included) the caller dialled ${fmtInt(c.client)} mTLS connections and the target accepted ${fmtInt(t.server)}; the target admitted ${fmtInt(await meshRequests(f.ports[target]))} mesh requests.`;
  };
  return {
    id: 'mesh',
    title: 'The mesh: two proxies, plaintext against mTLS',
    description: `wrk, 1 thread, ${opts.connections} connections, GET of a 2-byte answer from the same Node upstream as the HTTP table; every row is two svcproxy processes (--workers 1) and counts the CPU and RSS of both. The mesh rows' wrk is the caller workload's app: it talks to its sidecar's outbound listener (\`--mesh\`) with the target's internal name as Host (\`${host}\`), as an HTTP proxy client would; the caller sidecar sends it over mTLS (HTTP/1.1 over TLS 1.3, pooled keep-alive connections, ECDSA P-256 certificates from svcproxy's local CA) to the target replica's sidecar (\`--mesh-inbound\`), which checks the caller's identity against the internal firewall (same-org), adds x-forwarded-client-cert and forwards to its app. An ingress's external listener never takes the mesh hop (only internal names from a mesh listener do), so the literal ingress → sidecar → (mTLS) → sidecar → app does not exist; the last row is the nearest: the ingress's own mesh listener calling as spiffe://${MESH_ORG}/ingress.`,
    unit: 'req/s',
    refs: [{ key: 'chain', label: 'ingress → sidecar (plain)' }, { key: 'mesh-plain', label: 'sidecar → sidecar (plain)' }],
    rows: [
      { key: 'chain', name: 'svcproxy ingress → sidecar → app (plaintext; the HTTP table row)', proxy: ['ingress', 'sc-chain'], target: (f) => ({ port: f.ports.ingress, host: hostOf('chain') }) },
      {
        key: 'mesh-plain',
        name: 'caller sidecar (outbound) → plaintext → target sidecar → app',
        proxy: ['sc-pcall', 'sc-ptarget'],
        target: (f) => ({ port: f.ports['sc-pcall-out'], host }),
        check: (f, t) => expectMesh(f, t, { caller: 'sc-pcall-admin', target: 'sc-ptarget-admin' }, false),
      },
      {
        key: 'mesh',
        name: 'caller sidecar (outbound) → mTLS → target sidecar → app',
        proxy: ['sc-mcall', 'sc-mtarget'],
        target: (f) => ({ port: f.ports['sc-mcall-out'], host }),
        check: (f, t) => expectMesh(f, t, { caller: 'sc-mcall-admin', target: 'sc-mtarget-admin' }, true),
        counters: hs('sc-mcall-admin', 'sc-mtarget-admin'),
        summary: total('sc-mcall-admin', 'sc-mtarget-admin'),
      },
      {
        key: 'mesh-ingress',
        name: 'ingress mesh listener → mTLS → target sidecar → app',
        proxy: ['ingress-mesh', 'sc-itarget'],
        target: (f) => ({ port: f.ports['ingress-mesh-out'], host }),
        check: (f, t) => expectMesh(f, t, { caller: 'ingress-mesh-admin', target: 'sc-itarget-admin' }, true),
        counters: hs('ingress-mesh-admin', 'sc-itarget-admin'),
        summary: total('ingress-mesh-admin', 'sc-itarget-admin'),
      },
    ],
    drive: (t, seconds) => wrk({ url: `http://127.0.0.1:${t.port}/`, connections: opts.connections, seconds, ...(t.host ? { host: t.host } : {}) }),
    check: expectOk,
    notes: [
      'Handshakes are svcproxy_mesh_tls_handshakes_total from the two processes\' admin /metrics, read just before and just after each measured run: client = connections the caller dialled, server = handshakes the target completed. With the pool warm (wrk\'s warm-up second) both should stay near 0.',
    ],
  };
}

function bodySection(tools: Record<string, string | undefined>, workDir: string): SectionSpec {
  const lua = postScript(workDir, BODY_BYTES);
  return {
    id: 'body',
    duration: opts.shortDuration,
    title: 'HTTP/1.1, 1 MiB request bodies',
    description: `wrk, 1 thread, ${opts.bodyConnections} connections, each request a POST of 1 MiB (1,048,576 bytes) that the upstream reads to the end before answering 2 bytes. MB/s = 10^6 bytes of request body per second.`,
    unit: 'req/s',
    bytesPerRequest: BODY_BYTES,
    refs: [{ key: 'direct', label: 'direct' }, { key: 'hp3', label: 'http-proxy-3' }],
    rows: httpRows(tools),
    drive: (t, seconds) => wrk({ url: `http://127.0.0.1:${t.port}/`, connections: opts.bodyConnections, seconds, script: lua, ...(t.host ? { host: t.host } : {}) }),
    check: expectBody,
    notes: ['nginx streams the body (proxy_request_buffering off) like every other row, instead of spooling it to a temporary file first.'],
  };
}

function h2Section(tools: Record<string, string | undefined>): SectionSpec {
  const missing = (tool: string): { skip: string } | object => (tools[tool] ? {} : { skip: `${tool} not installed` });
  return {
    id: 'h2',
    duration: opts.shortDuration,
    title: 'HTTP/2 (h2c, prior knowledge)',
    description: `h2load, 1 thread, ${opts.h2Clients} connections × ${opts.h2Streams} concurrent streams, GET of a 2-byte answer. Proxies speak h2c to the client and HTTP/1.1 keep-alive to the upstream unless the row says otherwise. Percentiles from h2load's per-request log. http-proxy-3 and @fastify/http-proxy do not serve h2c, so the reference is the direct h2c upstream.`,
    unit: 'req/s',
    refs: [{ key: 'direct', label: 'direct h2c' }],
    rows: [
      { key: 'direct', name: 'direct h2c upstream (Node http2)', direct: true, proxy: [], deps: ['up-h2c'], target: (f) => ({ port: f.ports['up-h2c'] }) },
      { key: 'nginx', name: 'nginx, listen … http2 → HTTP/1.1 upstream', proxy: ['nginx'], target: (f) => ({ port: f.ports['nginx-h2'] }), ...missing('nginx') },
      { key: 'haproxy', name: 'HAProxy, bind … proto h2 → HTTP/1.1 upstream', proxy: ['haproxy'], target: (f) => ({ port: f.ports['haproxy-h2'] }), ...missing('haproxy') },
      { key: 'sidecar', name: 'svcproxy sidecar → HTTP/1.1 app', proxy: ['sc-plain'], target: (f) => ({ port: f.ports['sc-plain'] }) },
      { key: 'ingress', name: 'svcproxy ingress → HTTP/1.1 app', proxy: ['ingress'], target: (f) => ({ port: f.ports.ingress, host: hostOf('api') }) },
      { key: 'sidecar-h2', name: 'svcproxy sidecar → h2c app (port protocol http2)', proxy: ['sc-h2'], target: (f) => ({ port: f.ports['sc-h2'] }) },
    ],
    drive: (t, seconds) => h2load({ url: `http://127.0.0.1:${t.port}/`, clients: opts.h2Clients, streams: opts.h2Streams, seconds, ...(t.host ? { authority: t.host } : {}) }),
    check: expectH2,
  };
}

function grpcSection(): SectionSpec {
  return {
    id: 'grpc',
    duration: opts.shortDuration,
    title: 'gRPC unary',
    description: `A Node @grpc/grpc-js client (bench/clients/grpc-load.ts) keeping ${opts.grpcConcurrency} unary calls in flight on one channel, 64-byte messages, against a grpc-js echo server. svcproxy's workload port has protocol grpc (h2c both ways, trailers passed through). The client shares the 2 cores and is often the limit.`,
    unit: 'calls/s',
    refs: [{ key: 'direct', label: 'direct' }],
    rows: [
      { key: 'direct', name: 'direct (grpc-js server)', direct: true, proxy: [], deps: ['up-grpc'], target: (f) => ({ port: f.ports['up-grpc'] }) },
      { key: 'sidecar', name: 'svcproxy sidecar (port protocol grpc)', proxy: ['sc-grpc'], target: (f) => ({ port: f.ports['sc-grpc'] }) },
      { key: 'ingress', name: 'svcproxy ingress → app (port protocol grpc)', proxy: ['ingress'], target: (f) => ({ port: f.ports.ingress, host: hostOf('grpc') }) },
    ],
    drive: (t, seconds) => nodeClient(script('clients/grpc-load.js'), [t.port, t.host ?? `127.0.0.1:${t.port}`, opts.grpcConcurrency, seconds], seconds),
  };
}

function rlsSection(redisVersion: string | undefined): SectionSpec {
  const noRedis = redisVersion ? {} : { skip: 'redis-server not installed (scripts/test-deps.sh installs it)' };
  const sideRedis = { label: 'redis-server', services: ['redis'] };
  return {
    id: 'rls',
    duration: opts.shortDuration,
    title: 'Rate-limit service, checks per second',
    description: `\`svcproxy ratelimit\` (Envoy RLS v3) alone: a Node @grpc/grpc-js client (bench/clients/rls-load.ts) keeping ${opts.rlsConcurrency} ShouldRateLimit calls in flight over ${opts.rlsChannels} channels (connections), each call one descriptor \`{${RLS_KEY}: uN}\` of ${fmtInt(opts.rlsKeys)} distinct values in turn, against one rule of 10^9 per second (every call counted, none over the limit; a call counts only when answered OK with the rule's current_limit). CPU and RSS are the service process(es); the client shares the 2 cores and is often the limit.`,
    unit: 'calls/s',
    refs: [{ key: 'memory', label: 'memory' }],
    rows: [
      {
        key: 'memory',
        name: 'svcproxy ratelimit, in-memory counters',
        proxy: ['rls-mem'],
        target: (f) => ({ port: f.ports['rls-mem'] }),
        check: (f, t) => expectRls(f, t, ['rls-mem-admin'], 'memory'),
      },
      {
        key: 'redis',
        name: 'svcproxy ratelimit --redis (local redis-server, no persistence)',
        proxy: ['rls-redis'],
        deps: ['redis'],
        sideCpu: sideRedis,
        target: (f) => ({ port: f.ports['rls-redis'] }),
        check: (f, t) => expectRls(f, t, ['rls-redis-admin'], 'redis'),
        ...noRedis,
      },
      {
        key: 'redis-2',
        name: '2 × svcproxy ratelimit --redis, one redis-server (sum of both)',
        proxy: ['rls-redis', 'rls-redis-b'],
        deps: ['redis'],
        sideCpu: sideRedis,
        target: (f) => ({ port: f.ports['rls-redis'], ports: [f.ports['rls-redis'], f.ports['rls-redis-b']] }),
        check: (f, t) => expectRls(f, t, ['rls-redis-admin', 'rls-redis-b-admin'], 'redis'),
        summary: async (f) => {
          const r = await runCommand('redis-cli', ['-p', String(f.ports.redis), 'info', 'commandstats']);
          const calls = [...r.stdout.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[2]), 0);
          return r.code === 0 ? `redis-server ran ${fmtInt(calls)} check scripts (EVALSHA) in the whole section (both Redis rows and their checks).` : undefined;
        },
        ...noRedis,
      },
    ],
    drive: (t, seconds) => nodeClient(script('clients/rls-load.js'), [(t.ports ?? [t.port]).join(','), RLS_DOMAIN, RLS_KEY, opts.rlsConcurrency, seconds, opts.rlsChannels, opts.rlsKeys], seconds),
    notes: [
      ...(redisVersion ? [`Redis: ${redisVersion}, started by the bench on a free port with \`--save '' --appendonly no\`; the service runs one Lua script (INCRBY + EXPIRE) per check.`] : []),
      'The two-instance row sends half of the channels to each instance; CPU and RSS are the sum of both.',
    ],
  };
}

/** The rate-limit service instances use the store asked for, and a check is counted under the rule. */
async function expectRls(f: Fleet, t: Target, admins: ('rls-mem-admin' | 'rls-redis-admin' | 'rls-redis-b-admin')[], store: string): Promise<string | undefined> {
  for (const admin of admins) {
    const config = JSON.parse((await httpRequest(f.ports[admin], { path: '/config' })).body) as { store?: string };
    if (config.store !== store) return `the service on ${admin.replace(/-admin$/, '')} uses the ${String(config.store)} store, not ${store}`;
  }
  const r = await runCommand(process.execPath, [script('clients/rls-load.js'), (t.ports ?? [t.port]).join(','), RLS_DOMAIN, RLS_KEY, 'check'], { timeoutMs: 20_000 });
  let answers: { overall_code?: string; statuses?: { code?: string; current_limit?: { requests_per_unit?: number } | null }[] }[];
  try {
    answers = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as typeof answers;
  } catch {
    return `the check call failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-2).join(' ').slice(0, 300)}`;
  }
  for (const a of answers) {
    if (a.overall_code !== 'OK' || a.statuses?.[0]?.current_limit?.requests_per_unit !== 1_000_000_000) return `unexpected answer ${JSON.stringify(a).slice(0, 200)}`;
  }
  return undefined;
}

function wsSection(tools: Record<string, string | undefined>): SectionSpec {
  return {
    id: 'ws',
    duration: opts.shortDuration,
    title: 'WebSocket messages',
    description: `${opts.wsConnections} WebSocket connections (bench/clients/ws-load.ts), each sending a 32-byte text message and waiting for the echo before the next; the upstream is a raw RFC 6455 echo in the HTTP upstream process. Rate = round trips per second.`,
    unit: 'msg/s',
    refs: [{ key: 'direct', label: 'direct' }, { key: 'hp3', label: 'http-proxy-3' }],
    rows: httpRows(tools),
    drive: (t, seconds) => nodeClient(script('clients/ws-load.js'), [t.port, t.host ?? `127.0.0.1:${t.port}`, opts.wsConnections, seconds], seconds),
  };
}

// ---- 10,000 workloads ----------------------------------------------------------------------------

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

interface ScaleResult {
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

async function runScale(fleet: Fleet): Promise<ScaleResult> {
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

// ---- idle connections and the soak ---------------------------------------------------------------

interface IdleRow {
  name: string;
  before?: number;
  after?: number;
  open?: number;
  ok?: number;
  error?: string;
}

function idleClient(port: number, host: string, n: number): { ready: Promise<{ open: number; ok: number }>; stop(): void } {
  const child = spawn(process.execPath, [script('clients/idle.js'), String(port), host, String(n)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const ready = new Promise<{ open: number; ok: number }>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /^ready (.*)$/m.exec(out);
      if (m) resolve(JSON.parse(m[1]!) as { open: number; ok: number });
    });
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (code) => reject(new Error(`idle client exited ${code}: ${err.trim().slice(0, 200)}`)));
  });
  return { ready, stop: () => child.kill('SIGTERM') };
}

async function runIdle(fleet: Fleet, tools: Record<string, string | undefined>): Promise<IdleRow[]> {
  log(`\n== ${opts.idleConnections} idle keep-alive connections`);
  const rows: IdleRow[] = [];
  for (const row of httpRows(tools).filter((r) => !r.direct)) {
    const out: IdleRow = { name: row.name };
    rows.push(out);
    if (row.skip) {
      out.error = row.skip;
      continue;
    }
    try {
      const handles = await Promise.all(row.proxy.map((n) => fleet.get(n)));
      const t = row.target(fleet);
      await expectOk(t);
      await sleep(1000);
      const pids = processTree(handles.flatMap((h) => h.procs.map((p) => p.pid)));
      out.before = rssBytes(pids);
      const client = idleClient(t.port, t.host ?? '127.0.0.1', opts.idleConnections);
      try {
        const r = await client.ready;
        out.open = r.open;
        out.ok = r.ok;
        // Node's RSS moves with the garbage collector: the median of five readings over 5 s.
        const after: number[] = [];
        for (let i = 0; i < 5; i++) {
          await sleep(1000);
          after.push(rssBytes(processTree(handles.flatMap((h) => h.procs.map((p) => p.pid)))));
        }
        out.after = median(after)!;
      } finally {
        client.stop();
      }
      log(`  ${row.name}: ${fmtMB(out.before)} → ${fmtMB(out.after)} with ${out.open} open (${out.ok} answered 200)`);
    } catch (err) {
      out.error = errText(err);
      log(`  ${row.name}: ${out.error}`);
    }
    await fleet.stop(row.proxy.filter((n) => !BACKENDS.has(n)));
  }
  await fleet.stopProxies();
  return rows;
}

interface SoakResult {
  name: string;
  seconds: number;
  rate: number;
  first10?: number;
  last10?: number;
  peak?: number;
  result?: { sent: number; ok: number; non200: number; errors: number; rps: number; p50: number; p99: number; p999: number; firstError?: string };
  cpuPer1k?: number;
  error?: string;
}

async function runSoak(fleet: Fleet): Promise<SoakResult> {
  log(`\n== soak: ${opts.soakRate} req/s for ${opts.soakSeconds} s`);
  const res: SoakResult = { name: 'svcproxy ingress → app', seconds: opts.soakSeconds, rate: opts.soakRate };
  try {
    const h = await fleet.get('ingress');
    const pids = processTree(h.procs.map((p) => p.pid));
    const sampler = new RssSampler(pids, 1000, true);
    const cpu0 = cpuTicks(pids);
    const r = await runCommand(process.execPath, [script('clients/paced.js'), String(h.port), hostOf('api'), String(opts.soakRate), String(opts.soakSeconds)], { timeoutMs: (opts.soakSeconds + 60) * 1000 });
    const cpu1 = cpuTicks(pids);
    res.peak = sampler.stop();
    const line = r.stdout.trim().split('\n').pop() ?? '';
    res.result = JSON.parse(line) as NonNullable<SoakResult['result']>;
    res.cpuPer1k = (cpu1 - cpu0) / CLK_TCK / (res.result.ok / 1000);
    const s = sampler.samples;
    const t0 = s[0]!.t;
    const tEnd = s[s.length - 1]!.t;
    const mean = (xs: number[]): number | undefined => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);
    const first = mean(s.filter((x) => x.t - t0 < 10_000).map((x) => x.rss));
    const last = mean(s.filter((x) => tEnd - x.t < 10_000).map((x) => x.rss));
    if (first !== undefined) res.first10 = first;
    if (last !== undefined) res.last10 = last;
    log(`  RSS first 10 s ${fmtMB(res.first10)}, last 10 s ${fmtMB(res.last10)}, ${fmtInt(res.result.rps)} req/s, p99 ${fmtMs(res.result.p99)}`);
  } catch (err) {
    res.error = errText(err);
    log(`  ${res.error}`);
  }
  await fleet.stopProxies();
  return res;
}

// ---- profiles ------------------------------------------------------------------------------------

interface ProfileResult {
  name: string;
  summary?: ProfileSummary;
  load?: Load;
  file?: string;
  error?: string;
  /** CPU seconds of the profiled process (all threads) and of its main thread during the measured run. */
  cpuSeconds?: number;
  mainSeconds?: number;
  foreign?: number;
}

async function runProfiles(fleet: Fleet, keepDir: string): Promise<ProfileResult[]> {
  log('\n== CPU profiles under load');
  await fleet.stopProxies();
  const out: ProfileResult[] = [];
  const p = fleet.ports;
  interface ProfileCase { name: string; key: string; role: 'sidecar' | 'ingress'; port: number; admin: number; host: string | undefined; args: string[]; mesh?: { peer: MeshService; drive: number } }
  const cases: ProfileCase[] = [
    { name: 'svcproxy sidecar, no tags', key: 'sidecar', role: 'sidecar' as const, port: p['sc-plain'], admin: p['sc-plain-admin'], host: undefined, args: sidecarArgs([fleet.config.records], 'plain', `127.0.0.1:${p['up-http']}`) },
    { name: 'svcproxy ingress → app', key: 'ingress', role: 'ingress' as const, port: p.ingress, admin: p['ingress-admin'], host: hostOf('api'), args: ingressArgs([fleet.config.records, fleet.config.deployments]) },
    // Not asked for by the issue: the filters being built now, since that row is far slower.
    { name: 'svcproxy sidecar, ext auth (gRPC) + rate limit', key: 'sidecar-extauth-ratelimit', role: 'sidecar' as const, port: p['sc-guarded'], admin: p['sc-guarded-admin'], host: undefined, args: sidecarArgs([fleet.config.records], 'guarded', `127.0.0.1:${p['up-http']}`) },
  ];
  // The two sides of the mesh hop (caller sidecar → mTLS → target sidecar → app), each profiled with
  // the other side running unprofiled; wrk talks to the caller's outbound listener.
  for (const [key, name, profiled, peer] of [
    ['mesh-target', 'svcproxy mesh target sidecar (mTLS server side: caller → mTLS → this → app)', 'sc-mtarget', 'sc-mcall'],
    ['mesh-caller', 'svcproxy mesh caller sidecar (mTLS client side: wrk → this → mTLS → target → app)', 'sc-mcall', 'sc-mtarget'],
  ] as const) {
    const l = await fleet.meshLaunch(profiled);
    cases.push({ name, key, role: l.role, port: l.port, admin: l.adminPort, host: internalHost(), args: l.args, mesh: { peer, drive: fleet.ports['sc-mcall-out'] } });
  }
  await Promise.all([fleet.get('up-http'), fleet.get('up-grpc')]);
  await Promise.allSettled([fleet.get('authz'), fleet.get('ratelimit')]);
  for (const c of cases) {
    const dir = path.join(fleet.workDir, `profile-${c.key}`);
    mkdirSync(dir, { recursive: true });
    // A mesh target starts before its caller; the process measured is always the profiled one.
    const peerLaunch = c.mesh ? await fleet.meshLaunch(c.mesh.peer) : undefined;
    const startPeer = (): SvcProc | undefined => peerLaunch && launchSvc({ name: `profile-${c.key}-peer`, role: peerLaunch.role, args: peerLaunch.args, port: peerLaunch.port, adminPort: peerLaunch.adminPort, logDir: fleet.logDir });
    const peerFirst = peerLaunch?.target === undefined ? startPeer() : undefined;
    const svc = launchSvc({ name: `profile-${c.key}`, role: c.role, args: c.args, port: c.port, adminPort: c.admin, logDir: fleet.logDir, nodeFlags: ['--cpu-prof', `--cpu-prof-dir=${dir}`, '--cpu-prof-interval=500'] });
    const peerSvc = peerFirst ?? startPeer();
    const drivePort = c.mesh?.drive ?? c.port;
    const res: ProfileResult = { name: c.name };
    out.push(res);
    try {
      if (peerSvc) await waitReady(peerSvc);
      await waitReady(svc);
      await waitUntil(async () => (await httpRequest(drivePort, c.host ? { host: c.host } : {})).status === 200, 15_000, 'answering 200', svc.proc);
      const w = { url: `http://127.0.0.1:${drivePort}/`, connections: opts.connections, ...(c.host ? { host: c.host } : {}) };
      await settle();
      await wrk({ ...w, seconds: opts.warmup });
      const fromUs = Number(process.hrtime.bigint() / 1000n);
      const cpu0 = cpuTicks([svc.proc.pid]);
      const main0 = threadTicks(svc.proc.pid);
      const foreign = new ForeignCpu();
      res.load = await wrk({ ...w, seconds: opts.duration });
      res.foreign = foreign.read();
      res.cpuSeconds = (cpuTicks([svc.proc.pid]) - cpu0) / CLK_TCK;
      res.mainSeconds = (threadTicks(svc.proc.pid) - main0) / CLK_TCK;
      const toUs = Number(process.hrtime.bigint() / 1000n);
      await svc.proc.stop(30_000);
      const file = readdirSync(dir).find((f) => f.endsWith('.cpuprofile'));
      if (!file) throw new Error(`no .cpuprofile written (exit ${String(await svc.proc.exited)})`);
      const kept = path.join(keepDir, `${c.key}.cpuprofile`);
      copyFileSync(path.join(dir, file), kept);
      res.file = kept;
      res.summary = summarize(kept, APP_ROOT, 25, { fromUs, toUs });
      log(`  ${c.name}: ${fmtInt(res.load.rps)} req/s while profiled; top: ${res.summary.self.slice(0, 5).map((l) => `${l.name} ${(l.share * 100).toFixed(1)}%`).join(', ')}`);
    } catch (err) {
      res.error = errText(err);
      log(`  ${c.name}: ${res.error}`);
    } finally {
      await svc.proc.stop();
      await peerSvc?.proc.stop();
    }
  }
  return out;
}

// ---- environment and the results file ------------------------------------------------------------

async function redisVersion(): Promise<string | undefined> {
  if (!commandExists('redis-server')) return undefined;
  const r = await runCommand('redis-server', ['--version']);
  const v = /v=(\S+)/.exec(r.stdout)?.[1];
  return v ? `redis-server ${v}` : 'redis-server';
}

function pkgVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

/** A fingerprint of the compiled svcproxy (dist/**.js): another process may rebuild it mid-run. */
function distFingerprint(root = ROOT): string {
  const hash = createHash('sha1');
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.name.endsWith('.js')) hash.update(p).update(readFileSync(p));
    }
  };
  walk(path.join(root, 'dist'));
  return hash.digest('hex').slice(0, 12);
}

async function gitState(): Promise<string> {
  const git = async (args: string[]): Promise<string> => (await runCommand('git', args, { cwd: ROOT })).stdout.trim();
  const commit = (await git(['rev-parse', '--short', 'HEAD'])) || 'unknown';
  const dirty = (await git(['status', '--porcelain', '--', 'src'])).split('\n').filter(Boolean).length;
  return `commit ${commit}${dirty ? ` + ${dirty} uncommitted change${dirty === 1 ? '' : 's'} under src/` : ''}`;
}

async function environment(versions: Record<string, string>, start: { git: string; dist: string }): Promise<string[]> {
  const cpus = os.cpus();
  const endGit = await gitState();
  const rebuilt = distFingerprint() !== start.dist;
  return [
    `- svcproxy: ${start.git} when the run started, as built into dist/ then (fingerprint ${start.dist}); the bench ran a copy of that build, so ${rebuilt ? `the rebuild of dist/ by another process during the run (now ${endGit}) did not change the code under test` : 'a rebuild during the run could not have changed the code under test'}`,
    `- Node ${process.version}, ${os.type()} ${os.release()}, ${cpus.length} × ${cpus[0]?.model ?? 'CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
    `- **${cpus.length} cores shared** by the load generator, the upstream, the proxy (and its auth / rate-limit / trace services): nothing is pinned to a CPU, so every figure includes contention with the load generator.`,
    `- peers: ${Object.entries(versions).map(([k, v]) => `${k} ${v}`).join(', ')}; http-proxy-3 ${pkgVersion('http-proxy-3')}, fastify ${pkgVersion('fastify')}, @fastify/http-proxy ${pkgVersion('@fastify/http-proxy')}, undici ${pkgVersion('undici')}, @grpc/grpc-js ${pkgVersion('@grpc/grpc-js')}`,
    `- method: ${opts.rounds} rounds, rows interleaved (every row once per round, the order rotated each round), ${opts.warmup} s warm-up + ${opts.duration} s measured per row and round (${opts.shortDuration} s in the tables after the first, except the 10,000-workload throughput table); medians of the rounds; ratios are the median of each round's ratio to the reference row measured in that round. CPU = utime + stime of the proxy process(es) from /proc/PID/stat over the measured run, per 1,000 completed requests; peak RSS = the highest VmRSS sampled every 100 ms during warm-up and run (nginx: master + worker). Each section starts its proxies fresh.`,
  ];
}

function scaleMarkdown(s: ScaleResult): string {
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

function idleMarkdown(rows: IdleRow[]): string {
  const out = ['| proxy | RSS, idle | RSS with idle connections | per connection | connections open / answered |', '|---|---:|---:|---:|---:|'];
  for (const r of rows) {
    if (r.error || r.before === undefined || r.after === undefined) {
      out.push(`| ${r.name} | n/a (${r.error ?? 'not measured'}) | | | |`);
      continue;
    }
    const per = ((r.after - r.before) / Math.max(1, r.open ?? opts.idleConnections) / 1024).toFixed(1);
    out.push(`| ${r.name} | ${fmtMB(r.before)} | ${fmtMB(r.after)} | ${per} KiB | ${r.open} / ${r.ok} |`);
  }
  return out.join('\n');
}

function soakMarkdown(s: SoakResult): string {
  if (s.error || !s.result) return `n/a (${s.error ?? 'not run'})`;
  const growth = s.first10 && s.last10 ? `${((s.last10 - s.first10) / (1024 * 1024)).toFixed(1)} MiB (${(((s.last10 - s.first10) / s.first10) * 100).toFixed(1)}%)` : '—';
  const r = s.result;
  return [
    '| proxy | rate asked / achieved | ok / sent | p50 | p99 | p99.9 | CPU s / 1k req | RSS first 10 s | RSS last 10 s | growth | peak RSS |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| ${s.name} | ${fmtInt(s.rate)} / ${fmtInt(r.rps)} | ${fmtInt(r.ok)} / ${fmtInt(r.sent)}${r.non200 || r.errors ? ` (${r.non200} non-200, ${r.errors} errors${r.firstError ? `: ${r.firstError}` : ''})` : ''} | ${fmtMs(r.p50)} | ${fmtMs(r.p99)} | ${fmtMs(r.p999)} | ${fmtCpu(s.cpuPer1k)} | ${fmtMB(s.first10)} | ${fmtMB(s.last10)} | ${growth} | ${fmtMB(s.peak)} |`,
    '',
    `Fixed-rate client (bench/clients/paced.ts, wrk has no rate option), up to 64 keep-alive connections: latency counted from when a request was sent, or from when it should have been sent if the client sent it more than 2 ms late, so stalls are not hidden. The issue asks for a 10-minute soak: run \`npm run bench -- --only soak --soak-seconds 600\`; this run used ${s.seconds} s (\`--soak-seconds\`, default 60).`,
  ].join('\n');
}

// ---- main ----------------------------------------------------------------------------------------

async function main(): Promise<number> {
  const t0 = Date.now();
  if (!existsSync(path.join(ROOT, 'dist', 'cli.js'))) {
    log('dist/cli.js is missing: run `npm run build` (npm ci does it) first.');
    return 1;
  }
  const start = { git: await gitState(), dist: distFingerprint() };
  const tools = await ensureTools(!flags['no-install'], log);
  const versions = await toolVersions(tools.found);
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'svcproxy-bench-'));
  snapshotApp(path.join(workDir, 'app'));
  const date = new Date().toISOString().slice(0, 10);
  const profileDir = path.join(os.tmpdir(), `svcproxy-bench-profiles-${date}`);
  mkdirSync(profileDir, { recursive: true });
  const fleet = await Fleet.create(workDir, tools.found, opts.workloads);
  const skipped: string[] = [...tools.notes];
  if (!tools.found.wrk) skipped.push('wrk is missing: every wrk-driven table (HTTP/1.1, 1 MiB bodies, 10k workloads, profiles) is skipped');
  if (!tools.found.h2load) skipped.push('h2load is missing: the HTTP/2 table is skipped');

  const sections: SectionResult[] = [];
  let scale: ScaleResult | undefined;
  let idle: IdleRow[] | undefined;
  let soak: SoakResult | undefined;
  let profiles: ProfileResult[] | undefined;
  let pairs: PairResult[] | undefined;
  try {
    if (tools.found.wrk && wanted('http')) sections.push(await runSection(fleet, httpSection(tools.found)));
    if (tools.found.wrk && wanted('targets')) pairs = await runTargets(fleet, targetPairs(tools.found), 'paired targets', opts.shortDuration);
    if (tools.found.wrk && wanted('mesh')) sections.push(await runSection(fleet, meshSection()));
    if (tools.found.wrk && wanted('body')) sections.push(await runSection(fleet, bodySection(tools.found, workDir)));
    if (tools.found.h2load && wanted('h2')) sections.push(await runSection(fleet, h2Section(tools.found)));
    if (wanted('grpc')) sections.push(await runSection(fleet, grpcSection()));
    if (wanted('rls')) sections.push(await runSection(fleet, rlsSection(await redisVersion())));
    if (wanted('ws')) sections.push(await runSection(fleet, wsSection(tools.found)));
    if (wanted('idle')) idle = await runIdle(fleet, tools.found);
    if (wanted('soak')) soak = await runSoak(fleet);
    if (tools.found.wrk && wanted('profile')) profiles = await runProfiles(fleet, profileDir);
    if (tools.found.wrk && wanted('scale')) scale = await runScale(fleet);
  } finally {
    await fleet.stopAll();
  }

  const minutes = ((Date.now() - t0) / 60_000).toFixed(1);
  const md: string[] = [];
  md.push(`# svcproxy bench, ${date}`, '');
  md.push(`\`npm run bench${only ? ` -- --only ${[...only].join(',')}` : ''}\`, ${minutes} minutes. How to run and what each row means: [bench/README.md](../README.md).`, '');
  md.push(...(await environment(versions, start)), '');
  for (const s of sections) {
    md.push(`## ${s.title}`, '', s.description, '', sectionTable(s), '');
    const notes = sectionNotes(s);
    if (notes.length) md.push(...notes.map((n) => `- ${n}`), '');
    md.push('<details><summary>every round (throughput / p99 / CPU s per 1k)</summary>', '', roundsTable(s), '', '</details>', '');
  }
  if (pairs) {
    md.push('## The targets, measured in pairs', '');
    md.push(`Each request-rate target of the HTTP table again, its two rows measured back to back in ${opts.targetBlocks} blocks of four runs (wrk as in the HTTP table, ${opts.warmup} s warm-up + ${opts.shortDuration} s measured each): reference, subject, subject, reference, and the mirror order in every other block, so that the machine's drift over a block cancels out. A block's ratio is the subject's two runs over the reference's two (requests/s; p99 likewise); the median of the blocks is reported. Fresh proxies, started after the HTTP table.`, '');
    md.push(pairsMarkdown(pairs), '');
    const detail = pairsDetail(pairs);
    if (detail.length) md.push(...detail.map((d) => `- ${d}`), '');
  }
  if (scale) {
    md.push(`## ${fmtInt(opts.workloads)} workloads`, '', scaleMarkdown(scale), '');
    if (scale.throughput) {
      md.push(`### ${scale.throughput.title}`, '', scale.throughput.description, '', sectionTable(scale.throughput), '');
      md.push('<details><summary>every round</summary>', '', roundsTable(scale.throughput), '', '</details>', '');
    }
    if (scale.pairs) {
      md.push(`The goal again in pairs, as in "The targets, measured in pairs": ${opts.targetBlocks} blocks of four ${opts.duration} s runs, the ingress not being measured paused; the ${fmtInt(opts.workloads)}-workload ingress is the one with every workload deployed (the row above that probes them all).`, '');
      md.push(pairsMarkdown(scale.pairs), '');
      md.push(...pairsDetail(scale.pairs).map((d) => `- ${d}`), '');
    }
    md.push(...scale.notes.map((n) => `- ${n}`), '');
  }
  if (idle) {
    md.push(`## ${fmtInt(opts.idleConnections)} idle keep-alive connections`, '');
    md.push(`A Node script (bench/clients/idle.ts) opens ${opts.idleConnections} connections, makes one GET on each (50 at a time) and leaves them open; RSS of the proxy before, and the median of five readings in the 5 s after the last answer. One round (memory does not return to the baseline between rounds); Node's figures move with its garbage collector by a few MiB.`, '');
    md.push(idleMarkdown(idle), '');
  }
  if (soak) md.push(`## Soak at a fixed rate`, '', soakMarkdown(soak), '');
  if (profiles) {
    md.push('## Top costs', '');
    md.push(`CPU profiles (\`node --cpu-prof --cpu-prof-interval=500 bin/svcproxy.js …\`) of a fresh process under the HTTP table's load (wrk, ${opts.connections} connections), counting only the ${opts.duration} s measured run (start-up, warm-up and shutdown cut out). dist/ locations are mapped back to src/ through the source maps. The .cpuprofile files are in ${profileDir} (open them in Chrome DevTools); summarize one with \`node bench/dist/lib/profile.js FILE\`. \`writev\`, \`writeLatin1String\` and the other \"native: socket I/O\" entries are Node's C++ socket-write bindings: their time is the write system calls (on loopback a write also runs the receiving side's TCP path and wakes the reader).`, '');
    for (const p of profiles) {
      if (p.summary) {
        md.push(summaryMarkdown(p.summary, `${p.name} (${fmtInt(p.load?.rps)} req/s while profiled)`));
        if (p.cpuSeconds !== undefined) {
          const wall = p.summary.wallMs / 1000;
          const main = p.mainSeconds ?? 0;
          md.push(`Meanwhile (/proc) the main thread used ${main.toFixed(2)} s of CPU in the ${wall.toFixed(1)} s (${((main / Math.max(0.001, wall)) * 100).toFixed(0)}% of one core) and the whole process ${p.cpuSeconds.toFixed(2)} s (the rest: V8's GC helper threads and the sampler); other processes used ${p.foreign?.toFixed(2) ?? '?'} cores. The profile has ${(p.summary.busyMs / 1000).toFixed(2)} s of the main thread in JS or native frames; ${main > p.summary.busyMs / 1000 ? `the remaining ${(main - p.summary.busyMs / 1000).toFixed(2)} s of its CPU falls in what V8 files under (idle): libuv's poll phase, i.e. epoll_wait and the socket read system calls, which run outside any JS frame` : `that is more than the thread's CPU time: it was also waiting for a core (runnable, not running) while in those frames, so shares of wall time overstate CPU there`}.`, '');
        }
      } else md.push(`#### ${p.name}`, '', `n/a (${p.error ?? 'not run'})`, '');
    }
  }
  const na: string[] = [];
  for (const s of [...sections, ...(scale?.throughput ? [scale.throughput] : [])]) for (const r of s.rows) if (r.na) na.push(`${s.title} — ${r.name}: ${r.na}`);
  md.push('## What did not run', '');
  md.push(...[...skipped, ...na].map((x) => `- ${x}`), '');

  const file = flags.out ?? path.join(ROOT, 'bench', 'results', `${date}${only ? '-partial' : ''}.md`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, md.join('\n'));

  process.stdout.write(`\n# svcproxy bench, ${date} (${minutes} min)\n\n`);
  for (const s of sections) process.stdout.write(`## ${s.title}\n\n${sectionTable(s)}\n\n`);
  if (pairs) process.stdout.write(`## targets, in pairs\n\n${pairsMarkdown(pairs)}\n\n`);
  if (scale) process.stdout.write(`## ${opts.workloads} workloads\n\n${scaleMarkdown(scale)}\n\n${scale.throughput ? sectionTable(scale.throughput) : ''}\n\n`);
  if (scale?.pairs) process.stdout.write(`${pairsMarkdown(scale.pairs)}\n\n`);
  if (idle) process.stdout.write(`## idle connections\n\n${idleMarkdown(idle)}\n\n`);
  if (soak) process.stdout.write(`## soak\n\n${soakMarkdown(soak)}\n\n`);
  if (profiles) {
    for (const p of profiles) {
      process.stdout.write(`## top self time: ${p.name}\n\n`);
      if (p.summary) for (const l of p.summary.self.slice(0, 10)) process.stdout.write(`  ${(l.share * 100).toFixed(1).padStart(5)}%  ${l.name}  ${l.location}\n`);
      else process.stdout.write(`  n/a (${p.error ?? ''})\n`);
      process.stdout.write('\n');
    }
  }
  process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  if (!flags.keep) rmSync(workDir, { recursive: true, force: true });
  else process.stdout.write(`work folder kept: ${workDir}\n`);
  return 0;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`\n${signal}: stopping the bench's processes`);
    void stopAll().finally(() => process.exit(130));
  });
}
process.on('exit', () => killAllSync());

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    log(err instanceof Error ? err.stack ?? err.message : String(err));
    await stopAll();
    process.exit(1);
  },
);
