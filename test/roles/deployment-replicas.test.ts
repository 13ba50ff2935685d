/**
 * The replicas of `deployment` records across changes written through the store
 * (src/roles/deployment-replicas.ts): a workload whose deployment and model did not change keeps its
 * replica objects without being looked into, a changed deployment gets its replicas made again, and
 * the replica table is as a fresh apply of the same snapshot makes it. A change that leaves every
 * replica as it was is no change of the table (no `change` event: the health rows are not all read).
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigStore } from '../../src/config/store.js';
import { keyOf } from '../../src/config/record-meta.js';
import type { RawRecord } from '../../src/config/records.js';
import { silentLogger } from '../../src/log.js';
import { Metrics } from '../../src/admin/metrics.js';
import { systemClock } from '../../src/deps.js';
import { ReplicaRegistry, type Replica } from '../../src/routing/replicas.js';
import { DeploymentReplicas } from '../../src/roles/deployment-replicas.js';
import type { DataPlane } from '../../src/proxy/dataplane.js';
import { tempDir } from '../mesh/fixtures.js';

const NAMES = ['a', 'b', 'c', 'd'];

function workload(name: string, suspend = false): RawRecord {
  return { kind: 'workload', name, gvc: 'g', spec: { type: 'standard', containers: [{ name: 'app', image: 'x:1', ports: [{ number: 8080, protocol: 'http' }] }], defaultOptions: { suspend } } };
}

// `ready: false`: kept out of rotation by the record, so no probe dials anything.
function deployment(name: string, port: number): RawRecord {
  return { kind: 'deployment', name, gvc: 'g', status: { locations: [{ name: 'loc1', replicas: [{ name: `${name}-0`, address: `127.0.0.1:${port}`, ready: false }] }] } };
}

function replicasOf(registry: ReplicaRegistry): Map<string, Replica> {
  return new Map(NAMES.map((n) => [n, registry.list(`g/${n}`, 'loc1')[0]!] as const).filter(([, r]) => r !== undefined));
}

t.test('a change keeps the replicas of the workloads it did not touch, and makes the table a fresh apply makes', async (t) => {
  const dir = await tempDir(t, 'svcproxy-deployment-replicas-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify([
    { kind: 'org', name: 'o' }, { kind: 'location', name: 'loc1' },
    { kind: 'gvc', name: 'g', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
    ...NAMES.map((n) => workload(n)), ...NAMES.map((n, i) => deployment(n, 9000 + i)),
  ]));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());
  const logger = silentLogger();
  const dataplane = { upstreams: { forget: () => undefined }, forgetMesh: () => undefined } as unknown as DataPlane;
  const context = (registry: ReplicaRegistry) => ({ deps: { clock: systemClock, random: Math.random, logger }, logger, metrics: new Metrics(), registry, dataplane, current: () => store.current });
  const registry = new ReplicaRegistry();
  const deployments = new DeploymentReplicas(context(registry));
  t.teardown(() => deployments.close());
  let events = 0;
  registry.on('change', () => events++);
  deployments.apply(store.current);
  t.equal(events, 1, 'the first apply lists the replicas');
  const first = replicasOf(registry);
  t.equal(first.size, NAMES.length);

  const asFresh = (what: string): void => {
    const fresh = new ReplicaRegistry();
    const other = new DeploymentReplicas(context(fresh));
    other.apply(store.current);
    const shape = (r: ReplicaRegistry): unknown => r.all().map((x) => [x.workload, x.location, x.name, x.index, [...x.ports], x.ready]).sort();
    t.same(shape(registry), shape(fresh), `${what}: the table of a fresh apply`);
    other.close();
  };

  // a suspended: its model changes, its deployment and replica do not.
  t.ok((await store.write(keyOf('workload', 'a', 'g'), () => ({ put: workload('a', true) }))).ok);
  deployments.apply(store.current);
  const second = replicasOf(registry);
  for (const n of NAMES) t.equal(second.get(n), first.get(n), `suspend of a: ${n} keeps its replica object`);
  t.equal(events, 1, 'suspend of a: the same replicas, no change of the table');
  asFresh('suspend of a');

  // b's deployment moves to another port: its replica is made again, the others kept.
  t.ok((await store.write(keyOf('deployment', 'b', 'g'), () => ({ put: deployment('b', 9100) }))).ok);
  deployments.apply(store.current);
  const third = replicasOf(registry);
  t.not(third.get('b'), second.get('b'), 'b moved: a new replica');
  t.same(third.get('b')!.ports.get(8080), { host: '127.0.0.1', port: 9100 });
  for (const n of ['a', 'c', 'd']) t.equal(third.get(n), second.get(n), `b moved: ${n} keeps its replica object`);
  t.equal(events, 2, 'b moved: a change of the table');
  asFresh('b moved');

  // c's deployment deleted: its replica leaves the table.
  t.ok((await store.write(keyOf('deployment', 'c', 'g'), () => ({ delete: true }))).ok);
  deployments.apply(store.current);
  t.equal(registry.list('g/c', 'loc1').length, 0, 'c deleted: no replica');
  t.equal(replicasOf(registry).get('d'), first.get('d'), 'c deleted: d keeps its replica object');
  asFresh('c deleted');
});
