/**
 * A workload's deployments under `up` (src/local/deployments.ts), as `cpln workload get` and `cpln
 * apply --ready` read them: per location whether it serves, the record version replicas were started
 * from (through a rollout, and through a scaling change that keeps the processes), whether the
 * current version has as many ready replicas as the location wants, scale to zero, a workload `up`
 * runs nothing for, and the workload's readiness over its locations (a location its localOptions
 * suspend is not counted, as the CLI does not count it).
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigStore } from '../../src/config/store.js';
import { keyOf } from '../../src/config/record-meta.js';
import type { RawRecord } from '../../src/config/records.js';
import { silentLogger } from '../../src/log.js';
import { workloadVersion } from '../../src/local/env.js';
import { tempDir } from '../mesh/fixtures.js';
import { compileRecords } from '../../src/config/snapshot.js';
import type { Snapshot } from '../../src/config/model.js';
import { ReplicaRegistry, type Replica } from '../../src/routing/replicas.js';
import { VersionBook, deploymentStatuses, workloadReadiness } from '../../src/local/deployments.js';
import { versionOf } from '../../src/local/plan.js';
import type { UpReplicaState } from '../../src/local/supervisor.js';

const BASE = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'location', name: 'loc2', provider: 'gcp', region: 'r2' },
  { kind: 'gvc', name: 'g', spec: { staticPlacement: { locationLinks: ['//location/loc1', '//location/loc2'] } } },
];

function snapshotOf(version: number, spec: Record<string, unknown>): Snapshot {
  const result = compileRecords([...BASE, { kind: 'workload', name: 'w', gvc: 'g', version, spec: { type: 'standard', ...spec } }]);
  if (!result.ok) throw new Error(result.errors.join('\n'));
  return result.snapshot;
}

const container = (env: string): Record<string, unknown> => ({ name: 'main', command: 'node', args: ['app.js'], env: [{ name: 'V', value: env }], ports: [{ number: 8080, protocol: 'http' }] });

function replica(location: string, index: number, ready: boolean): Replica {
  return { workload: 'g/w', location, name: `w-${index}`, index, ports: new Map(), ready, starting: !ready, outstanding: 0, ejectedUntil: 0 };
}

function state(r: Replica, hash: number, stopping = false): UpReplicaState {
  return { replica: r, stopping, wasReady: r.ready, restarts: 0, startedAtMs: 0, workloadVersion: hash, containers: [{ name: 'main', ready: r.ready, restarts: 0 }] };
}

t.test('versions through a rollout and a scaling change', async (t) => {
  const book = new VersionBook();
  const v1 = snapshotOf(1, { containers: [container('one')], defaultOptions: { autoscaling: { minScale: 2 } } });
  book.observe(v1);
  const h1 = versionOf(v1, v1.workloads.get('g/w')!);
  const registry = new ReplicaRegistry();
  const a = [replica('loc1', 0, true), replica('loc1', 1, true)];
  const b = [replica('loc2', 0, true), replica('loc2', 1, false)];
  registry.replace('up', [...a, ...b]);
  let up = [...a, ...b].map((r) => state(r, h1));
  let d = deploymentStatuses({ snapshot: v1, registry, up, book, nowMs: 0 }, 'g/w');
  t.same(d.map((x) => [x.location, x.ready, x.currentReady, x.version, x.wanted]), [['loc1', true, true, 1, 2], ['loc2', true, false, 1, 2]]);
  t.match(d[0]!.versions, [{ workload: 1, ready: true, replicas: 2, readyReplicas: 2, containers: { main: { ready: true } } }]);
  t.same(workloadReadiness(v1.workloads.get('g/w')!, d), { ready: true, readyLatest: false });

  // A new version: the old replicas still serve loc1 while the new one starts.
  const v2 = snapshotOf(2, { containers: [container('two')], defaultOptions: { autoscaling: { minScale: 2 } } });
  book.observe(v2);
  const h2 = versionOf(v2, v2.workloads.get('g/w')!);
  t.not(h2, h1);
  const fresh = replica('loc1', 0, false);
  registry.replace('up', [...a, fresh, ...b]);
  up = [...a.map((r) => state(r, h1)), state(fresh, h2), ...b.map((r) => state(r, h1))];
  d = deploymentStatuses({ snapshot: v2, registry, up, book, nowMs: 0 }, 'g/w');
  t.match(d[0], { ready: true, currentReady: false, deploying: true, version: 2 });
  t.same(d[0]!.versions.map((v) => [v.workload, v.ready, v.replicas]), [[2, false, 1], [1, true, 2]], 'the old version by its record version, from the book');

  // A scaling change keeps what the replicas run (the same hash) and bumps the record.
  const v3 = snapshotOf(3, { containers: [container('two')], defaultOptions: { autoscaling: { minScale: 3 } } });
  book.observe(v3);
  t.equal(versionOf(v3, v3.workloads.get('g/w')!), h2);
  const news = [0, 1].map((i) => replica('loc1', i, true));
  registry.replace('up', news);
  up = news.map((r) => state(r, h2));
  d = deploymentStatuses({ snapshot: v3, registry, up, book, nowMs: 0 }, 'g/w');
  t.match(d[0], { currentReady: false, wanted: 3, version: 3, versions: [{ workload: 3, readyReplicas: 2 }] }, 'two of the three wanted');
  const third = replica('loc1', 2, true);
  registry.replace('up', [...news, third]);
  d = deploymentStatuses({ snapshot: v3, registry, up: [...up, state(third, h2)], book, nowMs: 0 }, 'g/w');
  t.match(d[0], { currentReady: true, deploying: false, message: 'Healthy: 3/3 replicas ready' });
});

t.test('scale to zero, nothing to run, suspended locations', async (t) => {
  const book = new VersionBook();
  const registry = new ReplicaRegistry();
  const zero = snapshotOf(1, { containers: [container('x')], defaultOptions: { autoscaling: { minScale: 0 } } });
  const d0 = deploymentStatuses({ snapshot: zero, registry, up: [], book, nowMs: 0 }, 'g/w');
  t.same(d0.map((x) => [x.ready, x.currentReady, x.wanted]), [[true, true, 0], [true, true, 0]], 'none wanted: ready');
  t.same(workloadReadiness(zero.workloads.get('g/w')!, d0), { ready: true, readyLatest: true });

  const image = snapshotOf(1, { containers: [{ name: 'main', image: 'nginx', ports: [{ number: 80 }] }] });
  const NO_IMAGE = 'svcproxy up runs no image (container main has image nginx and no command)';
  const di = deploymentStatuses({ snapshot: image, registry, up: [], book, nowMs: 0 }, 'g/w');
  t.same(di.map((x) => [x.ready, x.currentReady, x.message]), [[false, false, NO_IMAGE], [false, false, NO_IMAGE]], 'the reason up says everywhere (not-run.ts)');
  t.same(workloadReadiness(image.workloads.get('g/w')!, di), { ready: false, readyLatest: false });

  const suspended = snapshotOf(1, { containers: [container('x')], localOptions: [{ location: 'loc2', suspend: true }] });
  const h = versionOf(suspended, suspended.workloads.get('g/w')!);
  const r = replica('loc1', 0, true);
  registry.replace('up', [r]);
  const ds = deploymentStatuses({ snapshot: suspended, registry, up: [state(r, h)], book, nowMs: 0 }, 'g/w');
  t.same(ds.map((x) => [x.location, x.ready, x.currentReady]), [['loc1', true, true], ['loc2', false, true]]);
  t.same(workloadReadiness(suspended.workloads.get('g/w')!, ds), { ready: true, readyLatest: true }, 'the suspended location is not counted');
  t.same(deploymentStatuses({ snapshot: suspended, registry, up: [], book, nowMs: 0 }, 'g/other'), []);
});

t.test('the version book, observing the changes of a store: each written workload\'s versions, the others\' kept', async (t) => {
  const dir = await tempDir(t, 'svcproxy-version-book-');
  const file = join(dir, 'records.json');
  const workload = (name: string, image: string): RawRecord => ({ kind: 'workload', name, gvc: 'g', spec: { type: 'standard', containers: [{ name: 'app', image, command: 'node' }] } });
  await writeFile(file, JSON.stringify([
    { kind: 'location', name: 'loc1' },
    { kind: 'gvc', name: 'g', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
    workload('a', 'a:1'), workload('b', 'b:1'),
  ]));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());
  const book = new VersionBook();
  book.observe(store.current);
  const hashOf = (name: string): number => workloadVersion(store.record(keyOf('workload', name, 'g')));
  const a1 = hashOf('a');
  const b1 = hashOf('b');
  t.equal(book.recordVersion('g/a', a1), 1);
  for (const [image, version] of [['a:2', 2], ['a:3', 3]] as const) {
    t.ok((await store.write(keyOf('workload', 'a', 'g'), () => ({ put: workload('a', image) }))).ok);
    book.observe(store.current);
    t.equal(book.recordVersion('g/a', hashOf('a')), version, `a at ${image}: its version`);
  }
  t.equal(book.recordVersion('g/a', a1), 1, 'a\'s first hash still stands for version 1');
  t.equal(book.recordVersion('g/b', b1), 1, 'b untouched: kept');
  t.ok((await store.write(keyOf('workload', 'b', 'g'), () => ({ put: workload('b', 'b:2') }))).ok);
  book.observe(store.current);
  t.equal(book.recordVersion('g/b', hashOf('b')), 2, 'b written: its new version');
});
