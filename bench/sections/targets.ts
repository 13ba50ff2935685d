/**
 * The targets, measured in pairs (`targets`): each request-rate target of the HTTP table, its two
 * rows back to back in blocks of four runs so the machine's drift cancels out (bench/lib/pairs.ts).
 */
import { Fleet } from '../lib/fleet.js';
import { wrk, type Load } from '../lib/load.js';
import { blockOrder, pairsMarkdown, rpsRatio, type PairResult, type PairRun, type PairSpec } from '../lib/pairs.js';
import { CLK_TCK, cpuTicks, processTree } from '../lib/proc.js';
import { fmtInt } from '../lib/report.js';
import { errText, log, opts } from '../options.js';
import { expectOk } from './checks.js';
import { answeredElsewhere, badness, settle } from './table.js';

/** A paired target: the fleet services of its two rows and, for an ingress, the Host to ask for. */
type TargetPair = PairSpec & { services: Record<'subject' | 'reference', string>; hosts?: Partial<Record<'subject' | 'reference', string>> };

/** The request-rate targets, each a subject row against its reference row of the HTTP table. */
export function targetPairs(tools: Record<string, string | undefined>): TargetPair[] {
  const sidecar = { key: 'sidecar', name: 'sidecar no tags' };
  const pairs: TargetPair[] = [
    { target: 'untagged ≥ 2.0× http-proxy-3', subject: sidecar, reference: { key: 'hp3', name: 'http-proxy-3' }, minRatio: 2.0, services: { subject: 'sc-plain', reference: 'hp3' } },
    { target: 'untagged ≥ 0.65× nginx', subject: sidecar, reference: { key: 'nginx', name: 'nginx' }, minRatio: 0.65, maxP99Ratio: 1.5, services: { subject: 'sc-plain', reference: 'nginx' } },
    { target: 'untagged ≥ 1.6× Caddy', subject: sidecar, reference: { key: 'caddy', name: 'Caddy' }, minRatio: 1.6, services: { subject: 'sc-plain', reference: 'caddy' } },
    { target: 'untagged ≥ 0.75× Node byte relay', subject: sidecar, reference: { key: 'relay', name: 'Node byte relay' }, minRatio: 0.75, services: { subject: 'sc-plain', reference: 'relay' } },
    { target: 'ext auth + rate limit ≥ 0.7× no tags', subject: { key: 'guarded', name: 'ext auth (gRPC) + rate limit' }, reference: sidecar, minRatio: 0.7, services: { subject: 'sc-guarded', reference: 'sc-plain' } },
    { target: 'tracing 100% ≥ 0.7× no tags', subject: { key: 'traced', name: 'tracing 100%' }, reference: sidecar, minRatio: 0.7, services: { subject: 'sc-traced', reference: 'sc-plain' } },
  ];
  return pairs.filter((p) => !['nginx', 'caddy'].includes(p.reference.key) || tools[p.reference.key]);
}

/**
 * Each target's two rows back to back (bench/lib/pairs.ts): fresh proxies, then per block four runs
 * of warm-up + `seconds` measured, in R S S R or S R R S order. `exclusive`: the side not being
 * measured is paused (SIGSTOP) meanwhile, for proxies that keep working when idle.
 */
export async function runTargets(fleet: Fleet, pairs: readonly TargetPair[], title: string, seconds: number, exclusive = false): Promise<PairResult[]> {
  log(`\n== ${title}`);
  const drive = (port: number, host: string | undefined, s: number): Promise<Load> => wrk({ url: `http://127.0.0.1:${port}/`, connections: opts.connections, seconds: s, ...(host ? { host } : {}) });
  const results: PairResult[] = [];
  for (const pair of pairs) {
    const { services, hosts, ...spec } = pair;
    const result: PairResult = { spec, blocks: [] };
    results.push(result);
    try {
      const handles = { subject: await fleet.get(services.subject), reference: await fleet.get(services.reference) };
      const reason = (await expectOk({ port: handles.subject.port, ...(hosts?.subject ? { host: hosts.subject } : {}) }))
        ?? (await expectOk({ port: handles.reference.port, ...(hosts?.reference ? { host: hosts.reference } : {}) }));
      if (reason) {
        result.na = reason;
        continue;
      }
      for (let b = 0; b < opts.targetBlocks; b++) {
        const block = { subject: [] as PairRun[], reference: [] as PairRun[] };
        for (const side of blockOrder(b)) {
          const key = side === 's' ? 'subject' : 'reference';
          const h = handles[key];
          const pids = processTree(h.procs.map((p) => p.pid));
          const paused = exclusive ? processTree(handles[side === 's' ? 'reference' : 'subject'].procs.map((p) => p.pid)) : [];
          for (const pid of paused) process.kill(pid, 'SIGSTOP');
          try {
            await settle();
            await drive(h.port, hosts?.[key], opts.warmup);
            const cpu0 = cpuTicks(pids);
            const load = await drive(h.port, hosts?.[key], seconds);
            const cpuSeconds = (cpuTicks(pids) - cpu0) / CLK_TCK;
            const bad = badness(load) ?? answeredElsewhere(load, cpuSeconds);
            if (bad) throw new Error(`${spec[key].name}: ${bad}`);
            block[key].push({ load, cpuSeconds });
          } finally {
            for (const pid of paused) process.kill(pid, 'SIGCONT');
          }
        }
        result.blocks.push(block);
        log(`  ${spec.target}: block ${b + 1}/${opts.targetBlocks} ${blockOrder(b).join('')} ${block.subject.map((r) => fmtInt(r.load.rps)).join('+')} / ${block.reference.map((r) => fmtInt(r.load.rps)).join('+')} = ${rpsRatio(block).toFixed(2)}×`);
      }
    } catch (err) {
      result.na = errText(err);
    }
  }
  await fleet.stopProxies();
  log(`\n${pairsMarkdown(results)}`);
  return results;
}
