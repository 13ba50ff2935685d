/**
 * Logs arrive while a quiet process runs: with stdout a pipe (a container, systemd), `svcproxy
 * ingress` writes its start-up lines within about a second, not when 4 KiB have piled up or at exit.
 * The test waits for the line on the pipe while the process keeps running (a hang guard, not a
 * timing: without the flush timer the line never comes before exit).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));

t.test('a quiet ingress writes its start-up lines to a pipe while it runs', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcproxy-logs-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = join(dir, 'records.json');
  writeFileSync(config, JSON.stringify([
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
    { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  ]));
  const child = spawn(process.execPath, [BIN, 'ingress', '--config', config, '--location', 'loc1', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  const seen = new Promise<string>((resolve, reject) => {
    const guard = setTimeout(() => reject(new Error(`no 'ingress listening' line within 30 s; got ${JSON.stringify(out)}`)), 30_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const line = out.split('\n').find((l) => l.includes('"ingress listening"'));
      if (line) {
        clearTimeout(guard);
        resolve(line);
      }
    });
  });
  const line = JSON.parse(await seen) as { msg: string; address: string };
  t.equal(line.msg, 'ingress listening');
  t.equal(child.exitCode, null, 'while the process still runs');
});
