/**
 * `up` scales (DESIGN §10), with real processes: `minScale: 0` runs nothing until the first request,
 * which waits while a replica starts; after `scaleToZeroDelay` without requests the replica stops,
 * and the next request wakes it again. With `metric: concurrency`, requests in flight beyond the
 * target per replica start more replicas (up to `maxScale`), and they stop once the load is gone
 * (after the scale-down window, shortened here). The decisions themselves are table-tested in
 * test/local/autoscale.test.ts.
 */
import t from 'tap';
import type { Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startUp, type Up } from '../../src/roles/up.js';
import { echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { ALIAS, request, waitFor } from '../helpers/harness.js';

/** Answers after 200 ms with the most requests it ever had in flight at once. */
const COUNTING_APP = "let n=0,max=0;require('http').createServer((q,s)=>{n++;max=Math.max(max,n);setTimeout(()=>{n--;s.end(String(max))},200)}).listen(process.env.PORT,'127.0.0.1')";

function records(name: string, autoscaling: Record<string, unknown>, args: string[] = [echoScriptPath()], debug = false): Record<string, unknown>[] {
  return [
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: 'shop', alias: ALIAS, spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
    {
      kind: 'workload', name, gvc: 'shop',
      spec: {
        type: 'serverless',
        containers: [{ name: 'app', command: process.execPath, args, ports: [{ number: 8080, protocol: 'http' }] }],
        defaultOptions: { autoscaling, timeoutSeconds: 15, debug },
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      },
    },
  ];
}

async function start(t: Test, recs: Record<string, unknown>[]): Promise<Up> {
  const stateDir = mkdtempSync(join(tmpdir(), 'svcproxy-state-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  const up = await startUp({
    settings: defaultSettings, records: recs, listen: ['127.0.0.1:0'], admin: '127.0.0.1:0',
    logger: silentLogger(), watch: false, stateDir, limits: { maxEventLoopDelayMs: 0 }, scaleDownWindowMs: 500,
  });
  t.teardown(() => up.stop(3000));
  return up;
}

const host = (w: string): string => `${w}-${ALIAS}.app.localhost`;
const running = (up: Up, w: string): number => up.supervisor.processes().filter((p) => p.workload === `shop/${w}`).length;

t.test('minScale 0: nothing runs until a request; idle past scaleToZeroDelay: back to zero', async (t) => {
  const up = await start(t, records('lazy', { minScale: 0, maxScale: 2, scaleToZeroDelay: 1 }, undefined, true));
  const port = up.runtime.listeners[0]!.address.port;
  t.equal(running(up, 'lazy'), 0, 'no process at start');
  t.equal((await request(up.runtime.admin!.address.port, 'admin', '/ready')).status, 200, 'ready without it (minScale 0)');
  const first = await request(port, host('lazy'), '/wake');
  t.equal(first.status, 200, 'the first request waits for the replica it started');
  t.equal(JSON.parse(first.body).path, '/wake');
  t.equal(running(up, 'lazy'), 1);
  await waitFor(() => running(up, 'lazy') === 0, 60_000, 'scaled to zero after the idle delay');
  t.equal(up.runtime.replicas.all().filter((r) => r.workload === 'shop/lazy').length, 0, 'no replica left in the table');
  const again = await request(port, host('lazy'), '/again', { headers: { 'x-svc-debug': 'true' } });
  t.equal(again.status, 200, 'the next request wakes it again');
  t.match(again.headers['server-timing'], /(^|, )queue;dur=\d/, 'its debug answers show the wait for the replica (Server-Timing queue)');
});

t.test('concurrency: load beyond the target starts replicas up to maxScale; they stop when it is gone', async (t) => {
  const up = await start(t, records('busy', { minScale: 1, maxScale: 3, metric: 'concurrency', target: 1 }));
  const port = up.runtime.listeners[0]!.address.port;
  await waitFor(() => up.runtime.replicas.all().some((r) => r.ready), 30_000, 'the first replica ready');
  // Four slow requests in flight at once: four wanted, capped at maxScale 3.
  const slow = Array.from({ length: 4 }, (_, i) => request(port, host('busy'), `/delay?ms=4000&i=${i}`));
  await waitFor(() => running(up, 'busy') === 3, 30_000, 'scaled up to maxScale');
  for (const res of await Promise.all(slow)) t.equal(res.status, 200);
  await waitFor(() => running(up, 'busy') === 1, 60_000, 'back to minScale once the load is gone');
  t.pass('scaled down');
});

t.test('maxConcurrency: a replica takes at most that many requests at once; the rest wait their turn', async (t) => {
  const up = await start(t, records('capped', { minScale: 1, maxScale: 1, maxConcurrency: 1 }, ['-e', COUNTING_APP]));
  const port = up.runtime.listeners[0]!.address.port;
  await waitFor(() => up.runtime.replicas.all().some((r) => r.ready), 30_000, 'the replica ready');
  const answers = await Promise.all(Array.from({ length: 4 }, (_, i) => request(port, host('capped'), `/${i}`)));
  for (const res of answers) {
    t.equal(res.status, 200, 'answered after waiting');
    t.equal(res.body, '1', 'the app never had two requests at once');
  }
});
