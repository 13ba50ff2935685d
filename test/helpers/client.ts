/**
 * The command-line client as tests run it: in process through its entry (`main` of
 * src/client/main.ts, with captured streams, a given environment and folder, stdin text and an
 * optional terminal), or as the installed program (`node bin/svcproxy.js`, a real process); and a
 * real `svcproxy up` with its platform API on a free port, its state folder (`.svcproxy`, with the
 * operator key) in a temporary folder that the client can run in.
 */
import { execFile, spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { main, type ClientIo } from '../../src/client/main.js';
import { startUp, type Up } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const BIN = path.join(ROOT, 'bin/svcproxy.js');

export interface ClientRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

export interface ClientOptions {
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly cwd?: string;
  readonly stdin?: string;
  /** Both streams are terminals. */
  readonly tty?: boolean;
  /** The wall clock (default: the real one). */
  readonly now?: () => Date;
}

/** Runs one client command line in this process; `env` is the whole environment (nothing inherited but PATH). */
export async function runClient(argv: readonly string[], opts: ClientOptions = {}): Promise<ClientRun> {
  let stdout = '';
  let stderr = '';
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, ...opts.env };
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete env[k];
  const io: ClientIo = {
    env,
    cwd: opts.cwd ?? tmpdir(),
    stdout: { write: (s: string) => (stdout += s), isTTY: opts.tty === true },
    stderr: { write: (s: string) => (stderr += s), isTTY: opts.tty === true },
    readStdin: async () => opts.stdin ?? '',
    now: opts.now ?? (() => new Date()),
    sleep: async () => undefined,
    random: () => 0,
    // connect's command: its output captured with the client's, its stdin the run's.
    run: (command, args, o) => new Promise((resolve) => {
      const child = spawn(command, [...args], { env: o.env, cwd: o.cwd, stdio: 'pipe' });
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.stdin ?? '');
      child.once('error', (error) => resolve({ error }));
      child.once('close', (code, signal) => resolve({ code: code ?? 128 + (signal ? osConstants.signals[signal] : 0) }));
    }),
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}

/** Runs the installed program as a process (the client's or the data plane's entry, as it dispatches). */
export function runBin(argv: readonly string[], opts: { env?: Record<string, string>; cwd?: string; stdin?: string } = {}): Promise<ClientRun> {
  return new Promise((resolve, reject) => {
    const child = execFile(process.execPath, [BIN, ...argv], { env: { PATH: process.env.PATH, HOME: opts.cwd ?? tmpdir(), ...opts.env }, cwd: opts.cwd, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : undefined;
      if (code === undefined) reject(err);
      else resolve({ code, stdout, stderr });
    });
    child.stdin?.end(opts.stdin ?? '');
  });
}

export interface ApiUp {
  readonly up: Up;
  /** The folder `up` runs in: its `.svcproxy/api-token` is the operator key. */
  readonly dir: string;
  /** `HOST:PORT` of the API (what `SVCPROXY_API` holds). */
  readonly address: string;
  readonly url: string;
  readonly key: string;
}

/** `up` with these records and its API on a free port, stopped at teardown. */
export async function startApi(t: { teardown(fn: () => unknown): void }, records: readonly Record<string, unknown>[]): Promise<ApiUp> {
  const dir = await mkdtemp(path.join(tmpdir(), 'svcproxy-client-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'records.json');
  await writeFile(file, JSON.stringify(records));
  const up = await startUp({
    settings: defaultSettings,
    configPaths: [file],
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    mesh: ['127.0.0.1:0'],
    api: { address: '127.0.0.1:0' },
    logger: silentLogger(),
    watch: false,
    stateDir: path.join(dir, '.svcproxy'),
    limits: { maxEventLoopDelayMs: 0 },
  });
  t.teardown(() => up.stop(5000));
  const url = up.api.url!;
  const key = readFileSync(path.join(dir, '.svcproxy', 'api-token'), 'utf8').trim();
  return { up, dir, address: new URL(url).host, url, key };
}
