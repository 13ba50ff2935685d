/**
 * `svcproxy ratelimit` as a user runs it: the real CLI entry (src/cli.ts) in a child process, serving
 * gRPC until SIGTERM (exit 0), reloading its rules on SIGHUP; usage errors exit 2; invalid rules exit
 * 1 with every error and its path on stderr.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import { envoyRls, freePort, SERVICE, type TapLike } from '../fixtures/ratelimit/servers.js';

// Tap's 120 s per file is a hang guard, raised: on a loaded machine this file takes long
// (four child processes that compile the TypeScript entry first: 40-90 s with both cores busy).
t.setTimeout(300_000);

const CLI = fileURLToPath(new URL('../../src/cli.ts', import.meta.url));
const TS_LOADER = fileURLToPath(new URL('../../node_modules/@tapjs/typescript/dist/esm/import.mjs', import.meta.url));
const ENTRY = `const { main } = await import(${JSON.stringify(CLI)}); process.exitCode = await main(process.argv.slice(1));`;
const skip = existsSync(TS_LOADER) ? false : 'tap\'s TypeScript loader is not where expected';

const nodeArgs = (args: string[]): string[] => [`--import=${TS_LOADER}`, '--input-type=module', '-e', ENTRY, ...args];

function runSync(args: string[]): { code: number; stderr: string } {
  const r = spawnSync(process.execPath, nodeArgs(args), { encoding: 'utf8', timeout: 30_000, env: { ...process.env, SVCPROXY_LOG_LEVEL: 'error' } });
  return { code: r.status ?? -1, stderr: r.stderr };
}

function rulesFile(t: TapLike, source: string): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-rl-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'rules.yaml');
  writeFileSync(file, source);
  return file;
}

const rules = (n: number): string => `domain: cli\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: ${n}}\n`;

t.test('usage errors exit 2; invalid rules exit 1 with every error and its path', { skip }, async (t) => {
  const noConfig = runSync(['ratelimit']);
  t.equal(noConfig.code, 2);
  t.match(noConfig.stderr, /--config RULES\.yaml .* is required/);
  const badListen = runSync(['ratelimit', '--config', rulesFile(t, rules(1)), '--listen', 'nowhere']);
  t.equal(badListen.code, 2);
  t.match(badListen.stderr, /not a host:port address/);
  const file = rulesFile(t, 'domain: cli\ndescriptors:\n  - key: k\n    rate_limit: {unit: week, requests_per_unit: x}\n');
  const invalid = runSync(['ratelimit', '--config', file]);
  t.equal(invalid.code, 1);
  t.match(invalid.stderr, `${file}: domain.descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, month, year\n`);
  t.match(invalid.stderr, `${file}: domain.descriptors[0].rate_limit.requests_per_unit: must be a whole number from 0 to 4294967295\n`);
  t.match(invalid.stderr, 'svcproxy ratelimit: rules invalid (2 errors)');
});

t.test('serves until SIGTERM (exit 0); SIGHUP reloads the rules', { skip }, async (t) => {
  const file = rulesFile(t, rules(1));
  const port = await freePort();
  const child = spawn(process.execPath, nodeArgs(['ratelimit', '--config', file, '--listen', `127.0.0.1:${port}`]), { stdio: ['ignore', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const Ctor = grpc.makeClientConstructor(envoyRls()[SERVICE] as unknown as grpc.ServiceDefinition, SERVICE);
  const client = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as {
    ShouldRateLimit(req: unknown, opts: grpc.CallOptions, cb: (err: Error | null, res?: { overall_code: string }) => void): void;
    close(): void;
  };
  t.teardown(() => client.close());
  const ask = (): Promise<string> => new Promise((resolve, reject) =>
    client.ShouldRateLimit({ domain: 'cli', descriptors: [{ entries: [{ key: 'k', value: 'v' }] }] }, { deadline: Date.now() + 2000 }, (err, res) => (err ? reject(err) : resolve(res!.overall_code))),
  );
  // The child compiles TypeScript before it listens (a minute on a loaded machine): wait for it to
  // say so, or to exit; then the client connects.
  await new Promise<void>((resolve, reject) => {
    const check = (): void => {
      if (/ratelimit listening|listening\s+grpc:/.test(out)) done(resolve);
    };
    const exited = (): void => done(() => reject(new Error(`exited before listening\n${out}`)));
    const done = (settle: () => void): void => {
      child.stdout.off('data', check);
      child.stderr.off('data', check);
      child.off('exit', exited);
      settle();
    };
    child.stdout.on('data', check);
    child.stderr.on('data', check);
    child.once('exit', exited);
    check();
  });
  await new Promise<void>((resolve, reject) => (client as unknown as grpc.Client).waitForReady(Date.now() + 20_000, (err) => (err ? reject(new Error(`${err.message}\n${out}`)) : resolve())));
  t.equal(await ask(), 'OK');
  t.equal(await ask(), 'OVER_LIMIT');
  // Each load logs 'rate-limit rules loaded': wait for one after the SIGHUP (the folder watch may
  // load the new file first; either way the raised limit is in force once it is logged).
  const loads = (): number => out.split('"msg":"rate-limit rules loaded"').length - 1;
  const loadedBefore = loads();
  writeFileSync(file, rules(10));
  child.kill('SIGHUP');
  const deadline = Date.now() + 30_000;
  while (loads() === loadedBefore && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(await ask(), 'OK', 'the raised limit applies after SIGHUP (or the folder watch)');
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  t.equal(await exited, 0);
  t.match(out, /"msg":"stopped"/);
});
