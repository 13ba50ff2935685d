/**
 * The debug answers as a browser reads them: Debian's chromium (headless, playwright-core) loads a page
 * from a workload's canonical name through the proxy and fetches with `x-svc-debug: true`; the
 * browser's own Server-Timing parser (PerformanceResourceTiming.serverTiming) is the oracle for the
 * header's syntax: every entry the proxy wrote comes back with its name, duration and description,
 * the app's own entry after them, and the headers are readable by the page.
 */
import t from 'tap';
import { chromium } from 'playwright-core';
import { ALIAS, records, startHttpServer, startPlane } from '../helpers/harness.js';

const LOCATION = 'aws-us-east-2';

const PAGE = '<!doctype html><title>t</title><p>debug</p>';

t.test('chromium parses the Server-Timing the proxy writes', async (t) => {
  const app = await startHttpServer(t, (req, res) => {
    if (req.url === '/') {
      res.writeHead(200, { 'content-type': 'text/html' }).end(PAGE);
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain', 'server-timing': 'app-db;dur=2.5;desc="orders"' }).end('ok');
  });
  const plane = await startPlane(t, records({
    replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] },
    workloadSpec: { defaultOptions: { debug: true }, requestRetryPolicy: { attempts: 1, retryOn: ['5xx'] } },
  }), { location: LOCATION });
  await plane.ready();

  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage();
  // *.localhost is loopback in Chromium, as in curl: the page's origin is the workload's canonical name.
  const origin = `http://api-${ALIAS}.app.localhost:${plane.port}`;
  t.equal((await page.goto(`${origin}/`))?.status(), 200);
  const seen = await page.evaluate(async () => {
    const res = await fetch('/data?x=1', { headers: { 'x-svc-debug': 'true' } });
    await res.text();
    const entry = performance.getEntriesByType('resource').find((e) => e.name.includes('/data')) as PerformanceResourceTiming | undefined;
    return {
      status: res.status,
      route: res.headers.get('x-svc-route'),
      attempts: res.headers.get('x-svc-attempts'),
      timing: (entry?.serverTiming ?? []).map((s) => ({ name: s.name, duration: s.duration, description: s.description })),
    };
  });
  t.equal(seen.status, 200);
  t.equal(seen.route, 'canonical; gvc=shop; workload=api; port=8080');
  t.equal(seen.attempts, `1; 1=api-0@${LOCATION} 200`);
  t.same(seen.timing.map((s) => s.name), ['upstream', 'total', 'app-db'], 'every entry parsed, the app\'s after the proxy\'s');
  const [upstream, total, appDb] = seen.timing;
  t.equal(upstream!.description, 'attempt 1 api-0 200');
  t.ok(upstream!.duration > 0 && total!.duration >= upstream!.duration, `durations read as numbers (${upstream!.duration}, ${total!.duration})`);
  t.same(appDb, { name: 'app-db', duration: 2.5, description: 'orders' });
});
