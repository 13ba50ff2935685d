/**
 * The status listener (`--status`: `/healthz`, `/ready`) and the metrics listener (`--metrics`:
 * `/metrics`) beside the admin (DESIGN §3), so a cluster's probes and Prometheus reach them while the
 * admin stays on loopback: each answers its paths as the admin does (GET and HEAD, `/ready` following
 * the role's readiness), and 404 with the error shape for every other path (the admin's `/config`,
 * `/workloads`, the dashboard). In-process on port 0, then on the installed command: `up` with
 * `--status` and `--metrics` from SVCPROXY_STATUS / SVCPROXY_METRICS, and a `ratelimit` with both
 * flags. A listener that cannot bind closes the ones already started. (`--workers`: test/cli/workers.)
 */
import t from 'tap';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { Metrics } from '../../src/admin/metrics.js';
import { startAdminListeners, type AdminServer } from '../../src/admin/server.js';
import { demoRecords, echoScriptPath } from '../../src/local/index.js';
import { BIN, watchChild } from '../helpers/proxy-process.js';
import { yamlDocuments, type TapLike } from '../helpers/harness.js';
import { eventually } from '../faults/fixtures.js';
import { freePort } from '../fixtures/ratelimit/servers.js';

const url = (l: AdminServer, p: string): string => `http://127.0.0.1:${l.address.port}${p}`;

/** Status and body of `method path`. */
async function ask(l: AdminServer | string, p: string, method = 'GET'): Promise<{ status: number; body: string; type: string | null }> {
  const res = await fetch(typeof l === 'string' ? `${l}${p}` : url(l, p), { method });
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
}

/** The admin's paths that neither the status nor the metrics listener serves (the admin's own). */
const ADMIN_ONLY = ['/', '/config', '/workloads', '/events', '/dashboard.js', '/favicon.ico', '/stats', '/healthz/ready'];

t.test('status: /healthz and /ready only; metrics: /metrics only; 404 elsewhere; the admin serves all', async (t) => {
  const metrics = new Metrics();
  metrics.countRequest('shop/api', 'aws-us-east-2', 200, 0.01);
  let ready = false;
  const listeners = await startAdminListeners(
    { admin: { host: '127.0.0.1', port: 0 }, status: { host: '127.0.0.1', port: 0 }, metrics: { host: '127.0.0.1', port: 0 } },
    metrics,
    { ready: () => ready, config: () => ({ records: [] }), workloads: () => [] },
  );
  t.teardown(() => listeners.close());
  const { admin, status, metrics: scrape } = listeners;
  t.ok(admin && status && scrape, 'three listeners');
  t.not(status!.address.port, admin!.address.port);

  t.same(await ask(status!, '/healthz'), { status: 200, body: 'ok\n', type: 'text/plain' });
  t.same(await ask(status!, '/ready'), { status: 503, body: 'not ready\n', type: 'text/plain' }, 'not ready: 503, as the admin says');
  t.equal((await ask(admin!, '/ready')).status, 503);
  ready = true;
  t.same(await ask(status!, '/ready'), { status: 200, body: 'ready\n', type: 'text/plain' }, 'ready: 200');
  t.same(await ask(status!, '/ready', 'HEAD'), { status: 200, body: '', type: 'text/plain' }, 'HEAD: the status, no body');
  t.equal((await ask(status!, '/ready?full=1')).status, 200, 'a query string is ignored, as on the admin');

  const text = await ask(scrape!, '/metrics');
  t.equal(text.status, 200);
  t.match(text.type, /^text\/plain; version=0\.0\.4/, 'Prometheus text');
  t.match(text.body, /^svcproxy_requests_total\{workload="shop\/api",location="aws-us-east-2",status_class="2xx"\} 1$/m, 'the process\'s series');
  t.equal((await ask(admin!, '/metrics')).body.split('\n').filter((l) => l.startsWith('svcproxy_requests_total')).join(), text.body.split('\n').filter((l) => l.startsWith('svcproxy_requests_total')).join(), 'the admin\'s /metrics says the same');

  for (const p of [...ADMIN_ONLY, '/metrics']) {
    const r = await ask(status!, p);
    t.equal(r.status, 404, `status ${p}: 404`);
    t.same(JSON.parse(r.body), { status: 404, message: 'no route', code: 'NO_ROUTE', details: {}, id: '' }, `status ${p}: the error shape`);
  }
  for (const p of [...ADMIN_ONLY, '/healthz', '/ready']) t.equal((await ask(scrape!, p)).status, 404, `metrics ${p}: 404`);
  t.equal((await ask(admin!, '/config')).status, 200, 'the admin still serves /config');
  t.equal((await ask(admin!, '/workloads')).status, 200, 'and /workloads');
});

t.test('a listener that cannot bind: those already started are closed, the error thrown', async (t) => {
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => taken.close(() => resolve())));
  const takenPort = (taken.address() as net.AddressInfo).port;
  const adminPort = await freePort();
  await t.rejects(
    startAdminListeners(
      { admin: { host: '127.0.0.1', port: adminPort }, metrics: { host: '127.0.0.1', port: takenPort } },
      new Metrics(),
      { ready: () => true, config: () => ({}) },
    ),
    { code: 'EADDRINUSE' },
  );
  // The admin had bound: it is closed again, so its port can be bound once more.
  const again = net.createServer();
  await new Promise<void>((resolve, reject) => {
    again.once('error', reject);
    again.listen(adminPort, '127.0.0.1', resolve);
  });
  await new Promise<void>((resolve) => again.close(() => resolve()));
  t.pass('the admin listener started first was closed');
});

/** Runs the installed command until `ready` says so; `stop()` sends SIGTERM and resolves with the exit code. */
async function run(t: TapLike, args: string[], env: Record<string, string>, ready: () => Promise<boolean>): Promise<{ output(): string; stop(): Promise<number | null> }> {
  const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const { output, exited } = watchChild(t, child);
  // A hang guard; a process that exits is reported at once.
  const up = await eventually(async () => child.exitCode !== null || await ready(), 60_000);
  if (!up || child.exitCode !== null) throw new Error(`${args[0]} did not turn ready (exit ${child.exitCode}):\n${output()}`);
  return {
    output,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Until the output holds `pattern` (log lines are written asynchronously); false after a hang guard. */
const printed = (p: { output(): string }, pattern: RegExp): Promise<boolean> => eventually(() => pattern.test(p.output()), 30_000);

t.test('up: SVCPROXY_STATUS and SVCPROXY_METRICS; the admin on loopback serves the rest', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-status-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'demo.yaml'), yamlDocuments(demoRecords(echoScriptPath(), process.execPath)));
  const [listen, mesh, admin, status, scrape] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort()]);
  const base = (port: number): string => `http://127.0.0.1:${port}`;
  const up = await run(
    t,
    ['up', '--config', dir, '--listen', `127.0.0.1:${listen}`, '--mesh', `127.0.0.1:${mesh}`, '--admin', `127.0.0.1:${admin}`, '--log-dir', path.join(dir, 'logs')],
    { SVCPROXY_STATUS: `127.0.0.1:${status}`, SVCPROXY_METRICS: `127.0.0.1:${scrape}`, SVCPROXY_API: '127.0.0.1:0' },
    async () => (await fetch(`${base(status)}/ready`).catch(() => undefined))?.status === 200,
  );
  t.ok(await printed(up, new RegExp(`status +http://127\\.0\\.0\\.1:${status} +\\(/healthz /ready\\)`)), 'up prints the status listener');
  t.ok(await printed(up, new RegExp(`metrics +http://127\\.0\\.0\\.1:${scrape} +\\(/metrics\\)`)), 'and the metrics listener');
  t.equal((await ask(base(status), '/ready')).status, 200, 'status /ready: 200 once the demo\'s replicas are ready');
  t.equal((await ask(base(status), '/healthz')).status, 200);
  t.equal((await ask(base(status), '/workloads')).status, 404, 'status /workloads: 404');
  t.equal((await ask(base(status), '/')).status, 404, 'status /: 404 (no dashboard)');
  t.match((await ask(base(scrape), '/metrics')).body, /^svcproxy_workload_health\{/m, 'metrics: up\'s series');
  t.equal((await ask(base(scrape), '/config')).status, 404, 'metrics /config: 404');
  t.equal((await ask(base(admin), '/config')).status, 200, 'admin /config: 200');
  t.equal(await up.stop(), 0, 'SIGTERM: exit 0');
});

t.test('ratelimit: --status and --metrics', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-status-rl-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const rules = path.join(dir, 'rules.yaml');
  writeFileSync(rules, 'domain: svc\ndescriptors:\n  - key: authority\n    rate_limit: {unit: minute, requests_per_unit: 10}\n');
  const [listen, status, scrape] = await Promise.all([freePort(), freePort(), freePort()]);
  const base = (port: number): string => `http://127.0.0.1:${port}`;
  const rl = await run(
    t,
    ['ratelimit', '--config', rules, '--listen', `127.0.0.1:${listen}`, '--status', `127.0.0.1:${status}`, '--metrics', `127.0.0.1:${scrape}`, '--log-level', 'info'],
    {},
    async () => (await fetch(`${base(status)}/ready`).catch(() => undefined))?.status === 200,
  );
  t.ok(await printed(rl, new RegExp(`"address":"127\\.0\\.0\\.1:${status}","msg":"status listening"`)), 'a log line for the status listener');
  t.ok(await printed(rl, new RegExp(`"address":"127\\.0\\.0\\.1:${scrape}","msg":"metrics listening"`)), 'and the metrics listener');
  t.equal((await ask(base(status), '/healthz')).status, 200);
  t.equal((await ask(base(status), '/config')).status, 404, 'status /config: 404');
  t.match((await ask(base(scrape), '/metrics')).body, /^# TYPE svcproxy_ratelimit_service_rules_reloads_total counter$/m, 'the service\'s metrics');
  t.equal((await ask(base(scrape), '/ready')).status, 404, 'metrics /ready: 404');
  t.equal(await rl.stop(), 0, 'SIGTERM: exit 0');
});
