/**
 * A replica process crashes under `svcproxy up` while requests flow: the workload runs two replicas
 * of a small node app (minScale 2) with a retry policy; one replica process is killed (SIGKILL).
 * The supervisor restarts it, traffic moves to the other replica meanwhile, and no request fails
 * beyond those in flight at the kill — which are retried on the other one (in practice all of them).
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startUp } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { Load, eventually, send, tally } from './fixtures.js';

// The workload: answers with its replica name after 20 ms, so requests are in flight when it dies.
const APP = `
const http = require('node:http');
http.createServer((req, res) => {
  req.resume();
  setTimeout(() => res.end(process.env.SVC_REPLICA), 20);
}).listen(Number(process.env.PORT), '127.0.0.1');
`;

t.test('a replica process killed under load: restarted, traffic moves, in-flight requests retried', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-faults-up-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'app.cjs');
  writeFileSync(script, APP);
  const up = await startUp({
    settings: defaultSettings,
    records: [
      { kind: 'org', name: 'acme' },
      { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
      { kind: 'gvc', name: 'shop', alias: 'abcdefghij123', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
      {
        kind: 'workload', name: 'api', gvc: 'shop',
        spec: {
          type: 'standard',
          containers: [{ name: 'app', command: process.execPath, args: [script], ports: [{ number: 8080, protocol: 'http' }] }],
          defaultOptions: { autoscaling: { minScale: 2, maxScale: 2 }, timeoutSeconds: 5 },
          requestRetryPolicy: { attempts: 2, retryOn: ['connect-failure', 'reset', 'refused-stream'] },
          firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
        },
      },
    ],
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: silentLogger(),
    watch: false,
    stateDir: path.join(dir, 'state'),
    // Shedding off: a stalled CI machine must not turn into 503s this test would count as failures.
    limits: { maxEventLoopDelayMs: 0 },
    backoff: { initialMs: 200, maxMs: 1000, resetAfterMs: 10_000 },
  });
  t.teardown(() => up.stop(2000));
  const ready = (): boolean => up.runtime.replicas.all().length === 2 && up.runtime.replicas.all().every((r) => r.ready);
  // Bounds here are hang guards: a busy machine starts node processes slowly.
  t.ok(await eventually(ready, 60_000), 'two replicas ready');
  const port = up.runtime.listeners[0]!.address.port;
  const host = 'api-abcdefghij123.app.localhost';
  const load = new Load(() => send(port, host, '/', { note: (_res, body) => body }), { concurrency: 6, pauseMs: 5, maxMs: 110_000 });
  t.teardown(() => load.stop());
  await load.settle(40);

  const victim = up.supervisor.processes().find((p) => p.replica === 'api-0')!;
  load.phase = 'killed';
  const inFlight = up.runtime.dataplane.requestsInFlight;
  process.kill(victim.pid!, 'SIGKILL');
  const restarted = await eventually(() => {
    const p = up.supervisor.processes().find((x) => x.replica === 'api-0');
    return p !== undefined && p.restarts === victim.restarts + 1 && p.pid !== victim.pid && p.ready;
  }, 60_000);
  load.phase = 'after';
  await load.settle(60);
  await load.stop();

  const killed = load.of('killed');
  const during = tally(killed);
  const after = tally(load.of('after'));
  t.comment(`before: ${JSON.stringify(tally(load.of('before')))}`);
  t.comment(`while api-0 was down: ${JSON.stringify(during)}; ${inFlight} in flight at the kill`);
  t.comment(`after the restart: ${JSON.stringify(after)}`);
  t.ok(restarted, 'the killed process was restarted (a new pid) and is ready again');
  t.ok(killed.filter((r) => r.outcome === 200).every((r) => r.note === 'api-1' || r.note === 'api-0'), 'answers came from the replicas');
  t.ok(killed.some((r) => r.note === 'api-1'), 'traffic moved to the other replica');
  // Only a request in flight at the kill (or dispatched in the instant before the replica was
  // marked down) can fail, and only when it cannot be retried (the retry budget allows 3 retries
  // in flight at once): never more than the load's concurrency (6). Usually none.
  const failed = load.of().filter((r) => r.outcome !== 200);
  t.ok(failed.length <= 6, `${failed.length} failed of ${load.of().length} (${during.sent} sent while it was down): no failure beyond the requests in flight ${JSON.stringify(failed.map((r) => r.outcome))}`);
  t.ok(failed.every((r) => r.phase === 'killed'), 'and none outside the moment of the kill');
  t.equal(tally(load.of('after')).by[200], load.of('after').length, 'after the restart: every request 200');
  t.ok(load.of('after').some((r) => r.note === 'api-0'), 'the restarted replica serves again');
  const metrics = await (await fetch(`http://127.0.0.1:${up.runtime.admin!.address.port}/metrics`)).text();
  t.comment(`retries: ${/svcproxy_upstream_retries_total\{[^}]*\} (\d+)/.exec(metrics)?.[1] ?? 0}`);
});
