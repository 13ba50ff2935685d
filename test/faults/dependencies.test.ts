/**
 * The services around the proxy die and come back while it is under load: the external
 * authorization server (fail-open by default: requests go through, marked for the app; fail-closed:
 * 403 `external authorization failed`), the rate-limit service (fail-closed by default: 503
 * `rate limit service unavailable`; `svc/rateLimitFailureAllow: true`: through), and the Redis behind
 * `svcproxy ratelimit` (the service fails fast, so the proxy answers 503 fast). Every request is
 * answered within the dependency's bound, and each recovers without restarting the proxy.
 */
import t from 'tap';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { silentLogger } from '../../src/log.js';
import { RateLimitApp } from '../../src/ratelimit/service/app.js';
import { ALIAS, records, startHttpServer, startPlane } from '../helpers/harness.js';
import { allow } from '../fixtures/extauth/servers.js';
import { freePort, redisMissing, startRedis } from '../fixtures/ratelimit/servers.js';
import { Load, eventually, send, sleep, startRestartableGrpcAuth, tally } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

/** The app answers with the failure-mode header it received ('-' when absent). */
const markerApp: http.RequestListener = (req, res) => {
  req.resume();
  req.on('end', () => res.end(String(req.headers['x-envoy-auth-failure-mode-allowed'] ?? '-')));
};

/** Load on one plane; each result notes the answer body (or the error code of a local reply). */
function loadOn(port: number): Load {
  return new Load(() => send(port, HOST, '/', {
    timeoutMs: 30_000,
    note: (res, body) => (res.headers['content-type'] === 'application/json' ? JSON.parse(body).code : body),
  // maxMs only stops a load a failure left running (stop() ends it); a busy machine makes the phases long.
  }), { concurrency: 3, pauseMs: 10, maxMs: 110_000 });
}

function describe(load: Load, phase: string): string {
  const r = tally(load.of(phase));
  const notes: Record<string, number> = {};
  for (const x of load.of(phase)) notes[`${x.outcome}:${x.note ?? ''}`] = (notes[`${x.outcome}:${x.note ?? ''}`] ?? 0) + 1;
  return `${phase}: ${r.sent} sent, ${r.answered} answered ${JSON.stringify(notes)}, slowest ${r.maxMs} ms`;
}

const outcomes = (load: Load, phase: string): string[] => [...new Set(load.of(phase).map((r) => `${r.outcome}:${r.note ?? ''}`))].sort();

const PHASES = ['before', 'down', 'down-settled', 'restarted', 'after'] as const;

/**
 * The kill-and-restart sequence every test here runs under its loads: 20 answers in phase `before`;
 * phase `down` is what is sent while the dependency is stopped (what was sent before it has all
 * finished); 30 answers in `down-settled`; then `whileDown` (a probe of the stopped state);
 * `restarted` starts with the dependency, and `recovered` is awaited (at most `recoveryMs`); 20
 * answers in `after`; the loads stopped. Returns whether and when it recovered, and what `whileDown`
 * saw.
 */
async function killAndRestart<W = undefined>(loads: readonly Load[], o: {
  stop(): unknown;
  start(): Promise<unknown>;
  recovered(): boolean;
  recoveryMs: number;
  whileDown?: () => Promise<W>;
}): Promise<{ recovered: boolean; recoveryMs: number; whileDown: W | undefined }> {
  const phase = (p: string): void => void loads.forEach((l) => (l.phase = p));
  await Promise.all(loads.map((l) => l.settle(20)));
  // What is sent from here on may meet the kill; what was sent before it must all have finished.
  phase('down');
  await Promise.all(loads.map((l) => l.quiesce('before')));
  await o.stop();
  await sleep(100);
  phase('down-settled');
  await Promise.all(loads.map((l) => l.settle(30)));
  const whileDown = await o.whileDown?.();
  phase('restarted');
  await Promise.all(loads.map((l) => l.quiesce('down-settled')));
  const restartedAt = performance.now();
  await o.start();
  const recovered = await eventually(o.recovered, o.recoveryMs);
  const recoveryMs = Math.round(performance.now() - restartedAt);
  phase('after');
  await Promise.all(loads.map((l) => l.settle(20)));
  await Promise.all(loads.map((l) => l.stop()));
  return { recovered, recoveryMs, whileDown };
}

t.test('the authorization server killed and restarted under load', async (t) => {
  const app = await startHttpServer(t, markerApp);
  const authPort = await freePort();
  const auth = await startRestartableGrpcAuth(t, authPort, () => allow());
  const tags = { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': authPort, 'svc/externalAuthScheme': 'http' };
  const open = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags }));
  const closed = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags: { ...tags, 'svc/externalAuthFailureAllow': false } }));
  await Promise.all([open.ready(), closed.ready()]);
  const loads = [loadOn(open.port), loadOn(closed.port)] as const;
  t.teardown(() => Promise.all(loads.map((l) => l.stop())));
  const { recovered, recoveryMs } = await killAndRestart(loads, {
    stop: () => auth.stop(),
    start: () => auth.start(),
    recovered: () => loads[1].of('restarted').some((r) => r.outcome === 200) && loads[0].of('restarted').some((r) => r.note === '-'),
    recoveryMs: 30_000,
  });

  for (const [name, load] of [['fail-open', loads[0]], ['fail-closed', loads[1]]] as const) {
    for (const p of PHASES) t.comment(`${name} ${describe(load, p)}`);
  }
  t.same(outcomes(loads[0], 'before'), ['200:-'], 'fail-open, auth up: 200, checked');
  t.same(outcomes(loads[0], 'down-settled'), ['200:true'], 'fail-open, auth down: 200, the app told x-envoy-auth-failure-mode-allowed: true');
  t.same(outcomes(loads[1], 'before'), ['200:-'], 'fail-closed, auth up: 200');
  t.same(outcomes(loads[1], 'down-settled'), ['403:AUTH_FAILED'], 'fail-closed, auth down: 403 external authorization failed');
  t.ok(outcomes(loads[0], 'down').every((o) => o.startsWith('200:')), 'fail-open: nothing but 200 across the kill');
  t.ok(outcomes(loads[1], 'down').every((o) => o === '200:-' || o === '403:AUTH_FAILED'), 'fail-closed: 200 or 403 across the kill, nothing else');
  for (const load of loads) {
    const all = tally(load.of());
    t.equal(all.sent, all.answered, `every request answered (${all.sent})`);
    t.ok(all.maxMs < 1500, `within the 1 s check bound (slowest ${all.maxMs} ms)`);
  }
  t.ok(recovered, `recovered without restarting the proxy (${recoveryMs} ms after the server came back)`);
  t.same(outcomes(loads[0], 'after'), ['200:-'], 'fail-open: checked again');
  t.same(outcomes(loads[1], 'after'), ['200:-'], 'fail-closed: allowed again');
  t.ok(auth.calls() > 0);
});

const rules = `
domain: svc
descriptors:
  - key: authority
    rate_limit: {unit: second, requests_per_unit: 1000000}
`;

function rulesFile(t: { teardown(fn: () => unknown): void }): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-faults-rl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'rules.yaml');
  writeFileSync(file, rules);
  return file;
}

t.test('the rate-limit service killed and restarted under load', async (t) => {
  const app = await startHttpServer(t, markerApp);
  const file = rulesFile(t);
  const rlPort = await freePort();
  const startService = async (): Promise<RateLimitApp> => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await RateLimitApp.start({ rules: [file], listen: { host: '127.0.0.1', port: rlPort }, logger: silentLogger(), watch: false });
      } catch (err) {
        if (attempt >= 20) throw err;
        await sleep(50);
      }
    }
  };
  let service = await startService();
  t.teardown(() => service.close(0));
  const tags = { 'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': rlPort, 'svc/rateLimitScheme': 'http' };
  const closed = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags }));
  const open = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags: { ...tags, 'svc/rateLimitFailureAllow': true } }));
  await Promise.all([open.ready(), closed.ready()]);
  const loads = [loadOn(closed.port), loadOn(open.port)] as const;
  t.teardown(() => Promise.all(loads.map((l) => l.stop())));
  const { recovered, recoveryMs } = await killAndRestart(loads, {
    stop: () => service.close(0),
    start: async () => (service = await startService()),
    recovered: () => loads[0].of('restarted').some((r) => r.outcome === 200),
    recoveryMs: 30_000,
  });

  for (const [name, load] of [['fail-closed', loads[0]], ['failure-allow', loads[1]]] as const) {
    for (const p of PHASES) t.comment(`${name} ${describe(load, p)}`);
  }
  t.same(outcomes(loads[0], 'before'), ['200:-'], 'service up: 200');
  t.same(outcomes(loads[0], 'down-settled'), ['503:RATE_LIMIT_UNAVAILABLE'], 'service down, fail-closed (the default): 503 rate limit service unavailable');
  t.same(outcomes(loads[1], 'down-settled'), ['200:-'], 'service down, svc/rateLimitFailureAllow: 200');
  t.ok(outcomes(loads[0], 'down').every((o) => o === '200:-' || o === '503:RATE_LIMIT_UNAVAILABLE'), 'across the kill: 200 or 503, nothing else');
  for (const load of loads) {
    const all = tally(load.of());
    t.equal(all.sent, all.answered, `every request answered (${all.sent})`);
    t.ok(all.maxMs < 1500, `within the 1 s check bound (slowest ${all.maxMs} ms)`);
  }
  t.ok(recovered, `recovered without restarting the proxy (${recoveryMs} ms after the service came back)`);
  t.same(outcomes(loads[0], 'after'), ['200:-'], 'checked and allowed again');
});

t.test('Redis killed and restarted under svcproxy ratelimit', { skip: redisMissing() }, async (t) => {
  const redis = await startRedis(t);
  const app = await startHttpServer(t, markerApp);
  const adminPort = await freePort();
  const service = await RateLimitApp.start({
    rules: [rulesFile(t)], redis: redis.url, listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: adminPort }, logger: silentLogger(), watch: false,
  });
  t.teardown(() => service.close(0));
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    tags: { 'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': service.address.port, 'svc/rateLimitScheme': 'http' },
  }));
  await plane.ready();
  const load = loadOn(plane.port);
  t.teardown(() => load.stop());
  const ready = async (): Promise<number> => (await fetch(`http://127.0.0.1:${adminPort}/ready`)).status;

  const { recovered, recoveryMs, whileDown: readyWhileDown } = await killAndRestart([load], {
    stop: () => redis.stop(),
    start: () => redis.start(),
    recovered: () => load.of('restarted').some((r) => r.outcome === 200),
    recoveryMs: 30_000,
    whileDown: ready,
  });

  for (const p of PHASES) t.comment(describe(load, p));
  t.same(outcomes(load, 'before'), ['200:-'], 'Redis up: 200');
  t.same(outcomes(load, 'down-settled'), ['503:RATE_LIMIT_UNAVAILABLE'], 'Redis down: 503 (the service answers UNAVAILABLE, the proxy is fail-closed)');
  const down = tally(load.of('down-settled'));
  t.ok(down.maxMs < 1000, `fast failures while down (slowest ${down.maxMs} ms, the service's store bound is 500 ms)`);
  t.equal(readyWhileDown, 503, 'the service is not ready while Redis is down');
  const all = tally(load.of());
  t.equal(all.sent, all.answered, `every request answered (${all.sent})`);
  t.ok(recovered, `recovered by itself once Redis was back (${recoveryMs} ms)`);
  t.same(outcomes(load, 'after'), ['200:-'], 'allowed again');
  t.equal(await ready(), 200, 'and ready again');
});
