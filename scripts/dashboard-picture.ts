/**
 * Makes docs/dashboard.png, the picture of the dashboard in README.md and docs/debugging.md, from a
 * realistic run, so it can be made again whenever the page changes:
 *
 *   npm run dashboard-picture                      # about a minute; writes docs/dashboard.png
 *   npm run dashboard-picture -- --seconds 90 --out /tmp/dashboard.png
 *
 * `svcproxy up` runs as its own process (the built program, `bin/svcproxy.js`) with the tour's
 * records (docs/examples/tour.yaml: workload `echo` in GVC `shop`) and three more workloads of the
 * echo app in the same GVC: `api` (three replicas), `web` (answers in 10 to 120 ms) and `checkout`
 * (6 requests in 100 answer 503, and one runs past its 2 s timeout: 504). The page is opened
 * in headless Chromium (Debian's, driven by playwright-core, as test/admin's browser test does)
 * before the load starts, because the dashboard samples only while a page is open; then a steady
 * load of about 95 requests a second from this process (keep-alive connections, each workload at its
 * own rate) for `--seconds` (default 60), and a screenshot of the whole page while the load still
 * runs, taken once the page shows checkout's 5xx share of the last second above 0 (most seconds do).
 * The PNG carries `Software: svcproxy scripts/dashboard-picture.ts` and a `Description` of the run
 * (tEXt chunks), which test/docs/dashboard-picture checks, so that a test's screenshot (the
 * markup-injection probe's, test/admin) is not taken for it. Every port is a free loopback port; the
 * run's records, mesh CA and logs live in a temporary folder that is removed at the end. Exit 1, with
 * up's output, when up does not turn ready.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import net from 'node:net';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { crc32 } from 'node:zlib';
import jsyaml from 'js-yaml';
import { chromium } from 'playwright-core';

/** The repository: the nearest folder above this file with svcproxy's package.json (scripts/dist/ when run, scripts/ in a test). */
const ROOT = ((): string => {
  for (let dir = path.dirname(fileURLToPath(import.meta.url)); ; dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file) && (JSON.parse(readFileSync(file, 'utf8')) as { name?: string }).name === 'svcproxy') return dir;
    if (path.dirname(dir) === dir) throw new Error('svcproxy\'s package.json not found above this script');
  }
})();
const CHROMIUM = '/usr/bin/chromium';

/** The PNG's `Software` text: which program made the picture. */
export const PICTURE_SOFTWARE = 'svcproxy scripts/dashboard-picture.ts';

interface Workload {
  readonly name: string;
  /** Requests a second. */
  readonly rate: number;
  /** The path of the next request. */
  readonly path: () => string;
}

const WORKLOADS: readonly Workload[] = [
  { name: 'echo', rate: 20, path: () => '/hello' },
  { name: 'api', rate: 40, path: () => `/v1/items/${Math.floor(Math.random() * 1000)}` },
  { name: 'web', rate: 15, path: () => `/delay?ms=${10 + Math.floor(Math.random() ** 2 * 110)}` },
  {
    name: 'checkout',
    rate: 20,
    path: () => {
      const r = Math.random();
      return r < 0.06 ? '/status/503' : r < 0.07 ? '/delay?ms=3000' : '/cart';
    },
  },
];

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** An echo-app workload of GVC shop, shaped as the tour's. */
function echoWorkload(name: string, extra: { minScale?: number; timeoutSeconds?: number }): Record<string, unknown> {
  return {
    kind: 'workload',
    name,
    gvc: 'shop',
    tags: {},
    spec: {
      type: 'standard',
      containers: [{ name, command: process.execPath, args: [path.join(ROOT, 'dist/local/echo.js')], ports: [{ number: 8080, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale: extra.minScale ?? 1, maxScale: 5 }, timeoutSeconds: extra.timeoutSeconds ?? 5 },
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0', '::/0'] }, internal: { inboundAllowType: 'same-org' } },
    },
  };
}

/** The tour's records, its echo app named by absolute path, and the three other workloads. */
function records(): Record<string, unknown>[] {
  const tour = (jsyaml.loadAll(readFileSync(path.join(ROOT, 'docs/examples/tour.yaml'), 'utf8')) as Record<string, unknown>[]).filter((d) => d !== null && d !== undefined);
  for (const r of tour) {
    if (r.kind !== 'workload') continue;
    const spec = r.spec as { containers: { command: string; args: string[] }[] };
    for (const c of spec.containers) {
      c.command = process.execPath;
      c.args = c.args.map((a) => (a.startsWith('dist/') ? path.join(ROOT, a) : a));
    }
  }
  return [...tour, echoWorkload('api', { minScale: 3 }), echoWorkload('web', {}), echoWorkload('checkout', { timeoutSeconds: 2 })];
}

/** Until `check` holds, every 100 ms; false after `timeoutMs`. */
async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

/** A steady load: every 100 ms, each workload's share of its rate, over keep-alive connections. */
function startLoad(port: number, alias: string): { stop(): Promise<Map<string, Map<number, number>>> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const counts = new Map<string, Map<number, number>>(WORKLOADS.map((w) => [w.name, new Map()]));
  const owed = new Map<string, number>(WORKLOADS.map((w) => [w.name, 0]));
  const inFlight = new Set<Promise<void>>();
  const send = (w: Workload): void => {
    const done = new Promise<void>((resolve) => {
      const count = (status: number): void => {
        const byStatus = counts.get(w.name)!;
        byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
        resolve();
      };
      const req = http.get({ host: '127.0.0.1', port, path: w.path(), agent, headers: { host: `${w.name}-${alias}.app.localhost` } }, (res) => {
        res.resume();
        res.once('end', () => count(res.statusCode ?? 0));
        res.once('error', () => count(0));
      });
      req.once('error', () => count(0));
    });
    inFlight.add(done);
    void done.then(() => inFlight.delete(done));
  };
  const timer = setInterval(() => {
    for (const w of WORKLOADS) {
      let n = owed.get(w.name)! + w.rate / 10;
      for (; n >= 1; n--) send(w);
      owed.set(w.name, n);
    }
  }, 100);
  return {
    async stop() {
      clearInterval(timer);
      await Promise.all(inFlight);
      agent.destroy();
      return counts;
    },
  };
}

/** The PNG with `tEXt` chunks (keyword, Latin-1 text) inserted after its header chunk. */
export function withText(png: Buffer, entries: Readonly<Record<string, string>>): Buffer {
  const IHDR_END = 8 + 4 + 4 + 13 + 4;
  if (png.toString('latin1', 12, 16) !== 'IHDR') throw new Error('not a PNG');
  const chunks = Object.entries(entries).map(([keyword, text]) => {
    const typed = Buffer.concat([Buffer.from('tEXt', 'latin1'), Buffer.from(keyword, 'latin1'), Buffer.from([0]), Buffer.from(text, 'latin1')]);
    const head = Buffer.alloc(4);
    head.writeUInt32BE(typed.length - 4);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(crc32(typed));
    return Buffer.concat([head, typed, crc]);
  });
  return Buffer.concat([png.subarray(0, IHDR_END), ...chunks, png.subarray(IHDR_END)]);
}

/** The `tEXt` chunks of a PNG, by keyword. */
export function textOf(png: Buffer): Record<string, string> {
  const out: Record<string, string> = {};
  for (let at = 8; at + 12 <= png.length;) {
    const length = png.readUInt32BE(at);
    if (png.toString('latin1', at + 4, at + 8) === 'tEXt') {
      const data = png.subarray(at + 8, at + 8 + length);
      const zero = data.indexOf(0);
      if (zero > 0) out[data.toString('latin1', 0, zero)] = data.toString('latin1', zero + 1);
    }
    at += 12 + length;
  }
  return out;
}

function exited(child: ChildProcess): Promise<number | null> {
  return child.exitCode !== null ? Promise.resolve(child.exitCode) : new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

export interface PictureRun {
  /** Per workload, the load's answers by status (0: no answer). */
  readonly answers: ReadonlyMap<string, ReadonlyMap<number, number>>;
  /** The page's visible text when the picture was taken. */
  readonly pageText: string;
}

/** Runs up, the page and the load, and writes the picture to `out`; `log` gets progress lines. */
export async function makePicture(opts: { readonly seconds: number; readonly out: string; readonly log?: (line: string) => void }): Promise<PictureRun> {
  const { seconds, out } = opts;
  const log = opts.log ?? (() => undefined);
  if (!(seconds > 0)) throw new Error(`--seconds must be a positive number, not ${seconds}`);
  if (!existsSync(path.join(ROOT, 'dist/cli.js'))) throw new Error('dist/ is not built: npm run build');
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install chromium (scripts/test-deps.sh installs it)`);

  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-picture-'));
  const recs = records();
  writeFileSync(path.join(dir, 'records.yaml'), recs.map((r) => jsyaml.dump(r, { lineWidth: -1 })).join('---\n'));
  const alias = (recs.find((r) => r.kind === 'gvc') as { alias: string }).alias;
  const [listen, mesh, admin] = [await freePort(), await freePort(), await freePort()];
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^(SVC|SVCPROXY)_/.test(k)));
  const args = ['up', '--config', path.join(dir, 'records.yaml'), '--listen', `127.0.0.1:${listen}`, '--mesh', `127.0.0.1:${mesh}`,
    '--admin', `127.0.0.1:${admin}`, '--api', '127.0.0.1:0', '--log-dir', path.join(dir, 'logs')];
  // In the temporary folder, so up's CA and state (.svcproxy/) stay out of the repository.
  const up = spawn(process.execPath, [path.join(ROOT, 'bin/svcproxy.js'), ...args], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  up.stdout!.setEncoding('utf8').on('data', (d: string) => (output += d));
  up.stderr!.setEncoding('utf8').on('data', (d: string) => (output += d));
  const adminUrl = `http://127.0.0.1:${admin}`;
  let browser: Awaited<ReturnType<typeof chromium.launch>> | undefined;
  try {
    const ready = await until(async () => up.exitCode === null && (await fetch(`${adminUrl}/ready`).catch(() => undefined))?.status === 200, 60_000);
    if (!ready) throw new Error(`svcproxy up did not turn ready:\n${output}`);
    log(`up is ready: ${WORKLOADS.map((w) => w.name).join(', ')} in GVC shop (alias ${alias}); dashboard ${adminUrl}/`);
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    });
    const page = await browser.newPage({ viewport: { width: 1360, height: 300 }, colorScheme: 'light' });
    await page.goto(`${adminUrl}/`);
    for (const w of WORKLOADS) await page.waitForSelector(`tr[data-workload="shop/${w.name}"]`, { timeout: 60_000 });

    const load = startLoad(listen, alias);
    log(`steady load for ${seconds} s: ${WORKLOADS.map((w) => `${w.name} ${w.rate}/s`).join(', ')}`);
    await new Promise((r) => setTimeout(r, seconds * 1000));
    // A second in which checkout failed some requests, as most do (bounded: then any second).
    await page.waitForFunction(() => {
      const value = document.querySelector('tr[data-workload="shop/checkout"] td[data-field="err"] .value');
      return value !== null && Number.parseFloat(value.textContent ?? '') > 0;
    }, undefined, { timeout: 15_000 }).catch(() => undefined);
    // The viewport is shorter than the page: the whole page, and nothing under it.
    const png = await page.screenshot({ fullPage: true });
    const pageText = await page.innerText('body');
    const answers = await load.stop();
    const others = WORKLOADS.filter((w) => w.name !== 'echo').map((w) => w.name).join(', ');
    const description = `svcproxy up with docs/examples/tour.yaml and workloads ${others}; ${seconds} s of steady load (${WORKLOADS.map((w) => `${w.name} ${w.rate}/s`).join(', ')})`;
    writeFileSync(out, withText(png, { Software: PICTURE_SOFTWARE, Description: description }));
    for (const [name, byStatus] of answers) log(`  ${name.padEnd(9)} ${[...byStatus].sort(([a], [b]) => a - b).map(([status, n]) => `${status || 'error'}: ${n}`).join(', ')}`);
    log(`wrote ${path.relative(process.cwd(), out) || out}`);
    return { answers, pageText };
  } finally {
    await browser?.close();
    up.kill('SIGTERM');
    const code = await exited(up);
    if (code !== 0) process.stderr.write(`svcproxy up exited ${code}:\n${output}\n`);
    rmSync(dir, { recursive: true, force: true });
  }
}

// Run as a program (npm run dashboard-picture), not when a test imports it.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({ options: { seconds: { type: 'string', default: '60' }, out: { type: 'string', default: path.join(ROOT, 'docs/dashboard.png') } } });
  makePicture({ seconds: Number(values.seconds), out: path.resolve(values.out!), log: (line) => process.stdout.write(`${line}\n`) }).then(
    () => undefined,
    (err: unknown) => {
      process.stderr.write(`dashboard-picture: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
