/** The results file's environment: versions, the machine, git and a fingerprint of the build measured. */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { commandExists, runCommand } from './proc.js';
import { ROOT } from './svc.js';
import { opts } from '../options.js';

export async function redisVersion(): Promise<string | undefined> {
  if (!commandExists('redis-server')) return undefined;
  const r = await runCommand('redis-server', ['--version']);
  const v = /v=(\S+)/.exec(r.stdout)?.[1];
  return v ? `redis-server ${v}` : 'redis-server';
}

function pkgVersion(name: string): string {
  try {
    return (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  } catch {
    return 'not installed';
  }
}

/** A fingerprint of the compiled svcproxy (dist/**.js): another process may rebuild it mid-run. */
export function distFingerprint(root = ROOT): string {
  const hash = createHash('sha1');
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(p);
      else if (entry.name.endsWith('.js')) hash.update(p).update(readFileSync(p));
    }
  };
  walk(path.join(root, 'dist'));
  return hash.digest('hex').slice(0, 12);
}

export async function gitState(): Promise<string> {
  const git = async (args: string[]): Promise<string> => (await runCommand('git', args, { cwd: ROOT })).stdout.trim();
  const commit = (await git(['rev-parse', '--short', 'HEAD'])) || 'unknown';
  const dirty = (await git(['status', '--porcelain', '--', 'src'])).split('\n').filter(Boolean).length;
  return `commit ${commit}${dirty ? ` + ${dirty} uncommitted change${dirty === 1 ? '' : 's'} under src/` : ''}`;
}

export async function environment(versions: Record<string, string>, start: { git: string; dist: string }): Promise<string[]> {
  const cpus = os.cpus();
  const endGit = await gitState();
  const rebuilt = distFingerprint() !== start.dist;
  return [
    `- svcproxy: ${start.git} when the run started, as built into dist/ then (fingerprint ${start.dist}); the bench ran a copy of that build, so ${rebuilt ? `the rebuild of dist/ by another process during the run (now ${endGit}) did not change the code under test` : 'a rebuild during the run could not have changed the code under test'}`,
    `- Node ${process.version}, ${os.type()} ${os.release()}, ${cpus.length} × ${cpus[0]?.model ?? 'CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
    `- **${cpus.length} cores shared** by the load generator, the upstream, the proxy (and its auth / rate-limit / trace services): nothing is pinned to a CPU, so every figure includes contention with the load generator.`,
    `- peers: ${Object.entries(versions).map(([k, v]) => `${k} ${v}`).join(', ')}; http-proxy-3 ${pkgVersion('http-proxy-3')}, fastify ${pkgVersion('fastify')}, @fastify/http-proxy ${pkgVersion('@fastify/http-proxy')}, undici ${pkgVersion('undici')}, @grpc/grpc-js ${pkgVersion('@grpc/grpc-js')}`,
    `- method: ${opts.rounds} rounds, rows interleaved (every row once per round, the order rotated each round), ${opts.warmup} s warm-up + ${opts.duration} s measured per row and round (${opts.shortDuration} s in the tables after the first, except the 10,000-workload throughput table); medians of the rounds; ratios are the median of each round's ratio to the reference row measured in that round. CPU = utime + stime of the proxy process(es) from /proc/PID/stat over the measured run, per 1,000 completed requests; peak RSS = the highest VmRSS sampled every 100 ms during warm-up and run (nginx: master + worker). Each section starts its proxies fresh.`,
  ];
}
