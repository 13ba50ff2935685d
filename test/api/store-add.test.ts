/**
 * ConfigStore.add (src/config/store.ts), what `POST /org/{org}/gvc` stands on: a valid record is
 * applied as a new generation with `change`, and kept by reloads from files; an invalid one changes
 * nothing, not even the last rejected reload's errors; a file that later defines the same name
 * makes the reload fail as a duplicate and keeps what was in force.
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigStore } from '../../src/config/store.js';
import { silentLogger } from '../../src/log.js';
import { tempDir } from '../mesh/fixtures.js';

const FILE_RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
];
const G2 = { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } };

t.test('add: applied, kept by reloads, refused without a trace', async (t) => {
  const dir = await tempDir(t, 'svcproxy-store-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify(FILE_RECORDS));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());
  const changes: number[] = [];
  store.on('change', (s) => changes.push(s.generation));

  const bad = await store.add({ kind: 'gvc', name: 'g3', spec: { staticPlacement: { locationLinks: ['//location/nowhere'] } } });
  t.equal(bad.ok, false);
  t.match(bad.ok ? [] : bad.errors, [/gvc\/g3: spec\.staticPlacement\.locationLinks\[0\]: .*nowhere/]);
  t.equal(store.current.generation, 1);
  t.equal(store.lastErrors, undefined, 'a refused add is not a rejected reload');
  t.same(changes, []);

  const good = await store.add(G2);
  t.equal(good.ok, true);
  t.same(changes, [2]);
  t.ok(store.current.gvcs.has('g2'));
  t.equal((await store.add(G2)).ok, false, 'the same name again is a duplicate');

  // The file changes: the added GVC stays, after the file's records.
  await writeFile(file, JSON.stringify([...FILE_RECORDS, { kind: 'workload', name: 'w', gvc: 'g2', spec: { type: 'standard', containers: [{ name: 'app', image: 'x', ports: [{ number: 8080, protocol: 'http' }] }] } }]));
  t.equal(await store.reload(), true);
  t.ok(store.current.gvcs.has('g2'));
  t.ok(store.current.workloads.has('g2/w'), 'a file\'s workload in the added GVC');

  // A file that defines the same name: the reload is refused, what was in force stays.
  await writeFile(file, JSON.stringify([...FILE_RECORDS, G2]));
  t.equal(await store.reload(), false);
  t.match(store.lastErrors, [/gvc\/g2: name: duplicate/]);
  t.ok(store.current.workloads.has('g2/w'));
});
