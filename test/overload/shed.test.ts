/**
 * Load shedding: past its event-loop delay threshold the proxy answers new requests with a fast 503
 * `overloaded` (code OVERLOADED) instead of collapsing, keeps /ready at 200, counts what it shed in
 * `svcproxy_overload_shed_total`, lets requests it had already admitted finish, and serves 200 again
 * once the loop keeps up. The decision rule first as a table in fake time, then for real: the
 * event loop of the process running the proxy is blocked for 800 ms while requests arrive.
 */
import t from 'tap';
import net from 'node:net';
import { Registry } from 'prom-client';
import { OverloadGuard } from '../../src/proxy/overload.js';
import { ALIAS, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
import { eventually } from '../faults/fixtures.js';

const H = `api-${ALIAS}.app.localhost`;

t.test('the shedding rule, in fake time', async (t) => {
  let now = 0;
  const registry = new Registry();
  const guard = new OverloadGuard({ maxEventLoopDelayMs: 250, sampleIntervalMs: 100, registry, now: () => now });
  guard.start({ timer: false });
  t.teardown(() => guard.stop());
  // [what happens, then: time, sample?, shed?]
  const steps: [what: string, at: number, sample: boolean, shed: boolean][] = [
    ['on time', 100, true, false],
    ['a little late (120 ms)', 320, true, false],
    ['blocked: the next sample is 300 ms overdue, a request arrives first', 720, false, true],
    ['the late sample (300 ms) arrives', 720, true, true],
    ['still within the sample interval after a late sample', 780, false, true],
    ['the next sample is on time: recovered', 820, true, false],
    ['just under the threshold overdue', 1170, false, false],
    ['just over it', 1171.5, false, true],
  ];
  for (const [what, at, sample, shed] of steps) {
    now = at;
    if (sample) guard.sample();
    t.equal(guard.shed(), shed, `${what}: ${shed ? 'shed' : 'served'} (delay ${Math.round(guard.delayMs())} ms)`);
  }
  t.match(await registry.metrics(), /svcproxy_overload_shed_total 4/, 'each shed request counted');

  const off = new OverloadGuard({ maxEventLoopDelayMs: 0, now: () => now });
  off.start({ timer: false });
  now += 10_000;
  t.equal(off.shed(), false, 'threshold 0: never sheds');
  off.stop();
});

t.test('a blocked event loop: new requests shed with a fast 503, /ready stays 200, then recovery', async (t) => {
  let slowArrived = 0;
  let arrived = 0;
  const app = await startHttpServer(t, (req, res) => {
    arrived++;
    if (req.url === '/slow') slowArrived++;
    const ms = req.url === '/slow' ? 600 : 0;
    req.resume();
    setTimeout(() => res.end('ok'), ms);
  });
  // 300 ms: well above what a busy CI machine's scheduler adds, well below the 800 ms stall.
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }), { limits: { maxEventLoopDelayMs: 300 } });
  await plane.ready();
  const shedSoFar = async (): Promise<number> => Number(/svcproxy_overload_shed_total (\d+)/.exec(await (await fetch(`${plane.adminUrl}/metrics`)).text())?.[1] ?? 0);
  t.ok(await eventually(async () => (await request(plane.port, H, '/')).status === 200, 30_000), 'served while the loop keeps up');

  // Admitted before the stall: must finish normally.
  let admitted: Promise<{ status: number }> = Promise.resolve({ status: 0 });
  // Admitted means the app has it (a shed 503 never reaches the app), however long either takes.
  t.ok(await eventually(async () => {
    const arrivedBefore = slowArrived;
    let answered = false;
    const first = request(plane.port, H, '/slow');
    void first.finally(() => (answered = true)).catch(() => undefined);
    while (slowArrived === arrivedBefore && !answered) await new Promise((r) => setTimeout(r, 5));
    if (slowArrived === arrivedBefore) return false;
    admitted = first;
    return true;
  }, 30_000), 'a slow request admitted');
  const before = await shedSoFar();

  // 20 connections, each with a request written to the kernel just before the loop stalls.
  const N = 20;
  const sockets = await Promise.all(Array.from({ length: N }, () => new Promise<net.Socket>((resolve) => {
    const s = net.connect(plane.port, '127.0.0.1', () => resolve(s));
    s.on('error', () => undefined);
  })));
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  const answers = sockets.map((s) => new Promise<{ status: number; code: string }>((resolve) => {
    let text = '';
    s.on('data', (c: Buffer) => {
      text += c.toString();
      const m = /^HTTP\/1\.1 (\d{3})[\s\S]*\r\n\r\n([\s\S]*)$/.exec(text);
      if (m && m[2]!.length > 0) resolve({ status: Number(m[1]), code: /"code":"(\w+)"/.exec(m[2]!)?.[1] ?? m[2]! });
    });
  }));
  // The sampler is held for the stall and the answers: on a busy machine reading 20 requests may
  // outlast a sample interval, and the first sample after the stall would end the shedding midway.
  // The requests then meet the overdue sample, as requests queued behind any stall do.
  const guard = plane.runtime.overload!;
  guard.stop();
  guard.start({ timer: false });
  const arrivedBefore = arrived;
  for (const s of sockets) s.write(`GET / HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`);
  // Block this process's event loop (the proxy's too) for 800 ms: saturation, in-process.
  const blockedAt = performance.now();
  while (performance.now() - blockedAt < 800) {
    // busy
  }
  const results = await Promise.all(answers);
  const ready = await fetch(`${plane.adminUrl}/ready`);
  t.same([...new Set(results.map((r) => `${r.status} ${r.code}`))], ['503 OVERLOADED'], `${N} requests that arrived during the stall: ${N} answered 503 overloaded`);
  t.equal(arrived - arrivedBefore, 0, 'fast: answered by the proxy, none reached the app');
  t.equal(ready.status, 200, '/ready stays 200 (busy is not broken)');
  t.equal((await admitted).status, 200, 'the request admitted before the stall finished normally');

  t.ok((await shedSoFar()) - before >= N, `counted in svcproxy_overload_shed_total (+${(await shedSoFar()) - before})`);

  // Recovery: the sampler runs again; once its samples are on time, requests are served.
  guard.stop();
  guard.start();
  const recovered = await eventually(async () => {
    const after = await Promise.all(Array.from({ length: 10 }, () => request(plane.port, H, '/')));
    return after.every((r) => r.status === 200);
  }, 30_000, 50);
  t.ok(recovered, 'then 200 again (ten in a row)');
  t.match(await (await fetch(`${plane.adminUrl}/metrics`)).text(), /svcproxy_overload_event_loop_delay_seconds \d/, 'the delay gauge is exported');
});
