/**
 * Outlier ejection in fake time: the fifth consecutive failure ejects, success resets the count,
 * durations double and cap, at most half a location is ejected, readiness returning clears it; and
 * the latency EWMA.
 */
import t from 'tap';
import pino from 'pino';
import { OutlierDetector, BASE_EJECTION_MS, MAX_EJECTION_MS } from '../../src/routing/outlier.js';
import { ewma } from '../../src/routing/latency.js';
import { ReplicaRegistry, type Replica } from '../../src/routing/replicas.js';
import type { Clock } from '../../src/deps.js';

function setup(n: number) {
  let now = 1_000;
  const clock: Clock = { now: () => now, wallNow: () => now, setTimeout: () => ({}), clearTimeout: () => undefined };
  const registry = new ReplicaRegistry();
  const replicas: Replica[] = Array.from({ length: n }, (_, i) => ({
    workload: 'g/w', location: 'l', name: `w-${i}`, index: i, ports: new Map(), ready: true, outstanding: 0, ejectedUntil: 0,
  }));
  registry.replace('test', replicas);
  const ejected: number[] = [];
  const detector = new OutlierDetector(registry, clock, pino({ level: 'silent' }), { onEject: (_r, ms) => ejected.push(ms) });
  return { detector, replicas, registry, ejected, advance: (ms: number) => (now += ms), now: () => now };
}

t.test('the fifth consecutive failure ejects', async (t) => {
  const { detector, replicas, now } = setup(2);
  const r = replicas[0]!;
  for (let i = 0; i < 4; i++) detector.failure(r);
  t.equal(r.ejectedUntil, 0);
  detector.success(r);
  for (let i = 0; i < 4; i++) detector.failure(r);
  t.equal(r.ejectedUntil, 0, 'a success in between resets the count');
  detector.failure(r);
  t.equal(r.ejectedUntil, now() + BASE_EJECTION_MS);
});

t.test('durations double and cap at 5 minutes', async (t) => {
  const { detector, replicas, ejected, advance } = setup(2);
  const r = replicas[0]!;
  for (let round = 0; round < 6; round++) {
    for (let i = 0; i < 5; i++) detector.failure(r);
    advance(MAX_EJECTION_MS + 1);
  }
  t.same(ejected, [30_000, 60_000, 120_000, 240_000, 300_000, 300_000]);
});

t.test('never more than half of a location', async (t) => {
  const { detector, replicas } = setup(3);
  for (const r of replicas) for (let i = 0; i < 5; i++) detector.failure(r);
  t.equal(replicas.filter((r) => r.ejectedUntil > 0).length, 1, 'one of three');
  const lone = setup(1);
  for (let i = 0; i < 10; i++) lone.detector.failure(lone.replicas[0]!);
  t.equal(lone.replicas[0]!.ejectedUntil, 0, 'a lone replica is never ejected');
});

t.test('a replica that becomes ready again is back at once', async (t) => {
  const { detector, replicas, registry } = setup(2);
  const r = replicas[0]!;
  for (let i = 0; i < 5; i++) detector.failure(r);
  t.ok(r.ejectedUntil > 0);
  registry.setReady(r, false);
  registry.setReady(r, true);
  t.equal(r.ejectedUntil, 0);
});

t.test('EWMA', async (t) => {
  t.equal(ewma(undefined, 10), 10);
  t.equal(ewma(10, 20), 13);
  t.equal(ewma(10, 10), 10);
});
