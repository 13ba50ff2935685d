/**
 * What `up` cannot run, as pure functions over compiled records (src/local/not-run.ts): why it runs
 * none of a workload (an image without a command, a cron workload, no container), what it runs only
 * in part or not as written (a container without a command beside others, a command it runs on this
 * machine instead of in its image, volumes it does not mount), which workloads
 * get a reason for their 503 (not those a deployment record serves, nor suspended or ignored ones),
 * and `up`'s sayer, which logs each line once: at start, then what a reload adds or brings back.
 */
import t from 'tap';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { noteOf, notRunNotes, notRunReason, partlyRunNotes } from '../../src/local/not-run.js';
import { ConfigStore } from '../../src/config/store.js';
import { keyOf } from '../../src/config/record-meta.js';
import type { RawRecord } from '../../src/config/records.js';
import { silentLogger } from '../../src/log.js';
import { tempDir } from '../mesh/fixtures.js';
import { prng, testSeed } from '../helpers/seed.js';
import { planReplicas, upRuns } from '../../src/local/plan.js';
import { notRunSayer } from '../../src/roles/up.js';
import { captureLogger } from './fixtures.js';

const OPEN = { external: { inboundAllowCIDR: ['0.0.0.0/0'] } };
const base = [
  { kind: 'gvc', name: 'g', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
];

function workload(name: string, spec: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: 'workload', name, ...extra, spec: { firewallConfig: OPEN, ...spec } };
}

const records = [
  ...base,
  workload('image', { containers: [{ name: 'server', image: 'shop/front:1', ports: [{ number: 8080 }] }] }),
  workload('two-images', { containers: [{ name: 'a', image: 'a:1' }, { name: 'b', image: 'b:2' }] }),
  workload('bare', { containers: [{ name: 'x' }] }),
  workload('none', { containers: [] }),
  workload('cron', { type: 'cron', containers: [{ name: 'job', image: 'busybox', command: '/bin/sh', args: ['-c', 'true'] }] }),
  workload('mixed', { containers: [{ name: 'app', command: 'node', args: ['app.js'] }, { name: 'proxy', image: 'envoy:1' }] }),
  workload('mounted', { containers: [{ name: 'db', command: 'redis-server', volumes: [{ uri: 'cpln://volumeset/data', path: '/data', recoveryPolicy: 'retain' }, { uri: 'cpln://secret/conf', path: '/etc/conf' }] }] }),
  workload('runs', { containers: [{ name: 'app', command: 'node', args: ['app.js'] }] }),
  workload('in-image', { containers: [{ name: 'db', image: 'redis:7', command: 'redis-server' }] }),
  workload('served', { containers: [{ name: 'app', image: 'api:1', ports: [{ number: 8080 }] }] }),
  workload('asleep', { containers: [{ name: 'app', image: 'api:1' }], defaultOptions: { suspend: true } }),
  workload('ignored', { containers: [{ name: 'app', image: 'api:1' }] }, { tags: { 'svc/ignore': true } }),
  { kind: 'deployment', name: 'served', status: { locations: [{ name: 'aws-us-east-2', replicas: [{ name: 'served-0', address: '127.0.0.1:9' }] }] } },
];

const snapshot = buildSnapshot(records, defaultSettings);
const model = (name: string) => snapshot.workloads.get(`g/${name}`)!;

t.test('notRunReason: why up runs none of a workload', async (t) => {
  const cases: [string, string | undefined][] = [
    ['image', 'svcproxy up runs no image (container server has image shop/front:1 and no command)'],
    ['two-images', 'svcproxy up runs no image (container a has image a:1 and no command; container b has image b:2 and no command)'],
    ['bare', 'svcproxy up runs only commands (container x has no command)'],
    ['none', 'svcproxy up runs nothing: the workload has no container'],
    ['cron', 'svcproxy up runs no cron workload (the platform runs it as a job on spec.job.schedule)'],
    ['mixed', undefined],
    ['mounted', undefined],
    ['runs', undefined],
    ['in-image', undefined],
  ];
  for (const [name, want] of cases) t.equal(notRunReason(model(name)), want, name);
  t.notOk(upRuns(model('cron'), 'svc'), 'a cron workload is not run, though it has a command');
  t.same(planReplicas(snapshot).map((p) => p.workload.name).sort(), ['in-image', 'mixed', 'mounted', 'runs'], 'the plan runs the rest');
});

t.test('partlyRunNotes: containers not run beside others, volumes not mounted', async (t) => {
  t.same(partlyRunNotes(model('mixed')), ['svcproxy up runs no image: container proxy has image envoy:1 and no command; the workload\'s other containers run']);
  t.same(partlyRunNotes(model('mounted')), ['svcproxy up mounts no volume: container db\'s /data (cpln://volumeset/data), /etc/conf (cpln://secret/conf) are not there for its process']);
  t.same(partlyRunNotes(model('in-image')), ['svcproxy up runs container db\'s command redis-server on this machine, not in image redis:7']);
  t.same(partlyRunNotes(model('runs')), [], 'a command and no image: run as written');
  t.same(partlyRunNotes(model('image')), [], 'a workload run not at all has its reason instead');
});

t.test('notRunNotes: a reason for the 503 only where nothing else serves the workload', async (t) => {
  const notes = notRunNotes(snapshot);
  t.equal(notes, notRunNotes(snapshot), 'made once per snapshot');
  t.match(notes.get('g/image'), { reason: /^svcproxy up runs no image/, lines: [/: its host names answer 503 no healthy upstream$/] });
  t.match(notes.get('g/served'), { lines: [/: the replicas of its deployment record serve it$/] });
  t.equal(notes.get('g/served')?.reason, undefined, 'its deployment replicas answer: no reason for a 503');
  t.equal(notes.get('g/asleep'), undefined, 'suspended: its 503 says so');
  t.equal(notes.get('g/ignored'), undefined, 'ignored: 404, warned at load');
  t.equal(notes.get('g/runs'), undefined);
  t.equal(notes.get('g/mixed')?.reason, undefined, 'run in part: no reason');
});

t.test('up says each line once: at start, then what a reload adds or brings back', async (t) => {
  const { logger, lines } = captureLogger();
  const say = notRunSayer(logger);
  say(snapshot);
  const first = lines.length;
  t.equal(first, 9, 'one line per workload run in part, elsewhere or not at all');
  t.ok(lines.every((l) => l.level === 40 && typeof l.workload === 'string' && l.gvc === 'g'), 'warnings with workload and gvc');
  say(snapshot);
  t.equal(lines.length, first, 'the same snapshot again: nothing');
  const changed = buildSnapshot([...records.filter((r) => r.name !== 'runs' && r.name !== 'image'), workload('runs', { containers: [{ name: 'app', image: 'now:2' }] })], defaultSettings);
  say(changed);
  t.same(lines.slice(first).map((l) => l.msg), ['workload g/runs: svcproxy up runs no image (container app has image now:2 and no command): its host names answer 503 no healthy upstream'], 'only the new line');
  say(snapshot);
  t.same(lines.slice(first + 1).map((l) => l.msg), ['workload g/image: svcproxy up runs no image (container server has image shop/front:1 and no command): its host names answer 503 no healthy upstream'], 'a workload back again is said again');
});

t.test('notRunNotes after generated changes through the store: each workload\'s note as made alone, from a copy', async (t) => {
  const seed = testSeed('NOT_RUN_SEED', 777);
  t.comment(`seed ${seed} (NOT_RUN_SEED=${seed} replays it)`);
  const draw = prng(seed);
  const random = (n: number): number => Math.floor(draw() * n);
  const dir = await tempDir(t, 'svcproxy-not-run-');
  const file = join(dir, 'records.json');
  const names = ['a', 'b', 'c', 'd', 'e', 'f'];
  const containers = [
    [{ name: 'app', image: 'api:1' }],
    [{ name: 'app', command: 'node' }],
    [{ name: 'app', command: 'node' }, { name: 'side', image: 'envoy:1' }],
    [{ name: 'job', image: 'busybox', command: 'sh' }],
  ];
  const generated = (name: string, n: number): RawRecord => ({
    ...workload(name, { containers: containers[n % containers.length], defaultOptions: { suspend: n % 5 === 0 } }, n % 7 === 0 ? { tags: { 'svc/ignore': true } } : {}),
    gvc: 'g',
  }) as RawRecord;
  const deployment = (name: string): RawRecord => ({ kind: 'deployment', name, gvc: 'g', status: { locations: [{ name: 'aws-us-east-2', replicas: [{ name: `${name}-0`, address: '127.0.0.1:9' }] }] } });
  await writeFile(file, JSON.stringify([...base, ...names.map((n, i) => generated(n, i))]));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());
  const { logger, lines } = captureLogger();
  const say = notRunSayer(logger);
  say(store.current);
  for (let step = 0; step < 60; step++) {
    const name = names[random(names.length)]!;
    const op = random(3);
    const result = op === 0
      ? await store.write(keyOf('workload', name, 'g'), () => ({ put: generated(name, random(40)) }))
      : await store.write(keyOf('deployment', name, 'g'), () => (op === 1 ? { put: deployment(name) } : { delete: true }));
    if (!result.ok) continue;
    const now = store.current;
    const got = [...notRunNotes(now)].sort();
    const copy = buildSnapshot(structuredClone(now.records) as RawRecord[], now.settings);
    const want = [...copy.workloads.values()].map((w) => [w.key, noteOf(w, copy)] as const).filter(([, n]) => n !== undefined).sort();
    t.same(got, want, `step ${step}: as every note made alone`);
    const before = lines.length;
    say(now);
    for (const l of lines.slice(before)) t.ok(got.some(([, n]) => n.lines.some((line) => l.msg === `workload ${n.workload}: ${line}`)), `step ${step}: said a line of its notes`);
  }
});
