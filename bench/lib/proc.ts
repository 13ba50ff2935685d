/**
 * Processes for the bench: spawn a child with its output in a log file, wait for its port, stop it
 * by its own pid (SIGTERM, then SIGKILL), and read what the kernel says about it: CPU ticks
 * (utime + stime of /proc/PID/stat) and resident memory (VmRSS of /proc/PID/status), summed over
 * the process and its descendants (nginx's master + worker, HAProxy, a Node process).
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { TLSSocket } from 'node:tls';
import net from 'node:net';
import path from 'node:path';

export const CLK_TCK = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** The kernel's ephemeral range: outgoing connections take their local ports from it. */
function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (lo && hi) return [lo, hi];
  } catch {
    /* not Linux */
  }
  return [32768, 60999];
}

function tryBind(port: number): Promise<net.Server | undefined> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(undefined));
    server.listen(port, '127.0.0.1', () => resolve(server));
  });
}

/**
 * N distinct free ports below the ephemeral range. Ports are chosen up front (the svcproxy records
 * name them) and bound minutes later; a port inside the ephemeral range could meanwhile become the
 * local end of some outgoing connection (the 10k-workload ingress alone makes thousands a second),
 * and the listen would fail.
 */
export async function freePorts(n: number): Promise<number[]> {
  const [lo] = ephemeralRange();
  const floor = Math.max(1024, Math.min(20000, lo - 4000));
  const span = Math.max(n * 4, lo - floor - n);
  const servers: net.Server[] = [];
  const ports: number[] = [];
  let port = floor + Math.floor(Math.random() * Math.max(1, span - n * 2));
  for (let tries = 0; ports.length < n && tries < n * 50; tries++, port++) {
    if (port >= lo) port = floor;
    const server = await tryBind(port);
    if (!server) continue;
    servers.push(server);
    ports.push(port);
  }
  await Promise.all(servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  if (ports.length < n) throw new Error(`could not find ${n} free ports below ${lo}`);
  return ports;
}

export interface Proc {
  readonly name: string;
  readonly pid: number;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Resolves with the exit code (or signal) once the process is gone. */
  readonly exited: Promise<number | string>;
  exitedEarly(): boolean;
  /** The last lines the process wrote (stdout and stderr). */
  tail(lines?: number): string;
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<Proc>();

export interface SpawnOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  logDir: string;
}

export function spawnProc(name: string, command: string, args: readonly string[], opts: SpawnOptions): Proc {
  const logFile = path.join(opts.logDir, `${name.replace(/[^A-Za-z0-9._-]+/g, '_')}.log`);
  const fd = openSync(logFile, 'a');
  const child = spawn(command, [...args], {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    stdio: ['ignore', fd, fd],
    detached: false,
  });
  closeSync(fd);
  let done = false;
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, signal) => {
      done = true;
      running.delete(proc);
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', (err) => {
      done = true;
      running.delete(proc);
      resolve(`spawn error: ${err.message}`);
    });
  });
  const proc: Proc = {
    name,
    pid: child.pid ?? -1,
    child,
    logFile,
    exited,
    exitedEarly: () => done,
    tail: (lines = 12) => {
      try {
        return readFileSync(logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
      } catch {
        return '';
      }
    },
    stop: async (graceMs = 5000) => {
      if (done) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (!done) child.kill('SIGKILL');
      }, graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
  running.add(proc);
  return proc;
}

/** Stop every process this bench started (on exit or interrupt). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop(3000)));
}

export function killAllSync(): void {
  for (const p of running) {
    try {
      p.child.kill('SIGKILL');
    } catch {
      /* already gone */
    }
  }
}

export async function waitUntil(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string, proc?: Proc, intervalMs = 25): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc?.exitedEarly()) throw new Error(`${proc.name} exited: ${proc.tail(6)}`);
    try {
      if (await check()) return;
    } catch {
      /* not yet */
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${proc ? `; ${proc.name} says: ${proc.tail(6)}` : ''}`);
    await sleep(intervalMs);
  }
}

export function canConnect(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, host);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

export interface SimpleResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** Over TLS (`tls: true`): the protocol negotiated, e.g. TLSv1.3, and the cipher suite (its standard name). */
  tlsProtocol?: string;
  tlsCipher?: string;
}

/** One HTTP/1.1 request on a fresh connection; over TLS with `tls` (the certificate is not checked). */
export function httpRequest(port: number, opts: { path?: string; host?: string; method?: string; headers?: http.OutgoingHttpHeaders; body?: Buffer | string; timeoutMs?: number; tls?: boolean } = {}): Promise<SimpleResponse> {
  return new Promise((resolve, reject) => {
    const req = (opts.tls ? https : http).request(
      {
        ...(opts.tls ? { rejectUnauthorized: false } : {}),
        host: '127.0.0.1',
        port,
        path: opts.path ?? '/',
        method: opts.method ?? 'GET',
        headers: { ...(opts.host ? { host: opts.host } : {}), ...opts.headers },
        agent: false,
        timeout: opts.timeoutMs ?? 3000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        const tlsProtocol = opts.tls ? (res.socket as TLSSocket).getProtocol() ?? undefined : undefined;
        const tlsCipher = opts.tls ? (res.socket as TLSSocket).getCipher().standardName : undefined;
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString('utf8'), ...(tlsProtocol ? { tlsProtocol } : {}), ...(tlsCipher ? { tlsCipher } : {}) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end(opts.body);
  });
}

// ---- /proc ---------------------------------------------------------------------------------------

function readStat(pid: number | 'self'): { ppid: number; ticks: number; childTicks: number } | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // comm may hold spaces and parentheses: fields start after the last ')'.
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15, cutime 16, cstime 17.
    return { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]), childTicks: Number(rest[13]) + Number(rest[14]) };
  } catch {
    return undefined;
  }
}

/** The pids and every descendant of them. */
export function processTree(roots: readonly number[]): number[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const st = readStat(Number(entry));
    if (!st) continue;
    const list = children.get(st.ppid) ?? [];
    list.push(Number(entry));
    children.set(st.ppid, list);
  }
  const out: number[] = [];
  const queue = [...roots];
  while (queue.length) {
    const pid = queue.shift()!;
    if (out.includes(pid)) continue;
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

/** utime + stime, in clock ticks, summed over these pids. */
export function cpuTicks(pids: readonly number[]): number {
  let sum = 0;
  for (const pid of pids) sum += readStat(pid)?.ticks ?? 0;
  return sum;
}

/** Busy ticks of the whole machine (every CPU), from /proc/stat. */
function machineBusyTicks(): number {
  try {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    // user nice system idle iowait irq softirq steal
    return f[0]! + f[1]! + f[2]! + f[5]! + f[6]! + (f[7] ?? 0);
  } catch {
    return 0;
  }
}

/** Ticks used by this process and everything it started (alive, or exited and reaped). */
function benchTicks(): number {
  let sum = 0;
  for (const pid of processTree([process.pid])) {
    const st = readStat(pid);
    if (st) sum += st.ticks + st.childTicks;
  }
  return sum;
}

/**
 * CPU used on this machine by processes that are not the bench's (other users' builds and tests):
 * machine busy time minus the bench's own tree, in cores (1.0 = one core busy the whole time).
 */
export class ForeignCpu {
  private busy = machineBusyTicks();
  private mine = benchTicks();
  private at = performance.now();

  /** Cores of foreign CPU since the last read (or construction); restarts the window. */
  read(): number {
    const busy = machineBusyTicks();
    const mine = benchTicks();
    const at = performance.now();
    const cores = Math.max(0, (busy - this.busy - (mine - this.mine)) / CLK_TCK / Math.max(0.001, (at - this.at) / 1000));
    this.busy = busy;
    this.mine = mine;
    this.at = at;
    return cores;
  }
}

/**
 * Wait (up to `maxMs`) for a window of `windowMs` in which other processes used less than
 * `threshold` cores; returns the last window's reading.
 */
export async function waitQuiet(threshold: number, maxMs: number, windowMs = 500): Promise<{ cores: number; waitedMs: number }> {
  const started = performance.now();
  for (;;) {
    const f = new ForeignCpu();
    await sleep(windowMs);
    const cores = f.read();
    const waitedMs = performance.now() - started;
    if (cores < threshold || waitedMs >= maxMs) return { cores, waitedMs };
  }
}

function statusField(pid: number, field: string): number {
  try {
    const text = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Resident set size in bytes, summed over these pids. */
export function rssBytes(pids: readonly number[]): number {
  let sum = 0;
  for (const pid of pids) sum += statusField(pid, 'VmRSS');
  return sum;
}

/** Samples the summed RSS of a set of pids every `everyMs` until stopped; reports the peak. */
export class RssSampler {
  private timer: NodeJS.Timeout | undefined;
  peak = 0;
  readonly samples: { t: number; rss: number }[] = [];

  constructor(private readonly pids: readonly number[], everyMs = 100, keep = false) {
    const sample = (): void => {
      const rss = rssBytes(this.pids);
      if (rss > this.peak) this.peak = rss;
      if (keep) this.samples.push({ t: Date.now(), rss });
    };
    sample();
    this.timer = setInterval(sample, everyMs);
  }

  stop(): number {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    const rss = rssBytes(this.pids);
    if (rss > this.peak) this.peak = rss;
    return this.peak;
  }
}

/** Run a command to completion; stdout, stderr, exit code and wall time. */
export function runCommand(command: string, args: readonly string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {}): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(command, [...args], { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (c: Buffer) => out.push(c));
    child.stderr.on('data', (c: Buffer) => err.push(c));
    const timer = opts.timeoutMs ? setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs) : undefined;
    child.once('error', (e) => {
      if (timer) clearTimeout(timer);
      resolve({ code: -1, stdout: '', stderr: e.message, ms: performance.now() - started });
    });
    child.once('close', (code) => {
      if (timer) clearTimeout(timer);
      resolve({ code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), ms: performance.now() - started });
    });
  });
}

export function commandExists(name: string): string | undefined {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** One HTTP/2 (h2c, prior knowledge) GET; the status. */
export async function h2Get(port: number, authority?: string): Promise<number> {
  const http2 = await import('node:http2');
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const req = session.request({ ':path': '/', ...(authority ? { ':authority': authority } : {}) });
    req.setTimeout(3000, () => req.close());
    req.on('response', (headers) => {
      req.resume();
      req.on('end', () => {
        session.close();
        resolve(Number(headers[':status']));
      });
    });
    req.on('error', (err) => {
      session.destroy();
      reject(err);
    });
    req.end();
  });
}

/** utime + stime, in clock ticks, of one thread (the main thread of a process has tid = pid). */
export function threadTicks(pid: number, tid = pid): number {
  try {
    const text = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return Number(rest[11]) + Number(rest[12]);
  } catch {
    return 0;
  }
}
