/**
 * The control plane at scale (issue 37, DESIGN §13): one `svcproxy up` with N workloads loaded from
 * files, each with a `deployment` record whose replica is the bench's one shared upstream (so nothing
 * runs N processes), its platform API at `--api`. Not a test: it measures, it asserts nothing.
 *
 *   npm run build && npx tsc -p bench/tsconfig.json
 *   node bench/dist/control-plane.js [--workloads 10000 --trials 6 --rate 200 --steady-seconds 10]
 *
 * Measured, interleaved in one run:
 *
 * - the whole workload list read through its pages, as `cpln workload get --max 0` reads it (and
 *   `cpln` itself once, when the devDependency is installed);
 * - one workload written through the API (`PATCH` of `spec.defaultOptions.suspend`) until its host
 *   name answers accordingly (suspended: no longer 200, then 200 again), against the same change to
 *   another workload made by editing its file (written to a temporary name and renamed over it; the
 *   watcher's quiet time included): each trial does both, in alternating order, and the ratio
 *   API / file is taken per trial;
 * - a fixed-rate load (bench/clients/paced.ts) on other workloads, alone (steady state) and while the
 *   trials run: failed requests (errors and non-200 answers) and p99 against the steady state's.
 *
 * Prints its table on stdout and appends it to bench/results/<date>-control-plane.md. The absolute
 * times move with the machine: the load average is recorded at the start and the end.
 */
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';
import { freePorts, httpRequest, killAllSync, runCommand, spawnProc, stopAll, waitUntil, type Proc } from './lib/proc.js';
import { fmtInt, fmtMs } from './lib/report.js';
import { median, percentiles } from './lib/stats.js';
import { CLI, GVC, ROOT, deployment, hostOf, scaleName, snapshotApp, workload, writeScaleConfig, writeYaml } from './lib/svc.js';
import { script } from './lib/fleet.js';

const HELP = `node bench/dist/control-plane.js [options]

One \`svcproxy up\` with N workloads from files and its platform API: the whole list read through its
pages (and \`cpln workload get --max 0\` once), one workload changed through the API against the same
change made by editing a file (interleaved trials), and a fixed-rate load on other workloads meanwhile.
Build first: npm run build && npx tsc -p bench/tsconfig.json

  --workloads N        workloads (each with a deployment at the shared upstream)   default 10000
  --trials N           trials, each one API change and one file change (both ways)  default 6
  --rate R             requests/s of the load on 8 other workloads                 default 200
  --steady-seconds S   seconds of that load alone, before the trials (steady state) default 10
  --list-rounds N      reads of the whole workload list                            default 3
  --out FILE           results file to append to (default bench/results/<date>-control-plane.md)
  --keep               keep the work folder (records, state, logs)
  --cpu-prof DIR       write a V8 CPU profile of \`up\` into DIR (node --cpu-prof; written when it stops)
  --help               this text
`;
interface ApiBenchOptions {
  readonly workloads: number;
  /** Trials of each kind of change (each trial: suspend, then resume). */
  readonly trials: number;
  /** Requests a second of the load on the other workloads. */
  readonly rate: number;
  readonly steadySeconds: number;
  /** Reads of the whole list. */
  readonly listRounds: number;
  readonly workDir: string;
  readonly logDir: string;
  readonly upstreamPort: number;
  /** Where `up` writes its CPU profile (node --cpu-prof), when given. */
  readonly cpuProfDir?: string;
  log(line: string): void;
}

interface Paced {
  sent: number;
  ok: number;
  non200: number;
  errors: number;
  firstError?: string;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  p999: number;
}

interface ApiBenchResult {
  workloads: number;
  loadBefore: number[];
  loadAfter?: number[];
  startMs?: number;
  list: { ms: number[]; items: number; pages: number };
  cpln?: { ms: number; items: number } | { error: string };
  apiAnswerMs: number[];
  apiEffectMs: number[];
  fileEffectMs: number[];
  /** Per trial: the API's two changes over the file's two. */
  ratios: number[];
  steady?: Paced;
  /** The load while API changes applied (from each PATCH until its host answered accordingly). */
  duringApi?: Paced & { statuses: Record<string, number> };
  /** The load while file changes applied (from each write of the file until its host answered). */
  duringFile?: Paced & { statuses: Record<string, number> };
  /** Requests the overload guard answered 503 `overloaded` during the trials (svcproxy_overload_shed_total). */
  shed?: number;
  error?: string;
}

const ORG = 'bench';
const API_TARGET_INDEX = 0.25;
const FILE_TARGET = 'wfile';
/** Polls of a host name while a change comes into force. */
const POLL_MS = 5;

const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
/** Children spawned outside lib/proc (the load, cpln), killed if the bench is stopped. */
const children = new Set<ReturnType<typeof spawn>>();

function track(child: ReturnType<typeof spawn>): void {
  children.add(child);
  child.once('exit', () => children.delete(child));
}

function request(port: number, opts: { method?: string; path: string; host?: string; headers?: http.OutgoingHttpHeaders; body?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, agent, method: opts.method ?? 'GET', path: opts.path, headers: { ...(opts.host ? { host: opts.host } : {}), ...opts.headers } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(opts.body);
  });
}

/** What a host answers once a change is in force: 200, or its own suspension (not another 503, such as `overloaded`). */
const SERVING = (r: { status: number }): boolean => r.status === 200;
const SUSPENDED = (r: { status: number; body: string }): boolean => r.status === 503 && r.body.includes('workload suspended');

/** Polls `host` until its answer is what `wanted` says; the time since `t0`. */
async function until(port: number, host: string, wanted: (r: { status: number; body: string }) => boolean, t0: number, timeoutMs = 120_000): Promise<number> {
  for (;;) {
    const r = await request(port, { path: '/', host }).catch(() => ({ status: 0, body: '' }));
    if (wanted(r)) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs) throw new Error(`${host} did not answer as wanted within ${timeoutMs / 1000} s (last ${r.status} ${r.body.slice(0, 80)})`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

function pacedChild(port: number, hosts: readonly string[], rate: number, seconds: number, samples?: string): { result: Promise<Paced>; stop(): void } {
  const child = spawn(process.execPath, [script('clients/paced.js'), String(port), hosts.join(','), String(rate), String(seconds), ...(samples ? [samples] : [])], { stdio: ['ignore', 'pipe', 'pipe'] });
  track(child);
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const result = new Promise<Paced>((resolve, reject) => {
    child.once('exit', (code) => {
      try {
        resolve(JSON.parse(out.trim().split('\n').pop() ?? '') as Paced);
      } catch {
        reject(new Error(`paced.js exited ${code}: ${err.trim().slice(-300)}`));
      }
    });
  });
  return { result, stop: () => child.kill('SIGTERM') };
}

/** The workload list read whole, page after page (`rel: next`), as `cpln workload get --max 0` reads it. */
async function readList(port: number, key: string): Promise<{ ms: number; items: number; pages: number }> {
  const t0 = performance.now();
  let items = 0;
  let pages = 0;
  for (let next: string | undefined = `/org/${ORG}/gvc/${GVC}/workload`; next !== undefined;) {
    const r = await request(port, { path: next, headers: { authorization: `Bearer ${key}` } });
    if (r.status !== 200) throw new Error(`GET ${next}: ${r.status} ${r.body.slice(0, 200)}`);
    const page = JSON.parse(r.body) as { items: unknown[]; links: { rel: string; href: string }[] };
    items += page.items.length;
    pages++;
    next = page.links.find((l) => l.rel === 'next')?.href;
  }
  return { ms: performance.now() - t0, items, pages };
}

/** `cpln workload get --max 0 -o json` (the platform CLI, a devDependency), timed from its start. */
async function cplnList(apiPort: number, key: string, home: string): Promise<{ ms: number; items: number } | { error: string }> {
  let main: string;
  try {
    main = path.join(path.dirname(createRequire(path.join(ROOT, 'package.json')).resolve('@controlplane/cli/package.json')), 'dist/src/cpln.js');
  } catch {
    return { error: '@controlplane/cli is not installed (npm ci installs it)' };
  }
  mkdirSync(home, { recursive: true });
  const env = { PATH: process.env.PATH, HOME: home, CPLN_HOME: home, CPLN_SKIP_UPDATE_CHECK: '1', CPLN_ENDPOINT: `http://127.0.0.1:${apiPort}`, CPLN_TOKEN: key, CPLN_ORG: ORG, CPLN_GVC: GVC };
  const t0 = performance.now();
  const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
    const child = spawn(process.execPath, [main, 'workload', 'get', '--max', '0', '-o', 'json'], { env, cwd: home });
    track(child);
    let o = '';
    let e = '';
    child.stdout.on('data', (d: Buffer) => (o += d.toString()));
    child.stderr.on('data', (d: Buffer) => (e += d.toString()));
    child.once('exit', (c) => resolve({ code: c, stdout: o, stderr: e }));
  });
  const ms = performance.now() - t0;
  if (code !== 0) return { error: `cpln exited ${code}: ${stderr.trim().slice(-200)}` };
  return { ms, items: (JSON.parse(stdout) as { items: unknown[] }).items.length };
}

function loadAverage(): number[] {
  return os.loadavg().map((x) => Math.round(x * 100) / 100);
}

async function runControlPlane(o: ApiBenchOptions): Promise<ApiBenchResult> {
  const res: ApiBenchResult = { workloads: o.workloads, loadBefore: loadAverage(), list: { ms: [], items: 0, pages: 0 }, apiAnswerMs: [], apiEffectMs: [], fileEffectMs: [], ratios: [] };
  const base = path.join(o.workDir, 'api-scale');
  const configDir = writeScaleConfig(path.join(base, 'config'), o.workloads, o.upstreamPort);
  const editFile = path.join(configDir, 'edit.yaml');
  const writeEdit = (suspend: boolean): void => {
    const w = workload(FILE_TARGET, GVC) as { spec: { defaultOptions: Record<string, unknown> } };
    w.spec.defaultOptions = { ...w.spec.defaultOptions, suspend };
    writeYaml(`${editFile}.tmp`, [w, deployment(FILE_TARGET, GVC, `127.0.0.1:${o.upstreamPort}`)]);
    renameSync(`${editFile}.tmp`, editFile);
  };
  writeEdit(false);
  const stateDir = path.join(base, 'state');
  mkdirSync(stateDir, { recursive: true });
  const [listen, admin, api, mesh] = await freePorts(4) as [number, number, number, number];
  const apiTarget = scaleName(Math.floor(o.workloads * API_TARGET_INDEX));
  const loadHosts = Array.from({ length: 8 }, (_, i) => hostOf(scaleName(Math.floor(((i + 0.5) * o.workloads) / 8))));
  const t0 = performance.now();
  const profile = o.cpuProfDir === undefined ? [] : ['--cpu-prof', '--cpu-prof-dir', path.resolve(o.cpuProfDir)];
  const up: Proc = spawnProc('up-control-plane', process.execPath, [
    ...profile, CLI, 'up', '--config', configDir, '--listen', `127.0.0.1:${listen}`, '--admin', `127.0.0.1:${admin}`,
    '--api', `127.0.0.1:${api}`, '--mesh', `127.0.0.1:${mesh}`, '--log-level', 'warn',
  ], { cwd: stateDir, logDir: o.logDir });
  try {
    await waitUntil(async () => (await httpRequest(admin, { path: '/ready', timeoutMs: 2000 }).catch(() => ({ status: 0 }))).status === 200, 600_000, 'up /ready', up, 250);
    for (const host of [hostOf(apiTarget), hostOf(FILE_TARGET), ...loadHosts]) await until(listen, host, SERVING, performance.now(), 120_000);
    res.startMs = performance.now() - t0;
    o.log(`  up with ${fmtInt(o.workloads)} workloads: routing in ${fmtMs(res.startMs)}`);
    const keyFile = path.join(stateDir, '.svcproxy', 'api-token');
    if (!existsSync(keyFile)) throw new Error(`no operator key at ${keyFile}`);
    const key = readFileSync(keyFile, 'utf8').trim();

    for (let i = 0; i < o.listRounds; i++) {
      const l = await readList(api, key);
      res.list.ms.push(l.ms);
      res.list.items = l.items;
      res.list.pages = l.pages;
      o.log(`  the list: ${fmtInt(l.items)} workloads in ${l.pages} pages, ${fmtMs(l.ms)}`);
    }
    res.cpln = await cplnList(api, key, path.join(base, 'cpln-home'));
    o.log(`  cpln workload get --max 0: ${'error' in res.cpln ? res.cpln.error : `${fmtInt(res.cpln.items)} workloads, ${fmtMs(res.cpln.ms)}`}`);

    res.steady = await pacedChild(listen, loadHosts, o.rate, o.steadySeconds).result;
    o.log(`  steady load: ${fmtInt(res.steady.ok)} ok, ${res.steady.non200 + res.steady.errors} failed, p99 ${fmtMs(res.steady.p99)}`);

    const patch = (suspend: boolean) => request(api, {
      method: 'PATCH',
      path: `/org/${ORG}/gvc/${GVC}/workload/${apiTarget}`,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ spec: { defaultOptions: { suspend } } }),
    });
    const apiWindows: [number, number][] = [];
    const fileWindows: [number, number][] = [];
    const viaApi = async (): Promise<number> => {
      let total = 0;
      for (const suspend of [true, false]) {
        const wall = Date.now();
        const start = performance.now();
        const r = await patch(suspend);
        if (r.status !== 200) throw new Error(`PATCH: ${r.status} ${r.body.slice(0, 300)}`);
        res.apiAnswerMs.push(performance.now() - start);
        const ms = await until(listen, hostOf(apiTarget), suspend ? SUSPENDED : SERVING, start);
        apiWindows.push([wall, Date.now()]);
        res.apiEffectMs.push(ms);
        total += ms;
      }
      return total;
    };
    const viaFile = async (): Promise<number> => {
      let total = 0;
      for (const suspend of [true, false]) {
        const wall = Date.now();
        const start = performance.now();
        writeEdit(suspend);
        const ms = await until(listen, hostOf(FILE_TARGET), suspend ? SUSPENDED : SERVING, start);
        fileWindows.push([wall, Date.now()]);
        res.fileEffectMs.push(ms);
        total += ms;
      }
      return total;
    };
    const shedBefore = await shedCount(admin);
    const samplesFile = path.join(base, 'load-samples.txt');
    const load = pacedChild(listen, loadHosts, o.rate, 3600, samplesFile);
    try {
      for (let i = 0; i < o.trials; i++) {
        let apiMs: number;
        let fileMs: number;
        if (i % 2 === 0) {
          apiMs = await viaApi();
          fileMs = await viaFile();
        } else {
          fileMs = await viaFile();
          apiMs = await viaApi();
        }
        res.ratios.push(apiMs / fileMs);
        o.log(`  trial ${i + 1}: API ${fmtMs(apiMs / 2)}, file ${fmtMs(fileMs / 2)} a change (ratio ${(apiMs / fileMs).toFixed(2)})`);
      }
    } finally {
      load.stop();
      await load.result;
    }
    res.shed = (await shedCount(admin)) - shedBefore;
    const samples = readSamples(samplesFile);
    res.duringApi = windowStats(samples, apiWindows);
    res.duringFile = windowStats(samples, fileWindows);
    for (const [name, w] of [['API', res.duringApi], ['file', res.duringFile]] as const) {
      o.log(`  load while ${name} changes applied: ${fmtInt(w.ok)} ok, ${w.non200 + w.errors} failed ${JSON.stringify(w.statuses)}, p99 ${fmtMs(w.p99)}`);
    }
  } catch (err) {
    res.error = err instanceof Error ? err.message : String(err);
    o.log(`  control plane: ${res.error}\n${up.tail(8)}`);
  } finally {
    await up.stop(10_000);
    res.loadAfter = loadAverage();
  }
  return res;
}

/** `svcproxy_overload_shed_total` from the admin listener's metrics. */
async function shedCount(admin: number): Promise<number> {
  const r = await httpRequest(admin, { path: '/metrics', timeoutMs: 30_000 });
  let n = 0;
  for (const m of r.body.toString().matchAll(/^svcproxy_overload_shed_total(?:\{[^}]*\})? (\S+)$/gm)) n += Number(m[1]);
  return n;
}

interface Sample {
  readonly at: number;
  readonly ms: number;
  readonly status: number;
}

function readSamples(file: string): Sample[] {
  return readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => {
    const [at, ms, status] = line.split(' ').map(Number) as [number, number, number];
    return { at, ms, status };
  });
}

/** The load's requests scheduled within any of `windows` (wall-clock ms): as paced.ts counts them, and the statuses of those that failed. */
function windowStats(samples: readonly Sample[], windows: readonly [number, number][]): Paced & { statuses: Record<string, number> } {
  const inside = samples.filter((s) => windows.some(([from, to]) => s.at >= from && s.at <= to));
  const ok = inside.filter((s) => s.status === 200).map((s) => s.ms);
  const statuses: Record<string, number> = {};
  for (const s of inside) if (s.status !== 200) statuses[s.status === 0 ? 'error' : String(s.status)] = (statuses[String(s.status === 0 ? 'error' : s.status)] ?? 0) + 1;
  const seconds = windows.reduce((n, [from, to]) => n + (to - from) / 1000, 0);
  const [p50 = 0, p99 = 0, p999 = 0] = ok.length > 0 ? percentiles(ok, [50, 99, 99.9]) : [];
  return {
    sent: inside.length, ok: ok.length, non200: inside.filter((s) => s.status !== 200 && s.status !== 0).length, errors: inside.filter((s) => s.status === 0).length,
    seconds, rps: seconds > 0 ? ok.length / seconds : 0, p50, p99, p999, statuses,
  };
}

function stats(xs: readonly number[]): string {
  if (xs.length === 0) return 'n/a | | |';
  return `${fmtMs(median(xs))} | ${fmtMs(Math.min(...xs))} | ${fmtMs(Math.max(...xs))} | ${xs.length}`;
}

function controlPlaneMarkdown(r: ApiBenchResult, o: Pick<ApiBenchOptions, 'rate' | 'steadySeconds' | 'trials'>): string {
  const n = fmtInt(r.workloads);
  const md: string[] = [];
  md.push(`One \`svcproxy up\` with ${n} workloads and ${n} \`deployment\` records (their replicas: the one shared upstream) from files; its platform API at \`--api\`. Load average (1, 5, 15 min) at the start ${r.loadBefore.join(', ')}, at the end ${r.loadAfter?.join(', ') ?? '?'}; on a shared machine the absolute times move with it, the ratios less.${r.startMs !== undefined ? ` \`up\` routed the first hosts ${fmtMs(r.startMs)} after its start.` : ''}`, '');
  if (r.error) md.push(`**Stopped early: ${r.error}**`, '');
  md.push('| measurement | median | min | max | n |', '|---|---:|---:|---:|---:|');
  md.push(`| the whole workload list, ${fmtInt(r.list.items)} in ${r.list.pages} pages (GET, \`rel: next\`) | ${stats(r.list.ms)} |`);
  if (r.cpln) md.push(`| \`cpln workload get --max 0 -o json\`, its start included | ${'error' in r.cpln ? `n/a (${r.cpln.error}) | | |` : `${fmtMs(r.cpln.ms)} | | | 1`} |`);
  md.push(`| API: \`PATCH\` of a workload's \`suspend\`, its answer | ${stats(r.apiAnswerMs)} |`);
  md.push(`| API: \`PATCH\` until its host name answers accordingly | ${stats(r.apiEffectMs)} |`);
  md.push(`| file: the same change written to its file, until its host name answers | ${stats(r.fileEffectMs)} |`);
  const ratio = median(r.ratios);
  md.push('', `API / file, per trial (${r.ratios.length} trials, alternating which goes first): median **${ratio === undefined ? 'n/a' : ratio.toFixed(2)}** (${r.ratios.map((x) => x.toFixed(2)).join(', ')}); the goal: at most 1.`, '');
  md.push(`A fixed-rate load on 8 other workloads (bench/clients/paced.ts, ${o.rate} requests/s, up to 64 keep-alive connections), alone for ${o.steadySeconds} s, then through the trials; of the latter, the requests scheduled while a change was applying (from the PATCH, or the file's write, until the host answered accordingly):`, '');
  md.push('| window | sent | ok | non-200 | errors | p50 | p99 | p99.9 |', '|---|---:|---:|---:|---:|---:|---:|---:|');
  for (const [name, p] of [['steady state', r.steady], ['while API changes applied', r.duringApi], ['while file changes applied', r.duringFile]] as const) {
    if (p) md.push(`| ${name} | ${fmtInt(p.sent)} | ${fmtInt(p.ok)} | ${p.non200} | ${p.errors} | ${fmtMs(p.p50)} | ${fmtMs(p.p99)} | ${fmtMs(p.p999)} |`);
  }
  if (r.shed !== undefined) md.push('', `The overload guard answered ${fmtInt(r.shed)} requests 503 \`overloaded\` during the trials (\`svcproxy_overload_shed_total\`: the event loop lagged over its 250 ms).`);
  if (r.steady && r.duringApi) {
    const failed = r.duringApi.non200 + r.duringApi.errors;
    md.push('', `While API changes applied: ${failed === 0 ? 'no failed request' : `**${failed} failed requests** (${Object.entries(r.duringApi.statuses).map(([k, n]) => `${n} × ${k}`).join(', ')})`}; p99 ${(r.duringApi.p99 / r.steady.p99).toFixed(2)}× the steady state's (the goal: no failed request, at most 2×).`);
  }
  return md.join('\n');
}

async function gitCommit(): Promise<string> {
  const git = async (args: string[]): Promise<string> => (await runCommand('git', args, { cwd: ROOT })).stdout.trim();
  const commit = (await git(['rev-parse', '--short', 'HEAD'])) || 'unknown';
  const dirty = (await git(['status', '--porcelain', '--', 'src'])).split('\n').filter(Boolean).length;
  return `${commit}${dirty ? ` + ${dirty} uncommitted change${dirty === 1 ? '' : 's'} under src/` : ''}`;
}

async function main(): Promise<number> {
  const { values: flags } = parseArgs({
    options: {
      workloads: { type: 'string', default: '10000' },
      trials: { type: 'string', default: '6' },
      rate: { type: 'string', default: '200' },
      'steady-seconds': { type: 'string', default: '10' },
      'list-rounds': { type: 'string', default: '3' },
      out: { type: 'string' },
      keep: { type: 'boolean', default: false },
      'cpu-prof': { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  if (flags.help) {
    process.stdout.write(HELP);
    return 0;
  }
  const num = (name: 'workloads' | 'trials' | 'rate' | 'steady-seconds' | 'list-rounds', min: number): number => {
    const n = Number(flags[name]);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number of at least ${min} (got ${flags[name]})`);
    return n;
  };
  const opts = {
    workloads: Math.floor(num('workloads', 16)), trials: Math.floor(num('trials', 1)), rate: num('rate', 1),
    steadySeconds: num('steady-seconds', 1), listRounds: Math.floor(num('list-rounds', 1)),
  };
  if (!existsSync(path.join(ROOT, 'dist', 'cli.js'))) {
    process.stderr.write('dist/cli.js is missing: run `npm run build` first.\n');
    return 1;
  }
  const log = (line: string): void => void process.stderr.write(`${line}\n`);
  const commit = await gitCommit();
  const started = new Date();
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'svcproxy-control-plane-bench-'));
  // A copy of the build: a rebuild of dist/ meanwhile cannot change the code under test.
  snapshotApp(path.join(workDir, 'app'));
  const logDir = path.join(workDir, 'logs');
  mkdirSync(logDir, { recursive: true });
  let result: ApiBenchResult;
  try {
    const [upstreamPort] = await freePorts(1) as [number];
    const upstream = spawnProc('upstream', process.execPath, [script('servers/upstream.js'), 'http', String(upstreamPort)], { logDir });
    await waitUntil(async () => (await httpRequest(upstreamPort, { path: '/', timeoutMs: 1000 }).catch(() => ({ status: 0 }))).status === 200, 20_000, 'the upstream', upstream);
    log(`== the control plane with ${fmtInt(opts.workloads)} workloads (work folder ${workDir})`);
    const cpuProfDir = flags['cpu-prof'];
    result = await runControlPlane({ ...opts, workDir, logDir, upstreamPort, log, ...(cpuProfDir === undefined ? {} : { cpuProfDir }) });
  } finally {
    await stopAll();
  }
  const heading = `# The control plane with ${fmtInt(opts.workloads)} workloads, ${started.toISOString().slice(0, 16).replace('T', ' ')} UTC`;
  const env = `svcproxy commit ${commit} (a copy of its dist/), Node ${process.version}, ${os.cpus().length} cores shared with other work; \`node bench/dist/control-plane.js --workloads ${opts.workloads} --trials ${opts.trials} --rate ${opts.rate} --steady-seconds ${opts.steadySeconds}\``;
  const md = `${heading}\n\n${env}\n\n${controlPlaneMarkdown(result, opts)}\n`;
  const file = flags.out ?? path.join(ROOT, 'bench', 'results', `${started.toISOString().slice(0, 10)}-control-plane.md`);
  mkdirSync(path.dirname(file), { recursive: true });
  appendFileSync(file, `${existsSync(file) ? '\n' : ''}${md}`);
  process.stdout.write(`${md}\nresults appended to ${path.relative(process.cwd(), file)}\n`);
  if (flags.keep) process.stdout.write(`work folder kept: ${workDir}\n`);
  else rmSync(workDir, { recursive: true, force: true });
  return result.error ? 1 : 0;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    void stopAll().finally(() => process.exit(130));
  });
}
process.on('exit', () => {
  killAllSync();
  for (const child of children) child.kill('SIGKILL');
});

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exit(1);
  },
);
