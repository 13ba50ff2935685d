/**
 * Requests wait for a starting replica under `svcproxy up` (DESIGN §10), with real processes: a
 * request sent before the app listens is held and answered once the replica is ready (checked every
 * 50-100 ms while starting); a replica that never becomes ready answers 504 at the workload's
 * timeout; past the per-workload bound of waiting requests, 503 `overloaded`; `/ready` turns 200
 * only once every workload has a ready replica, and the first request after it is answered.
 */
import t from 'tap';
import type { Test } from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startUp, type Up } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { ALIAS, request, waitFor } from '../helpers/harness.js';

const NODE = process.execPath;
/** Listens only after `ms`: a slow start. */
const LATE_APP = (ms: number): string => `setTimeout(()=>require('http').createServer((q,s)=>s.end('late '+q.url)).listen(process.env.PORT,'127.0.0.1'),${ms})`;
/** Never listens. */
const DEAD_APP = 'setInterval(()=>{},1000)';

function records(workloads: { name: string; script: string; timeoutSeconds?: number }[]): Record<string, unknown>[] {
  return [
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: 'shop', alias: ALIAS, spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
    ...workloads.map((w) => ({
      kind: 'workload', name: w.name, gvc: 'shop',
      spec: {
        type: 'standard',
        containers: [{ name: 'app', command: NODE, args: ['-e', w.script], ports: [{ number: 8080, protocol: 'http' }] }],
        defaultOptions: { autoscaling: { minScale: 1 }, timeoutSeconds: w.timeoutSeconds ?? 10 },
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      },
    })),
  ];
}

async function start(t: Test, workloads: Parameters<typeof records>[0], maxHeldPerWorkload?: number): Promise<Up> {
  const stateDir = mkdtempSync(join(tmpdir(), 'svcproxy-state-'));
  t.teardown(() => rmSync(stateDir, { recursive: true, force: true }));
  const up = await startUp({
    settings: defaultSettings, records: records(workloads), listen: ['127.0.0.1:0'], admin: '127.0.0.1:0',
    logger: silentLogger(), watch: false, stateDir, limits: { maxEventLoopDelayMs: 0 },
    ...(maxHeldPerWorkload !== undefined ? { maxHeldPerWorkload } : {}),
  });
  t.teardown(() => up.stop(3000));
  return up;
}

const host = (w: string): string => `${w}-${ALIAS}.app.localhost`;

t.test('a request sent while the replica starts waits for it', async (t) => {
  const up = await start(t, [{ name: 'slow', script: LATE_APP(800) }]);
  const port = up.runtime.listeners[0]!.address.port;
  t.notOk(up.runtime.replicas.all().some((r) => r.ready), 'nothing is ready when the request is sent');
  t.ok(up.runtime.replicas.all().some((r) => r.starting), 'the replica is starting');
  const res = await request(port, host('slow'), '/first');
  t.equal(res.status, 200, 'held, then answered');
  t.equal(res.body, 'late /first');
});

t.test('past the timeout: 504; past the bound: 503 overloaded', async (t) => {
  const up = await start(t, [{ name: 'dead', script: DEAD_APP, timeoutSeconds: 1 }], 2);
  const port = up.runtime.listeners[0]!.address.port;
  await waitFor(() => up.runtime.replicas.all().some((r) => r.starting), 30_000, 'the replica starting');
  const held = [request(port, host('dead'), '/a'), request(port, host('dead'), '/b')];
  // Both are waiting before the third arrives (the bound is 2).
  const heldNow = (): number => {
    const held = up.runtime.dataplane.heldCount('shop/dead');
    return held.anywhere + [...held.byLocation.values()].reduce((a, b) => a + b, 0);
  };
  await waitFor(() => heldNow() === 2, 10_000, 'two held');
  const third = await request(port, host('dead'), '/c');
  t.equal(third.status, 503);
  t.equal(JSON.parse(third.body).message, 'overloaded');
  for (const res of await Promise.all(held)) {
    t.equal(res.status, 504);
    t.equal(JSON.parse(res.body).message, 'upstream request timeout');
  }
});

t.test('/ready waits for every workload; the first request after it is answered', async (t) => {
  const up = await start(t, [{ name: 'slow', script: LATE_APP(500) }, { name: 'quick', script: LATE_APP(0) }]);
  const admin = up.runtime.admin!.address.port;
  const first = await request(admin, 'admin', '/ready');
  t.equal(first.status, 503, 'not ready while a replica starts');
  await waitFor(() => up.runtime.replicas.all().every((r) => r.ready), 30_000, 'replicas ready');
  t.equal((await request(admin, 'admin', '/ready')).status, 200);
  const res = await request(up.runtime.listeners[0]!.address.port, host('slow'), '/');
  t.equal(res.status, 200);
});
