/**
 * `--workers N` on the installed command (`node bin/svcproxy.js`, built by `npm test`): real
 * primary and worker processes on free loopback ports. Requests through a 2-worker sidecar are
 * served by both workers (the `svcproxy_worker_requests_total{worker}` series and the access log's
 * `worker` field), `/metrics` sums them (on the admin and on the `--metrics` listener; `--status`
 * answers the primary's readiness), a configuration reload reaches every worker while a
 * rejected one is reported once, a killed worker is restarted and traffic goes on, SIGTERM drains
 * every worker and exits 0, a port in use exits 1 with the single-process message.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ALIAS, records, startHttpServer, type TapLike, waitFor, yamlDocuments } from '../helpers/harness.js';
import { BIN, startProxyProcess, type ProxyProcess } from '../helpers/proxy-process.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { eventually, send } from '../faults/fixtures.js';

// Tap's 120 s per file is a hang guard, raised: on a loaded machine this file takes long
// (several multi-process proxies started one after another: ~65 s with both cores busy).
t.setTimeout(300_000);

const HOST = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';

function configDir(t: TapLike, docs: unknown[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-workers-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeConfig(dir, docs);
  return dir;
}

/** Replace the config file atomically (rename), as a config manager does. */
function writeConfig(dir: string, docs: unknown[], name = 'config.yaml'): void {
  const tmp = path.join(dir, `.${name}.tmp`);
  writeFileSync(tmp, yamlDocuments(docs));
  renameSync(tmp, path.join(dir, name));
}

/** The process with info logs and no event-loop-delay shedding (a busy test machine must not shed). */
function start(t: TapLike, args: string[], env: Record<string, string> = {}): Promise<ProxyProcess> {
  return startProxyProcess(t, args, { env, extraArgs: ['--log-level', 'info', '--max-event-loop-delay', '0'] });
}

function sidecarArgs(dir: string, appPort: number): string[] {
  return ['sidecar', '--config', dir, '--app', `127.0.0.1:${appPort}`, '--gvc', 'shop', '--workload', 'api', '--location', LOCATION, '--replica', 'api-0'];
}

/**
 * An app that answers `app`; a request with `?hold` is answered only once `release()` is called, so
 * it is in flight for as long as the test needs, however busy the machine. `held()`: how many arrived.
 */
async function slowApp(t: TapLike): Promise<{ port: number; held(): number; release(): void }> {
  let held = 0;
  let release: () => void = () => undefined;
  const released = new Promise<void>((r) => (release = r));
  t.teardown(() => release());
  const { port } = await startHttpServer(t, (req, res) => {
    if (!new URL(req.url ?? '/', 'http://x').searchParams.has('hold')) return void res.end('app');
    held++;
    void released.then(() => res.end('app'));
  });
  return { port, held: () => held, release: () => release() };
}

async function metrics(admin: string): Promise<string> {
  return (await fetch(`${admin}/metrics`)).text();
}

/** The value of one series (`name{labels}`) in Prometheus text, 0 when absent. */
function series(text: string, name: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return line ? Number(line.slice(name.length + 1)) : 0;
}

interface WorkerView {
  worker: number;
  pid: number | null;
  ready: boolean;
  generation: number;
  restarts: number;
}

async function config(admin: string): Promise<{ generation: number; workers: WorkerView[]; lastError: { errors: string[] } | null; replicas: unknown[] }> {
  return (await fetch(`${admin}/config`)).json() as never;
}

/** Whether a new connection to the port is refused (one that connects is closed at once). */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
}

/** `count` requests, each on its own connection; the bodies. */
async function requests(port: number, count: number, host = HOST): Promise<(number | string)[]> {
  const out: (number | string)[] = [];
  for (let i = 0; i < count; i++) {
    const r = await send(port, host, '/', { note: (_res, body) => body });
    out.push(r.outcome === 200 ? r.note! : r.outcome);
  }
  return out;
}

t.test('a 2-worker sidecar: both workers serve, /metrics sums them, the access log names the worker; SIGTERM exits 0', async (t) => {
  const app = await slowApp(t);
  const dir = configDir(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] } }));
  const [statusPort, metricsPort] = [await freePort(), await freePort()];
  const proxy = await start(t, [...sidecarArgs(dir, app.port), '--workers', '2', '--status', `127.0.0.1:${statusPort}`, '--metrics', `127.0.0.1:${metricsPort}`]);
  const answers = await requests(proxy.port, 20, 'localhost');
  t.same(answers, Array(20).fill('app'), '20 requests on 20 connections, all answered by the app');

  const text = await metrics(proxy.admin);
  const w0 = series(text, 'svcproxy_worker_requests_total{worker="0"}');
  const w1 = series(text, 'svcproxy_worker_requests_total{worker="1"}');
  t.ok(w0 > 0 && w1 > 0, `both workers served requests (worker 0: ${w0}, worker 1: ${w1})`);
  t.equal(w0 + w1, 20, 'and together all 20');
  t.equal(series(text, `svcproxy_requests_total{workload="shop/api",location="${LOCATION}",status_class="2xx"}`), 20, 'svcproxy_requests_total is the sum over workers');
  t.equal(series(text, 'svcproxy_workers'), 2);
  t.equal(series(text, 'svcproxy_workers_ready'), 2);
  t.equal(text.match(/^svcproxy_open_connections /gm)?.length, 1, 'one series per metric, not one per worker');
  // The primary's status and metrics listeners: its readiness, and /metrics summed as the admin's is.
  const scraped = await metrics(`http://127.0.0.1:${metricsPort}`);
  t.equal(series(scraped, `svcproxy_requests_total{workload="shop/api",location="${LOCATION}",status_class="2xx"}`), 20, '--metrics: the sum over workers');
  t.equal(series(scraped, 'svcproxy_workers_ready'), 2, '--metrics: the primary\'s own series');
  t.equal((await fetch(`http://127.0.0.1:${metricsPort}/config`)).status, 404, '--metrics: /config is 404');
  t.equal((await fetch(`http://127.0.0.1:${statusPort}/ready`)).status, 200, '--status: /ready 200 with both workers ready');
  t.equal((await fetch(`http://127.0.0.1:${statusPort}/metrics`)).status, 404, '--status: /metrics is 404');
  const view = await config(proxy.admin);
  t.same(view.workers.map((w) => [w.worker, w.ready, w.generation]), [[0, true, 1], [1, true, 1]], '/config lists both workers, ready, at generation 1');
  t.equal(new Set(view.workers.map((w) => w.pid)).size, 2, 'two processes');

  // Requests in flight at SIGTERM (one per worker: two connections, round robin) are answered.
  const inFlight = [send(proxy.port, 'localhost', '/?hold', { note: (_res, body) => body, timeoutMs: 60_000 }), send(proxy.port, 'localhost', '/?hold', { note: (_res, body) => body, timeoutMs: 60_000 })];
  await waitFor(() => app.held() === 2, 30_000, 'both requests to reach the app');
  proxy.child.kill('SIGTERM');
  t.ok(await eventually(() => refused(proxy.port), 30_000, 20), 'while draining, new connections are refused');
  t.equal(proxy.child.exitCode, null, 'the primary waits for the requests in flight');
  const releasedAt = performance.now();
  app.release();
  const answered = await Promise.all(inFlight);
  t.same(answered.map((a) => [a.outcome, a.note]), [[200, 'app'], [200, 'app']], 'the requests in flight at SIGTERM are answered');
  t.equal(await proxy.exited, 0, 'exit 0');
  // A bound only to tell "after the answers" from "at the 90 s grace period", far from either.
  t.ok(performance.now() - releasedAt < 45_000, 'soon after the last answer, not at the 90 s grace period');
  for (const w of view.workers) t.throws(() => process.kill(w.pid!, 0), `worker ${w.worker} exited too`);
  const access = proxy.output().split('\n').filter((l) => l.includes('"component":"access"')).map((l) => JSON.parse(l) as { worker?: string });
  t.same(new Set(access.map((a) => a.worker)), new Set(['0', '1']), 'access-log lines carry the worker that served them');
});

t.test('an ingress with 2 workers: reloads reach every worker; a rejected one keeps the last good everywhere and is reported once', async (t) => {
  const a = await startHttpServer(t, (_req, res) => res.end('a'));
  const b = await startHttpServer(t, (_req, res) => res.end('b'));
  const dir = configDir(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${a.port}`] } }));
  const proxy = await start(t, ['ingress', '--config', dir, '--location', LOCATION, '--workers', '2']);
  t.ok(await eventually(async () => (await requests(proxy.port, 1))[0] === 'a', 30_000, 50), 'the ingress routes to a');

  writeConfig(dir, records({ replicas: { [LOCATION]: [`127.0.0.1:${b.port}`] } }));
  t.ok(await eventually(async () => (await config(proxy.admin)).workers.every((w) => w.generation === 2), 30_000, 50), 'both workers applied generation 2');
  // Each worker probes the new replica itself; /config's merged table says ready once all of them see it.
  t.ok(await eventually(async () => {
    const replicas = (await config(proxy.admin)).replicas as { name: string; ready: boolean }[];
    return replicas.length === 1 && replicas[0]!.ready;
  }, 30_000, 50), 'every worker sees the new replica ready');
  t.same(await requests(proxy.port, 10), Array(10).fill('b'), 'every worker routes to b (10 connections, round robin)');

  writeFileSync(path.join(dir, 'broken.yaml'), 'kind: workload\nname: [unclosed\n');
  t.ok(await eventually(async () => (await config(proxy.admin)).lastError !== null, 30_000, 50), '/config shows the rejected reload');
  const view = await config(proxy.admin);
  t.equal(view.generation, 2, 'the last good generation stays in force');
  t.same(view.workers.map((w) => w.generation), [2, 2], 'in every worker');
  t.match(view.lastError!.errors.join('\n'), /broken\.yaml/);
  t.equal((await fetch(`${proxy.admin}/ready`)).status, 200, 'and the proxy stays ready');
  t.same(await requests(proxy.port, 6), Array(6).fill('b'), 'traffic goes on');
  const text = await metrics(proxy.admin);
  t.equal(series(text, 'svcproxy_config_reloads_total{result="ok"}'), 1, 'one good reload counted once, not once per worker');
  t.equal(series(text, 'svcproxy_config_reloads_total{result="rejected"}'), 1, 'one rejected reload');

  rmSync(path.join(dir, 'broken.yaml'));
  t.ok(await eventually(async () => (await config(proxy.admin)).workers.every((w) => w.generation === 3), 30_000, 50), 'removing the broken file reloads (generation 3)');
  proxy.child.kill('SIGHUP');
  t.ok(await eventually(async () => (await config(proxy.admin)).workers.every((w) => w.generation === 4), 30_000, 50), 'SIGHUP reloads every worker (generation 4)');
  t.equal(proxy.child.exitCode, null, 'SIGHUP did not stop anything');
  t.same(await requests(proxy.port, 4), Array(4).fill('b'));

  proxy.child.kill('SIGTERM');
  t.equal(await proxy.exited, 0, 'exit 0');
  const rejected = proxy.output().split('\n').filter((l) => l.includes('configuration rejected: keeping the last good one'));
  t.equal(rejected.length, 1, 'the rejection is logged once, by the primary');
});

t.test('a killed worker is restarted and traffic goes on', async (t) => {
  const app = await slowApp(t);
  const dir = configDir(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] } }));
  const proxy = await start(t, [...sidecarArgs(dir, app.port), '--workers', '2']);
  const before = await config(proxy.admin);
  const victim = before.workers[0]!;
  process.kill(victim.pid!, 'SIGKILL');
  // /ready is polled from the kill until it is 200 again: not ready while a worker is missing.
  const statuses: number[] = [];
  const readyAgain = eventually(async () => {
    const status = (await fetch(`${proxy.admin}/ready`)).status;
    statuses.push(status);
    return status === 200 && statuses.includes(503);
  }, 60_000, 10);
  t.ok(await eventually(async () => (await config(proxy.admin)).workers[0]!.pid !== victim.pid, 30_000, 10), 'the primary sees the worker gone');
  // While it is down, the other worker takes every new connection.
  t.same(await requests(proxy.port, 6, 'localhost'), Array(6).fill('app'), 'requests right after the kill are answered');
  t.ok(await readyAgain, `/ready: 503 while worker 0 is missing, then 200 (${statuses.filter((s) => s === 503).length} polls saw 503)`);
  const again = (await config(proxy.admin)).workers[0]!;
  t.ok(again.ready && again.pid !== victim.pid && again.restarts === 1, 'worker 0 is running again, in a new process');
  t.same(await requests(proxy.port, 10, 'localhost'), Array(10).fill('app'), 'and traffic goes on');
  const text = await metrics(proxy.admin);
  t.equal(series(text, 'svcproxy_worker_restarts_total'), 1, 'svcproxy_worker_restarts_total counts it');
  t.ok(series(text, 'svcproxy_worker_requests_total{worker="0"}') > 0, 'the new worker 0 serves');
  proxy.child.kill('SIGTERM');
  t.equal(await proxy.exited, 0, 'exit 0');
  t.match(proxy.output(), /worker exited: restarting it/, 'the exit is logged');
});

t.test('a port in use: exit 1 with the same message as a single process', async (t) => {
  const app = await slowApp(t);
  const dir = configDir(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] } }));
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => taken.close());
  const port = (taken.address() as net.AddressInfo).port;
  const run = async (workers: string): Promise<{ code: number | null; stderr: string }> => {
    const admin = await freePort();
    const r = spawnSync(process.execPath, [BIN, ...sidecarArgs(dir, app.port), '--workers', workers, '--listen', `127.0.0.1:${port}`, '--admin', `127.0.0.1:${admin}`, '--log-level', 'warn'], { encoding: 'utf8', timeout: 60_000 });
    return { code: r.status, stderr: r.stderr };
  };
  const single = await run('1');
  const clustered = await run('2');
  const message = `svcproxy: listen EADDRINUSE: address already in use 127.0.0.1:${port}\n`;
  t.equal(single.code, 1, 'one process: exit 1');
  t.equal(single.stderr, message);
  t.equal(clustered.code, 1, 'two workers: exit 1');
  t.equal(clustered.stderr, message, 'with the same message, once');
});

t.test('--workers: SVCPROXY_WORKERS, auto, and usage errors', async (t) => {
  const app = await slowApp(t);
  const dir = configDir(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] } }));
  const proxy = await start(t, sidecarArgs(dir, app.port), { SVCPROXY_WORKERS: '2' });
  t.equal((await config(proxy.admin)).workers.length, 2, 'SVCPROXY_WORKERS=2 starts two workers');
  proxy.child.kill('SIGTERM');
  t.equal(await proxy.exited, 0);

  const single = await start(t, sidecarArgs(dir, app.port));
  t.equal((await config(single.admin)).workers, undefined, 'the default is one process, no workers');
  single.child.kill('SIGTERM');
  t.equal(await single.exited, 0);

  const usage = (args: string[], env: Record<string, string> = {}): { code: number | null; stderr: string } => {
    const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 60_000 });
    return { code: r.status, stderr: r.stderr };
  };
  for (const bad of ['0', 'two', '1.5', '257']) {
    const r = usage([...sidecarArgs(dir, app.port), '--workers', bad]);
    t.equal(r.code, 2, `--workers ${bad}: exit 2`);
    t.match(r.stderr, /--workers must be a whole number from 1 to 256, or auto/);
  }
  const up = usage(['up', '--workers', '2']);
  t.equal(up.code, 2, 'up takes no --workers');
  t.match(up.stderr, /^svcproxy: up runs in one process: --workers is for ingress and sidecar\n/);
  const ratelimit = usage(['ratelimit', '--config', dir, '--workers', '2']);
  t.equal(ratelimit.code, 2, 'nor does ratelimit');
  t.match(ratelimit.stderr, /^svcproxy: ratelimit runs in one process/);
  // SVCPROXY_WORKERS for up or ratelimit is ignored, as any variable of a flag a command does not
  // take (test/cli/help.test.ts): one environment may serve every command.
});
