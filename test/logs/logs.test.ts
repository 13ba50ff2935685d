/**
 * `svcproxy logs` and the files `up` writes: lines routed to one file per workload (process output
 * and access-log lines only), rotation at the size bound, the tee logger keeping the console's own
 * level; reading merges current and rotated files of every location and replica in time order and
 * filters by location, replica, container and `--since`/`--until`; text and JSON output; the errors.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { runLogs, parseTimeBound, readLogs, teeLogger, WorkloadLogFiles, PROXY_CONTAINER } from '../../src/logs/index.js';
import type { Flags } from '../../src/flags.js';

function tempDir(t: { teardown(fn: () => unknown): void }): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcproxy-logs-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function line(fields: Record<string, unknown>): string {
  return JSON.stringify({ level: 30, ...fields }) + '\n';
}

async function run(flags: Flags, now = Date.parse('2026-01-02T10:00:00Z')): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runLogs(flags, { out: (s) => (out += s), err: (s) => (err += s), now });
  return { code, out, err };
}

t.test('lines are routed to one file per workload; other lines are not', async (t) => {
  const dir = tempDir(t);
  const files = new WorkloadLogFiles(dir);
  files.write(line({ time: '2026-01-02T09:00:00.000Z', workload: 'api', gvc: 'shop', location: 'l1', replica: 'api-0', container: 'app', stream: 'stdout', msg: 'hello' }));
  files.write(line({ time: '2026-01-02T09:00:01.000Z', component: 'access', requestId: 'r', method: 'GET', host: 'h', path: '/x', status: 200, workload: 'api', gvc: 'shop', location: 'l1', replica: 'api-0' }));
  files.write(line({ time: '2026-01-02T09:00:02.000Z', component: 'supervisor', workload: 'shop/api', msg: 'replica starting' }));
  files.write(line({ time: '2026-01-02T09:00:03.000Z', component: 'access', status: 404, path: '/nowhere' }));
  files.write(line({ time: '2026-01-02T09:00:04.000Z', workload: 'web', gvc: 'shop', container: 'app', msg: 'web says \\"workload\\":\\"api\\"' }));
  files.write(line({ time: '2026-01-02T09:00:05.000Z', workload: '../escape', gvc: 'shop', container: 'app', msg: 'no' }));
  await files.close();
  const api = fs.readFileSync(path.join(dir, 'shop', 'api.jsonl'), 'utf8').trim().split('\n');
  t.equal(api.length, 2, 'process output and access-log lines, nothing else');
  t.equal(fs.readFileSync(path.join(dir, 'shop', 'web.jsonl'), 'utf8').trim().split('\n').length, 1);
  t.same(fs.readdirSync(path.join(dir, 'shop')).sort(), ['api.jsonl', 'web.jsonl'], 'unsafe names are never paths');
});

t.test('rotation at the size bound keeps the newest files', async (t) => {
  const dir = tempDir(t);
  const files = new WorkloadLogFiles(dir, { maxBytes: 400, keep: 2 });
  for (let i = 0; i < 20; i++) files.write(line({ time: new Date(Date.UTC(2026, 0, 2, 9, 0, i)).toISOString(), workload: 'api', gvc: 'shop', container: 'app', msg: `line ${i}` }));
  await files.close();
  t.same(fs.readdirSync(path.join(dir, 'shop')).sort(), ['api.1.jsonl', 'api.2.jsonl', 'api.jsonl']);
  for (const f of fs.readdirSync(path.join(dir, 'shop'))) t.ok(fs.statSync(path.join(dir, 'shop', f)).size <= 400, `${f} within the bound`);
  const lines = await readLogs({ dir, workload: 'api', gvc: 'shop' });
  const numbers = lines.map((l) => Number(String(l.record.msg).split(' ')[1]));
  t.same(numbers, [...numbers].sort((a, b) => a - b), 'read back in order across rotated files');
  t.equal(numbers.at(-1), 19, 'the newest line is kept');
  t.ok(numbers[0]! > 0, 'the oldest were rotated away');
});

t.test('the tee logger writes files at info while the console keeps its level', async (t) => {
  const dir = tempDir(t);
  let console = '';
  const sink = new Writable({ write(chunk, _e, cb) { console += chunk.toString(); cb(); } });
  const base = pino({ level: 'warn', base: undefined }, sink);
  const files = new WorkloadLogFiles(dir);
  const logger = teeLogger(base, files);
  logger.child({ workload: 'api', gvc: 'shop', location: 'l1', replica: 'api-0', container: 'app' }).info({ stream: 'stdout' }, 'from the app');
  logger.child({ component: 'access' }).info({ workload: 'api', gvc: 'shop', status: 200 });
  logger.warn('a warning');
  await files.close();
  await new Promise((r) => setTimeout(r, 20));
  t.notMatch(console, /from the app/, 'info stays off a warn console');
  t.match(console, /a warning/);
  const written = fs.readFileSync(path.join(dir, 'shop', 'api.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  t.equal(written.length, 2);
  t.match(written[0], { workload: 'api', gvc: 'shop', location: 'l1', replica: 'api-0', container: 'app', msg: 'from the app' });
  t.match(written[0].time, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, 'ISO time');
});

/** Two locations, two replicas, a rotated file, access lines, another GVC with the same workload name. */
function fixture(dir: string): void {
  const write = (file: string, records: Record<string, unknown>[]): void => {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, records.map((r) => line(r)).join('') + 'not json\n\n');
  };
  const at = (s: number): string => new Date(Date.parse('2026-01-02T09:00:00Z') + s * 1000).toISOString();
  const app = (s: number, location: string, replica: string, msg: string) => ({ time: at(s), workload: 'api', gvc: 'shop', location, replica, container: 'app', msg });
  write(path.join(dir, 'shop', 'api.1.jsonl'), [app(0, 'aws-us-east-2', 'api-0', 'boot east'), app(2, 'gcp-us-east1', 'api-0', 'boot central')]);
  write(path.join(dir, 'shop', 'api.jsonl'), [
    app(1, 'aws-us-east-2', 'api-1', 'boot east 1'),
    { time: at(3), workload: 'api', gvc: 'shop', location: 'aws-us-east-2', replica: 'api-0', container: 'sidecar-log', msg: 'second container' },
    { time: at(4), component: 'access', workload: 'api', gvc: 'shop', location: 'gcp-us-east1', replica: 'api-0', method: 'GET', host: 'api.example', path: '/x', status: 200, durationMs: 1.5 },
    app(5, 'gcp-us-east1', 'api-0', 'late'),
  ]);
  write(path.join(dir, 'other', 'api.jsonl'), [{ time: at(1), workload: 'api', gvc: 'other', container: 'app', msg: 'other gvc' }]);
  write(path.join(dir, 'other', 'solo.jsonl'), [{ time: at(1), workload: 'solo', gvc: 'other', location: 'x', replica: 'solo-0', container: 'app', msg: 'alone' }]);
}

t.test('reading: merged in time order, filtered', async (t) => {
  const dir = tempDir(t);
  fixture(dir);
  const all = await run({ workload: 'api', gvc: 'shop', 'log-dir': dir, output: 'json' });
  t.equal(all.code, 0);
  const records = all.out.trim().split('\n').map((l) => JSON.parse(l));
  t.same(records.map((r) => r.msg ?? r.path), ['boot east', 'boot east 1', 'boot central', 'second container', '/x', 'late'], 'time order across files, locations and replicas');
  t.equal(records[4].container, PROXY_CONTAINER, 'access-log lines are the proxy\'s');

  const pick = async (flags: Partial<Flags>): Promise<string[]> => {
    const r = await run({ workload: 'api', gvc: 'shop', 'log-dir': dir, output: 'json', ...flags } as Flags);
    return r.out.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l).msg ?? JSON.parse(l).path);
  };
  t.same(await pick({ location: 'gcp-us-east1' }), ['boot central', '/x', 'late']);
  t.same(await pick({ replica: 'api-1' }), ['boot east 1']);
  t.same(await pick({ container: 'sidecar-log' }), ['second container']);
  t.same(await pick({ container: PROXY_CONTAINER }), ['/x']);
  t.same(await pick({ since: '2026-01-02T09:00:02Z', until: '2026-01-02T09:00:04Z' }), ['boot central', 'second container', '/x']);
  const now = Date.parse('2026-01-02T09:00:05Z');
  const recent = await run({ workload: 'api', gvc: 'shop', 'log-dir': dir, since: '2s' } as Flags, now);
  t.equal(recent.out.trim().split('\n').length, 3, '--since 2s counts back from now');

  const text = await run({ workload: 'solo', 'log-dir': dir } as Flags);
  t.equal(text.code, 0, 'the GVC is found when only one has the workload');
  t.match(text.out, /^2026-01-02T09:00:01\.000Z\s+x\s+solo-0\s+app\s+alone\n$/);
  const access = await run({ workload: 'api', gvc: 'shop', 'log-dir': dir, container: PROXY_CONTAINER } as Flags);
  t.match(access.out, /GET api\.example\/x 200 1\.5ms/);
});

t.test('errors', async (t) => {
  const dir = tempDir(t);
  fixture(dir);
  t.match(await run({ 'log-dir': dir } as Flags), { code: 2, err: /--workload W is required/ });
  t.match(await run({ workload: 'api', 'log-dir': dir } as Flags), { code: 2, err: /several GVCs \(other, shop\): pass --gvc/ });
  t.match(await run({ workload: 'nope', 'log-dir': dir } as Flags), { code: 1, err: /no logs for workload nope/ });
  t.match(await run({ workload: 'api', gvc: 'nope', 'log-dir': dir } as Flags), { code: 1 });
  t.match(await run({ workload: 'api', gvc: 'shop', 'log-dir': dir, since: 'yesterday' } as Flags), { code: 2, err: /--since "yesterday"/ });
  t.match(await run({ workload: 'api', gvc: 'shop', 'log-dir': dir, output: 'yaml' } as Flags), { code: 2 });
  t.equal(parseTimeBound('1h30m', 10_000_000), 10_000_000 - 5_400_000);
  t.equal(parseTimeBound('2026-01-02T09:00:00Z', 0), Date.parse('2026-01-02T09:00:00Z'));
  t.equal(parseTimeBound('soon', 0), undefined);
});
