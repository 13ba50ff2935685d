import t from 'tap';
import { chooseLocation, geoCandidates, type GeoCandidate } from '../../src/routing/geo.js';
import { ReplicaRegistry } from '../../src/routing/replicas.js';
import { buildReplica, buildSnapshot, workloadOf } from '../helpers/snapshot.js';

/** Candidate shorthand: name, available, latency, tier, offset, tolerance. */
function c(
  name: string,
  latency?: number,
  more: { available?: boolean; tier?: number; offset?: number; tolerance?: number } = {},
): GeoCandidate {
  return {
    name,
    available: more.available ?? true,
    measuredLatencyMs: latency,
    routingTier: more.tier,
    latencyOffsetMs: more.offset ?? 0,
    latencyToleranceMs: more.tolerance,
  };
}

const table: [string, GeoCandidate[], string | undefined][] = [
  ['no candidates', [], undefined],
  ['nothing available', [c('a', 10, { available: false }), c('b', 5, { available: false })], undefined],
  ['single', [c('a', 50)], 'a'],
  ['lowest latency', [c('a', 50), c('b', 20), c('c', 30)], 'b'],
  ['unavailable dropped', [c('a', 50), c('b', 20, { available: false })], 'a'],
  ['tie keeps gvc order', [c('a', 20), c('b', 20)], 'a'],
  ['positive offset pushes away', [c('a', 20, { offset: 50 }), c('b', 40)], 'b'],
  ['negative offset attracts', [c('a', 20), c('b', 40, { offset: -30 })], 'b'],
  ['offset tie keeps gvc order', [c('a', 30), c('b', 20, { offset: 10 })], 'a'],
  // tiers: the lowest tier group wins even when slower
  ['lower tier wins', [c('a', 10, { tier: 2 }), c('b', 90, { tier: 1 })], 'b'],
  ['best in the best tier', [c('a', 10, { tier: 2 }), c('b', 90, { tier: 1 }), c('c', 40, { tier: 1 })], 'c'],
  ['tier 0 beats tier 1', [c('a', 1, { tier: 1 }), c('b', 100, { tier: 0 })], 'b'],
  ['best tier unavailable: next tier', [c('a', 10, { tier: 2 }), c('b', 5, { tier: 1, available: false })], 'a'],
  ['untiered ranks after tiered', [c('a', 1), c('b', 100, { tier: 5 })], 'b'],
  ['only untiered left', [c('a', 30), c('b', 100, { tier: 5, available: false }), c('c', 20)], 'c'],
  ['negative tier', [c('a', 1, { tier: 0 }), c('b', 100, { tier: -1 })], 'b'],
  // tolerance
  ['over tolerance dropped', [c('a', 10, { tolerance: 5 }), c('b', 50)], 'b'],
  ['at tolerance kept', [c('a', 10, { tolerance: 10 }), c('b', 50)], 'a'],
  ['tolerance drops the better tier', [c('a', 80, { tier: 1, tolerance: 50 }), c('b', 90, { tier: 2 })], 'b'],
  ['tolerance compares measured latency, not the offset', [c('a', 40, { offset: 100, tolerance: 50 }), c('b', 100)], 'b'],
  ['tolerance ignores the offset (kept)', [c('a', 40, { offset: 30, tolerance: 50 }), c('b', 100)], 'a'],
  ['everything over tolerance: all kept', [c('a', 80, { tolerance: 50 }), c('b', 60, { tolerance: 50 })], 'b'],
  [
    'everything available over tolerance, tiers still apply',
    [c('a', 80, { tier: 1, tolerance: 50 }), c('b', 60, { tier: 2, tolerance: 50 }), c('c', 1, { available: false })],
    'a',
  ],
  ['unavailable within tolerance does not count', [c('a', 10, { available: false }), c('b', 90, { tolerance: 50 })], 'b'],
  // unknown latency ranks after every measured location of its tier
  ['unknown after known', [c('a'), c('b', 300)], 'b'],
  ['unknown ones by offset', [c('a', undefined, { offset: 20 }), c('b', undefined, { offset: -5 })], 'b'],
  ['all unknown: gvc order', [c('a'), c('b')], 'a'],
  ['unknown in a better tier still wins', [c('a', undefined, { tier: 1 }), c('b', 1, { tier: 2 })], 'a'],
  ['unknown is never over tolerance', [c('a', undefined, { tolerance: 1 }), c('b', 5, { tolerance: 1 })], 'a'],
  ['NaN counts as unknown', [c('a', Number.NaN), c('b', 10)], 'b'],
];

t.test('chooseLocation', async (t) => {
  for (const [name, candidates, want] of table) t.equal(chooseLocation(candidates), want, name);
});

t.test('geoCandidates builds candidates from the model', async (t) => {
  const snapshot = buildSnapshot({
    locations: [{ name: 'gcp-us-east1', latencyMs: 42 }],
    gvcs: [
      {
        name: 'g',
        locations: ['aws-us-west-2', 'gcp-us-east1', 'azure-eastus', 'aws-eu-west-1'],
        locationOptions: {
          'aws-us-west-2': { routingTier: 1, latencyOffsetMs: 10, latencyToleranceMs: 100 },
          'gcp-us-east1': { latencyOffsetMs: -5 },
        },
      },
    ],
    workloads: [
      { name: 'w', localOptions: { 'azure-eastus': { suspend: true }, 'aws-eu-west-1': { maxScale: 0 } } },
      { name: 'off', defaultOptions: { suspend: true } },
    ],
  });
  const registry = new ReplicaRegistry();
  registry.replace('test', [
    buildReplica({ workload: 'g/w', location: 'aws-us-west-2' }),
    buildReplica({ workload: 'g/w', location: 'gcp-us-east1', ready: false }),
    buildReplica({ workload: 'g/w', location: 'azure-eastus' }),
    buildReplica({ workload: 'g/w', location: 'aws-eu-west-1' }),
    buildReplica({ workload: 'g/off', location: 'aws-us-west-2' }),
  ]);
  const latencyOf = (loc: string): number | undefined => (loc === 'aws-us-west-2' ? 12 : loc === 'gcp-us-east1' ? 999 : undefined);

  const got = geoCandidates(snapshot, workloadOf(snapshot, 'w'), registry, latencyOf);
  t.same(got, [
    { name: 'aws-us-west-2', available: true, measuredLatencyMs: 12, routingTier: 1, latencyOffsetMs: 10, latencyToleranceMs: 100 },
    // pinned latency wins over the measured one; no ready replica
    { name: 'gcp-us-east1', available: false, measuredLatencyMs: 42, routingTier: undefined, latencyOffsetMs: -5, latencyToleranceMs: undefined },
    // suspended in this location
    { name: 'azure-eastus', available: false, measuredLatencyMs: undefined, routingTier: undefined, latencyOffsetMs: 0, latencyToleranceMs: undefined },
    // maxScale 0 in this location
    { name: 'aws-eu-west-1', available: false, measuredLatencyMs: undefined, routingTier: undefined, latencyOffsetMs: 0, latencyToleranceMs: undefined },
  ]);
  t.equal(chooseLocation(got), 'aws-us-west-2');

  registry.setReady(registry.list('g/w', 'gcp-us-east1')[0]!, true);
  const later = geoCandidates(snapshot, workloadOf(snapshot, 'w'), registry, latencyOf);
  t.equal(chooseLocation(later), 'aws-us-west-2', 'tier 1 beats the untiered location');

  const off = geoCandidates(snapshot, workloadOf(snapshot, 'off'), registry, latencyOf);
  t.ok(off.every((x) => !x.available), 'globally suspended: nothing available');
  t.equal(chooseLocation(off), undefined);
});
