/**
 * The health rows' watcher (src/local/workloads.ts `HealthWatch`) and the workload-record lookup it
 * leans on (src/local/plan.ts `findWorkloadRecord`): a readiness change re-evaluates the rows of its
 * workload alone and reports what changed; a change of the replica lists and the timer re-evaluate
 * every row; the lookup answers as a scan of the records does, on generated record sets.
 */
import t from 'tap';
import { buildSnapshot } from '../../src/config/snapshot.js';
import type { RawRecord } from '../../src/config/records.js';
import { workloadGvc } from '../../src/config/records.js';
import { findWorkloadRecord } from '../../src/local/plan.js';
import { HealthWatch, workloadStatuses, type HealthChange, type WorkloadStatus } from '../../src/local/workloads.js';
import type { Snapshot } from '../../src/config/model.js';
import { ReplicaRegistry, type Replica } from '../../src/routing/replicas.js';
import type { Timer } from '../../src/deps.js';

const LOCATION = 'aws-us-east-2';

function records(names: readonly string[], gvcs: readonly string[] = ['g']): RawRecord[] {
  return [
    { kind: 'org', name: 'o' },
    { kind: 'location', name: LOCATION },
    ...gvcs.map((g) => ({ kind: 'gvc', name: g, spec: { staticPlacement: { locationLinks: [`//location/${LOCATION}`] } } })),
    ...gvcs.flatMap((g) => names.map((name) => ({
      kind: 'workload', name, gvc: g,
      spec: { type: 'standard', containers: [{ name: 'app', image: 'x:1', ports: [{ number: 8080, protocol: 'http' }] }] },
    }))),
  ];
}

function replica(workload: string, name: string): Replica {
  return { workload, location: LOCATION, name, index: 0, ports: new Map([[8080, { host: '127.0.0.1', port: 1 }]]), ready: false, outstanding: 0, ejectedUntil: 0 };
}

/** A clock whose timer fires when the test says. */
function manualClock(): { setTimeout(fn: () => void, ms: number): Timer; clearTimeout(timer: Timer | undefined): void; fire(): void } {
  let due: (() => void) | undefined;
  return {
    setTimeout: (fn) => {
      due = fn;
      return {} as Timer;
    },
    clearTimeout: () => (due = undefined),
    fire: () => {
      const fn = due;
      due = undefined;
      fn?.();
    },
  };
}

/** The rows of the snapshot `current` gives, with each `only` they were asked for. */
function recorded(current: () => Snapshot, registry: ReplicaRegistry): { asked: (string | readonly string[] | undefined)[]; rows: (only?: string | readonly string[]) => WorkloadStatus[] } {
  const asked: (string | readonly string[] | undefined)[] = [];
  return {
    asked,
    rows: (only) => {
      asked.push(only);
      return workloadStatuses(current(), registry, undefined, 0, only);
    },
  };
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

t.test('HealthWatch: a readiness change re-evaluates its workload alone; list changes and the timer, every row', async (t) => {
  const snapshot = buildSnapshot(records(['a', 'b', 'c']));
  const registry = new ReplicaRegistry();
  const reps = ['a', 'b', 'c'].map((w) => replica(`g/${w}`, `${w}-0`));
  registry.replace('deployments', reps);
  const { asked, rows } = recorded(() => snapshot, registry);
  const changes: HealthChange[] = [];
  const clock = manualClock();
  const watch = new HealthWatch(rows, registry, clock, (c) => changes.push(c));
  t.same(asked, [undefined], 'the baseline reads every row');
  t.same(changes, [], 'the baseline reports nothing');

  asked.length = 0;
  registry.setReady(reps[1]!, true);
  registry.setReady(reps[1]!, false);
  registry.setReady(reps[1]!, true);
  await settle();
  t.same(asked, ['g/b'], 'three events of one workload in one job: its rows once, no other');
  t.same(changes.map((c) => [c.status.workload, c.from, c.status.health, c.status.ready]), [['b', 'Unhealthy', 'Healthy', 1]]);

  asked.length = 0;
  changes.length = 0;
  registry.setReady(reps[0]!, true);
  registry.setReady(reps[2]!, true);
  await settle();
  t.same(asked.sort(), ['g/a', 'g/c'], 'two workloads: each one\'s rows');
  t.same(changes.map((c) => c.status.workload).sort(), ['a', 'c']);

  asked.length = 0;
  changes.length = 0;
  registry.setReady(reps[0]!, false);
  registry.replace('deployments', reps.slice(1));
  await settle();
  t.same(asked, [undefined], 'a list change in the same job: one pass over every row covers the readiness change too');
  t.same(changes.map((c) => [c.status.workload, c.from, c.status.health]), [['a', 'Healthy', 'Unknown']], 'a, its replica gone');

  asked.length = 0;
  changes.length = 0;
  reps[2]!.ready = false; // changed behind the registry's back: only the timer's pass sees it
  clock.fire();
  t.same(asked, [['g/a', 'g/b', 'g/c']], 'the timer reads the rows of every workload');
  t.same(changes.map((c) => [c.status.workload, c.status.health]), [['c', 'Unhealthy']]);

  watch.stop();
  asked.length = 0;
  registry.setReady(reps[1]!, false);
  await settle();
  t.same(asked, [], 'stopped: no more reads');
});

t.test('HealthWatch: the timer\'s pass reads the workloads a slice per turn, then schedules the next', async (t) => {
  const names = Array.from({ length: 240 }, (_, i) => `w${i}`);
  const snapshot = buildSnapshot(records(names));
  const registry = new ReplicaRegistry();
  const reps = names.map((w) => ({ ...replica(`g/${w}`, `${w}-0`), ready: true }));
  registry.replace('deployments', reps);
  const { asked, rows } = recorded(() => snapshot, registry);
  const changes: HealthChange[] = [];
  const clock = manualClock();
  const watch = new HealthWatch(rows, registry, clock, (c) => changes.push(c));
  t.teardown(() => watch.stop());
  asked.length = 0;
  reps[220]!.ready = false; // behind the registry's back: only the timer's pass sees it
  clock.fire();
  t.same(asked.map((a) => (a as readonly string[]).length), [100], 'the first slice in the timer\'s turn');
  t.same(changes, [], 'the changed workload is in a later slice');
  clock.fire();
  t.equal(asked.length, 1, 'no next pass while this one runs');
  await settle();
  await settle();
  t.same(asked.map((a) => (a as readonly string[]).length), [100, 100, 40], 'the others a turn each');
  t.same((asked as string[][]).flat(), names.map((n) => `g/${n}`), 'every workload once, in order');
  t.same(changes.map((c) => [c.status.workload, c.status.health]), [['w220', 'Unhealthy']], 'reported');
  asked.length = 0;
  clock.fire();
  t.equal(asked.length, 1, 'the next pass scheduled when the last slice was read');
});

t.test('HealthWatch: a configuration that leaves the replicas alone re-evaluates the workloads it changed', async (t) => {
  const recs = records(['a', 'b', 'c']);
  let snapshot = buildSnapshot(recs);
  const registry = new ReplicaRegistry();
  const reps = ['a', 'b', 'c'].map((w) => ({ ...replica(`g/${w}`, `${w}-0`), ready: true }));
  registry.replace('deployments', reps);
  const { asked, rows } = recorded(() => snapshot, registry);
  const changes: HealthChange[] = [];
  let events = 0;
  registry.on('change', () => events++);
  const watch = new HealthWatch(rows, registry, manualClock(), (c) => changes.push(c));
  t.teardown(() => watch.stop());

  asked.length = 0;
  registry.replace('deployments', [...reps]);
  await settle();
  t.equal(events, 0, 'the same replicas again: no change of the lists');
  t.same(asked, [], 'and no row read');

  // b suspended: its replica stays listed, its row moves.
  snapshot = buildSnapshot(recs.map((r) => (r.name === 'b' && r.kind === 'workload' ? { ...r, spec: { ...(r.spec as object), defaultOptions: { suspend: true } } } : r)));
  watch.reconfigured(['g/b']);
  await settle();
  t.same(asked, ['g/b'], 'the changed workload\'s rows alone');
  const now = workloadStatuses(snapshot, registry, undefined, 0, 'g/b')[0]!.health;
  t.not(now, 'Healthy', `suspended with its replica still there: ${now}`);
  t.same(changes.map((c) => [c.status.workload, c.from, c.status.health]), [['b', 'Healthy', now]], 'reported');

  asked.length = 0;
  watch.reconfigured(['g/a', 'g/b', 'g/c']);
  await settle();
  t.same(asked, [undefined], 'most workloads changed (a reload of the files): every row in one pass');

  asked.length = 0;
  registry.replace('deployments', reps.slice(1));
  await settle();
  t.equal(events, 1, 'other replicas: a change');
  t.same(asked, [undefined], 'every row read');
});

t.test('findWorkloadRecord answers as a scan of the records does', async (t) => {
  let seed = 7;
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  for (let round = 0; round < 50; round++) {
    const names = Array.from({ length: 1 + random(12) }, (_, i) => `w${i}`);
    const gvcs = Array.from({ length: 1 + random(3) }, (_, i) => `g${i}`);
    const all = records(names, gvcs);
    // Some workloads removed from the records (a hand-built model may name one the records lack).
    const kept = all.filter((r) => r.kind !== 'workload' || random(4) > 0);
    const snapshot = buildSnapshot(all);
    const recordsOf = Object.freeze(kept.map((r) => Object.freeze(r)));
    for (const w of snapshot.workloads.values()) {
      const scan = recordsOf.find((r) => r.kind === 'workload' && r.name === w.name && workloadGvc(r) === w.gvc);
      t.equal(findWorkloadRecord(recordsOf, w), scan, `round ${round}: ${w.key}`);
    }
  }
  t.end();
});
