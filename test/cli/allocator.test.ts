/**
 * svcproxy raises glibc malloc's thresholds at start (src/allocator.ts, applied by bin/svcproxy.js
 * before the program's modules). Observed from outside the allocator, in /proc/self/maps: under
 * glibc's defaults a 1 MiB buffer is a mapping of its own; once the thresholds are raised, such
 * buffers come from the heap and no new anonymous mapping appears for them. The
 * control is a plain Node process; then the module by itself; then the installed entry point, probed
 * at its exit by a module preloaded with `--import` (the probe runs its allocation after svcproxy
 * has run). On a C library other than glibc there is nothing to observe, and the test says so.
 */
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { records, yamlDocuments } from '../helpers/harness.js';

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));
const MODULE = pathToFileURL(fileURLToPath(new URL('../../dist/allocator.js', import.meta.url))).href;

/**
 * How many MiB of readable and writable anonymous mappings outside `[heap]` appeared while 48 buffers of 1 MiB were
 * allocated and kept: 48 or more when each is mapped on its own, none (or little: V8's own pages)
 * when they come from the heap (its growth is not measured: free heap may serve them).
 */
const PROBE = `
import { readFileSync } from 'node:fs';
export function mappedGrowth() {
  const mapped = () => {
    let total = 0;
    for (const line of readFileSync('/proc/self/maps', 'utf8').split('\\n')) {
      const fields = line.trim().split(/\\s+/);
      if (fields.length !== 5) continue; // a file, [heap], [stack], ...: not an anonymous mapping
      // Reserved, not usable (---p): a new thread's malloc arena reserves 64 MiB so, and a helper
      // thread of V8's that first allocates during the loop would otherwise count as buffers.
      if (!fields[1].startsWith('rw')) continue;
      const [a, b] = fields[0].split('-').map((h) => parseInt(h, 16));
      total += b - a;
    }
    return total / 1048576;
  };
  const before = mapped();
  const keep = [];
  for (let i = 0; i < 48; i++) keep.push(Buffer.allocUnsafeSlow(1 << 20).fill(1));
  return Math.round(mapped() - before);
}
`;

const glibc = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime;

function growth(t: Test, args: string[]): number {
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, `child exited 0 (${r.stderr.trim().slice(0, 200)})`);
  const m = /mapped (\d+)/.exec(r.stdout);
  t.ok(m, `the probe reported (${r.stdout.trim().slice(-120)})`);
  return Number(m?.[1] ?? -1);
}

function probeFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-malloc-'));
  const probe = path.join(dir, 'probe.mjs');
  writeFileSync(probe, `${PROBE}\nprocess.on('exit', () => console.log('mapped', mappedGrowth()));\n`);
  writeFileSync(
    path.join(dir, 'config.yaml'),
    yamlDocuments(records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] } })),
  );
  return dir;
}

t.test('glibc malloc thresholds', { skip: process.platform !== 'linux' || !glibc ? 'not a glibc process: no thresholds to raise' : false }, async (t) => {
  const dir = probeFile();
  const probe = pathToFileURL(path.join(dir, 'probe.mjs')).href;
  const control = growth(t, ['--import', probe, '--input-type=module', '-e', '']);
  t.ok(control >= 48, `control: a plain Node process maps 1 MiB buffers on their own (${control} MiB mapped)`);
  const tuned = growth(t, ['--import', probe, '--input-type=module', '-e', `await import(${JSON.stringify(MODULE)});`]);
  t.ok(tuned < 16, `after dist/allocator.js they come from the heap (${tuned} MiB mapped)`);
  const out = spawnSync(process.execPath, ['--import', probe, BIN, 'validate', '--config', path.join(dir, 'config.yaml')], { encoding: 'utf8', timeout: 60_000 });
  t.match(out.stdout, /^valid: /m, 'svcproxy validate ran');
  const m = /mapped (\d+)/.exec(out.stdout);
  t.ok(m && Number(m[1]) < 16, `the installed entry point raised them (${m?.[1]} MiB mapped)`);
});
