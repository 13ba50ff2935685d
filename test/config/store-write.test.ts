/**
 * ConfigStore.write (src/config/store.ts, overlay.ts, record-state.ts), what every write of `up`'s
 * control plane stands on: a valid change is applied as a new generation with `change` and kept
 * in the record state; an invalid one changes nothing, not even the last rejected reload's errors;
 * a record's meta (`id`, `version`, `created`, `lastModified`) moves with its content, by a write or
 * by an edited file. Per record the later change wins, both ways: an API change over a file's
 * record stays until the file's version of it changes, and then the file's applies; and all of it
 * holds across a restart on the same state folder (a store opened again).
 */
import t from 'tap';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigStore } from '../../src/config/store.js';
import { FolderRecordState } from '../../src/config/record-state.js';
import { keyOf } from '../../src/config/record-meta.js';
import type { RawRecord } from '../../src/config/records.js';
import { silentLogger } from '../../src/log.js';
import { tempDir } from '../mesh/fixtures.js';

const ORG = { kind: 'org', name: 'acme' };
const LOC = { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' };
const gvc = (name: string, description?: string): RawRecord => ({
  kind: 'gvc', name, ...(description ? { description } : {}), spec: { staticPlacement: { locationLinks: ['//location/loc1'] } },
});
const G1 = keyOf('gvc', 'g1');
const G2 = keyOf('gvc', 'g2');

t.test('write: applied, kept, refused without a trace; the later change wins both ways, across restarts', async (t) => {
  const dir = await tempDir(t, 'svcproxy-store-');
  const file = join(dir, 'records.json');
  const stateDir = join(dir, 'state');
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('g1', 'from the file')]));
  let clock = Date.parse('2026-12-01T00:00:00Z');
  const open = async (): Promise<ConfigStore> => ConfigStore.open({ paths: [file], logger: silentLogger(), state: await FolderRecordState.open(stateDir), now: () => clock });
  let store = await open();
  t.teardown(() => store.close());
  const changes: number[] = [];
  store.on('change', (s) => changes.push(s.generation));

  const g1 = store.record(G1)!;
  t.match(g1, { version: 1, created: '2026-12-01T00:00:00.000Z', lastModified: '2026-12-01T00:00:00.000Z', description: 'from the file' });
  t.same(await readdir(join(stateDir)), [], 'nothing kept of records seen once');

  const bad = await store.write(G2, () => ({ put: { ...gvc('g2'), spec: { staticPlacement: { locationLinks: ['//location/nowhere'] } } } }));
  t.equal(bad.ok, false);
  t.match(bad.ok ? [] : bad.errors, [/gvc\/g2: spec\.staticPlacement\.locationLinks\[0\]: .*nowhere/]);
  t.equal(store.current.generation, 1);
  t.equal(store.lastErrors, undefined, 'a refused write is not a rejected reload');
  t.same(changes, []);
  t.same(await readdir(stateDir), [], 'a refused write keeps nothing');
  await t.rejects(store.write(G2, () => {
    throw new Error('refused by the caller');
  }), /refused by the caller/);

  clock += 1000;
  const created = await store.write(G2, (current) => {
    t.equal(current, undefined);
    return { put: gvc('g2', 'from the API') };
  });
  t.ok(created.ok && created.created);
  t.same(changes, [2]);
  t.ok(store.current.gvcs.has('g2'));
  const g2 = store.record(G2)!;
  t.match(g2, { version: 1, created: '2026-12-01T00:00:01.000Z' });
  t.match(g2.id, /^[0-9a-f-]{36}$/);

  clock += 1000;
  const changed = await store.write(G1, (current) => ({ put: { ...current!, description: 'from the API' } }));
  t.ok(changed.ok && !changed.created);
  t.match(store.record(G1), { version: 2, description: 'from the API', lastModified: '2026-12-01T00:00:02.000Z', created: '2026-12-01T00:00:00.000Z', id: g1.id });
  const same = await store.write(G1, (current) => ({ put: current! }));
  t.match(same.ok && same.record, { version: 2 }, 'writing the same content moves nothing');

  // A reload with the file unchanged: the API's change stays.
  t.equal(await store.reload(), true);
  t.match(store.record(G1), { version: 2, description: 'from the API' });

  // A restart on the same state: the API's records and versions are there.
  store.close();
  store = await open();
  t.match(store.record(G1), { version: 2, description: 'from the API', id: g1.id });
  t.match(store.record(G2), { version: 1, description: 'from the API', id: g2.id });

  // The file is edited after the API's change: the file's version applies, with the next version.
  clock += 1000;
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('g1', 'edited file')]));
  t.equal(await store.reload(), true);
  t.match(store.record(G1), { version: 3, description: 'edited file', lastModified: '2026-12-01T00:00:03.000Z' });
  // Then the API changes it again: the API's applies, across a restart too.
  await store.write(G1, (current) => ({ put: { ...current!, description: 'API after the edit' } }));
  store.close();
  store = await open();
  t.match(store.record(G1), { version: 4, description: 'API after the edit' });

  // The API deletes a file's record: it stays deleted across reloads and restarts...
  await store.write(G1, () => ({ delete: true }));
  t.equal(store.record(G1), undefined);
  t.equal(await store.reload(), true);
  t.notOk(store.current.gvcs.has('g1'));
  store.close();
  store = await open();
  t.notOk(store.current.gvcs.has('g1'));
  // ...until the file's version of it changes.
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('g1', 'back in the file')]));
  t.equal(await store.reload(), true);
  t.match(store.record(G1), { description: 'back in the file' });

  // A file that adds a record the API created: the file's applies.
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('g1', 'back in the file'), gvc('g2', 'now in the file')]));
  t.equal(await store.reload(), true);
  t.match(store.record(G2), { description: 'now in the file', version: 2, id: g2.id });

  // Deleting a record only the API had leaves nothing in the state.
  const G3 = keyOf('gvc', 'g3');
  await store.write(G3, () => ({ put: gvc('g3') }));
  const held = (await readdir(stateDir)).length;
  await store.write(G3, () => ({ delete: true }));
  t.equal((await readdir(stateDir)).length, held - 1);
  store.close();
  store = await open();
  t.notOk(store.current.gvcs.has('g3'));
});

t.test('a write whose state cannot be kept is refused and applies nothing', async (t) => {
  const dir = await tempDir(t, 'svcproxy-store-');
  let fail = false;
  const state = await FolderRecordState.open(join(dir, 'state'), {
    rename: async (from, to) => {
      if (fail) throw Object.assign(new Error('injected: rename failed'), { code: 'EIO' });
      const { rename } = await import('node:fs/promises');
      await rename(from, to);
    },
  });
  const store = await ConfigStore.open({ records: [ORG, LOC, gvc('g1')], logger: silentLogger(), state });
  t.teardown(() => store.close());
  fail = true;
  await t.rejects(store.write(G2, () => ({ put: gvc('g2') })), /injected/);
  t.notOk(store.current.gvcs.has('g2'));
  t.equal(store.current.generation, 1);
  t.same(await readdir(join(dir, 'state')), [], 'no temporary file left');
  fail = false;
  t.ok((await store.write(G2, () => ({ put: gvc('g2') }))).ok);
});

t.test('API changes that no longer fit the files: up does not start, and says where they are', async (t) => {
  const dir = await tempDir(t, 'svcproxy-store-');
  const file = join(dir, 'records.json');
  const stateDir = join(dir, 'state');
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('g1')]));
  const first = await ConfigStore.open({ paths: [file], logger: silentLogger(), state: await FolderRecordState.open(stateDir) });
  const w = { kind: 'workload', name: 'w', gvc: 'g1', spec: { type: 'standard', containers: [{ name: 'main', image: 'x', ports: [{ number: 80 }] }] } };
  t.ok((await first.write(keyOf('workload', 'w', 'g1'), () => ({ put: w }))).ok);
  first.close();
  // Another configuration in the same folder: the API's workload names a GVC it does not have.
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('other')]));
  const opened = ConfigStore.open({ paths: [file], logger: silentLogger(), state: await FolderRecordState.open(stateDir) });
  await t.rejects(opened, { errors: [
    `${stateDir}: workload/w: gvc: points to gvc g1, which is not defined`,
    `${stateDir}: the errors above that name this folder are about changes made through the API and kept there; change the files to fit them, or move the folder away to start without them`,
  ] });
});

t.test('a file\'s workload that names no GVC is known in its GVC (the --gvc flag, or the only GVC): keyed, written, kept', async (t) => {
  const dir = await tempDir(t, 'svcproxy-store-');
  const file = join(dir, 'records.json');
  const workload = (description: string): RawRecord => ({
    kind: 'workload', name: 'w', description,
    spec: { type: 'standard', containers: [{ name: 'app', image: 'nginx', ports: [{ number: 80, protocol: 'http' }] }] },
  });
  const W = keyOf('workload', 'w', 'g1');
  for (const settings of [undefined, { vendor: 'svc', appDomain: 'app.localhost', directDomain: 'direct.localhost', internalDomain: 'internal.localhost', gvc: 'g1' }]) {
    const gvcs = settings === undefined ? [gvc('g1')] : [gvc('g1'), gvc('g2')];
    const stateDir = join(dir, settings === undefined ? 'state-only' : 'state-flag');
    await writeFile(file, JSON.stringify([ORG, LOC, ...gvcs, workload('from the file')]));
    const open = async (): Promise<ConfigStore> => ConfigStore.open({ paths: [file], logger: silentLogger(), state: await FolderRecordState.open(stateDir), ...(settings ? { settings } : {}) });
    let store = await open();
    t.match(store.record(W), { version: 1, gvc: 'g1', description: 'from the file' }, settings ? 'by --gvc' : 'the only GVC');
    const written = await store.write(W, (current) => ({ put: { ...current!, description: 'from the API' } }));
    t.ok(written.ok);
    store.close();
    store = await open();
    t.match(store.record(W), { version: 2, description: 'from the API' }, 'the API\'s change to it kept across a restart');
    // The file's version of it changes later: the file's applies.
    await writeFile(file, JSON.stringify([ORG, LOC, ...gvcs, workload('edited in the file')]));
    t.equal(await store.reload(), true);
    t.match(store.record(W), { version: 3, description: 'edited in the file' });
    store.close();
  }
});

t.test('a write lets the event loop turn between composing, validating and compiling', async (t) => {
  const dir = await tempDir(t, 'svcproxy-store-turns-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify([ORG, LOC, gvc('g1')]));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());
  // The record state in memory saves without I/O: without pauses the whole write would run in
  // microtasks, before anything the loop has queued.
  const order: string[] = [];
  store.on('change', () => order.push('change'));
  const turns = (n: number): void => {
    if (n === 0) return;
    setImmediate(() => {
      order.push('turn');
      turns(n - 1);
    });
  };
  const written = store.write(G2, () => ({ put: gvc('g2') }));
  turns(3);
  t.equal((await written).ok, true);
  t.same(order.slice(0, order.indexOf('change')), ['turn', 'turn'], 'two turns of the loop ran while the write was validated and compiled');
});
