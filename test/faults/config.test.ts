/**
 * Garbage written over a watched configuration while the proxy is under load: random bytes, a
 * truncated file, broken YAML and JSON, records that fail validation, and an empty file — replaced
 * by rename and written in place (so a reload can read a half-written file). No request fails, the
 * last good configuration keeps serving, the process stays ready, /config shows the last error,
 * and a good file afterwards is applied.
 */
import t from 'tap';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ALIAS, records, startHttpServer, echoHandler, startPlane, yamlDocuments } from '../helpers/harness.js';
import { Load, eventually, send, tally } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

t.test('garbage over the config during load: nothing fails, the last good config serves', async (t) => {
  const app = await startHttpServer(t, echoHandler('api'));
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-faults-config-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'config.yaml');
  const good = yamlDocuments(records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }));
  writeFileSync(file, good);
  const plane = await startPlane(t, undefined, { configPaths: [dir], watch: true });
  await plane.ready();
  const generation = plane.runtime.store.current.generation;
  // maxMs only stops a load left running by a failure: stop() ends it; on a busy machine the phases take long.
  const load = new Load(() => send(plane.port, HOST, '/'), { concurrency: 4, pauseMs: 5, maxMs: 110_000 });
  t.teardown(() => load.stop());
  await load.settle(20);

  const byRename = (content: string | Buffer): void => {
    writeFileSync(`${file}.tmp`, content);
    renameSync(`${file}.tmp`, file);
  };
  const inPlace = (content: string | Buffer): void => writeFileSync(file, content);
  // Every reload the watcher runs ends in 'rejected' or 'change': a write is judged once one more
  // has ended after it (however long the watcher and the debounce take on a busy machine).
  let reloads = 0;
  const counted = (): void => void reloads++;
  plane.runtime.store.on('rejected', counted);
  plane.runtime.store.on('change', counted);
  t.teardown(() => {
    plane.runtime.store.off('rejected', counted);
    plane.runtime.store.off('change', counted);
  });
  const reloaded = async (what: string, write: () => void): Promise<void> => {
    const before = reloads;
    write();
    t.ok(await eventually(() => reloads > before, 30_000), `${what}: the watcher reloaded`);
  };
  const garbage: [name: string, write: () => void][] = [
    ['random bytes (rename)', () => byRename(randomBytes(4096))],
    ['random bytes (in place)', () => inPlace(randomBytes(4096))],
    ['the good file cut in half (in place)', () => inPlace(good.slice(0, Math.floor(good.length / 2)))],
    ['broken YAML', () => byRename('kind: workload\nname: [unclosed\n  spec: {')],
    ['broken JSON', () => byRename('[{"kind": "org", "name": "acme",')],
    ['valid YAML, invalid records', () => byRename(good.replace('timeoutSeconds', 'timeoutSecondz') + '---\nkind: workload\nname: x\ngvc: shop\nspec: {type: nope}\n')],
    ['a NUL-filled file', () => inPlace(Buffer.alloc(2048))],
    ['an empty file (in place)', () => inPlace('')],
    ['only comments (rename)', () => byRename('# nothing here yet\n---\n')],
  ];
  for (const [name, write] of garbage) {
    load.phase = name;
    // The watcher (100 ms debounce) and the reload run while requests keep coming.
    await reloaded(name, write);
    await load.settle(10);
    const dump = (await (await fetch(`${plane.adminUrl}/config`)).json()) as { generation: number; lastError: { errors: string[] } | null };
    t.equal(plane.runtime.store.current.generation, generation, `${name}: nothing applied`);
    t.ok(dump.lastError !== null && dump.lastError.errors.length > 0, `${name}: /config shows the error (${dump.lastError?.errors[0]?.slice(0, 80)})`);
    t.equal((await fetch(`${plane.adminUrl}/ready`)).status, 200, `${name}: still ready`);
    const r = tally(load.of(name));
    t.same(r.by, { 200: r.sent }, `${name}: ${r.sent} sent, ${r.answered} answered, all 200`);
  }

  // A slow writer rewriting the file in place: emptied, then the first part (cut mid-record), then
  // the rest. Every intermediate state is rejected; the finished file is applied.
  load.phase = 'rewritten in place, slowly';
  const cut = good.indexOf('firewallConfig') + 5;
  await reloaded('emptied', () => inPlace(''));
  await reloaded('the first part', () => inPlace(good.slice(0, cut)));
  inPlace(good);
  t.ok(await eventually(() => plane.runtime.store.lastErrors === undefined, 30_000), 'the finished file is applied and clears the error');
  t.ok(plane.runtime.store.current.generation > generation, 'as a new generation');
  await load.settle(10);
  const slow = tally(load.of('rewritten in place, slowly'));
  t.same(slow.by, { 200: slow.sent }, `while it was rewritten: ${slow.sent} sent, all 200`);
  const errors = plane.runtime.store.lastErrorAt;
  t.equal(errors, undefined);
  await load.stop();
  const all = tally(load.of());
  t.same(all.by, { 200: all.sent }, `in all: ${all.sent} sent, ${all.answered} answered, every one 200`);
});
