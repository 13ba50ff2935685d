/**
 * Instructions a request through the untagged sidecar, counted by cachegrind: unlike time, the count
 * does not move with the machine's load, so two builds can be compared on a noisy machine.
 *
 *   npm run build && npx tsc -p bench/tsconfig.json
 *   node bench/dist/instructions.js [--root DIR]... [--warmup 5000] [--requests 15000] [--path P]
 *
 * `--path` chooses the process counted and the load (bench/README.md): `plain` (default) the
 * untagged sidecar over cleartext HTTP/1.1; `h2` the same sidecar's HTTP/2 listener path, h2c
 * (prior knowledge) over 10 connections × 10 concurrent streams as the HTTP/2 table's load (the same
 * session and stream handling as the ingress's); `tagged` the sidecar of the workload with ext auth
 * (gRPC) and rate limiting (`guarded`, the pairs' tagged row), its auth server and rate-limit service
 * started beside it, unmeasured; `http-ingress` the ingress's plaintext listener (the same
 * process as the next); `https-ingress` the ingress's TLS listener (`--listen-tls`,
 * HTTP/1.1 over TLS 1.3, keep-alive); `https-close` the same with `Connection: close` on every
 * request (a TCP connection and a full handshake each); `mtls-hop` the caller sidecar of the mesh hop
 * (its outbound listener in cleartext, the target's mTLS listener upstream; the target sidecar runs
 * outside valgrind) and `plain-hop` its plaintext twin (the caller without mesh credentials, the
 * target's plain listener upstream: the mesh bench's control); `mtls-target` the target sidecar of
 * the mesh hop (its mTLS listener, `--mesh-inbound`, loaded by a caller sidecar of this checkout
 * outside valgrind) and `plain-target` its plaintext twin (the same sidecar without mesh
 * credentials, its plain listener loaded by the plaintext caller).
 *
 * Each `--root` (a checkout with dist/ built; default: this one) runs a sidecar under
 * `valgrind --tool=cachegrind --cache-sim=no`, with V8's background threads off (`--single-threaded`,
 * which makes the count repeatable) and load shedding off (valgrind runs ~70× slower), twice: h2load
 * sends `warmup` requests over 50 connections to one process and `warmup + requests` to the other;
 * the difference of their totals over `requests` is the count a request once the code is warm. The
 * roots run side by side, so give at most two on a 2-core machine, and nothing else should run: a
 * busy machine changes how many requests each event-loop turn handles, and with it the count. Only
 * user space is counted (the kernel's system calls are not). Needs valgrind and h2load. `--keep DIR`
 * keeps cachegrind's output of each process (`PATH-ROOT-N.cgout`): `cg_diff` of a root's two files
 * over `requests`, then `cg_annotate`, splits the count by function (OpenSSL, Node's C++, V8's
 * builtins and collector; the JIT-compiled JavaScript is one unnamed entry).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Fleet } from './lib/fleet.js';
import { CALLER, internalHost, meshArgs, writeTargetDeployments } from './lib/mesh.js';
import { commandExists, freePorts, httpRequest, runCommand, waitUntil } from './lib/proc.js';
import { GVC, ROOT, hostOf, ingressArgs, launchSvc, sidecarArgs } from './lib/svc.js';

const PATHS = ['plain', 'h2', 'tagged', 'http-ingress', 'https-ingress', 'https-close', 'mtls-hop', 'plain-hop', 'mtls-target', 'plain-target'] as const;
type PathName = (typeof PATHS)[number];

const { values: flags } = parseArgs({
  options: {
    root: { type: 'string', multiple: true },
    warmup: { type: 'string', default: '5000' },
    requests: { type: 'string', default: '15000' },
    path: { type: 'string', default: 'plain' },
    // Keep cachegrind's output files here (one a process counted) for cg_diff and cg_annotate.
    keep: { type: 'string' },
  },
});
if (!(PATHS as readonly string[]).includes(flags.path!)) {
  process.stderr.write(`--path must be one of ${PATHS.join(', ')}\n`);
  process.exit(2);
}
const which = flags.path as PathName;
const roots = (flags.root ?? [ROOT]).map((r) => path.resolve(r));
const warmup = Number(flags.warmup);
const requests = Number(flags.requests);
for (const tool of ['valgrind', 'h2load']) {
  if (!commandExists(tool)) {
    process.stderr.write(`${tool} is needed (apt-get install -y ${tool === 'h2load' ? 'nghttp2-client' : tool})\n`);
    process.exit(1);
  }
}

/** What is counted: the svcproxy command line (after `bin/svcproxy.js`) and where h2load sends its load. */
interface Counted {
  args: string[];
  admin: number;
  url: string;
  /** h2load's extra fields (`:authority`, which it sends as Host over HTTP/1.1; `connection`). */
  fields: string[];
  /** h2load's connections (default 50). */
  clients?: number;
  /** h2c with this many concurrent streams a connection, instead of HTTP/1.1. */
  streams?: number;
  /**
   * A process outside valgrind that h2load talks to instead (the caller sidecar of a counted
   * target), started once the counted process is ready; `url` is then unused.
   */
  loader?: () => Promise<{ url: string; stop(): Promise<void> }>;
}

/** The process `--path` counts, on fresh ports (two roots run side by side). */
async function counted(fleet: Fleet, app: string): Promise<Counted> {
  // `inbound`: a mesh caller's own mTLS listener (its default, 127.0.0.1:15008, is one port for every
  // caller on the machine: two roots side by side, or another bench, would collide on it).
  const [port, admin, secure, inbound] = await freePorts(4);
  const common = ['--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${admin}`, '--log-level', 'warn', '--max-event-loop-delay', '0'];
  switch (which) {
    case 'plain':
    case 'h2':
    case 'tagged':
      return {
        args: ['sidecar', ...sidecarArgs([fleet.config.records], which === 'tagged' ? 'guarded' : 'plain', app, GVC), ...common],
        admin: admin!,
        url: `http://127.0.0.1:${port}/`,
        fields: [],
        ...(which === 'h2' ? { clients: 10, streams: 10 } : {}),
      };
    case 'http-ingress':
    case 'https-ingress':
    case 'https-close': {
      // The same ingress process with its TLS listener; http-ingress loads its plaintext one.
      const { cert, key } = fleet.serverCert();
      return {
        args: ['ingress', ...ingressArgs([fleet.config.records, fleet.config.deployments]), '--listen-tls', `127.0.0.1:${secure}`, '--tls-cert', cert, '--tls-key', key, ...common],
        admin: admin!,
        url: which === 'http-ingress' ? `http://127.0.0.1:${port}/` : `https://127.0.0.1:${secure}/`,
        fields: [':authority: ' + hostOf('api'), ...(which === 'https-close' ? ['connection: close'] : [])],
      };
    }
    case 'mtls-hop': {
      // The caller's own arguments, its outbound (`--mesh`) listener moved to a port of its own.
      const launch = await fleet.meshLaunch('sc-mcall');
      const args = [...launch.args];
      args[args.indexOf('--mesh') + 1] = `127.0.0.1:${secure}`;
      args.push('--mesh-inbound', `127.0.0.1:${inbound}`);
      // 10 connections, not 50: each needs a pooled mTLS connection, and 50 handshakes at once under
      // valgrind outlast the pool's 10 s connect timeout.
      return { args: [launch.role, ...args, ...common], admin: admin!, url: `http://127.0.0.1:${secure}/`, fields: [':authority: ' + internalHost()], clients: 10 };
    }
    case 'plain-hop': {
      // The plaintext control's caller, its outbound listener on a port of its own.
      const launch = await fleet.meshLaunch('sc-pcall');
      const args = [...launch.args];
      args[args.indexOf('--mesh') + 1] = `127.0.0.1:${secure}`;
      return { args: [launch.role, ...args, ...common], admin: admin!, url: `http://127.0.0.1:${secure}/`, fields: [':authority: ' + internalHost()], clients: 10 };
    }
    case 'mtls-target':
    case 'plain-target': {
      // The target sidecar counted, on fresh ports (its mTLS listener on `secure`), and a caller of
      // its own outside valgrind whose deployment folder names that listener.
      const mtls = which === 'mtls-target';
      const launch = await fleet.meshLaunch(mtls ? 'sc-mtarget' : 'sc-ptarget');
      const args = [...launch.args];
      if (mtls) args[args.indexOf('--mesh-inbound') + 1] = `127.0.0.1:${secure}`;
      const loader = async (): Promise<{ url: string; stop(): Promise<void> }> => {
        const [callerPort, callerAdmin, out, callerInbound] = await freePorts(4);
        const deployments = writeTargetDeployments(mkdtempSync(path.join(work, 'target-')), app, mtls ? { mesh: `127.0.0.1:${secure}` } : { sidecar: `127.0.0.1:${port}` });
        const callerArgs = [
          ...sidecarArgs([fleet.mesh.records, deployments], CALLER, app, GVC),
          ...(mtls ? [...meshArgs((await fleet.meshFiles()).caller), '--mesh-inbound', `127.0.0.1:${callerInbound}`] : []), '--mesh', `127.0.0.1:${out}`,
        ];
        const caller = launchSvc({ name: `caller-${callerPort}`, role: 'sidecar', args: callerArgs, port: callerPort!, adminPort: callerAdmin!, logDir: fleet.logDir });
        // The caller's first answers wait for its first check of the target under valgrind.
        await waitUntil(async () => (await httpRequest(out!, { host: internalHost(), timeoutMs: 30_000 })).status === 200, 600_000, `caller → ${which} answering 200`, caller.proc, 500);
        return { url: `http://127.0.0.1:${out}/`, stop: () => caller.proc.stop() };
      };
      return { args: [launch.role, ...args, ...common], admin: admin!, url: '', fields: [':authority: ' + internalHost()], clients: 10, loader };
    }
  }
}

/** Total instructions of a process from `root` that answered `n` requests. */
async function count(root: string, fleet: Fleet, app: string, n: number): Promise<number> {
  const what = await counted(fleet, app);
  const out = flags.keep === undefined ? '/dev/null' : path.join(path.resolve(flags.keep), `${which}-${path.basename(root)}-${n}.cgout`);
  const args = [
    '--tool=cachegrind', '--cache-sim=no', `--cachegrind-out-file=${out}`,
    process.execPath, '--single-threaded', path.join(root, 'bin', 'svcproxy.js'), ...what.args,
  ];
  const child = spawn('valgrind', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    // A process that exits first (a port taken meanwhile by another run) fails the count at once.
    const died = exited.then(() => Promise.reject(new Error(`${root} under valgrind exited before /ready:\n${stderr.slice(-600)}`)));
    died.catch(() => undefined);
    await Promise.race([waitUntil(async () => (await httpRequest(what.admin, { path: '/ready', timeoutMs: 5000 })).status === 200, 600_000, `${root} under valgrind /ready`), died]);
    const loader = what.loader ? await Promise.race([what.loader(), died]) : undefined;
    const protocol = what.streams ? ['-m', String(what.streams)] : ['--h1'];
    const url = loader?.url ?? what.url;
    const load = await runCommand('h2load', [...protocol, '-n', String(n), '-c', String(what.clients ?? 50), ...what.fields.flatMap((f) => ['-H', f]), url], { timeoutMs: 3_600_000 }).finally(() => loader?.stop());
    // Every request answered; a few 5xx are let through (at most 1%: under valgrind the mesh hop's
    // readiness probes of its target can time out), since an error answer is still a request served.
    const done = /(\d+) done, (\d+) succeeded/.exec(load.stdout);
    if (Number(done?.[1]) !== n || Number(done?.[2]) < n * 0.99) throw new Error(`h2load: not every request succeeded:\n${load.stdout.slice(-600)}`);
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
  // The mesh hop's target sidecar runs outside valgrind, shared by the roots' callers.
  if (which === 'mtls-hop') await fleet.get('sc-mtarget');
  if (which === 'plain-hop') await fleet.get('sc-ptarget');
  if (which === 'tagged') await Promise.all([fleet.get('authz'), fleet.get('ratelimit')]);
  if (which.includes('ingress') || which === 'https-close') await fleet.get('up-grpc');
  const rows = await Promise.all(
    roots.map(async (root) => {
      const before = await count(root, fleet, app, warmup);
      const after = await count(root, fleet, app, warmup + requests);
      return { root, perRequest: Math.round((after - before) / requests) };
    }),
  );
  for (const r of rows) process.stdout.write(`${r.perRequest.toLocaleString('en-US')} instructions a request (${which})  ${r.root}\n`);
} finally {
  await fleet.stopAll();
  rmSync(work, { recursive: true, force: true });
}
