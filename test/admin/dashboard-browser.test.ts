/**
 * The dashboard in a real browser: Debian's chromium, headless, driven by playwright-core. `up` runs
 * the built-in demo (its echo workload as real processes) from a config folder; the page shows the
 * workload, its request rate rises above 0 once traffic is sent (waited for in the DOM, no sleeps),
 * a rejected reload whose error text holds markup shows that text as text (no element made, no
 * script run), and a screenshot is written to the test's temporary folder, kept (its path printed)
 * only when the test fails; never to docs/, since it shows the injection probe (docs/dashboard.png is
 * made by scripts/dashboard-picture.ts from a realistic run).
 */
import t from 'tap';
import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { startUp } from '../../src/roles/up.js';
import { demoRecords, echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { request, waitFor, yamlDocuments } from '../helpers/harness.js';

const INJECTED = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">';

t.test('the page shows the demo workload, its rate rises with traffic, markup in an error stays text', async (t) => {
  const dir = await mkdtemp(path.join(tmpdir(), 'svcproxy-dashboard-'));
  // Kept when the test fails, for its screenshot.
  t.teardown(() => (t.passing() ? rm(dir, { recursive: true, force: true }) : t.comment(`kept: ${dir}`)));
  await writeFile(path.join(dir, 'demo.yaml'), yamlDocuments(demoRecords(echoScriptPath(), process.execPath)));
  const up = await startUp({
    settings: defaultSettings,
    configPaths: [dir],
    listen: ['127.0.0.1:0'],
    mesh: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: silentLogger(),
    logDir: path.join(dir, 'logs'),
    stateDir: path.join(dir, 'state'),
    watch: false,
  });
  t.teardown(() => up.stop(5000));
  const { runtime } = up;
  await waitFor(() => runtime.replicas.all().length > 0 && runtime.replicas.all().every((r) => r.ready), 30_000, 'demo replicas ready');

  // A rejected reload whose error lines carry markup (an unknown kind is quoted back).
  await writeFile(path.join(dir, 'bad.yaml'), yamlDocuments([{ kind: INJECTED, name: 'x' }]));
  await runtime.store.reload();
  t.ok(runtime.store.lastErrors?.some((e) => e.includes('<script>')), 'the error text holds the markup');

  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1360, height: 520 } });
  const problems: string[] = [];
  page.on('pageerror', (err) => problems.push(err.message));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  const admin = `http://127.0.0.1:${runtime.admin!.address.port}`;
  const res = await page.goto(`${admin}/`);
  t.equal(res?.status(), 200);

  const row = 'tr[data-workload="demo/echo"]';
  await page.waitForSelector(row, { timeout: 60_000 });
  t.match(await page.textContent(row), /echo/, 'the demo workload is shown');
  t.match(await page.textContent(row), /aws-us-east-2/, 'with its locations');
  t.match(await page.textContent('#status'), /live/);

  // Traffic until the page's rate is above 0; the browser tells when (bounded: 20,000 requests).
  const alias = runtime.store.current.gvcs.get('demo')!.alias;
  const port = runtime.listeners[0]!.address.port;
  let risen = false;
  const rateAbove0 = page
    .waitForFunction((sel) => {
      const value = document.querySelector(`${sel} td[data-field="rps"] .value`);
      return value !== null && Number.parseFloat(value.textContent ?? '') > 0;
    }, row, { timeout: 120_000 })
    .finally(() => (risen = true));
  let sent = 0;
  while (!risen && sent < 20_000) {
    await request(port, `echo-${alias}.app.localhost`, '/dashboard');
    sent++;
  }
  await rateAbove0;
  t.ok(sent > 0, `rate above 0 after ${sent} requests`);
  t.match(await page.textContent(`${row} td[data-field="rps"] .value`), /\/s$/);

  // The error lines as text: file and line apart, the markup shown, nothing made of it.
  await page.waitForSelector('#config-error:not([hidden])');
  const errorText = await page.textContent('#config-error-lines');
  t.ok(errorText?.includes('<script>window.__pwned=1</script>'), 'markup shown as text');
  t.match(await page.textContent('#config-error-lines td:first-child'), /bad\.yaml$/, 'the file in its own column');
  t.equal(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned), undefined, 'no injected script ran');
  t.equal(await page.evaluate(() => document.querySelectorAll('script').length), 1, 'only the page\'s own script');
  t.equal(await page.evaluate(() => document.querySelectorAll('#config-error img').length), 0, 'no element made of the text');
  t.match(await page.textContent('#generation'), /^\d+$/);

  // A few more samples under traffic, so the picture's sparklines have a shape (bounded as above).
  let drawn = false;
  const sparkline = page
    .waitForFunction((sel) => {
      const line = document.querySelector(`${sel} td[data-field="p99"] polyline`);
      return line !== null && (line.getAttribute('points') ?? '').split(' ').length >= 8;
    }, row, { timeout: 120_000 })
    .finally(() => (drawn = true));
  for (let i = 0; !drawn && i < 20_000; i++) await request(port, `echo-${alias}.app.localhost`, i % 50 === 0 ? '/slow' : '/dashboard');
  await sparkline;
  const shot = path.join(dir, 'dashboard.png');
  await page.screenshot({ path: shot, fullPage: true });
  t.ok((await stat(shot)).size > 0, `a screenshot of the page with the probe (${shot}, kept if the test fails)`);
  t.same(problems, [], 'no script error on the page');
});
