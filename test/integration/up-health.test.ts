/**
 * `svcproxy up` with real processes: each workload's health per location (DESIGN §10) as `up` reports
 * it (a callback per change, an info log line, admin `/workloads`, the `svcproxy_workload_health`
 * gauge): a replica that answers goes Loading -> Healthy, one that crashes at start goes
 * Loading -> Unhealthy, a removed one is Deleting while its process (which ignores SIGTERM) stops.
 * A workload tagged `svc/ignore: true` gets no process, its canonical host answers 404, and the load
 * says so once as a warning. Beside them, a GVC in the shape of the platform's own example manifests
 * (test/config/fixtures/platform/shop.yaml: no gvc members, the platform's locations, `'1'` counts),
 * put in its GVC by `--gvc`: its image-only workloads and its cron workload get no process, their host
 * names answer 503 `no healthy upstream: svcproxy up runs no image (...)`, their `/workloads` rows say
 * why (`notRun`, health Unknown), and up says so once per workload, not per request.
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startUp } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import type { HealthChange, WorkloadStatus } from '../../src/local/workloads.js';
import { request, waitFor } from '../helpers/harness.js';
import { captureLogger, echoContainer, NODE, tempDir } from '../mesh/fixtures.js';

const SHOP = fileURLToPath(new URL('../config/fixtures/platform/shop.yaml', import.meta.url));

const OPEN = { external: { inboundAllowCIDR: ['0.0.0.0/0'] } };

function workload(name: string, container: Record<string, unknown>, extra: { tags?: Record<string, unknown>; grace?: number } = {}): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc: 'g1', tags: extra.tags ?? {},
    spec: {
      type: 'standard',
      containers: [container],
      defaultOptions: { autoscaling: { minScale: 1 }, timeoutSeconds: 5 },
      firewallConfig: OPEN,
      ...(extra.grace !== undefined ? { rolloutOptions: { terminationGracePeriodSeconds: extra.grace } } : {}),
    },
  };
}

/** An HTTP app on $PORT that ignores SIGTERM: it stops only at the grace period's SIGKILL. */
const STUBBORN = "process.on('SIGTERM', () => {}); require('http').createServer((q, s) => s.end('ok')).listen(+process.env.PORT, '127.0.0.1')";

const base = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
];
const web = workload('web', { name: 'app', command: NODE, args: ['-e', STUBBORN], ports: [{ number: 8080, protocol: 'http' }] }, { grace: 3 });
const crash = workload('crash', { name: 'app', command: NODE, args: ['-e', 'process.exit(3)'], ports: [{ number: 8080, protocol: 'http' }] });
const skipped = workload('skipped', echoContainer(), { tags: { 'svc/ignore': true } });

t.test('health per workload and location; svc/ignore', async (t) => {
  const dir = await tempDir(t, 'up-health-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify([...base, web, crash, skipped]));
  const changes: HealthChange[] = [];
  const { logger, entries } = captureLogger();
  const up = await startUp({
    // Two GVCs: the shop's workloads, which name none, belong to --gvc.
    settings: { ...defaultSettings, gvc: 'shop' },
    configPaths: [file, SHOP],
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger,
    watch: false,
    stateDir: await tempDir(t, 'svcproxy-state-'),
    limits: { maxEventLoopDelayMs: 0 },
    // Crash restarts come quickly, so the crash-loop bound is reached within a second or so.
    backoff: { initialMs: 20, maxMs: 40, resetAfterMs: 10_000 },
    onHealthChange: (c) => changes.push(c),
  });
  t.teardown(() => up.stop(5000));
  const { runtime } = up;
  const seen = (workload: string, from: string, to: string): boolean =>
    changes.some((c) => c.status.workload === workload && c.from === from && c.status.health === to);

  await waitFor(() => seen('web', 'Loading', 'Healthy') && seen('crash', 'Loading', 'Unhealthy'), 60_000, 'web healthy, crash unhealthy');
  t.ok(entries.some((e) => e.msg === 'workload health' && e.workload === 'web' && e.health === 'Healthy' && e.from === 'Loading'), 'each change is logged at info');

  const adminPort = runtime.admin!.address.port;
  const listing = await request(adminPort, '127.0.0.1', '/workloads');
  t.equal(listing.status, 200);
  const rows = JSON.parse(listing.body) as WorkloadStatus[];
  const webEnv = up.supervisor.processes().find((p) => p.workload === 'g1/web')!.env;
  t.same(rows.find((r) => r.workload === 'web'), {
    workload: 'web', gvc: 'g1', location: 'loc1', health: 'Healthy', ready: 1, replicas: 1, version: Number(webEnv.SVC_WORKLOAD_VERSION),
  }, 'web: Healthy, 1/1, the version its replica runs');
  t.match(rows.find((r) => r.workload === 'crash'), { health: 'Unhealthy', ready: 0, replicas: 1 });
  t.equal(rows.find((r) => r.workload === 'skipped'), undefined, 'an ignored workload is not listed');

  const metrics = (await request(adminPort, '127.0.0.1', '/metrics')).body;
  t.match(metrics, /svcproxy_workload_health\{workload="web",gvc="g1",location="loc1",health="Healthy"\} 1\n/);
  t.match(metrics, /svcproxy_workload_health\{workload="web",gvc="g1",location="loc1",health="Loading"\} 0\n/);
  t.match(metrics, /svcproxy_workload_health\{workload="crash",gvc="g1",location="loc1",health="Unhealthy"\} 1\n/);
  t.notMatch(metrics, /workload="skipped"/);

  // svc/ignore: no process, 404 on its canonical host (as an unknown host), one warning at load.
  t.notOk(up.supervisor.processes().some((p) => p.workload === 'g1/skipped'), 'no process started for the ignored workload');
  const snapshot = runtime.store.current;
  const port = runtime.listeners[0]!.address.port;
  const answer = await request(port, snapshot.workloads.get('g1/skipped')!.canonicalHost, '/');
  t.equal(answer.status, 404, 'the ignored workload\'s canonical host answers 404');
  t.equal(JSON.parse(answer.body).message, 'no route');
  t.equal((await request(port, snapshot.workloads.get('g1/web')!.canonicalHost, '/')).status, 200, 'another workload of the GVC answers');
  t.equal(snapshot.warnings.filter((w) => w.includes('svc/ignore')).length, 1, 'the ignore tag is warned about once');

  // What up cannot run: an image without a command, a cron workload. No process, and a reason everywhere.
  t.same(snapshot.gvcs.get('shop')?.locations, ['aws-eu-central-1', 'azure-eastus2', 'gcp-us-west1'], 'the shop runs in the platform\'s locations');
  t.notOk(up.supervisor.processes().some((p) => p.workload.startsWith('shop/')), 'no process for an image, nor for the cron workload\'s command');
  const front = snapshot.workloads.get('shop/front')!;
  const noImage = 'svcproxy up runs no image (container server has image registry.example/shop/front:v1.2.0 and no command)';
  for (const host of [front.canonicalHost, front.canonicalHost.replace('.app.localhost', '.azure-eastus2.direct.localhost')]) {
    for (let i = 0; i < 3; i++) {
      const refused = await request(port, host, '/');
      t.equal(refused.status, 503, host);
      t.equal(JSON.parse(refused.body).message, `no healthy upstream: ${noImage}`, 'the 503 says why, after the usual message');
    }
  }
  const shopRows = (JSON.parse((await request(adminPort, '127.0.0.1', '/workloads')).body) as WorkloadStatus[]).filter((r) => r.gvc === 'shop');
  t.same(shopRows.filter((r) => r.workload === 'front').map((r) => [r.location, r.health, r.notRun]), [
    ['aws-eu-central-1', 'Unknown', noImage], ['azure-eastus2', 'Unknown', noImage], ['gcp-us-west1', 'Unknown', noImage],
  ], '/workloads: health Unknown, and why');
  t.match(shopRows.find((r) => r.workload === 'cart'), { health: 'Unknown', notRun: 'svcproxy up runs no image (container redis has image redis:alpine and no command)' });
  t.match(shopRows.find((r) => r.workload === 'nightly'), { health: 'Unknown', notRun: /^svcproxy up runs no cron workload/ });
  t.equal(rows.find((r) => r.workload === 'web')?.notRun, undefined, 'a workload up runs has no such field');
  const said = entries.filter((e) => e.component === 'up' && e.workload === 'front');
  t.same(said.map((e) => e.msg), [`workload shop/front: ${noImage}: its host names answer 503 no healthy upstream`], 'said once, at start, not per request');
  t.equal(entries.filter((e) => e.component === 'up' && e.gvc === 'shop').length, 3, 'once for each of the three');

  // Removed by a reload: Deleting while its process stops (it ignores SIGTERM: up to the 3 s grace).
  await writeFile(file, JSON.stringify([...base, crash, skipped]));
  t.equal(await runtime.store.reload(), true);
  await waitFor(() => seen('web', 'Healthy', 'Deleting'), 30_000, 'web deleting');
  await waitFor(() => up.supervisor.replicaStates().every((s) => s.replica.workload !== 'g1/web'), 30_000, 'web stopped');
  const after = JSON.parse((await request(adminPort, '127.0.0.1', '/workloads')).body) as WorkloadStatus[];
  t.equal(after.find((r) => r.workload === 'web'), undefined, 'a removed workload leaves the list once its replicas are gone');
});
