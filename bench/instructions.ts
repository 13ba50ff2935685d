/**
 * Instructions a request through the untagged sidecar, counted by cachegrind: unlike time, the count
 * does not move with the machine's load, so two builds can be compared on a noisy machine.
 *
 *   npm run build && npx tsc -p bench/tsconfig.json
 *   node bench/dist/instructions.js [--root DIR]... [--warmup 5000] [--requests 15000] [--h2] [--tagged]
 *
 * `--h2`: the clients speak h2c (prior knowledge), 10 connections × 10 concurrent streams, as the
 * HTTP/2 table's load (the sidecar's HTTP/2 listener path: the same session and stream handling as
 * the ingress's); without it, HTTP/1.1 over 50 connections. `--tagged`: the sidecar of the workload
 * with ext auth (gRPC) and rate limiting (`guarded`, the pairs' tagged row), its auth server and
 * rate-limit service started beside it, unmeasured.
 *
 * Each `--root` (a checkout with dist/ built; default: this one) runs a sidecar under
 * `valgrind --tool=cachegrind --cache-sim=no`, with V8's background threads off (`--single-threaded`,
 * which makes the count repeatable) and load shedding off (valgrind runs ~70× slower), twice: h2load
 * sends `warmup` requests over 50 connections to one process and `warmup + requests` to the other;
 * the difference of their totals over `requests` is the count a request once the code is warm. The
 * roots run side by side, so give at most two on a 2-core machine, and nothing else should run: a
 * busy machine changes how many requests each event-loop turn handles, and with it the count. Only
 * user space is counted (the kernel's system calls are not). Needs valgrind and h2load.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Fleet } from './lib/fleet.js';
import { commandExists, freePorts, httpRequest, runCommand, waitUntil } from './lib/proc.js';
import { GVC, ROOT, sidecarArgs } from './lib/svc.js';

const { values: flags } = parseArgs({
  options: {
    root: { type: 'string', multiple: true },
    warmup: { type: 'string', default: '5000' },
    requests: { type: 'string', default: '15000' },
    h2: { type: 'boolean', default: false },
    tagged: { type: 'boolean', default: false },
  },
});
const roots = (flags.root ?? [ROOT]).map((r) => path.resolve(r));
const warmup = Number(flags.warmup);
const requests = Number(flags.requests);
const workload = flags.tagged ? 'guarded' : 'plain';
const client = flags.h2 ? ['-c', '10', '-m', '10'] : ['--h1', '-c', '50'];
for (const tool of ['valgrind', 'h2load']) {
  if (!commandExists(tool)) {
    process.stderr.write(`${tool} is needed (apt-get install -y ${tool === 'h2load' ? 'nghttp2-client' : tool})\n`);
    process.exit(1);
  }
}

/** Total instructions of a sidecar process from `root` that answered `n` requests. */
async function count(root: string, records: string, app: string, n: number): Promise<number> {
  const [port, admin] = await freePorts(2);
  const args = [
    '--tool=cachegrind', '--cache-sim=no', '--cachegrind-out-file=/dev/null',
    process.execPath, '--single-threaded', path.join(root, 'bin', 'svcproxy.js'), 'sidecar',
    ...sidecarArgs([records], workload, app, GVC),
    '--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${admin}`, '--log-level', 'warn', '--max-event-loop-delay', '0',
  ];
  const child = spawn('valgrind', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    await waitUntil(async () => (await httpRequest(admin!, { path: '/ready', timeoutMs: 5000 })).status === 200, 180_000, `${root} under valgrind /ready`);
    const load = await runCommand('h2load', [...client, '-n', String(n), `http://127.0.0.1:${port}/`], { timeoutMs: 1_800_000 });
    const done = /(\d+) succeeded/.exec(load.stdout);
    if (Number(done?.[1]) !== n) throw new Error(`h2load: not every request succeeded:\n${load.stdout.slice(-600)}`);
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
  const refs = /I\s+refs:\s+([\d,]+)/.exec(stderr);
  if (!refs) throw new Error(`no instruction count from valgrind:\n${stderr.slice(-600)}`);
  return Number(refs[1]!.replace(/,/g, ''));
}

const work = mkdtempSync(path.join(os.tmpdir(), 'svcproxy-instructions-'));
const fleet = await Fleet.create(work, {}, 10);
try {
  const up = await fleet.get('up-http');
  const app = `127.0.0.1:${up.port}`;
  if (flags.tagged) await Promise.all([fleet.get('authz'), fleet.get('ratelimit')]);
  const rows = await Promise.all(
    roots.map(async (root) => {
      const before = await count(root, fleet.config.records, app, warmup);
      const after = await count(root, fleet.config.records, app, warmup + requests);
      return { root, perRequest: Math.round((after - before) / requests) };
    }),
  );
  const what = `${flags.tagged ? 'ext auth + rate limit' : 'untagged'} sidecar, ${flags.h2 ? 'h2c' : 'HTTP/1.1'}`;
  for (const r of rows) process.stdout.write(`${r.perRequest.toLocaleString('en-US')} instructions a request (${what})  ${r.root}\n`);
} finally {
  await fleet.stopAll();
  rmSync(work, { recursive: true, force: true });
}
