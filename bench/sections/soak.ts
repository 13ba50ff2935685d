/** The soak (`soak`): a fixed rate against the ingress → app, latency from each request's scheduled start, RSS over time. */
import { Fleet, script } from '../lib/fleet.js';
import { CLK_TCK, cpuTicks, processTree, RssSampler, runCommand } from '../lib/proc.js';
import { fmtCpu, fmtInt, fmtMB, fmtMs } from '../lib/report.js';
import { hostOf } from '../lib/svc.js';
import { errText, log, opts } from '../options.js';

export interface SoakResult {
  name: string;
  seconds: number;
  rate: number;
  first10?: number;
  last10?: number;
  peak?: number;
  result?: { sent: number; ok: number; non200: number; errors: number; rps: number; p50: number; p99: number; p999: number; firstError?: string };
  cpuPer1k?: number;
  error?: string;
}

export async function runSoak(fleet: Fleet): Promise<SoakResult> {
  log(`\n== soak: ${opts.soakRate} req/s for ${opts.soakSeconds} s`);
  const res: SoakResult = { name: 'svcproxy ingress → app', seconds: opts.soakSeconds, rate: opts.soakRate };
  try {
    const h = await fleet.get('ingress');
    const pids = processTree(h.procs.map((p) => p.pid));
    const sampler = new RssSampler(pids, 1000, true);
    const cpu0 = cpuTicks(pids);
    const r = await runCommand(process.execPath, [script('clients/paced.js'), String(h.port), hostOf('api'), String(opts.soakRate), String(opts.soakSeconds)], { timeoutMs: (opts.soakSeconds + 60) * 1000 });
    const cpu1 = cpuTicks(pids);
    res.peak = sampler.stop();
    const line = r.stdout.trim().split('\n').pop() ?? '';
    res.result = JSON.parse(line) as NonNullable<SoakResult['result']>;
    res.cpuPer1k = (cpu1 - cpu0) / CLK_TCK / (res.result.ok / 1000);
    const s = sampler.samples;
    const t0 = s[0]!.t;
    const tEnd = s[s.length - 1]!.t;
    const mean = (xs: number[]): number | undefined => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : undefined);
    const first = mean(s.filter((x) => x.t - t0 < 10_000).map((x) => x.rss));
    const last = mean(s.filter((x) => tEnd - x.t < 10_000).map((x) => x.rss));
    if (first !== undefined) res.first10 = first;
    if (last !== undefined) res.last10 = last;
    log(`  RSS first 10 s ${fmtMB(res.first10)}, last 10 s ${fmtMB(res.last10)}, ${fmtInt(res.result.rps)} req/s, p99 ${fmtMs(res.result.p99)}`);
  } catch (err) {
    res.error = errText(err);
    log(`  ${res.error}`);
  }
  await fleet.stopProxies();
  return res;
}

export function soakMarkdown(s: SoakResult): string {
  if (s.error || !s.result) return `n/a (${s.error ?? 'not run'})`;
  const growth = s.first10 && s.last10 ? `${((s.last10 - s.first10) / (1024 * 1024)).toFixed(1)} MiB (${(((s.last10 - s.first10) / s.first10) * 100).toFixed(1)}%)` : '—';
  const r = s.result;
  return [
    '| proxy | rate asked / achieved | ok / sent | p50 | p99 | p99.9 | CPU s / 1k req | RSS first 10 s | RSS last 10 s | growth | peak RSS |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
    `| ${s.name} | ${fmtInt(s.rate)} / ${fmtInt(r.rps)} | ${fmtInt(r.ok)} / ${fmtInt(r.sent)}${r.non200 || r.errors ? ` (${r.non200} non-200, ${r.errors} errors${r.firstError ? `: ${r.firstError}` : ''})` : ''} | ${fmtMs(r.p50)} | ${fmtMs(r.p99)} | ${fmtMs(r.p999)} | ${fmtCpu(s.cpuPer1k)} | ${fmtMB(s.first10)} | ${fmtMB(s.last10)} | ${growth} | ${fmtMB(s.peak)} |`,
    '',
    `Fixed-rate client (bench/clients/paced.ts, wrk has no rate option), up to 64 keep-alive connections: latency counted from when a request was sent, or from when it should have been sent if the client sent it more than 2 ms late, so stalls are not hidden. The issue asks for a 10-minute soak: run \`npm run bench -- --only soak --soak-seconds 600\`; this run used ${s.seconds} s (\`--soak-seconds\`, default 60).`,
  ].join('\n');
}
