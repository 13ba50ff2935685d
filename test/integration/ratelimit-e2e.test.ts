/**
 * End to end: a data plane (startPlane) whose workload is tagged `svc/rateLimitAddress: 127.0.0.1`,
 * `svc/rateLimitPort`, `svc/rateLimitScheme: http`, against svcproxy's own rate-limit service started
 * in-process from a rules file: nested descriptors, both algorithms, the x-ratelimit-* headers as the
 * service counts, hot reload of the rules file (a good one applies, a bad one is rejected whole and
 * the old rules stay), the service's metrics, and fail-closed once the service is gone.
 */
import t from 'tap';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { systemClock } from '../../src/deps.js';
import { silentLogger } from '../../src/log.js';
import { RateLimitApp } from '../../src/ratelimit/service/app.js';
import { findLimit } from '../../src/ratelimit/service/match.js';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, waitFor } from '../helpers/harness.js';
import { freePort } from '../fixtures/ratelimit/servers.js';

const HOST = `api-${ALIAS}.app.localhost`;

const rules = (login: number): string => `
domain: edge
descriptors:
  - key: remote_address
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: ${login}, name: login}
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 3, algorithm: sliding-window}
`;

t.test('the proxy against our own rate-limit service', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-rl-e2e-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'rules.yaml');
  writeFileSync(file, rules(2));
  const adminPort = await freePort();
  // One fixed wall time (mid-minute): no window boundary falls inside the test.
  const clock = { ...systemClock, wallNow: () => 1_700_000_010_000 };
  const service = await RateLimitApp.start({
    rules: [file], listen: { host: '127.0.0.1', port: 0 }, admin: { host: '127.0.0.1', port: adminPort }, logger: silentLogger(), clock,
  });
  t.teardown(() => service.close(0));

  const app = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    tags: {
      'svc/rateLimitAddress': '127.0.0.1',
      'svc/rateLimitPort': String(service.address.port),
      'svc/rateLimitScheme': 'http',
      'svc/rateLimitDomain': 'edge',
      'svc/rateLimitDescriptors': 'remote_address,path',
    },
  }));
  await plane.ready();

  const login = [];
  for (let i = 0; i < 3; i++) login.push(await request(plane.port, HOST, '/login'));
  t.same(login.map((r) => r.status), [200, 200, 429], 'two logins a minute (fixed window)');
  t.same(login.map((r) => [r.headers['x-ratelimit-limit'], r.headers['x-ratelimit-remaining'], r.headers['x-ratelimit-reset']]), [
    ['2, 2;w=60;name="login"', '1', '30'],
    ['2, 2;w=60;name="login"', '0', '30'],
    ['2, 2;w=60;name="login"', '0', '30'],
  ], 'the headers follow the service: 30 s to the end of the minute');
  t.equal(login[2]!.headers['x-envoy-ratelimited'], 'true');
  t.equal(JSON.parse(login[2]!.body).code, 'RATE_LIMITED');

  const other = [];
  for (let i = 0; i < 4; i++) other.push((await request(plane.port, HOST, '/items')).status);
  t.same(other, [200, 200, 200, 429], 'any other path: three a minute (sliding window, key-only rule)');
  t.equal((await request(plane.port, HOST, '/orders')).status, 200, 'a key-only rule counts each value apart, as the reference server');

  // Hot reload: the rules file replaced by rename (as editors and ConfigMaps do) is picked up.
  writeFileSync(path.join(dir, 'next.tmp'), rules(5));
  renameSync(path.join(dir, 'next.tmp'), file);
  const loginLimit = (): number | undefined => {
    const domain = service.rules.domains.get('edge');
    return domain && findLimit(domain, [{ key: 'remote_address', value: '127.0.0.1' }, { key: 'path', value: '/login' }])?.requestsPerUnit;
  };
  await waitFor(() => loginLimit() === 5, 5000, 'rules reloaded');
  const after = await request(plane.port, HOST, '/login');
  t.equal(after.status, 200, 'the raised limit applies (the window already counted 3)');
  t.equal(after.headers['x-ratelimit-remaining'], '1');

  // A broken reload is rejected whole: the rules in force stay, /config shows why.
  writeFileSync(file, rules(5).replace('unit: minute, requests_per_unit: 5', 'unit: fortnight, requests_per_unit: 5'));
  await waitFor(() => (service.describe() as { lastErrors?: string[] }).lastErrors !== undefined, 5000, 'reload rejected');
  const config = await (await fetch(`http://127.0.0.1:${adminPort}/config`)).json() as { lastErrors: string[] };
  t.same(config.lastErrors, [`${file}: domain.descriptors[0].descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, month, year`]);
  t.same([(await request(plane.port, HOST, '/login')).status, (await request(plane.port, HOST, '/login')).status], [200, 429], 'still the last good rules (5 a minute)');
  t.equal(loginLimit(), 5);

  const metrics = await (await fetch(`http://127.0.0.1:${adminPort}/metrics`)).text();
  t.match(metrics, /svcproxy_ratelimit_service_checks_total\{domain="edge",code="ok"\} \d+/);
  t.match(metrics, /svcproxy_ratelimit_service_checks_total\{domain="edge",code="over_limit"\} \d+/);
  t.match(metrics, /svcproxy_ratelimit_service_rules_reloads_total\{result="rejected"\} [1-9]/);
  t.equal((await fetch(`http://127.0.0.1:${adminPort}/ready`)).status, 200);
  t.equal((await fetch(`http://127.0.0.1:${adminPort}/healthz`)).status, 200);

  await service.close(0);
  t.equal((await request(plane.port, HOST, '/login')).status, 503, 'the service gone: fail-closed');
});
