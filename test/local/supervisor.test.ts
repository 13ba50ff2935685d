import t, { type Test } from 'tap';
import { request } from 'node:http';
import { ReplicaRegistry, type Replica } from '../../src/routing/replicas.js';
import { Supervisor } from '../../src/local/supervisor.js';
import type { ContainerModel } from '../../src/config/model.js';
import { captureLogger, container, probe, snapshot, testDeps, waitFor, workload, type WorkloadInput } from './fixtures.js';

/** A tiny app: answers its environment as JSON on $PORT; `/crash` exits 1. */
const SERVER = `
const http = require('http');
const s = http.createServer((req, res) => {
  if (req.url === '/crash') { res.end('bye'); setTimeout(() => process.exit(1), 10); return; }
  res.end(JSON.stringify(process.env));
});
s.listen(Number(process.env.PORT), '127.0.0.1', () => console.log('listening ' + process.env.PORT));
process.on('SIGTERM', () => { console.log('got SIGTERM'); s.close(() => process.exit(0)); s.closeAllConnections(); });
`;

/** Serves on $PORT but ignores SIGTERM. */
const STUBBORN = `
require('net').createServer(() => {}).listen(Number(process.env.PORT), '127.0.0.1', () => console.log('up'));
process.on('SIGTERM', () => console.log('ignoring SIGTERM'));
`;

function app(script: string, overrides: Partial<ContainerModel> = {}): ContainerModel {
  return container({ command: process.execPath, args: ['-e', script], readinessProbe: probe({ kind: 'tcp' }), ...overrides });
}

function get(port: number, path = '/'): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(body));
    });
    req.on('error', reject);
    req.end();
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function setup(t: Test, options: { backoffMs?: number } = {}) {
  const { logger, lines } = captureLogger();
  const registry = new ReplicaRegistry();
  const sup = new Supervisor({
    registry,
    deps: testDeps(logger),
    backoff: { initialMs: options.backoffMs ?? 100, maxMs: 1000, resetAfterMs: 10_000 },
    tokenSecret: 'test',
  });
  t.teardown(() => sup.stop(500));
  return { sup, registry, lines };
}

function one(input: WorkloadInput, locations = ['aws-us-east-2']) {
  return snapshot({ workloads: [workload({ ...input, locations })], locations });
}

t.test('starts replicas with the platform environment, registers them, probes them ready', async (t) => {
  const { sup, registry, lines } = setup(t);
  const snap = snapshot({ workloads: [workload({ name: 'api', containers: [app(SERVER, { env: [{ name: 'GREETING', value: 'hi' }] })] })] });
  await sup.apply(snap);
  const east = registry.list('demo/api', 'aws-us-east-2');
  const gcp = registry.list('demo/api', 'gcp-us-east1');
  t.equal(east.length, 1);
  t.equal(gcp.length, 1);
  t.equal(east[0]!.name, 'api-0');
  t.equal(east[0]!.index, 0);
  t.equal(east[0]!.ready, false, 'not ready before probing');
  t.equal(east[0]!.ports.get(8080)?.host, '127.0.0.1');
  t.not(east[0]!.ports.get(8080)?.port, gcp[0]!.ports.get(8080)?.port, 'each replica its own port');
  await waitFor(() => registry.hasReady('demo/api', 'aws-us-east-2') && registry.hasReady('demo/api', 'gcp-us-east1'), 30_000, 'ready');

  const env = JSON.parse(await get(gcp[0]!.ports.get(8080)!.port)) as Record<string, string>;
  t.equal(env.PORT, String(gcp[0]!.ports.get(8080)!.port));
  t.equal(env.SVC_PORT_8080, env.PORT);
  t.equal(env.SVC_LOCATION, 'gcp-us-east1');
  t.equal(env.SVC_PROVIDER, 'gcp');
  t.equal(env.SVC_REPLICA, 'api-0');
  t.equal(env.SVC_WORKLOAD, 'api');
  t.equal(env.SVC_GVC, 'demo');
  t.equal(env.SVC_GVC_ALIAS, 'abcdefghijklm');
  t.equal(env.SVC_ORG, 'acme');
  t.equal(env.SVC_GLOBAL_ENDPOINT, 'api-abcdefghijklm.app.localhost');
  t.match(env.SVC_TOKEN, /^local\./);
  t.match(env.SVC_WORKLOAD_VERSION, /^\d+$/);
  t.match(env.SVC_NAMESPACE, /^[a-z2-7]{16}$/);
  t.equal(env.GREETING, 'hi');
  t.equal(env.PATH, process.env.PATH, 'inherits PATH');

  await waitFor(() => lines.some((l) => l.msg === `listening ${env.PORT}`), 30_000, 'output logged');
  const line = lines.find((l) => l.msg === `listening ${env.PORT}`)!;
  t.has(line, { workload: 'api', location: 'gcp-us-east1', replica: 'api-0', container: 'app', stream: 'stdout' });
});

t.test('a crashed process is marked not ready and restarted after the backoff', async (t) => {
  const { sup, registry, lines } = setup(t, { backoffMs: 400 });
  await sup.apply(one({ name: 'api', containers: [app(SERVER)] }));
  const [r] = registry.list('demo/api', 'aws-us-east-2') as Replica[];
  await waitFor(() => r!.ready, 30_000, 'ready');
  const firstPid = sup.processes()[0]!.pid!;
  const events: [boolean, number][] = [];
  registry.on('ready', (x: Replica) => events.push([x.ready, Date.now()]));
  await get(r!.ports.get(8080)!.port, '/crash');
  await waitFor(() => !r!.ready, 30_000, 'not ready after the crash');
  t.equal(sup.processes()[0]!.pid, undefined, 'no process while backing off');
  await waitFor(() => r!.ready, 30_000, 'ready again');
  const [down, up] = events;
  t.equal(down![0], false);
  t.equal(up![0], true);
  t.ok(up![1] - down![1] >= 350, `down for the backoff (${up![1] - down![1]} ms)`);
  const info = sup.processes()[0]!;
  t.equal(info.restarts, 1);
  t.not(info.pid, firstPid);
  t.equal(registry.list('demo/api', 'aws-us-east-2')[0], r, 'same replica, same ports');
  t.ok(lines.some((l) => l.msg === 'process exited' && l.code === 1 && l.restartInMs === 400));
});

t.test('a command that cannot start is retried with backoff, never ready', async (t) => {
  const { sup, registry, lines } = setup(t, { backoffMs: 50 });
  await sup.apply(one({ name: 'ghost', containers: [container({ command: '/nonexistent/app' })] }));
  await waitFor(() => lines.filter((l) => l.msg === 'process could not be started').length >= 3, 30_000, 'retries');
  const delays = lines.filter((l) => l.msg === 'process could not be started').map((l) => l.restartInMs);
  t.same(delays.slice(0, 3), [50, 100, 200], 'doubling');
  t.equal(registry.list('demo/ghost', 'aws-us-east-2')[0]!.ready, false);
});

t.test('stop() sends SIGTERM and resolves when all exited', async (t) => {
  const { sup, registry, lines } = setup(t);
  await sup.apply(snapshot({ workloads: [workload({ name: 'api', containers: [app(SERVER)] })] }));
  await waitFor(() => sup.processes().every((p) => p.ready), 30_000, 'ready');
  const pids = sup.processes().map((p) => p.pid!);
  t.equal(pids.length, 2);
  const started = Date.now();
  await sup.stop(5000);
  t.ok(Date.now() - started < 4000, 'well within the grace');
  t.equal(lines.filter((l) => l.msg === 'got SIGTERM').length, 2, 'each got SIGTERM');
  t.ok(pids.every((p) => !alive(p)), 'all gone');
  t.same(registry.all(), [], 'unregistered');
  await sup.apply(snapshot({ workloads: [workload({ name: 'api', containers: [app(SERVER)] })] }));
  t.same(registry.all(), [], 'apply after stop does nothing');
});

t.test('a process ignoring SIGTERM is killed after the grace period', async (t) => {
  const { sup, lines } = setup(t);
  await sup.apply(one({ name: 'stubborn', containers: [app(STUBBORN)], terminationGracePeriodSeconds: 0.4 }));
  await waitFor(() => sup.processes()[0]!.ready, 30_000, 'ready');
  const pid = sup.processes()[0]!.pid!;
  const started = Date.now();
  await sup.stop();
  const took = Date.now() - started;
  t.ok(took >= 350 && took < 4000, `killed after the workload's grace (${took} ms)`);
  t.notOk(alive(pid));
  t.ok(lines.some((l) => l.msg === 'ignoring SIGTERM'));
  t.ok(lines.some((l) => l.msg === 'process ignored SIGTERM; killing'));
});

t.test("stop(graceMs) caps the workload's grace period", async (t) => {
  const { sup } = setup(t);
  await sup.apply(one({ name: 'stubborn', containers: [app(STUBBORN)], terminationGracePeriodSeconds: 90 }));
  await waitFor(() => sup.processes()[0]!.ready, 30_000, 'ready');
  const started = Date.now();
  await sup.stop(300);
  const took = Date.now() - started;
  t.ok(took >= 250 && took < 4000, `capped (${took} ms)`);
});

t.test('scalingPolicy: OrderedReady starts replicas one by one as each turns ready; Parallel at once', async (t) => {
  const { sup, registry } = setup(t);
  const list = (w: string): string[] => registry.list(`demo/${w}`, 'aws-us-east-2').map((r) => r.name);
  await sup.apply(one({ name: 'ord', containers: [app(SERVER)], defaultOptions: { minScale: 3 } }));
  t.same(list('ord'), ['ord-0'], 'OrderedReady: only the first starts');
  await waitFor(() => list('ord').length === 3 && registry.list('demo/ord', 'aws-us-east-2').every((r) => r.ready), 30_000, 'all three, in order');
  const { sup: sup2, registry: registry2 } = setup(t);
  await sup2.apply(one({ name: 'par', containers: [app(SERVER)], defaultOptions: { minScale: 3 }, rollout: { scalingPolicy: 'Parallel' } }));
  t.same(registry2.list('demo/par', 'aws-us-east-2').map((r) => r.name), ['par-0', 'par-1', 'par-2'], 'Parallel: all at once');
});

t.test('apply(): scale up, restart on change, stop removed', async (t) => {
  const { sup, registry } = setup(t);
  const base = { name: 'api', containers: [app(SERVER)] };
  await sup.apply(one(base));
  await waitFor(() => sup.processes().every((p) => p.pid !== undefined), 30_000, 'started');
  const pid0 = sup.processes()[0]!.pid;

  await sup.apply(one({ ...base, defaultOptions: { minScale: 2 } }));
  // scalingPolicy OrderedReady (the default): api-1 starts once api-0 is ready.
  await waitFor(() => registry.list('demo/api', 'aws-us-east-2').length === 2, 30_000, 'api-1 started after api-0 was ready');
  t.ok(registry.list('demo/api', 'aws-us-east-2')[0]!.ready, 'api-0 was ready first');
  t.same(registry.list('demo/api', 'aws-us-east-2').map((r) => r.name), ['api-0', 'api-1'], 'scaled to 2');
  await waitFor(() => sup.processes().length === 2 && sup.processes().every((p) => p.pid !== undefined), 30_000, 'both started');
  t.equal(sup.processes().find((p) => p.replica === 'api-0')!.pid, pid0, 'api-0 untouched');

  await sup.apply(one({ ...base, containers: [app(SERVER, { env: [{ name: 'V', value: '2' }] })] }));
  t.notOk(registry.list('demo/api', 'aws-us-east-2').some((r) => r.name === 'api-1'), 'api-1 removed at once');
  // api-0 is rolled out: its replacement starts beside it, and the old one stops once the new is ready.
  await waitFor(() => sup.processes()[0]?.pid !== undefined, 30_000, 'restarted');
  await waitFor(() => registry.list('demo/api', 'aws-us-east-2').length === 1, 30_000, 'the old api-0 replaced');
  t.same(registry.list('demo/api', 'aws-us-east-2').map((r) => r.name), ['api-0'], 'scaled back to 1');
  t.not(sup.processes()[0]!.pid, pid0, 'changed container restarted');
  t.equal(sup.processes()[0]!.env.V, '2');
  await waitFor(() => !alive(pid0!), 30_000, 'old process stopped');

  await sup.apply(one({ ...base, defaultOptions: { suspend: true } }));
  t.same(registry.all(), [], 'suspended: nothing runs');
  t.same(sup.processes(), []);
});

t.test('a replica of two containers is ready when both are', async (t) => {
  const { sup, registry } = setup(t);
  const idle = `setInterval(() => {}, 1000); process.on('SIGTERM', () => process.exit(0));`;
  await sup.apply(
    one({
      name: 'pair',
      containers: [
        app(SERVER, { name: 'web' }),
        app(idle, { name: 'side', ports: [{ number: 9000, protocol: 'tcp' }] }),
      ],
    }),
  );
  const [r] = registry.list('demo/pair', 'aws-us-east-2');
  await waitFor(() => sup.processes().find((p) => p.container === 'web')!.ready, 30_000, 'web ready');
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(r!.ready, false, 'side never listens: replica not ready');
  const side = sup.processes().find((p) => p.container === 'side')!;
  t.equal(side.env.SVC_PORT_8080, String(r!.ports.get(8080)!.port), 'side can find web');
  t.equal(side.env.PORT, String(r!.ports.get(9000)!.port));
});

t.test('killNow() kills every process synchronously', async (t) => {
  const { sup } = setup(t);
  await sup.apply(one({ name: 'stubborn', containers: [app(STUBBORN)] }));
  await waitFor(() => sup.processes()[0]?.pid !== undefined, 30_000, 'started');
  const pid = sup.processes()[0]!.pid!;
  sup.killNow();
  await waitFor(() => !alive(pid), 30_000, 'killed');
  t.pass('gone without a grace period');
  await sup.stop(100);
});
