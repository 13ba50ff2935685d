/**
 * `npm run bench`: the same load against svcproxy and its alternatives, in interleaved rounds (every
 * row once per round; the median of the rounds is reported, with each row's ratio to the reference
 * rows measured in the same round), then the 10,000-workload, idle-connection and soak measurements
 * and two CPU profiles of svcproxy under load. Prints each table as it is done and writes everything
 * to bench/results/<date>.md. See bench/README.md for the rows and the flags.
 *
 * One file a section in bench/sections/ (as the tests are laid out in test/), the flags in
 * bench/options.ts; this runner runs the sections asked for, in order, and writes the results.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { distFingerprint, environment, gitState, redisVersion } from './lib/environment.js';
import { Fleet } from './lib/fleet.js';
import { pairsDetail, pairsMarkdown, type PairResult } from './lib/pairs.js';
import { ensureTools, toolVersions } from './lib/peers.js';
import { killAllSync, stopAll } from './lib/proc.js';
import { summaryMarkdown } from './lib/profile.js';
import { fmtInt, roundsTable, sectionNotes, sectionTable, type SectionResult } from './lib/report.js';
import { ROOT, snapshotApp } from './lib/svc.js';
import { flags, log, only, opts, wanted } from './options.js';
import { bodySection } from './sections/body.js';
import { grpcSection } from './sections/grpc.js';
import { h2Section } from './sections/h2.js';
import { httpSection } from './sections/http.js';
import { httpsSections } from './sections/https.js';
import { type IdleRow, idleMarkdown, runIdle } from './sections/idle.js';
import { type MemoryResult, memoryMarkdown, runMemory } from './sections/memory.js';
import { meshSection } from './sections/mesh.js';
import { type ProfileResult, runProfiles } from './sections/profile.js';
import { rlsSection } from './sections/rls.js';
import { type ScaleResult, runScale, scaleMarkdown } from './sections/scale.js';
import { type SoakResult, runSoak, soakMarkdown } from './sections/soak.js';
import { runSection } from './sections/table.js';
import { runTargets, targetPairs } from './sections/targets.js';
import { wsSection } from './sections/ws.js';

async function main(): Promise<number> {
  const t0 = Date.now();
  if (!existsSync(path.join(ROOT, 'dist', 'cli.js'))) {
    log('dist/cli.js is missing: run `npm run build` (npm ci does it) first.');
    return 1;
  }
  const start = { git: await gitState(), dist: distFingerprint() };
  const tools = await ensureTools(!flags['no-install'], log);
  const versions = await toolVersions(tools.found);
  const workDir = mkdtempSync(path.join(os.tmpdir(), 'svcproxy-bench-'));
  snapshotApp(path.join(workDir, 'app'));
  const date = new Date().toISOString().slice(0, 10);
  const profileDir = path.join(os.tmpdir(), `svcproxy-bench-profiles-${date}`);
  mkdirSync(profileDir, { recursive: true });
  const fleet = await Fleet.create(workDir, tools.found, opts.workloads);
  const skipped: string[] = [...tools.notes];
  if (!tools.found.wrk) skipped.push('wrk is missing: every wrk-driven table (HTTP/1.1, 1 MiB bodies, 10k workloads, profiles) is skipped');
  if (!tools.found.h2load) skipped.push('h2load is missing: the HTTP/2 table is skipped');

  const sections: SectionResult[] = [];
  let scale: ScaleResult | undefined;
  let idle: IdleRow[] | undefined;
  let memory: MemoryResult | undefined;
  let soak: SoakResult | undefined;
  let profiles: ProfileResult[] | undefined;
  let pairs: PairResult[] | undefined;
  try {
    if (tools.found.wrk && wanted('http')) sections.push(await runSection(fleet, httpSection(tools.found)));
    if (tools.found.wrk && wanted('targets')) pairs = await runTargets(fleet, targetPairs(tools.found), 'paired targets', opts.shortDuration);
    if (tools.found.wrk && wanted('https')) for (const s of httpsSections(tools.found)) sections.push(await runSection(fleet, s));
    if (tools.found.wrk && wanted('mesh')) sections.push(await runSection(fleet, meshSection()));
    if (tools.found.wrk && wanted('body')) sections.push(await runSection(fleet, bodySection(tools.found, workDir)));
    if (tools.found.h2load && wanted('h2')) sections.push(await runSection(fleet, h2Section(tools.found)));
    if (wanted('grpc')) sections.push(await runSection(fleet, grpcSection()));
    if (wanted('rls')) sections.push(await runSection(fleet, rlsSection(await redisVersion())));
    if (wanted('ws')) sections.push(await runSection(fleet, wsSection(tools.found)));
    if (wanted('idle')) idle = await runIdle(fleet, tools.found);
    if (wanted('memory')) memory = await runMemory(fleet);
    if (wanted('soak')) soak = await runSoak(fleet);
    if (tools.found.wrk && wanted('profile')) profiles = await runProfiles(fleet, profileDir);
    if (tools.found.wrk && wanted('scale')) scale = await runScale(fleet);
  } finally {
    await fleet.stopAll();
  }

  const minutes = ((Date.now() - t0) / 60_000).toFixed(1);
  const md: string[] = [];
  md.push(`# svcproxy bench, ${date}`, '');
  md.push(`\`npm run bench${only ? ` -- --only ${[...only].join(',')}` : ''}\`, ${minutes} minutes. How to run and what each row means: [bench/README.md](../README.md).`, '');
  md.push(...(await environment(versions, start)), '');
  for (const s of sections) {
    md.push(`## ${s.title}`, '', s.description, '', sectionTable(s), '');
    const notes = sectionNotes(s);
    if (notes.length) md.push(...notes.map((n) => `- ${n}`), '');
    md.push('<details><summary>every round (throughput / p99 / CPU s per 1k)</summary>', '', roundsTable(s), '', '</details>', '');
  }
  if (pairs) {
    md.push('## The targets, measured in pairs', '');
    md.push(`Each request-rate target of the HTTP table again, its two rows measured back to back in ${opts.targetBlocks} blocks of four runs (wrk as in the HTTP table, ${opts.warmup} s warm-up + ${opts.shortDuration} s measured each): reference, subject, subject, reference, and the mirror order in every other block, so that the machine's drift over a block cancels out. A block's ratio is the subject's two runs over the reference's two (requests/s; p99 likewise); the median of the blocks is reported. Fresh proxies, started after the HTTP table.`, '');
    md.push(pairsMarkdown(pairs), '');
    const detail = pairsDetail(pairs);
    if (detail.length) md.push(...detail.map((d) => `- ${d}`), '');
  }
  if (scale) {
    md.push(`## ${fmtInt(opts.workloads)} workloads`, '', scaleMarkdown(scale), '');
    if (scale.throughput) {
      md.push(`### ${scale.throughput.title}`, '', scale.throughput.description, '', sectionTable(scale.throughput), '');
      md.push('<details><summary>every round</summary>', '', roundsTable(scale.throughput), '', '</details>', '');
    }
    if (scale.pairs) {
      md.push(`The goal again in pairs, as in "The targets, measured in pairs": ${opts.targetBlocks} blocks of four ${opts.duration} s runs, the ingress not being measured paused; the ${fmtInt(opts.workloads)}-workload ingress is the one with every workload deployed (the row above that probes them all).`, '');
      md.push(pairsMarkdown(scale.pairs), '');
      md.push(...pairsDetail(scale.pairs).map((d) => `- ${d}`), '');
    }
    md.push(...scale.notes.map((n) => `- ${n}`), '');
  }
  if (idle) {
    md.push(`## ${fmtInt(opts.idleConnections)} idle keep-alive connections`, '');
    md.push(`A Node script (bench/clients/idle.ts) opens ${opts.idleConnections} connections, makes one GET on each (50 at a time) and leaves them open; RSS of the proxy before, and the median of five readings in the 5 s after the last answer. One round (memory does not return to the baseline between rounds); Node's figures move with its garbage collector by a few MiB.`, '');
    md.push(idleMarkdown(idle), '');
  }
  if (memory) md.push('## Memory beside every replica', '', memoryMarkdown(memory), '');
  if (soak) md.push(`## Soak at a fixed rate`, '', soakMarkdown(soak), '');
  if (profiles) {
    md.push('## Top costs', '');
    md.push(`CPU profiles (\`node --cpu-prof --cpu-prof-interval=500 bin/svcproxy.js …\`) of a fresh process under the HTTP table's load (wrk, ${opts.connections} connections), counting only the ${opts.duration} s measured run (start-up, warm-up and shutdown cut out). dist/ locations are mapped back to src/ through the source maps. The .cpuprofile files are in ${profileDir} (open them in Chrome DevTools); summarize one with \`node bench/dist/lib/profile.js FILE\`. \`writev\`, \`writeLatin1String\` and the other \"native: socket I/O\" entries are Node's C++ socket-write bindings: their time is the write system calls (on loopback a write also runs the receiving side's TCP path and wakes the reader).`, '');
    for (const p of profiles) {
      if (p.summary) {
        md.push(summaryMarkdown(p.summary, `${p.name} (${fmtInt(p.load?.rps)} req/s while profiled)`));
        if (p.cpuSeconds !== undefined) {
          const wall = p.summary.wallMs / 1000;
          const main = p.mainSeconds ?? 0;
          md.push(`Meanwhile (/proc) the main thread used ${main.toFixed(2)} s of CPU in the ${wall.toFixed(1)} s (${((main / Math.max(0.001, wall)) * 100).toFixed(0)}% of one core) and the whole process ${p.cpuSeconds.toFixed(2)} s (the rest: V8's GC helper threads and the sampler); other processes used ${p.foreign?.toFixed(2) ?? '?'} cores. The profile has ${(p.summary.busyMs / 1000).toFixed(2)} s of the main thread in JS or native frames; ${main > p.summary.busyMs / 1000 ? `the remaining ${(main - p.summary.busyMs / 1000).toFixed(2)} s of its CPU falls in what V8 files under (idle): libuv's poll phase, i.e. epoll_wait and the socket read system calls, which run outside any JS frame` : `that is more than the thread's CPU time: it was also waiting for a core (runnable, not running) while in those frames, so shares of wall time overstate CPU there`}.`, '');
        }
      } else md.push(`#### ${p.name}`, '', `n/a (${p.error ?? 'not run'})`, '');
    }
  }
  const na: string[] = [];
  for (const s of [...sections, ...(scale?.throughput ? [scale.throughput] : [])]) for (const r of s.rows) if (r.na) na.push(`${s.title} — ${r.name}: ${r.na}`);
  md.push('## What did not run', '');
  md.push(...[...skipped, ...na].map((x) => `- ${x}`), '');

  const file = flags.out ?? path.join(ROOT, 'bench', 'results', `${date}${only ? '-partial' : ''}.md`);
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, md.join('\n'));

  process.stdout.write(`\n# svcproxy bench, ${date} (${minutes} min)\n\n`);
  for (const s of sections) process.stdout.write(`## ${s.title}\n\n${sectionTable(s)}\n\n`);
  if (pairs) process.stdout.write(`## targets, in pairs\n\n${pairsMarkdown(pairs)}\n\n`);
  if (scale) process.stdout.write(`## ${opts.workloads} workloads\n\n${scaleMarkdown(scale)}\n\n${scale.throughput ? sectionTable(scale.throughput) : ''}\n\n`);
  if (scale?.pairs) process.stdout.write(`${pairsMarkdown(scale.pairs)}\n\n`);
  if (idle) process.stdout.write(`## idle connections\n\n${idleMarkdown(idle)}\n\n`);
  if (memory) process.stdout.write(`## memory\n\n${memoryMarkdown(memory)}\n\n`);
  if (soak) process.stdout.write(`## soak\n\n${soakMarkdown(soak)}\n\n`);
  if (profiles) {
    for (const p of profiles) {
      process.stdout.write(`## top self time: ${p.name}\n\n`);
      if (p.summary) for (const l of p.summary.self.slice(0, 10)) process.stdout.write(`  ${(l.share * 100).toFixed(1).padStart(5)}%  ${l.name}  ${l.location}\n`);
      else process.stdout.write(`  n/a (${p.error ?? ''})\n`);
      process.stdout.write('\n');
    }
  }
  process.stdout.write(`results: ${path.relative(process.cwd(), file)}\n`);
  if (!flags.keep) rmSync(workDir, { recursive: true, force: true });
  else process.stdout.write(`work folder kept: ${workDir}\n`);
  return 0;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    log(`\n${signal}: stopping the bench's processes`);
    void stopAll().finally(() => process.exit(130));
  });
}
process.on('exit', () => killAllSync());

main().then(
  (code) => process.exit(code),
  async (err: unknown) => {
    log(err instanceof Error ? err.stack ?? err.message : String(err));
    await stopAll();
    process.exit(1);
  },
);
