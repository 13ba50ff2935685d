/**
 * The whole-process time of one `svcproxy rest get` against the platform CLI's `cpln rest get` for
 * the same request to the same local `up` (issue 38: a client is started hundreds of times in
 * scripts; the goal is at most half of cpln's), with `svcproxy --help` and `cpln --version` for
 * reference. Not a test: it measures, it asserts nothing.
 *
 *   npm run build && npx tsc -p bench/tsconfig.json
 *   node bench/dist/client-startup.js [--runs 15] [--output json]
 *
 * Starts `svcproxy up` (the built program) with one org and GVC and its API on a free port in a
 * temporary folder, then runs each command `--runs` times, interleaved (a, b, c, d, a, b, ...), each
 * as a new process from spawn to exit, and prints the median and the spread of each and the ratio of
 * the medians. Both clients get the endpoint and the operator key through their own variables
 * (`SVC_ENDPOINT`/`SVC_TOKEN`, `CPLN_ENDPOINT`/`CPLN_TOKEN`), cpln `CPLN_SKIP_UPDATE_CHECK=1` (else it
 * asks the npm registry first) and a home of its own; both outputs are checked to be the same bytes.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { mkdtempSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { freePorts, httpRequest, spawnProc, stopAll, waitUntil } from './lib/proc.js';
import { ROOT } from './lib/svc.js';
import { median } from './lib/stats.js';

const { values: flags } = parseArgs({ options: { runs: { type: 'string', default: '15' }, output: { type: 'string', default: 'json' } } });
const runs = Number(flags.runs);
const require = createRequire(import.meta.url);
const CPLN = path.join(path.dirname(require.resolve('@controlplane/cli/package.json', { paths: [ROOT] })), 'dist/src/cpln.js');
const BIN = path.join(ROOT, 'bin/svcproxy.js');

interface Timed {
  readonly ms: number;
  readonly code: number;
  readonly stdout: string;
}

function timed(args: readonly string[], env: NodeJS.ProcessEnv, cwd: string): Promise<Timed> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(process.execPath, [...args], { env, cwd, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ ms: performance.now() - started, code: code ?? -1, stdout }));
  });
}

async function main(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svcproxy-client-bench-'));
  try {
    const records = path.join(dir, 'records.yaml');
    writeFileSync(records, 'kind: org\nname: acme\n---\nkind: location\nname: aws-us-east-2\nprovider: aws\nregion: us-east-2\n---\nkind: gvc\nname: shop\ndescription: the shop\nspec:\n  staticPlacement:\n    locationLinks: [//location/aws-us-east-2]\n');
    const [api, listen, admin, mesh] = await freePorts(4);
    const up = spawnProc('up', process.execPath, [BIN, 'up', '--config', records, '--api', `127.0.0.1:${api}`, '--listen', `127.0.0.1:${listen}`, '--admin', `127.0.0.1:${admin}`, '--mesh', `127.0.0.1:${mesh}`, '--log-level', 'warn'], { cwd: dir, logDir: dir });
    const keyFile = path.join(dir, '.svcproxy', 'api-token');
    await waitUntil(async () => existsSync(keyFile) && (await httpRequest(api!, { path: '/org/acme', timeoutMs: 2000 })).status !== 0, 60_000, 'up\'s API', up);
    const key = readFileSync(keyFile, 'utf8').trim();
    const endpoint = `http://127.0.0.1:${api}`;
    const base = { PATH: process.env.PATH, HOME: dir, NO_COLOR: '1' };
    const request = ['rest', 'get', '/org/acme/gvc/shop', '-o', flags.output];
    const commands: { name: string; args: string[]; env: NodeJS.ProcessEnv }[] = [
      { name: `svcproxy ${request.join(' ')}`, args: [BIN, ...request], env: { ...base, SVC_ENDPOINT: endpoint, SVC_TOKEN: key } },
      { name: `cpln ${request.join(' ')}`, args: [CPLN, ...request], env: { ...base, CPLN_ENDPOINT: endpoint, CPLN_TOKEN: key, CPLN_HOME: path.join(dir, 'cpln'), CPLN_SKIP_UPDATE_CHECK: '1' } },
      { name: 'svcproxy --help', args: [BIN, '--help'], env: base },
      { name: 'cpln --version', args: [CPLN, '--version'], env: { ...base, CPLN_HOME: path.join(dir, 'cpln'), CPLN_SKIP_UPDATE_CHECK: '1' } },
    ];
    const times = commands.map(() => [] as number[]);
    const outputs = commands.map(() => new Set<string>());
    for (let r = 0; r < runs; r++) {
      for (const [i, c] of commands.entries()) {
        const t = await timed(c.args, c.env, dir);
        if (t.code !== 0) throw new Error(`${c.name}: exit ${t.code}`);
        times[i]!.push(t.ms);
        outputs[i]!.add(t.stdout);
      }
    }
    await up.stop();
    const same = outputs[0]!.size === 1 && outputs[1]!.size === 1 && [...outputs[0]!][0] === [...outputs[1]!][0];
    const lines = [`# client start-up: ${runs} runs each, interleaved (node ${process.version}, ${os.cpus().length} cores, ${os.loadavg()[0]!.toFixed(2)} load)`, ''];
    lines.push('| command | median | min | max |', '|---|---|---|---|');
    for (const [i, c] of commands.entries()) {
      const ts = times[i]!;
      lines.push(`| \`${c.name}\` | ${median(ts)!.toFixed(0)} ms | ${Math.min(...ts).toFixed(0)} ms | ${Math.max(...ts).toFixed(0)} ms |`);
    }
    lines.push('', `svcproxy rest get / cpln rest get: ${(median(times[0]!)! / median(times[1]!)!).toFixed(2)} (goal: at most 0.50); the same bytes on stdout: ${same ? 'yes' : 'NO'}`);
    process.stdout.write(`${lines.join('\n')}\n`);
  } finally {
    await stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
