/** Idle connections (`idle`): each proxy's RSS with 1,000 keep-alive connections open (bench/README.md). */
import { spawn } from 'node:child_process';
import { BACKENDS, Fleet, script } from '../lib/fleet.js';
import { processTree, rssBytes, sleep } from '../lib/proc.js';
import { fmtMB } from '../lib/report.js';
import { median } from '../lib/stats.js';
import { errText, log, opts } from '../options.js';
import { expectOk } from './checks.js';
import { httpRows } from './http.js';

export interface IdleRow {
  name: string;
  before?: number;
  after?: number;
  open?: number;
  ok?: number;
  error?: string;
}

function idleClient(port: number, host: string, n: number): { ready: Promise<{ open: number; ok: number }>; stop(): void } {
  const child = spawn(process.execPath, [script('clients/idle.js'), String(port), host, String(n)], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const ready = new Promise<{ open: number; ok: number }>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /^ready (.*)$/m.exec(out);
      if (m) resolve(JSON.parse(m[1]!) as { open: number; ok: number });
    });
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    child.once('exit', (code) => reject(new Error(`idle client exited ${code}: ${err.trim().slice(0, 200)}`)));
  });
  return { ready, stop: () => child.kill('SIGTERM') };
}

export async function runIdle(fleet: Fleet, tools: Record<string, string | undefined>): Promise<IdleRow[]> {
  log(`\n== ${opts.idleConnections} idle keep-alive connections`);
  const rows: IdleRow[] = [];
  for (const row of httpRows(tools).filter((r) => !r.direct)) {
    const out: IdleRow = { name: row.name };
    rows.push(out);
    if (row.skip) {
      out.error = row.skip;
      continue;
    }
    try {
      const handles = await Promise.all(row.proxy.map((n) => fleet.get(n)));
      const t = row.target(fleet);
      await expectOk(t);
      await sleep(1000);
      const pids = processTree(handles.flatMap((h) => h.procs.map((p) => p.pid)));
      out.before = rssBytes(pids);
      const client = idleClient(t.port, t.host ?? '127.0.0.1', opts.idleConnections);
      try {
        const r = await client.ready;
        out.open = r.open;
        out.ok = r.ok;
        // Node's RSS moves with the garbage collector: the median of five readings over 5 s.
        const after: number[] = [];
        for (let i = 0; i < 5; i++) {
          await sleep(1000);
          after.push(rssBytes(processTree(handles.flatMap((h) => h.procs.map((p) => p.pid)))));
        }
        out.after = median(after)!;
      } finally {
        client.stop();
      }
      log(`  ${row.name}: ${fmtMB(out.before)} → ${fmtMB(out.after)} with ${out.open} open (${out.ok} answered 200)`);
    } catch (err) {
      out.error = errText(err);
      log(`  ${row.name}: ${out.error}`);
    }
    await fleet.stop(row.proxy.filter((n) => !BACKENDS.has(n)));
  }
  await fleet.stopProxies();
  return rows;
}

export function idleMarkdown(rows: IdleRow[]): string {
  const out = ['| proxy | RSS, idle | RSS with idle connections | per connection | connections open / answered |', '|---|---:|---:|---:|---:|'];
  for (const r of rows) {
    if (r.error || r.before === undefined || r.after === undefined) {
      out.push(`| ${r.name} | n/a (${r.error ?? 'not measured'}) | | | |`);
      continue;
    }
    const per = ((r.after - r.before) / Math.max(1, r.open ?? opts.idleConnections) / 1024).toFixed(1);
    out.push(`| ${r.name} | ${fmtMB(r.before)} | ${fmtMB(r.after)} | ${per} KiB | ${r.open} / ${r.ok} |`);
  }
  return out.join('\n');
}
