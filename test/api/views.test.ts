/**
 * What the platform API shows of records (src/local/api/views.ts, quota.ts): a secret's view keeps
 * only its common fields and type, checked on generated secret records (seeded; `API_VIEW_SEED`
 * replays) whose data and unknown members hold marked values that must never appear; ids stable and
 * UUID-shaped; the CPU and memory quantities of quota CURRENT, a table and generated values.
 */
import t from 'tap';
import { recordView, stableId, selfLink, listOf } from '../../src/local/api/views.js';
import { cpuMillicores, memoryMiB } from '../../src/local/api/quota.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('API_VIEW_SEED', 20261127);

t.test(`a secret's view never carries its data (seed ${SEED})`, async (t) => {
  const random = prng(SEED);
  const word = (): string => Math.floor(random() * 36 ** 6).toString(36);
  const types = ['opaque', 'tls', 'gcp', 'aws', 'ecr', 'userpass', 'keypair', 'azure-sdk', 'azure-connector', 'docker', 'dictionary', 'nats-account'];
  for (let i = 0; i < 500; i++) {
    const marks: string[] = [];
    const mark = (): string => {
      const m = `SECRET${i}x${word()}`;
      marks.push(m);
      return m;
    };
    const nested = (depth: number): unknown => (depth === 0 || random() < 0.4 ? mark() : random() < 0.5 ? [nested(depth - 1), mark()] : { [word()]: nested(depth - 1), payload: mark() });
    const record: Record<string, unknown> = { kind: 'secret', name: `s${i}`, type: types[i % types.length], data: nested(3) };
    if (random() < 0.5) record.description = 'kept';
    if (random() < 0.5) record.tags = { team: 'kept' };
    // Members the spec does not show for a secret: not shown either, whatever they hold.
    if (random() < 0.5) record[word()] = nested(2);
    if (random() < 0.3) record.status = { revealed: mark() };
    const view = recordView(record, 'acme', '2026-01-01T00:00:00.000Z');
    const text = JSON.stringify(view);
    const leaked = marks.filter((m) => text.includes(m));
    if (leaked.length > 0) t.fail(`seed ${SEED}: secret s${i} shows ${leaked.join(', ')}: ${text}`);
    t.notOk('data' in view);
    for (const key of Object.keys(view)) {
      if (!['id', 'name', 'kind', 'version', 'description', 'tags', 'created', 'lastModified', 'type', 'links'].includes(key)) t.fail(`seed ${SEED}: member ${key} shown`);
    }
  }
});

t.test('views fill in the read-only common fields', async (t) => {
  const v = recordView({ kind: 'workload', name: 'w', gvc: 'g', spec: {} }, 'acme', '2026-01-01T00:00:00.000Z', 'g');
  t.match(v, { kind: 'workload', name: 'w', version: 1, created: '2026-01-01T00:00:00.000Z', lastModified: '2026-01-01T00:00:00.000Z' });
  t.same(v.links, [
    { rel: 'self', href: '/org/acme/gvc/g/workload/w' },
    { rel: 'org', href: '/org/acme' },
    { rel: 'gvc', href: '/org/acme/gvc/g' },
  ]);
  t.equal(v.id, stableId('workload/g/w'), 'derived from the record key, the same every run');
  const own = recordView({ kind: 'gvc', name: 'g', id: 'x', version: 4, created: 'c', lastModified: 'm' }, 'acme', 's');
  t.match(own, { id: 'x', version: 4, created: 'c', lastModified: 'm' });
  t.equal(selfLink('acme', 'secret', 'a/b'), '/org/acme/secret/a%2Fb');
  t.same(listOf('identity', [], '/x'), { kind: 'list', itemKind: 'identity', items: [], links: [{ rel: 'self', href: '/x' }] });
  t.same(listOf('identity', [], '/x', '/x?cursor=a').links, [{ rel: 'self', href: '/x' }, { rel: 'next', href: '/x?cursor=a' }]);
  const ids = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const id = stableId(`/org/acme/gvc/g${i}`);
    t.match(id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    ids.add(id);
  }
  t.equal(ids.size, 200);
});

t.test('CPU and memory quantities', async (t) => {
  const cpu: [unknown, number | undefined][] = [
    ['500m', 500], ['1', 1000], ['1.5', 1500], ['0.25', 250], [' 50m ', 50], [2, 2000], [0.1, 100],
    ['', undefined], ['m', undefined], ['1k', undefined], ['-1', undefined], [-1, undefined], [null, undefined], ['1.5m', 2],
  ];
  for (const [given, want] of cpu) t.equal(cpuMillicores(given), want, `cpu ${JSON.stringify(given)}`);
  const memory: [unknown, number | undefined][] = [
    ['128Mi', 128], ['1Gi', 1024], ['0.5Gi', 512], ['1Ti', 1048576], ['1024Ki', 1], ['1Ki', 1], ['500M', 477], ['1G', 954],
    [1048576, 1], ['1048576', 1], ['', undefined], ['1Xi', undefined], ['Mi', undefined], [null, undefined],
  ];
  for (const [given, want] of memory) t.equal(memoryMiB(given), want, `memory ${JSON.stringify(given)}`);
  const random = prng(SEED);
  const factor: Record<string, number> = { Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3, k: 1e3, M: 1e6, G: 1e9, '': 1 };
  for (let i = 0; i < 500; i++) {
    const n = Math.floor(random() * 5000);
    const unit = Object.keys(factor)[Math.floor(random() * 7)]!;
    // Bytes first, then MiB rounded up: an independent way to the same number.
    t.equal(memoryMiB(`${n}${unit}`), Math.ceil((n * factor[unit]!) / 1024 ** 2), `seed ${SEED}: ${n}${unit}`);
    t.equal(cpuMillicores(`${n}m`), n);
  }
});
