/**
 * The Redis store against a real redis-server (started per test on a free port, no persistence):
 * its Lua script answers exactly as the in-memory store for both algorithms (same fake times), two
 * service instances on one Redis enforce one shared limit, and Redis stopped then restarted: checks
 * fail fast while it is down (the client's failure mode decides), and recover by themselves after.
 * An unreachable Redis at start is a clear error. Skipped only when redis-server is not installed.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { silentLogger } from '../../src/log.js';
import { systemClock } from '../../src/deps.js';
import { RateLimitApp } from '../../src/ratelimit/service/app.js';
import { runRateLimitService } from '../../src/ratelimit/service/cli.js';
import { MemoryStore } from '../../src/ratelimit/service/store-memory.js';
import { RedisStore, redactRedisUrl } from '../../src/ratelimit/service/store-redis.js';
import type { CounterCheck } from '../../src/ratelimit/service/store.js';
import { envoyRls, freePort, redisMissing, SERVICE, startRedis, type TapLike } from '../fixtures/ratelimit/servers.js';

const skip = redisMissing();
if (skip) t.comment(`SKIP Redis-backed tests: ${skip}`);

const RULES = `
domain: shared
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: burst
    rate_limit: {unit: second, requests_per_unit: 3, algorithm: sliding-window}
`;

function rulesFile(t: TapLike): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-rl-redis-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'rules.yaml');
  writeFileSync(file, RULES);
  return file;
}

type Client = grpc.Client & {
  ShouldRateLimit(req: unknown, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res?: { overall_code: string; statuses: { limit_remaining: number }[] }) => void): void;
};

function client(t: TapLike, port: number): Client {
  const Ctor = grpc.makeClientConstructor(envoyRls()[SERVICE] as unknown as grpc.ServiceDefinition, SERVICE);
  const c = new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as Client;
  t.teardown(() => c.close());
  return c;
}

function ask(c: Client, key: string, value: string, timeoutMs = 1000): Promise<{ code: string; remaining?: number; grpc?: number; ms: number }> {
  const started = Date.now();
  return new Promise((resolve) => {
    c.ShouldRateLimit({ domain: 'shared', descriptors: [{ entries: [{ key, value }] }], hits_addend: 1 }, { deadline: Date.now() + timeoutMs }, (err, res) => {
      const ms = Date.now() - started;
      if (err) resolve({ code: 'ERROR', grpc: err.code, ms });
      else resolve({ code: res!.overall_code, remaining: res!.statuses[0]!.limit_remaining, ms });
    });
  });
}

t.test('the Lua script answers as the in-memory store, both algorithms, same fake times', { skip }, async (t) => {
  const redis = await startRedis(t);
  const store = await RedisStore.connect(redis.url, { logger: silentLogger() });
  t.teardown(() => store.close());
  const memory = new MemoryStore();
  const checks: CounterCheck[] = [
    { key: 'd/k=fixed', limit: 4, windowSeconds: 60, algorithm: 'fixed-window' },
    { key: 'd/k=sliding', limit: 4, windowSeconds: 2, algorithm: 'sliding-window' },
  ];
  let now = 1_700_000_000_000;
  let seed = 7;
  const random = (): number => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  for (let i = 0; i < 400; i++) {
    now += random() < 0.8 ? Math.floor(random() * 100) : Math.floor(random() * 3000);
    const hits = random() < 0.9 ? 1 : 2;
    const fromRedis = await store.check(checks, hits, now);
    const fromMemory = memory.checkNow(checks, hits, now);
    if (JSON.stringify(fromRedis) !== JSON.stringify(fromMemory)) {
      t.same(fromRedis, fromMemory, `step ${i} at ${now}`);
      return;
    }
  }
  t.pass('400 steps, identical answers');
});

t.test('two service instances on one Redis enforce one shared limit', { skip }, async (t) => {
  const redis = await startRedis(t);
  const file = rulesFile(t);
  // Both instances read one fixed wall time (mid-minute), so no window boundary falls inside the test.
  const clock = { ...systemClock, wallNow: () => 1_700_000_010_000 };
  const apps = await Promise.all([0, 1].map(() => RateLimitApp.start({ rules: [file], redis: redis.url, listen: { host: '127.0.0.1', port: 0 }, logger: silentLogger(), watch: false, clock })));
  for (const app of apps) t.teardown(() => app.close(0));
  const clients = apps.map((a) => client(t, a.address.port));
  const answers: string[] = [];
  for (let i = 0; i < 14; i++) answers.push((await ask(clients[i % 2]!, 'user', 'alice')).code);
  t.same(answers.filter((a) => a === 'OK').length, 10, 'ten in the minute across both instances (fixed window)');
  t.same(answers.slice(10), ['OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT', 'OVER_LIMIT']);
  const burst = await Promise.all(Array.from({ length: 8 }, (_, i) => ask(clients[i % 2]!, 'burst', 'bob')));
  t.equal(burst.filter((b) => b.code === 'OK').length, 3, 'concurrent checks on both: exactly the sliding limit');
});

t.test('Redis stopped: fast UNAVAILABLE, not ready; restarted: recovers by itself', { skip }, async (t) => {
  const redis = await startRedis(t);
  const file = rulesFile(t);
  const adminPort = await freePort();
  const app = await RateLimitApp.start({
    rules: [file], redis: redis.url, listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: adminPort }, logger: silentLogger(), watch: false,
  });
  t.teardown(() => app.close(0));
  const c = client(t, app.address.port);
  t.equal((await ask(c, 'user', 'carol')).code, 'OK');
  t.equal((await fetch(`http://127.0.0.1:${adminPort}/ready`)).status, 200);

  await redis.stop();
  const down = [];
  for (let i = 0; i < 5; i++) down.push(await ask(c, 'user', 'carol'));
  for (const d of down) {
    t.equal(d.grpc, grpc.status.UNAVAILABLE, 'UNAVAILABLE while Redis is down');
    t.ok(d.ms < 700, `answered in ${d.ms} ms, within the client's 1 s deadline`);
  }
  t.equal((await fetch(`http://127.0.0.1:${adminPort}/ready`)).status, 503, 'not ready while Redis is down');
  t.match(await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text(), /svcproxy_ratelimit_service_redis_errors_total [1-9]/);

  await redis.start();
  const deadline = Date.now() + 10_000;
  let back: Awaited<ReturnType<typeof ask>> | undefined;
  while (Date.now() < deadline) {
    back = await ask(c, 'user', 'carol');
    if (back.code !== 'ERROR') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(back?.code, 'OK', 'checks work again once Redis is back');
  t.equal(back?.remaining, 9, 'the restarted (empty) Redis counts from zero');
  t.equal((await fetch(`http://127.0.0.1:${adminPort}/ready`)).status, 200);
});

t.test('an unreachable Redis at start: exit 1 with the URL and the reason', { skip }, async (t) => {
  const port = await freePort();
  const url = `redis://user:s3cret@127.0.0.1:${port}`;
  await t.rejects(
    RateLimitApp.start({ rules: [rulesFile(t)], redis: url, listen: { host: '127.0.0.1', port: 0 }, logger: silentLogger(), watch: false }),
    { message: `cannot reach Redis at ${redactRedisUrl(url)}: connect ECONNREFUSED 127.0.0.1:${port}` },
  );
  t.notMatch(redactRedisUrl(url), /s3cret/, 'the password is not shown');

  const written: string[] = [];
  const write = process.stderr.write;
  process.stderr.write = ((chunk: string) => (written.push(String(chunk)), true)) as typeof process.stderr.write;
  let code: number;
  try {
    code = await runRateLimitService({ config: [rulesFile(t)], redis: url, listen: ['127.0.0.1:0'] }, silentLogger());
  } finally {
    process.stderr.write = write;
  }
  t.equal(code, 1);
  t.match(written.join(''), `svcproxy ratelimit: cannot reach Redis at redis://user:***@127.0.0.1:${port}: connect ECONNREFUSED`);
});
