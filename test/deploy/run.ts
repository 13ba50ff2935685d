/**
 * Processes of the deploy test: a planned container's argv run from the staged image (its PATH and
 * WORKDIR), its output kept for failure messages; waiting for a probe URL to answer 200 (or the
 * process to die, which fails at once with what it printed); plain HTTP/HTTPS requests with a Host
 * header; and one Redis command over RESP.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { StagedImage } from './image.js';
import { watchChild } from '../helpers/proxy-process.js';

export interface Proc {
  readonly name: string;
  readonly child: ChildProcess;
  output(): string;
  readonly exited: Promise<number | null>;
}

export function runArgv(t: { teardown(fn: () => unknown): void }, name: string, argv: readonly string[], env: Record<string, string>, image: StagedImage): Proc {
  const child = spawn(argv[0]!, argv.slice(1), { cwd: image.cwd, env: { ...env, PATH: image.path }, stdio: ['ignore', 'pipe', 'pipe'] });
  const { output, exited } = watchChild(t, child);
  return { name, child, output, exited };
}

/** Runs to completion (a short command: validate, endpoints, --help). */
export function runSync(argv: readonly string[], env: Record<string, string>, image: StagedImage): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(argv[0]!, argv.slice(1), { cwd: image.cwd, env: { ...env, PATH: image.path }, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, stdout: r.stdout ?? '', stderr: `${r.stderr ?? ''}${r.error ? `spawn: ${r.error.message}` : ''}` };
}

/** Until `url` answers 200; fails when the process exits first, or after `timeoutMs` (a hang guard). */
export async function waitFor200(proc: Proc, url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (proc.child.exitCode !== null || proc.child.signalCode !== null) throw new Error(`${proc.name} exited (${proc.child.exitCode ?? proc.child.signalCode}) before ${url} answered 200:\n${proc.output()}`);
    const status = await fetch(url).then((r) => r.status, () => 0);
    if (status === 200) return;
    if (Date.now() > deadline) throw new Error(`${proc.name}: ${url} never answered 200 (last ${status}):\n${proc.output()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Answer {
  readonly status: number;
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
}

/** GET `path` on 127.0.0.1:`port` with `host`; `ca` makes it HTTPS with SNI `host`. */
export function get(port: number, host: string, path: string, ca?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const opts = { host: '127.0.0.1', port, path, headers: { host }, agent: false as const };
    const req = ca ? https.get({ ...opts, servername: host, ca }) : http.get(opts);
    req.setTimeout(15_000, () => req.destroy(new Error('request timed out')));
    req.once('error', reject);
    req.once('response', (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.once('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      res.once('error', reject);
    });
  });
}

/** One inline Redis command's reply line (`:3`, `+PONG`). */
export function redisCommand(port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (d: Buffer) => {
      reply += d.toString();
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.split('\r\n')[0]!);
      }
    });
    socket.once('error', reject);
  });
}
