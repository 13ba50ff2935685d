/**
 * The record state folder (src/config/record-state.ts): entries survive a reopen; a process killed
 * (SIGKILL) while it writes entries in a loop leaves a folder that opens, each entry old or new and
 * never torn, and no temporary file behind; a file that is not an entry makes `open()` fail naming
 * it, and nothing is overwritten. The writer is the compiled module (dist/, built by `npm ci`) in a
 * child process, as `up` runs it.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FolderRecordState } from '../../src/config/record-state.js';
import { tempDir } from '../mesh/fixtures.js';

const DIST = fileURLToPath(new URL('../../dist/config/record-state.js', import.meta.url));
const meta = (version: number): { id: string; version: number; created: string; lastModified: string; hash: string } =>
  ({ id: 'id', version, created: '2026-01-01T00:00:00.000Z', lastModified: '2026-01-01T00:00:00.000Z', hash: `h${version}` });

t.test('entries survive a reopen; removed ones are gone', async (t) => {
  const dir = join(await tempDir(t, 'svcproxy-state-'), 'api');
  const state = await FolderRecordState.open(dir);
  await state.save(new Map([
    ['gvc/g1', { meta: meta(2) }],
    ['workload/g1/w', { meta: meta(1), overlay: { base: null, record: { kind: 'workload', name: 'w', gvc: 'g1' } } }],
    ['gvc/g2', { overlay: { base: 'abc' } }],
  ]));
  t.equal((await stat(dir)).mode & 0o777, 0o700);
  for (const f of await readdir(dir)) t.equal((await stat(join(dir, f))).mode & 0o777, 0o600, f);
  await state.save(new Map([['gvc/g1', undefined]]));
  const again = await FolderRecordState.open(dir);
  t.same([...again.entries().keys()].sort(), ['gvc/g2', 'workload/g1/w']);
  t.same(again.entries().get('gvc/g2'), { overlay: { base: 'abc' } });
  t.same(again.entries().get('workload/g1/w')?.overlay?.record, { kind: 'workload', name: 'w', gvc: 'g1' });
});

t.test('a file that is not an entry stops the open, naming it, and is kept', async (t) => {
  const dir = join(await tempDir(t, 'svcproxy-state-'), 'api');
  const state = await FolderRecordState.open(dir);
  await state.save(new Map([['gvc/g1', { meta: meta(2) }]]));
  const [name] = await readdir(dir);
  await writeFile(join(dir, name!), '{"key": "gvc/g1", "meta": ');
  await t.rejects(FolderRecordState.open(dir), new RegExp(`${name}: not a record state entry \\(not JSON\\); move it away`));
  await writeFile(join(dir, name!), JSON.stringify({ key: 'gvc/other', meta: meta(1) }));
  await t.rejects(FolderRecordState.open(dir), /not a record state entry/, 'a key that is not its file\'s');
  t.equal(await readFile(join(dir, name!), 'utf8'), JSON.stringify({ key: 'gvc/other', meta: meta(1) }), 'not overwritten');
});

t.test('killed while writing: the folder opens, each entry old or new', { skip: existsSync(DIST) ? false : 'dist/ not built' }, async (t) => {
  for (let run = 0; run < 3; run++) {
    const dir = join(await tempDir(t, 'svcproxy-state-'), 'api');
    // Writes entries k0..k3 over and over, each with a growing version and a large record, and
    // prints the version after each save.
    const script = `
      import { FolderRecordState } from ${JSON.stringify(DIST)};
      const state = await FolderRecordState.open(${JSON.stringify(dir)});
      const big = 'x'.repeat(256 * 1024);
      for (let v = 1; ; v++) {
        const changes = new Map();
        for (let k = 0; k < 4; k++) changes.set('k' + k, { meta: { id: 'id', version: v, created: 'c', lastModified: 'm', hash: 'h' + v }, overlay: { base: null, record: { kind: 'gvc', name: 'k' + k, description: String(v), big } } });
        await state.save(changes);
        process.stdout.write(v + '\\n');
      }
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let last = 0;
    const exited = new Promise((resolve) => child.on('exit', resolve));
    // Killed after a few saves, at a moment of the loop that differs each run.
    await new Promise<void>((resolve) => {
      child.stdout.on('data', (d: Buffer) => {
        const lines = d.toString().trim().split('\n');
        last = Number(lines[lines.length - 1]);
        if (last >= 3 + run * 2) {
          setImmediate(() => {
            child.kill('SIGKILL');
            resolve();
          });
        }
      });
    });
    await exited;
    const state = await FolderRecordState.open(dir);
    const versions = [...state.entries()].map(([key, e]) => {
      const description = Number(e.overlay?.record?.description);
      t.equal(description, e.meta!.version, `run ${run}: ${key} whole (record and meta of one write)`);
      return e.meta!.version;
    });
    t.equal(versions.length, 4);
    t.ok(versions.every((v) => v >= last), `run ${run}: each entry as of the last save reported (${last}) or a later one: ${versions.join(', ')}`);
    t.same((await readdir(dir)).filter((f) => !f.endsWith('.json')), [], `run ${run}: no temporary file left`);
  }
});
