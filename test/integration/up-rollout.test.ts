/**
 * A rollout under `svcproxy up` (DESIGN §10), with real processes: a reload that changes what a
 * two-replica workload runs (its env) replaces the replicas by `rolloutOptions` with
 * `maxUnavailableReplicas: 0`: a replacement starts beside each old replica, which keeps serving
 * until the new one is ready, so two replicas are ready at every moment. Steady traffic throughout:
 * zero failed requests, every replica ends on the new definition, and SVC_WORKLOAD_VERSION changed.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync, renameSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startUp } from '../../src/roles/up.js';
import { echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { ALIAS, request, waitFor } from '../helpers/harness.js';

function config(release: string): string {
  return JSON.stringify([
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: 'shop', alias: ALIAS, spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
    {
      kind: 'workload', name: 'api', gvc: 'shop',
      spec: {
        type: 'standard',
        containers: [{ name: 'app', command: process.execPath, args: [echoScriptPath()], env: [{ name: 'RELEASE', value: release }], ports: [{ number: 8080, protocol: 'http' }] }],
        defaultOptions: { autoscaling: { minScale: 2, maxScale: 2 }, timeoutSeconds: 10 },
        rolloutOptions: { maxUnavailableReplicas: 0, maxSurgeReplicas: 1, minReadySeconds: 0 },
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      },
    },
  ]);
}

t.test('a rollout with maxUnavailableReplicas 0 fails no request', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'svcproxy-rollout-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'records.json');
  writeFileSync(file, config('1'));
  const up = await startUp({
    settings: defaultSettings, configPaths: [file], listen: ['127.0.0.1:0'], admin: '127.0.0.1:0',
    logger: silentLogger(), watch: false, stateDir: join(dir, 'state'), limits: { maxEventLoopDelayMs: 0 },
  });
  t.teardown(() => up.stop(3000));
  const port = up.runtime.listeners[0]!.address.port;
  const releases = (): string[] => up.supervisor.processes().map((p) => p.env.RELEASE!);
  await waitFor(() => up.runtime.replicas.all().filter((r) => r.ready).length === 2, 30_000, 'two replicas ready');
  const versionBefore = up.supervisor.processes()[0]!.env.SVC_WORKLOAD_VERSION;

  let running = true;
  let ok = 0;
  const failures: string[] = [];
  const loops = Array.from({ length: 6 }, async () => {
    while (running) {
      const res = await request(port, `api-${ALIAS}.app.localhost`, '/steady').catch((err: Error) => ({ status: 0, body: err.message }));
      if (res.status === 200) ok++;
      else failures.push(`${res.status} ${res.body.slice(0, 120)}`);
    }
  });
  await waitFor(() => ok >= 20, 30_000, 'traffic flowing');
  // maxUnavailableReplicas 0: at every change of the table, two replicas stay ready.
  let fewestReady = Number.POSITIVE_INFINITY;
  const count = (): void => {
    fewestReady = Math.min(fewestReady, up.runtime.replicas.all().filter((r) => r.ready).length);
  };
  up.runtime.replicas.on('ready', count);
  up.runtime.replicas.on('change', count);
  writeFileSync(join(dir, '.next'), config('2'));
  renameSync(join(dir, '.next'), file);
  await up.runtime.store.reload();
  // Done when both replicas run release 2 and no old replica is registered.
  await waitFor(() => {
    const r = releases();
    return r.length === 2 && r.every((x) => x === '2') && up.runtime.replicas.all().length === 2 && up.runtime.replicas.all().every((x) => x.ready);
  }, 60_000, 'the rollout to finish');
  const during = ok;
  await waitFor(() => ok >= during + 20, 30_000, 'traffic after the rollout');
  running = false;
  await Promise.all(loops);
  t.same(failures.slice(0, 5), [], `no failed request (${ok} answered)`);
  t.ok(fewestReady >= 2, `never fewer than two replicas ready (fewest: ${fewestReady})`);
  t.not(up.supervisor.processes()[0]!.env.SVC_WORKLOAD_VERSION, versionBefore, 'a new workload version');
});
