/**
 * The installed entry point (bin/svcproxy.js) as a child process on free ports, started and waited
 * for until its admin `/ready` answers 200: for tests that need a whole process (cluster workers,
 * what a process loads).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { TapLike } from './harness.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { eventually, send } from '../faults/fixtures.js';

export const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));

export interface ProxyProcess {
  readonly child: ChildProcess;
  readonly port: number;
  readonly admin: string;
  /** Everything the process (and its workers) printed so far (logs are flushed in 4 KiB batches and at exit). */
  output(): string;
  readonly exited: Promise<number | null>;
}

export interface ProxyProcessOptions {
  /** Node's own flags, before the entry point (`--import`, …). */
  readonly nodeArgs?: readonly string[];
  readonly env?: Record<string, string>;
  /** Flags after the command's own (`--log-level` …); `--max-event-loop-delay 0` unless given. */
  readonly extraArgs?: readonly string[];
  /** How long to wait for `/ready` (default 60 s: a hang guard; a busy machine starts a process slowly). */
  readonly readyTimeoutMs?: number;
}

/**
 * A spawned child's output (stdout and stderr, as printed) and its exit, and a SIGKILL at teardown if
 * it is still running.
 */
export function watchChild(t: { teardown(fn: () => unknown): void }, child: ChildProcess): { output(): string; exited: Promise<number | null> } {
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout?.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr?.on('data', (c: Buffer) => (out += c.toString()));
  child.once('error', (err) => (out += `spawn: ${err.message}\n`));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { output: () => out, exited };
}

export async function startProxyProcess(t: TapLike, args: readonly string[], opts: ProxyProcessOptions = {}): Promise<ProxyProcess> {
  // Logs are buffered while the process runs, so the ports are chosen here, not read back.
  const port = await freePort();
  const adminPort = await freePort();
  // Load shedding off unless a test asks for it (as startPlane does): a busy machine stalls a child
  // past the 250 ms default (loading undici on the first HTTP ext_authz check did), and a shed 503
  // would fail tests that are about something else.
  const extra = opts.extraArgs ?? [];
  const shedding = extra.includes('--max-event-loop-delay') ? [] : ['--max-event-loop-delay', '0'];
  const child = spawn(process.execPath, [...(opts.nodeArgs ?? []), BIN, ...args, '--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${adminPort}`, ...shedding, ...extra], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...opts.env },
  });
  const { output, exited } = watchChild(t, child);
  const admin = `http://127.0.0.1:${adminPort}`;
  const ready = async (): Promise<boolean> => (await fetch(`${admin}/ready`).catch(() => undefined))?.status === 200;
  if (!(await eventually(ready, opts.readyTimeoutMs ?? 60_000, 100))) throw new Error(`not ready (exit ${child.exitCode}): ${output()}`);
  return { child, port, admin, output, exited };
}

/**
 * The program started with `args` answers three GETs of `/` and is stopped with SIGTERM: each
 * answer (its body when 200, else its status or failure), the exit code, and what it printed.
 */
export async function answerThreeThenStop(t: TapLike, args: readonly string[], opts: ProxyProcessOptions = {}): Promise<{ answers: (number | string)[]; code: number | null; output: string }> {
  const proxy = await startProxyProcess(t, args, opts);
  const answers: (number | string)[] = [];
  for (let i = 0; i < 3; i++) {
    const r = await send(proxy.port, 'localhost', '/', { note: (_res, body) => body });
    answers.push(r.outcome === 200 ? r.note! : r.outcome);
  }
  proxy.child.kill('SIGTERM');
  const code = await proxy.exited;
  return { answers, code, output: proxy.output() };
}

/**
 * Writes `hooks.mjs` in `dir`, module-loader hooks that append the URL of every module a process
 * resolves to the file their `initialize` data names (`{ log }`); returns its URL for `register`.
 */
export function writeResolveHooks(dir: string): string {
  const file = path.join(dir, 'hooks.mjs');
  writeFileSync(file, `
import { appendFileSync } from 'node:fs';
let log;
export function initialize(data) { log = data.log; }
export async function resolve(specifier, context, next) {
  const r = await next(specifier, context);
  appendFileSync(log, r.url + '\\n');
  return r;
}
`);
  return pathToFileURL(file).href;
}
