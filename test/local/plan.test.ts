import t from 'tap';
import { planReplicas, plannedCount, replicaCount } from '../../src/local/plan.js';
import { workloadVersion } from '../../src/local/env.js';
import { DEFAULT_ORG } from '../../src/mesh/index.js';
import { container, snapshot, workload } from './fixtures.js';

t.test('replicaCount', async (t) => {
  const cases: [string, { suspend: boolean; minScale: number; maxScale: number }, number][] = [
    ['default', { suspend: false, minScale: 1, maxScale: 5 }, 1],
    ['minScale 3', { suspend: false, minScale: 3, maxScale: 5 }, 3],
    ['capped by maxScale', { suspend: false, minScale: 3, maxScale: 2 }, 2],
    ['minScale 0: nothing until a request', { suspend: false, minScale: 0, maxScale: 5 }, 0],
    ['suspended', { suspend: true, minScale: 3, maxScale: 5 }, 0],
    ['maxScale 0', { suspend: false, minScale: 1, maxScale: 0 }, 0],
  ];
  for (const [name, options, want] of cases) t.equal(replicaCount(options), want, name);
  // The scaler's count wins over minScale, within maxScale, never while suspended.
  t.equal(replicaCount({ suspend: false, minScale: 0, maxScale: 5 }, 1), 1, 'woken from zero');
  t.equal(replicaCount({ suspend: false, minScale: 1, maxScale: 5 }, 4), 4, 'scaled up');
  t.equal(replicaCount({ suspend: false, minScale: 1, maxScale: 3 }, 9), 3, 'never above maxScale');
  t.equal(replicaCount({ suspend: true, minScale: 1, maxScale: 3 }, 2), 0, 'never while suspended');
});

t.test('planReplicas: per location, names, skips', async (t) => {
  const api = workload({ name: 'api', defaultOptions: { minScale: 2 }, localOptions: { 'gcp-us-east1': { minScale: 1 } } });
  const sleepy = workload({ name: 'sleepy', localOptions: { 'aws-us-east-2': { suspend: true } } });
  const off = workload({ name: 'off', defaultOptions: { suspend: true } });
  const zero = workload({ name: 'zero', defaultOptions: { maxScale: 0 } });
  const image = workload({ name: 'image-only', containers: [container({ image: 'nginx' })] });
  const mixed = workload({
    name: 'mixed',
    containers: [container({ name: 'side', image: 'envoy' }), container({ name: 'main', command: '/bin/app', ports: [{ number: 9000, protocol: 'http' }] })],
  });
  const withCommand = (w: ReturnType<typeof workload>) =>
    workload({ name: w.name, defaultOptions: w.defaultOptions, localOptions: Object.fromEntries(w.locationOptions), containers: w.containers.map((c) => ({ ...c, command: c.command ?? '/bin/app' })) });
  const snap = snapshot({ workloads: [withCommand(api), withCommand(sleepy), withCommand(off), withCommand(zero), image, mixed] });
  const plans = planReplicas(snap);
  t.same(
    plans.map((p) => `${p.workload.name}@${p.location.name}/${p.name}`),
    [
      'api@aws-us-east-2/api-0',
      'api@aws-us-east-2/api-1',
      'api@gcp-us-east1/api-0',
      'sleepy@gcp-us-east1/sleepy-0',
      'mixed@aws-us-east-2/mixed-0',
      'mixed@gcp-us-east1/mixed-0',
    ],
  );
  // One workload's count in one location (what the health rows ask) is what the whole plan has there.
  for (const w of snap.workloads.values()) {
    for (const location of ['aws-us-east-2', 'gcp-us-east1', 'nowhere']) {
      t.equal(plannedCount(snap, w, location), plans.filter((p) => p.workload === w && p.location.name === location).length, `plannedCount ${w.name}@${location}`);
    }
  }
  const mixedPlan = plans.find((p) => p.workload.name === 'mixed')!;
  t.same(mixedPlan.containers.map((c) => c.name), ['main'], 'only containers with a command');
  t.equal(mixedPlan.key, 'demo/mixed|aws-us-east-2|0');
  t.equal(mixedPlan.location.provider, 'aws');
  t.equal(mixedPlan.vendor, 'svc');
  t.equal(mixedPlan.org, 'acme');
});

t.test('planReplicas: without an org record, the org of the mesh identities (SVC_ORG is never empty)', async (t) => {
  const [plan] = planReplicas(snapshot({ org: null, workloads: [workload({ name: 'api', containers: [container({ command: '/bin/a' })] })] }));
  t.equal(plan!.org, DEFAULT_ORG);
});

t.test('planReplicas: fingerprint and version', async (t) => {
  const a = workload({ name: 'api', containers: [container({ command: '/bin/a' })] });
  const record = { kind: 'workload', name: 'api', gvc: 'demo', spec: { containers: [{ name: 'app', command: '/bin/a' }] } };
  const [p1] = planReplicas(snapshot({ workloads: [a], records: [record] }));
  t.equal(p1!.workloadVersion, workloadVersion(record), 'version from the raw record');
  const scaled = workload({ name: 'api', containers: [container({ command: '/bin/a' })], defaultOptions: { minScale: 2 } });
  const p2 = planReplicas(snapshot({ workloads: [scaled] }));
  t.equal(p2[0]!.fingerprint, p1!.fingerprint, 'scale does not change the fingerprint');
  const changed = workload({ name: 'api', containers: [container({ command: '/bin/a', env: [{ name: 'X', value: '1' }] })] });
  t.not(planReplicas(snapshot({ workloads: [changed] }))[0]!.fingerprint, p1!.fingerprint, 'env change does');
  t.not(planReplicas(snapshot({ workloads: [a], vendor: 'cpln' }))[0]!.fingerprint, p1!.fingerprint, 'vendor change does');
});

t.test('planReplicas: a workload tagged svc/ignore: true gets no replica (and false, or another vendor\'s tag, changes nothing)', async (t) => {
  const cmd = [container({ command: '/bin/app' })];
  const ignored = { ...workload({ name: 'ignored', containers: cmd }), tags: { 'svc/ignore': 'true' } };
  const notIgnored = { ...workload({ name: 'kept', containers: cmd }), tags: { 'svc/ignore': 'false' } };
  const otherVendor = { ...workload({ name: 'other', containers: cmd }), tags: { 'cpln/ignore': 'true' } };
  const plans = planReplicas(snapshot({ workloads: [ignored, notIgnored, otherVendor] }));
  t.same([...new Set(plans.map((p) => p.workload.name))], ['kept', 'other']);
});
