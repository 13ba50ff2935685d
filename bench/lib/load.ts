/**
 * Load generators, each an external process, each result reduced to one `Load`: requests completed,
 * seconds, requests/s, p50 and p99 latency (ms), and what went wrong (non-2xx answers, socket errors).
 *
 * - wrk (HTTP/1.1): `wrk -t1 -cN -dTs --latency`, a Lua script for request bodies;
 * - h2load (HTTP/2 over h2c, prior knowledge): `h2load -t1 -cN -mM -D T --log-file` (the per-request
 *   log gives the percentiles, which h2load does not print);
 * - the Node clients of bench/clients (gRPC, WebSocket), which print one JSON line.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCommand } from './proc.js';
import { percentileSorted } from './stats.js';

export interface Load {
  requests: number;
  seconds: number;
  rps: number;
  p50: number;
  p99: number;
  /** Answers that were not 2xx (wrk counts 3xx as fine too). */
  non2xx: number;
  /** Socket errors, failed streams or calls. */
  errors: number;
  /** What the generator said about its errors, for the report. */
  errorText?: string;
}

const UNIT_MS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000 };

function toMs(value: string, unit: string): number {
  return Number(value) * (UNIT_MS[unit] ?? NaN);
}

export function parseWrk(out: string): Load {
  const reqs = /(\d+) requests in ([\d.]+)(us|ms|s|m)\b/.exec(out);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const p = (q: string): number => {
    const m = new RegExp(`^\\s+${q}%\\s+([\\d.]+)(us|ms|s|m)\\s*$`, 'm').exec(out);
    return m ? toMs(m[1]!, m[2]!) : NaN;
  };
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = sock ? Number(sock[1]) + Number(sock[2]) + Number(sock[3]) + Number(sock[4]) : 0;
  if (!reqs || !rps) throw new Error(`cannot read wrk output: ${out.trim().slice(0, 400)}`);
  return {
    requests: Number(reqs[1]),
    seconds: toMs(reqs[2]!, reqs[3]!) / 1000,
    rps: Number(rps[1]),
    p50: p('50'),
    p99: p('99'),
    non2xx,
    errors,
    ...(sock ? { errorText: sock[0] } : {}),
  };
}

export interface WrkOptions {
  url: string;
  connections: number;
  seconds: number;
  host?: string;
  /** Other request fields, `Name: value` each (`Connection: close`: a new connection per request). */
  headers?: string[];
  /** A Lua script (request method/body). */
  script?: string;
  timeoutSeconds?: number;
}

export async function wrk(opts: WrkOptions): Promise<Load> {
  const args = ['-t1', `-c${opts.connections}`, `-d${opts.seconds}s`, '--latency', `--timeout`, `${opts.timeoutSeconds ?? 10}s`];
  if (opts.host) args.push('-H', `Host: ${opts.host}`);
  for (const h of opts.headers ?? []) args.push('-H', h);
  if (opts.script) args.push('-s', opts.script);
  args.push(opts.url);
  const r = await runCommand('wrk', args, { timeoutMs: (opts.seconds + 30) * 1000 });
  if (r.code !== 0) throw new Error(`wrk exited ${r.code}: ${(r.stderr || r.stdout).trim().slice(0, 300)}`);
  return parseWrk(r.stdout);
}

/** A Lua script for wrk that POSTs a body of `bytes` bytes. */
export function postScript(dir: string, bytes: number): string {
  const file = path.join(dir, `post-${bytes}.lua`);
  writeFileSync(file, `wrk.method = "POST"\nwrk.body = string.rep("x", ${bytes})\nwrk.headers["Content-Type"] = "application/octet-stream"\n`);
  return file;
}

export interface H2loadOptions {
  url: string;
  clients: number;
  streams: number;
  seconds: number;
  authority?: string;
  /** Keep the per-request log for percentiles (false for warm-ups). */
  percentiles?: boolean;
}

export async function h2load(opts: H2loadOptions): Promise<Load> {
  const dir = mkdtempSync(path.join(tmpdir(), 'bench-h2load-'));
  const log = path.join(dir, 'requests.log');
  try {
    const args = ['-t1', `-c${opts.clients}`, `-m${opts.streams}`, '-D', String(opts.seconds)];
    if (opts.authority) args.push('-H', `:authority: ${opts.authority}`);
    if (opts.percentiles !== false) args.push(`--log-file=${log}`);
    args.push(opts.url);
    const r = await runCommand('h2load', args, { timeoutMs: (opts.seconds + 30) * 1000 });
    const out = r.stdout;
    const finished = /finished in ([\d.]+)(us|ms|s|m), ([\d.]+) req\/s/.exec(out);
    const requests = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
    const codes = /status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/.exec(out);
    if (r.code !== 0 || !finished || !requests || !codes) throw new Error(`h2load exited ${r.code}: ${(r.stderr + r.stdout).trim().slice(0, 400)}`);
    let p50 = NaN;
    let p99 = NaN;
    if (opts.percentiles !== false) {
      const durations = readFileSync(log, 'utf8')
        .split('\n')
        .filter(Boolean)
        .map((line) => Number(line.split('\t')[2]) / 1000);
      const sorted = Float64Array.from(durations).sort();
      p50 = percentileSorted(sorted, 50);
      p99 = percentileSorted(sorted, 99);
    }
    const seconds = toMs(finished[1]!, finished[2]!) / 1000;
    const succeeded = Number(requests[4]);
    const failed = Number(requests[5]) + Number(requests[6]) + Number(requests[7]);
    return {
      requests: Number(codes[1]),
      seconds,
      rps: Number(codes[1]) / seconds,
      p50,
      p99,
      non2xx: Number(codes[2]) + Number(codes[3]) + Number(codes[4]),
      errors: failed,
      ...(failed ? { errorText: `${failed} failed of ${succeeded + failed}` } : {}),
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A bench/clients script that prints one JSON line with requests, seconds, rps, p50, p99, errors. */
export async function nodeClient(script: string, args: readonly (string | number)[], seconds: number): Promise<Load> {
  const r = await runCommand(process.execPath, [script, ...args.map(String)], { timeoutMs: (seconds + 30) * 1000 });
  const line = r.stdout.trim().split('\n').pop() ?? '';
  let j: { requests: number; seconds: number; rps: number; p50: number; p99: number; errors: number; firstError?: string };
  try {
    j = JSON.parse(line) as typeof j;
  } catch {
    throw new Error(`${path.basename(script)} exited ${r.code}: ${(r.stderr || r.stdout).trim().split('\n').slice(-3).join(' ').slice(0, 300)}`);
  }
  return {
    requests: j.requests,
    seconds: j.seconds,
    rps: j.rps,
    p50: j.p50,
    p99: j.p99,
    non2xx: 0,
    errors: j.errors,
    ...(j.errors ? { errorText: `${j.errors} errors, first: ${j.firstError ?? ''}` } : {}),
  };
}
