/**
 * The dashboard's sampler and events. Quantiles from bucket deltas against the exact quantile of
 * generated observations (fed through the real upstream-latency histogram) and Prometheus' own
 * documented cases; the rings stay bounded; nothing is read before a page is asked for and the
 * rates are the counters' differences (fake clock); the `/events` stream read by undici's
 * EventSource (the reference client): `retry`, a `history` then `tick` events whose rate follows
 * the requests counted, clients dropped when they go away and the one past the bound answered 503;
 * the page's headers (CSP, nosniff) and its script's ways of writing values (text only); and the
 * installed command with `--workers 2`, whose primary sums its workers' counters for the page.
 */
import t from 'tap';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { EventSource } from 'undici';
import { Metrics } from '../../src/admin/metrics.js';
import { startAdmin } from '../../src/admin/server.js';
import { Dashboard, sseEvent, type DashboardSource, type DashboardView, type Tick } from '../../src/admin/dashboard.js';
import { DASHBOARD_HTML, DASHBOARD_JS } from '../../src/admin/dashboard-page.js';
import { histogramQuantile, readCounters, Ring, LATENCY, type MetricFamily } from '../../src/admin/dashboard-series.js';
import type { Clock, Timer } from '../../src/deps.js';
import { prng, testSeed } from '../helpers/seed.js';
import { ALIAS, echoHandler, records, request, startHttpServer, waitFor, yamlDocuments } from '../helpers/harness.js';
import { startProxyProcess } from '../helpers/proxy-process.js';

const BOUNDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

t.test('histogram_quantile as Prometheus documents it', async (t) => {
  // The rules of promql's histogram_quantile (its documentation), one case each.
  const bounds = [0.1, 0.2];
  t.ok(Number.isNaN(histogramQuantile(0.5, bounds, [0, 0, 0])), 'no observations: NaN');
  t.equal(histogramQuantile(0.5, bounds, [10, 10, 10]), 0.05, 'the lowest bucket starts at 0');
  t.ok(Math.abs(histogramQuantile(0.75, bounds, [0, 4, 4]) - 0.175) < 1e-12, 'interpolated inside the bucket');
  t.equal(histogramQuantile(0.99, bounds, [1, 2, 10]), 0.2, 'a rank in +Inf answers the highest finite bound');
  t.equal(histogramQuantile(-1, bounds, [1, 2, 3]), -Infinity);
  t.equal(histogramQuantile(2, bounds, [1, 2, 3]), Infinity);
  t.equal(histogramQuantile(0, bounds, [2, 4, 4]), 0, 'q = 0 is the lowest bucket\'s start');
  t.equal(histogramQuantile(1, bounds, [2, 4, 4]), 0.2, 'q = 1 is the bucket of the largest');
});

t.test('quantiles of each interval bracket the exact quantile of generated observations', async (t) => {
  const seed = testSeed('DASHBOARD_SEED', 29);
  t.comment(`seed ${seed} (DASHBOARD_SEED=${seed} to replay)`);
  const random = prng(seed);
  const metrics = new Metrics();
  const read = async () => readCounters([(await metrics.upstreamLatency.get()) as MetricFamily]);
  let before = await read();
  for (let round = 0; round < 60; round++) {
    // Log-uniform latencies from 0.1 ms to 20 s (beyond the last bound too), a spike now and then.
    const n = 1 + Math.floor(random() * 400);
    const values: number[] = [];
    for (let i = 0; i < n; i++) {
      const v = random() < 0.05 ? 0.2 + random() : 10 ** (-4 + random() * 5.3);
      values.push(v);
      metrics.countRequest('shop/api', 'aws-us-east-2', 200, v);
    }
    const after = await read();
    const cumulative = after.latency.get('shop/api')!.map((c, i) => c - (before.latency.get('shop/api')?.[i] ?? 0));
    before = after;
    t.same(after.bounds, BOUNDS, 'the bounds read back from the histogram');
    values.sort((a, b) => a - b);
    for (const q of [0.5, 0.9, 0.99]) {
      const estimate = histogramQuantile(q, after.bounds, cumulative);
      // Prometheus' bucket is the first whose count reaches q·n: the ceil(q·n)-th smallest is in it.
      const exact = values[Math.max(0, Math.ceil(q * n) - 1)]!;
      const b = BOUNDS.findIndex((bound) => exact <= bound);
      if (b === -1) {
        t.equal(estimate, BOUNDS[BOUNDS.length - 1], `q=${q} n=${n}: above every bound`);
        continue;
      }
      const lower = b === 0 ? 0 : BOUNDS[b - 1]!;
      if (!(estimate >= lower && estimate <= BOUNDS[b]!)) t.fail(`seed ${seed} round ${round} q=${q}: ${estimate} outside [${lower}, ${BOUNDS[b]}] of exact ${exact}`);
    }
  }
  // Uniform observations inside one bucket: the interpolation is the exact quantile of the uniform.
  const uniform = new Metrics();
  for (let i = 0; i < 1000; i++) uniform.countRequest('shop/api', 'x', 200, 0.01 + (0.015 * (i + 0.5)) / 1000);
  const c = readCounters([(await uniform.upstreamLatency.get()) as MetricFamily]);
  t.ok(Math.abs(histogramQuantile(0.5, c.bounds, c.latency.get('shop/api')!) - 0.0175) < 1e-9, 'the median of uniform(10 ms, 25 ms) is 17.5 ms');
});

t.test('families read back summed over workers', async (t) => {
  const a = new Metrics();
  const b = new Metrics();
  a.countRequest('shop/api', 'l1', 200, 0.001);
  b.countRequest('shop/api', 'l1', 503, 0.3);
  b.countRequest('shop/api', 'l2', 200, undefined);
  const families = [...(await a.registry.getMetricsAsJSON()), ...(await b.registry.getMetricsAsJSON())] as MetricFamily[];
  const c = readCounters(families);
  t.same(c.requests.get('shop/api\u0000l1'), [0, 1, 0, 0, 1]);
  t.same(c.requests.get('shop/api\u0000l2'), [0, 1, 0, 0, 0]);
  t.equal(c.latency.get('shop/api')!.at(-1), 2, 'the +Inf bucket counts both workers\' observations');
  t.ok(families.some((f) => f.name === LATENCY));
});

t.test('a ring keeps the latest values, oldest first, NaN as null', async (t) => {
  const ring = new Ring(3);
  t.same(ring.values(), []);
  t.ok(Number.isNaN(ring.last()));
  for (const v of [1, 2, NaN, 4, 5]) ring.push(v);
  t.equal(ring.length, 3);
  t.same(ring.values(), [null, 4, 5]);
  t.equal(ring.last(), 5);
});

/** Timers run only when the test says; the clock moves only then. */
function fakeClock(): Clock & { fire(): Promise<void>; pending(): number } {
  let now = 0;
  let timers: { at: number; fn: () => void }[] = [];
  const settle = () => new Promise((r) => setImmediate(r));
  return {
    now: () => now,
    wallNow: () => 1_800_000_000_000 + now,
    setTimeout: (fn, ms) => {
      const timer = { at: now + ms, fn };
      timers.push(timer);
      return timer as Timer;
    },
    clearTimeout: (timer) => void (timers = timers.filter((x) => x !== timer)),
    pending: () => timers.length,
    async fire() {
      const next = timers.shift();
      if (!next) throw new Error('no timer pending');
      now = Math.max(now, next.at);
      next.fn();
      await settle();
      await settle();
    },
  };
}

function viewOf(metrics: Metrics, lastError: DashboardView['lastError'] = null): DashboardSource & { reads: number } {
  const source = {
    reads: 0,
    counters: async () => {
      source.reads++;
      return [(await metrics.requests.get()) as MetricFamily, (await metrics.upstreamLatency.get()) as MetricFamily];
    },
    view: (): DashboardView => ({
      role: 'ingress',
      generation: 3,
      lastError,
      workloads: [{ workload: 'api', gvc: 'shop', location: 'aws-us-east-2', health: 'Healthy', ready: 1, replicas: 1 }],
      replicas: [{ workload: 'shop/api', location: 'aws-us-east-2', name: 'api-0', ready: true, outstanding: 0, ejected: false }],
    }),
  };
  return source;
}

t.test('nothing is read before the page is asked for; rates are counter differences; rings bounded', async (t) => {
  const clock = fakeClock();
  const metrics = new Metrics();
  const source = viewOf(metrics);
  const dashboard = new Dashboard(source, { clock, history: 5, idleStopMs: 60_000 });
  t.teardown(() => dashboard.close());
  metrics.countRequest('shop/api', 'aws-us-east-2', 200, 0.002);
  t.equal(source.reads, 0);
  t.equal(clock.pending(), 0, 'no timer before the first page');
  dashboard.touch();
  await new Promise((r) => setImmediate(r));
  t.equal(source.reads, 1, 'the first read is the baseline');
  t.equal(dashboard.current, undefined, 'a baseline is not a rate');
  for (let i = 0; i < 3; i++) metrics.countRequest('shop/api', 'aws-us-east-2', 200, 0.002);
  metrics.countRequest('shop/api', 'aws-us-east-2', 502, 0.2);
  await clock.fire();
  let tick = dashboard.current as Tick;
  const api = tick.workloads.find((w) => w.key === 'shop/api')!;
  t.equal(api.rps, 4, 'the request before the page opened is not counted');
  t.equal(api.err, 0.25);
  t.ok(api.p50! > 1 && api.p50! <= 2.5, `p50 ${api.p50} ms in the 1..2.5 ms bucket`);
  t.same(api.locations, [{ location: 'aws-us-east-2', health: 'Healthy', ready: 1, replicas: 1, rps: 4, err: 0.25 }]);
  await clock.fire();
  tick = dashboard.current as Tick;
  t.equal(tick.workloads[0]!.rps, 0);
  t.equal(tick.workloads[0]!.err, null, 'no request: no error share');
  for (let i = 0; i < 10; i++) await clock.fire();
  const history = dashboard.historyEvent();
  t.equal(history.series['shop/api']!.rps.length, 5, 'the ring holds `history` samples');
  t.equal(history.seq, (dashboard.current as Tick).seq);
  // No page for idleStopMs: sampling stops and its rings are dropped.
  for (let i = 0; i < 60 && dashboard.sampling; i++) await clock.fire();
  t.notOk(dashboard.sampling, 'stopped after a minute without a page');
  t.equal(clock.pending(), 0);
  t.same(dashboard.historyEvent().series, {});
});

t.test('a tick carries the busiest maxRows workloads and says so', async (t) => {
  const clock = fakeClock();
  const metrics = new Metrics();
  const dashboard = new Dashboard(viewOf(metrics), { clock, maxRows: 2 });
  t.teardown(() => dashboard.close());
  dashboard.touch();
  await new Promise((r) => setImmediate(r));
  for (const [key, n] of [['shop/a', 5], ['shop/b', 1], ['shop/c', 3]] as const) for (let i = 0; i < n; i++) metrics.countRequest(key, 'l', 200, undefined);
  await clock.fire();
  const tick = dashboard.current as Tick;
  t.same(tick.workloads.map((w) => w.key), ['shop/a', 'shop/c'], 'the two busiest, in name order');
  t.match(tick.note, /the 2 busiest of 4 workloads shown/);
});

t.test('sseEvent frames one data line even for text with newlines', async (t) => {
  const frame = sseEvent('tick', { text: 'a\nb\r\nc' });
  t.equal(frame.split('\n').length, 4, 'event, data, blank line');
  t.match(frame, /^event: tick\ndata: \{.*\}\n\n$/);
});

async function adminWith(t: { teardown(fn: () => unknown): void }, source: DashboardSource, maxClients = 16) {
  const metrics = new Metrics();
  const admin = await startAdmin('127.0.0.1', 0, metrics, { ready: () => true, config: () => ({}), dashboard: source, dashboardOptions: { intervalMs: 50, maxClients } });
  t.teardown(() => admin.close());
  return { admin, base: `http://127.0.0.1:${admin.address.port}` };
}

t.test('/events read by undici\'s EventSource: retry, history, ticks that follow the counters', async (t) => {
  const metrics = new Metrics();
  const { admin, base } = await adminWith(t, viewOf(metrics, { at: '2026-11-28T10:00:00.000Z', errors: ['/etc/svc/a.yaml:7: workload/<script>alert(1)</script>: spec: bad'] }));
  const raw = await new Promise<{ head: http.IncomingMessage; text: string }>((resolve, reject) => {
    http.get(`${base}/events`, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
        if (text.includes('event: history')) {
          res.destroy();
          resolve({ head: res, text });
        }
      });
    }).on('error', reject);
  });
  t.equal(raw.head.headers['content-type'], 'text/event-stream; charset=utf-8');
  t.match(raw.text, /^retry: \d+\n\n/, 'the stream opens with its reconnection delay');

  const es = new EventSource(`${base}/events`);
  t.teardown(() => es.close());
  const ticks: Tick[] = [];
  let history: { capacity: number } | undefined;
  es.addEventListener('history', (e) => (history = JSON.parse((e as MessageEvent).data)));
  es.addEventListener('tick', (e) => ticks.push(JSON.parse((e as MessageEvent).data)));
  await waitFor(() => ticks.length > 0, 30_000, 'a tick');
  t.equal(history?.capacity, 300);
  t.equal(ticks[0]!.generation, 3);
  t.same(ticks[0]!.lastError!.errors, ['/etc/svc/a.yaml:7: workload/<script>alert(1)</script>: spec: bad'], 'error text arrives as JSON data');
  const sent = ticks.length;
  for (let i = 0; i < 20; i++) metrics.countRequest('shop/api', 'aws-us-east-2', 200, 0.001);
  await waitFor(() => ticks.slice(sent).some((x) => x.workloads[0]!.rps > 0), 30_000, 'a tick with requests');
  t.equal(admin.dashboard!.clientCount, 1);
  es.close();
  await waitFor(() => admin.dashboard!.clientCount === 0, 30_000, 'the closed page dropped');
  t.pass('a page that goes away is dropped');
});

t.test('at most maxClients pages; the next gets 503 until one leaves', async (t) => {
  const { admin, base } = await adminWith(t, viewOf(new Metrics()), 2);
  const open = [new AbortController(), new AbortController()];
  t.teardown(() => open.forEach((c) => c.abort()));
  for (const c of open) t.equal((await fetch(`${base}/events`, { signal: c.signal })).status, 200);
  await waitFor(() => admin.dashboard!.clientCount === 2, 30_000, 'two pages');
  const refused = await fetch(`${base}/events`);
  t.equal(refused.status, 503);
  t.equal(refused.headers.get('retry-after'), '10');
  open[0]!.abort();
  await waitFor(() => admin.dashboard!.clientCount === 1, 30_000, 'one page left');
  const again = new AbortController();
  t.teardown(() => again.abort());
  t.equal((await fetch(`${base}/events`, { signal: again.signal })).status, 200, 'a place freed is taken');
});

t.test('the page: no value in its markup, CSP and nosniff, values written as text only', async (t) => {
  const { base } = await adminWith(t, viewOf(new Metrics()));
  const page = await fetch(`${base}/`);
  t.equal(page.status, 200);
  t.match(page.headers.get('content-security-policy'), /^default-src 'self'/);
  t.equal(page.headers.get('x-content-type-options'), 'nosniff');
  t.equal(await page.text(), DASHBOARD_HTML, 'the same document whatever the configuration');
  for (const asset of ['/dashboard.js', '/dashboard.css']) {
    const res = await fetch(`${base}${asset}`);
    t.equal(res.status, 200, asset);
    t.equal(res.headers.get('x-content-type-options'), 'nosniff');
  }
  t.notMatch(DASHBOARD_JS, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\(|new Function/, 'no way of writing markup');
  t.notMatch(DASHBOARD_HTML, /<script>|\sstyle=|\son\w+=/, 'no inline script, style or handler (the CSP forbids them)');
});

t.test('a role without a dashboard source keeps / and /events 404', async (t) => {
  const admin = await startAdmin('127.0.0.1', 0, new Metrics(), { ready: () => true, config: () => ({}) });
  t.teardown(() => admin.close());
  for (const path of ['/', '/events', '/dashboard.js']) t.equal((await fetch(`http://127.0.0.1:${admin.address.port}${path}`)).status, 404, path);
});

t.test('--workers 2: the primary\'s page sums its workers\' counters and says what it cannot see', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-dashboard-workers-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'records.yaml'), yamlDocuments(records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } })));
  const proxy = await startProxyProcess(t, ['ingress', '--config', dir, '--location', 'aws-us-east-2', '--workers', '2']);
  const es = new EventSource(`${proxy.admin}/events`);
  t.teardown(() => es.close());
  let latest: Tick | undefined;
  es.addEventListener('tick', (e) => (latest = JSON.parse((e as MessageEvent).data)));
  await waitFor(() => latest !== undefined, 60_000, 'a tick from the primary');
  t.match(latest!.note, /--workers 2/, 'the page says where its numbers come from');
  t.match(latest!.role, /primary of 2 workers/);
  let risen = false;
  for (let i = 0; !risen && i < 20_000; i++) {
    await request(proxy.port, `api-${ALIAS}.app.localhost`, '/');
    risen = (latest!.workloads.find((w) => w.key === 'shop/api')?.rps ?? 0) > 0;
  }
  t.ok(risen, 'requests through the workers show as a rate');
  const api = latest!.workloads.find((w) => w.key === 'shop/api')!;
  t.equal(api.locations[0]?.health, 'Healthy', 'health as every worker sees it');
  t.same(api.replicas.map((r) => [r.name, r.ready, r.ejected]), [['api-0', true, null]]);
});
