/**
 * The rate-limit service's answers, in fake time, with the in-memory store: fixed windows aligned to
 * the unit, the sliding window that never lets more than the limit through in any window (the
 * boundary burst included), unlimited and unmatched descriptors, shadow mode, several descriptors,
 * hits_addend, the client's limit override, invalid requests, and a failing or hanging store
 * answered UNAVAILABLE within its bound.
 */
import t from 'tap';
import * as grpc from '@grpc/grpc-js';
import { Registry } from 'prom-client';
import { silentLogger } from '../../src/log.js';
import { rulesFrom, type RuleSet } from '../../src/ratelimit/service/rules.js';
import { RateLimitService, RpcError, serviceMetrics } from '../../src/ratelimit/service/server.js';
import { MemoryStore } from '../../src/ratelimit/service/store-memory.js';
import type { Store } from '../../src/ratelimit/service/store.js';
import type { RateLimitRequest, RateLimitResponse } from '../../src/ratelimit/proto.js';
import { FakeClock } from '../local/fixtures.js';

const RULES = `
domain: edge
descriptors:
  - key: fixed
    rate_limit: {unit: minute, requests_per_unit: 3, name: three-a-minute}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 5, algorithm: sliding-window}
  - key: second
    rate_limit: {unit: second, requests_per_unit: 2, algorithm: sliding-window}
  - key: open
    rate_limit: {unlimited: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: zero
    rate_limit: {unit: hour, requests_per_unit: 0}
`;

function rules(source = RULES): RuleSet {
  const r = rulesFrom([{ file: 'rules.yaml', source }]);
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.rules;
}

function setup(opts: { store?: Store; source?: string } = {}) {
  const clock = new FakeClock();
  const registry = new Registry();
  const metrics = serviceMetrics(registry);
  const store = opts.store ?? new MemoryStore();
  const set = rules(opts.source);
  const service = new RateLimitService({ rules: () => set, store, clock, logger: silentLogger(), metrics, storeTimeoutMs: 200 });
  const ask = (key: string, value = 'v', hits?: number): Promise<RateLimitResponse> =>
    service.shouldRateLimit({ domain: 'edge', descriptors: [{ entries: [{ key, value }] }], ...(hits !== undefined ? { hits_addend: hits } : {}) });
  return { clock, registry, metrics, service, ask, store };
}

/** Wall time (fake) is 1_700_000_000_000 + now: :20 past a minute at the start. */
t.test('fixed window: counts per window aligned to the unit, as the reference server', async (t) => {
  const { clock, ask } = setup();
  const seen = [];
  for (let i = 0; i < 4; i++) {
    const r = await ask('fixed');
    seen.push([r.overall_code, r.statuses![0]!.limit_remaining, Number(r.statuses![0]!.duration_until_reset!.seconds)]);
  }
  t.same(seen, [['OK', 2, 40], ['OK', 1, 40], ['OK', 0, 40], ['OVER_LIMIT', 0, 40]]);
  const r = await ask('fixed');
  t.same(r.statuses![0]!.current_limit, { requests_per_unit: 3, unit: 'MINUTE', name: 'three-a-minute' });
  clock.advance(39_999);
  t.equal((await ask('fixed')).overall_code, 'OVER_LIMIT', 'still the same window at :59.999');
  t.equal(Number((await ask('fixed')).statuses![0]!.duration_until_reset!.seconds), 1);
  clock.advance(1);
  const fresh = await ask('fixed');
  t.same([fresh.overall_code, fresh.statuses![0]!.limit_remaining, Number(fresh.statuses![0]!.duration_until_reset!.seconds)], ['OK', 2, 60], 'a new window at :00');
  t.equal((await ask('fixed', 'other')).statuses![0]!.limit_remaining, 2, 'each value has its own counter');
});

t.test('fixed window lets 2x the limit through across a boundary; the sliding window does not', async (t) => {
  const { clock, ask } = setup();
  clock.advance(39_900); // :59.9
  let fixed = 0;
  let sliding = 0;
  for (let i = 0; i < 5; i++) {
    if ((await ask('fixed')).overall_code === 'OK') fixed++;
    if ((await ask('sliding')).overall_code === 'OK') sliding++;
  }
  clock.advance(200); // :00.1 of the next minute
  for (let i = 0; i < 5; i++) {
    if ((await ask('fixed')).overall_code === 'OK') fixed++;
    if ((await ask('sliding')).overall_code === 'OK') sliding++;
  }
  t.equal(fixed, 6, 'fixed: 3 + 3 within 200 ms');
  t.equal(sliding, 5, 'sliding: never more than 5 in any minute');
  const over = await ask('sliding');
  t.equal(over.overall_code, 'OVER_LIMIT');
  t.equal(Number(over.statuses![0]!.duration_until_reset!.seconds), 60, 'reset: when the oldest hit leaves the window');
  clock.advance(59_800); // the first five were at :59.9; now 59.9 s later... not yet a full minute
  t.equal((await ask('sliding')).overall_code, 'OVER_LIMIT', 'both ends of the window count');
  clock.advance(101);
  const again = await ask('sliding');
  t.same([again.overall_code, again.statuses![0]!.limit_remaining], ['OK', 4], 'quota frees up one window after the hits');
});

t.test('sliding window: no window of the unit ever holds more than the limit (randomized, fake time)', async (t) => {
  const { clock, ask } = setup();
  let seed = 42;
  const random = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const allowed: number[] = [];
  for (let i = 0; i < 3000; i++) {
    // Bursts and gaps: mostly a few ms apart, sometimes up to 1.5 s.
    clock.advance(random() < 0.9 ? Math.floor(random() * 20) : Math.floor(random() * 1500));
    const r = await ask('second');
    if (r.overall_code === 'OK') allowed.push(clock.now());
  }
  let worst = 0;
  let j = 0;
  for (let i = 0; i < allowed.length; i++) {
    while (allowed[j]! < allowed[i]! - 1000) j++;
    worst = Math.max(worst, i - j + 1); // hits in [t - 1 s, t], both ends included
  }
  t.equal(worst <= 2, true, `at most 2 in any second (worst ${worst})`);
  t.equal(worst, 2, 'and it does let the full limit through');
  t.ok(allowed.length > 100, `allowed ${allowed.length} of 3000`);
});

t.test('unlimited and unmatched descriptors are OK without a limit and never counted', async (t) => {
  let calls = 0;
  const store = new MemoryStore();
  const counting: Store = { kind: 'memory', ready: () => true, close: () => store.close(), check: (...a) => (calls++, store.check(...a)) };
  const { ask, service } = setup({ store: counting });
  for (let i = 0; i < 10; i++) {
    const r = await ask('open');
    t.same(r, { overall_code: 'OK', statuses: [{ code: 'OK' }] });
  }
  t.same(await ask('nobody'), { overall_code: 'OK', statuses: [{ code: 'OK' }] });
  t.same(await service.shouldRateLimit({ domain: 'elsewhere', descriptors: [{ entries: [{ key: 'fixed', value: 'v' }] }] }), { overall_code: 'OK', statuses: [{ code: 'OK' }] }, 'an unknown domain limits nothing');
  t.equal(calls, 0);
});

t.test('shadow mode: counted and reported, never OVER_LIMIT', async (t) => {
  const { ask, registry } = setup();
  t.equal((await ask('shadow')).overall_code, 'OK');
  const r = await ask('shadow');
  t.equal(r.overall_code, 'OK');
  t.same([r.statuses![0]!.code, r.statuses![0]!.limit_remaining], ['OK', 0]);
  t.match(await registry.metrics(), /svcproxy_ratelimit_service_shadow_over_limit_total\{domain="edge"\} 1/);
});

t.test('several descriptors: one status each, OVER_LIMIT when any is', async (t) => {
  const { service } = setup();
  const req: RateLimitRequest = {
    domain: 'edge',
    descriptors: [{ entries: [{ key: 'fixed', value: 'a' }] }, { entries: [{ key: 'zero', value: 'a' }] }, { entries: [{ key: 'open', value: 'a' }] }],
  };
  const r = await service.shouldRateLimit(req);
  t.equal(r.overall_code, 'OVER_LIMIT');
  t.same(r.statuses!.map((s) => s.code), ['OK', 'OVER_LIMIT', 'OK']);
  t.equal(r.statuses![0]!.limit_remaining, 2, 'the allowed descriptor was counted, as the reference server does');
});

t.test('hits_addend: 0 counts as 1; larger values count whole', async (t) => {
  const { ask } = setup();
  t.equal((await ask('fixed', 'h', 0)).statuses![0]!.limit_remaining, 2);
  t.equal((await ask('fixed', 'h', 2)).statuses![0]!.limit_remaining, 0);
  t.equal((await ask('sliding', 'h', 6)).overall_code, 'OVER_LIMIT', 'more than the whole limit at once');
  t.equal((await ask('sliding', 'h', 5)).statuses![0]!.limit_remaining, 0, 'a refused batch was not logged');
});

t.test("the client's limit override replaces the rules", async (t) => {
  const { service } = setup();
  const req: RateLimitRequest = { domain: 'edge', descriptors: [{ entries: [{ key: 'anything', value: 'x' }], limit: { requests_per_unit: 1, unit: 'HOUR' } }] };
  t.equal((await service.shouldRateLimit(req)).overall_code, 'OK');
  const r = await service.shouldRateLimit(req);
  t.equal(r.overall_code, 'OVER_LIMIT');
  t.same(r.statuses![0]!.current_limit, { requests_per_unit: 1, unit: 'HOUR' });
});

t.test('invalid requests are INVALID_ARGUMENT', async (t) => {
  const { service } = setup();
  await t.rejects(service.shouldRateLimit({ domain: '', descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] }), { code: grpc.status.INVALID_ARGUMENT });
  await t.rejects(service.shouldRateLimit({ domain: 'edge', descriptors: [] }), { code: grpc.status.INVALID_ARGUMENT });
});

t.test('a failing or hanging store: UNAVAILABLE, within the bound', async (t) => {
  const failing: Store = { kind: 'redis', ready: () => false, close: async () => undefined, check: () => Promise.reject(new Error('connection refused')) };
  const a = setup({ store: failing });
  const err = await a.ask('fixed').catch((e: unknown) => e);
  t.ok(err instanceof RpcError);
  t.equal((err as RpcError).code, grpc.status.UNAVAILABLE);
  t.match((err as Error).message, /connection refused/);
  t.match(await a.registry.metrics(), /svcproxy_ratelimit_service_redis_errors_total 1/);
  t.match(await a.registry.metrics(), /svcproxy_ratelimit_service_checks_total\{domain="edge",code="error"\} 1/);

  const hanging: Store = { kind: 'redis', ready: () => true, close: async () => undefined, check: () => new Promise(() => undefined) };
  const b = setup({ store: hanging });
  const pending = b.ask('fixed').then(() => 'answered', (e: RpcError) => e.code);
  b.clock.advance(199);
  await new Promise((r) => setImmediate(r));
  b.clock.advance(1);
  t.equal(await pending, grpc.status.UNAVAILABLE, 'answered at the 200 ms bound of fake time');
});

t.test('in-memory counters: no timer per check; a failing one is still UNAVAILABLE', async (t) => {
  const { clock, ask } = setup();
  const answer = ask('fixed');
  t.same(clock.pending(), [], 'nothing scheduled for the check');
  t.equal((await answer).overall_code, 'OK');
  const broken: Store = { kind: 'memory', ready: () => true, close: async () => undefined, check: () => Promise.reject(new Error('broken')) };
  const err = await setup({ store: broken }).ask('fixed').catch((e: unknown) => e);
  t.equal((err as RpcError).code, grpc.status.UNAVAILABLE);
  t.match((err as Error).message, /rate limit store failed: broken/);
});

t.test('metrics: checks by domain and code', async (t) => {
  const { ask, registry, service } = setup();
  await ask('zero');
  await ask('fixed');
  await service.shouldRateLimit({ domain: 'who', descriptors: [{ entries: [{ key: 'a', value: 'b' }] }] });
  const text = await registry.metrics();
  t.match(text, /svcproxy_ratelimit_service_checks_total\{domain="edge",code="over_limit"\} 1/);
  t.match(text, /svcproxy_ratelimit_service_checks_total\{domain="edge",code="ok"\} 1/);
  t.match(text, /svcproxy_ratelimit_service_checks_total\{domain="unknown",code="ok"\} 1/, 'domains without rules share one label');
});
