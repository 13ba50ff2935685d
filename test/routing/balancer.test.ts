import t from 'tap';
import { pickReplica } from '../../src/routing/balancer.js';
import type { Replica } from '../../src/routing/replicas.js';
import { buildReplica } from '../helpers/snapshot.js';

/** A small deterministic PRNG (mulberry32), so failures reproduce. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const NOW = 1_000;

function set(...specs: Partial<Replica>[]): Replica[] {
  return specs.map((s, index) => ({ ...buildReplica({ index }), ...s }));
}

t.test('nothing eligible', async (t) => {
  const random = seeded(1);
  t.equal(pickReplica([], random, NOW), undefined, 'empty');
  t.equal(pickReplica(set({ ready: false }, { ready: false }), random, NOW), undefined, 'none ready');
  t.equal(pickReplica(set({ ejectedUntil: NOW + 1 }), random, NOW), undefined, 'ejected');
  t.equal(
    pickReplica(set({ ready: false, ejectedUntil: NOW + 1 }), random, NOW, { includeNotReady: true }),
    undefined,
    'includeNotReady still skips ejected',
  );
});

t.test('never picks a not-ready or ejected replica', async (t) => {
  const replicas = set(
    { ready: false },
    { ejectedUntil: NOW + 5 },
    {},
    { ready: false, outstanding: 0 },
    {},
    { ejectedUntil: NOW }, // ejection over: eligible again
  );
  const random = seeded(42);
  const seen = new Set<number>();
  for (let i = 0; i < 2000; i++) {
    const r = pickReplica(replicas, random, NOW)!;
    seen.add(r.index);
  }
  t.same([...seen].sort(), [2, 4, 5]);
});

t.test('includeNotReady admits not-ready replicas (publishNotReadyAddresses)', async (t) => {
  const replicas = set({ ready: false }, { ready: false, outstanding: 1 });
  const random = seeded(7);
  const seen = new Set<number>();
  for (let i = 0; i < 200; i++) seen.add(pickReplica(replicas, random, NOW, { includeNotReady: true })!.index);
  t.same([...seen], [0], 'two candidates: the less loaded always wins');
});

t.test('prefers the less loaded of two', async (t) => {
  const replicas = set({ outstanding: 5 }, { outstanding: 0 });
  const random = seeded(3);
  for (let i = 0; i < 100; i++) t.equal(pickReplica(replicas, random, NOW)!.index, 1);

  // With many replicas the busiest one can only win against itself, which two distinct choices
  // rule out: it is never picked.
  const many = set({ outstanding: 100 }, { outstanding: 1 }, { outstanding: 2 }, { outstanding: 3 });
  const counts = [0, 0, 0, 0];
  for (let i = 0; i < 4000; i++) counts[pickReplica(many, random, NOW)!.index]!++;
  t.equal(counts[0], 0, 'busiest never chosen');
  t.ok(counts[1]! > counts[2]! && counts[2]! > counts[3]!, `skewed toward idle: ${counts.join(',')}`);
});

t.test('spreads evenly over equally loaded replicas', async (t) => {
  const replicas = set({}, {}, {});
  const random = seeded(11);
  const counts = [0, 0, 0];
  for (let i = 0; i < 3000; i++) counts[pickReplica(replicas, random, NOW)!.index]!++;
  for (const n of counts) t.ok(n > 700 && n < 1300, `balanced: ${counts.join(',')}`);
});

t.test('random at the edges of [0, 1)', async (t) => {
  const replicas = set({}, {}, {});
  t.ok(pickReplica(replicas, () => 0, NOW));
  t.ok(pickReplica(replicas, () => 0.9999999999, NOW));
  t.ok(pickReplica(replicas, () => 1, NOW), 'a random source returning 1 does not index past the end');
});

t.test('exclude prefers another replica', async (t) => {
  const replicas = set({ outstanding: 0 }, { outstanding: 9 });
  const random = seeded(5);
  for (let i = 0; i < 50; i++) {
    t.equal(pickReplica(replicas, random, NOW, { exclude: replicas[0] })!.index, 1, 'the idle one is excluded');
  }
  const single = set({});
  t.equal(pickReplica(single, random, NOW, { exclude: single[0] }), single[0], 'only one: retried on it');
  const other = set({}, { ready: false });
  t.equal(pickReplica(other, random, NOW, { exclude: other[0] }), other[0], 'the only ready one');
  const ejected = set({ ejectedUntil: NOW + 1 });
  t.equal(pickReplica(ejected, random, NOW, { exclude: ejected[0] }), undefined, 'excluded and ejected');
  t.equal(pickReplica(set({}), random, NOW, { exclude: buildReplica({ index: 7 }) })!.index, 0, 'foreign exclude');
  t.equal(
    pickReplica(set({ ready: false }), random, NOW, { exclude: buildReplica({ index: 7 }) }),
    undefined,
    'an excluded replica from elsewhere is never returned',
  );
});
