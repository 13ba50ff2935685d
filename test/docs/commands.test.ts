/**
 * Every command and flag in the documentation (README.md, docs/*.md) is checked against the program:
 * (a) each `svcproxy` command line in a fenced block parses with the program's own option table
 * (src/flags.ts OPTIONS, node:util parseArgs strict) and names a command the entry point knows, so a
 * misspelled flag or command in the docs fails; (b) every option is documented somewhere in docs/,
 * and every `--flag` in the prose is an option (or one of the other programs' flags listed here);
 * (c) every command in an `sh` block is run against the built program: one-shot commands must exit
 * 0, long-running roles must turn ready and exit 0 on SIGTERM; (d) every client command line
 * (`svcproxy rest ...`) is checked by the client's own options and verbs, and run in its `sh` block by
 * a shell against a real `up` (the last test says what is set up for it). A block that cannot run
 * here carries `<!-- not-run: reason -->` just before it, and the reasons are listed in the output.
 *
 * What is changed before a command runs (nothing else is):
 * - the program is `node bin/svcproxy.js` however it is written (`svcproxy`, `npx svcproxy`);
 * - `--listen`, `--listen-tls`, `--admin`, `--status`, `--metrics`, `--mesh`, `--mesh-inbound`
 *   addresses become free loopback ports, and a role without `--listen`, `--admin` (or, for `up`,
 *   `--mesh`) gets one, so that its defaults cannot collide and its admin `/ready` can be asked;
 * - a `--config` path that exists in the repository is used as it is (from the repository's root);
 *   any other (`/etc/svcproxy`) is a temporary folder of real records naming the org, location, GVC
 *   and workloads the docs use (acme, aws-us-east-2, shop, web, api); for `ratelimit` it is a file
 *   holding the rules example of docs/rate-limiting.md;
 * - `--tls-cert`/`--tls-key`/`--tls-client-ca` are a fresh self-signed pair, and
 *   `--mesh-cert`/`--mesh-key`/`--mesh-ca` a certificate issued by a fresh mesh CA for the
 *   workload the command names (`spiffe://acme/gvc/GVC/workload/W`);
 * - `logs` gets `--log-dir` with one log line for each workload the docs name;
 * - the working directory is a temporary folder whose `dist` links to the repository's build (so
 *   `up`'s CA and log folders stay out of the repository, and the tour's `node dist/local/echo.js`
 *   runs).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as flagsModule from '../../src/flags.js';
import { OPTIONS } from '../../src/flags.js';
import { LocalCa } from '../../src/mesh/ca.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { eventually } from '../faults/fixtures.js';
import { testCert } from '../fixtures/tls.js';
import { ROOT, commandsIn, docFiles, filesIn, proseFlags, synopsisArgs, type DocCommand } from './fixtures.js';
import { clientCommandOf } from '../../src/client/words.js';
import { CLIENT_OPTIONS, parseClientArgs } from '../../src/client/args.js';
import { COMMAND_SPECS } from '../../src/client/commands.js';
import { isClientCommand } from '../../src/client/words.js';
import { echoScriptPath } from '../../src/local/index.js';
import { startApi, type ApiUp } from '../helpers/client.js';

// Every sh block of the docs is run (roles to /ready, the client's lines against a real up): past tap's
// two minutes on a machine with a core kept busy.
t.setTimeout(300_000);

/** Flags of other programs that the prose names, each with its program. */
const FOREIGN: Record<string, string> = {
  only: 'npm run bench',
  http2: 'curl',
  prop: 'cpln (the platform\'s CLI: cpln location query --prop ~TEXT)',
  rounds: 'npm run bench',
  root: 'node bench/dist/instructions.js',
  seconds: 'npm run dashboard-picture',
  out: 'npm run dashboard-picture',
  'single-threaded': 'valgrind',
  login: 'cpln profile update',
  wait: 'code (VS Code, as an editor)',
  'no-color': 'svcproxy rest (--color turned off)',
  version: 'cpln --version',
  ready: 'cpln apply',
  set: 'cpln workload update',
  unset: 'cpln workload update',
  replace: 'cpln edit',
  'all-gvcs': 'cpln workload get',
  duration: 'npm run bench',
  'trace-gc': 'node (V8\'s garbage-collection trace)',
  'cpu-prof': 'node (V8\'s CPU profile)',
  'cpu-prof-interval': 'node (V8\'s CPU profile)',
  bundle: 'esbuild',
  splitting: 'esbuild',
  minify: 'esbuild',
  path: 'node bench/dist/instructions.js',
  warmup: 'node bench/dist/instructions.js (and npm run bench)',
  requests: 'node bench/dist/instructions.js',
  keep: 'node bench/dist/instructions.js',
  'perf-basic-prof': 'node (V8\'s symbol map for perf)',
  'expose-gc': 'node (V8\'s gc() function)',
  'stress-flush-code': 'node (V8\'s bytecode flushing at every collection)',
  'v8-pool-size': 'node (V8\'s worker threads)',
  'single-threaded-gc': 'node (V8\'s collector without helper threads)',
  'max-lazy': 'node (V8\'s lazy compilation)',
  'lite-mode': 'node (V8 without optimizing compilers)',
};
const RUNNABLE_LANGS = new Set(['sh', 'bash', 'shell', 'console']);
const LONG_RUNNING = new Set(['up', 'ingress', 'sidecar', 'ratelimit']);
const ORG = 'acme';

const commands = docFiles().flatMap(commandsIn);
// The entry point's commands: src/flags.ts's COMMANDS where it lists them, else the entry point's switch.
const listed = (flagsModule as Record<string, unknown>).COMMANDS as readonly string[] | undefined;
const known = new Set(listed ?? [...readFileSync(path.join(ROOT, 'src/cli.ts'), 'utf8').matchAll(/case '([a-z]+)':/g)].map((m) => m[1]!));
known.add('help');

/** A command line of the client (`svcproxy rest ...`), checked by the client's own option table. */
const isClient = (c: DocCommand): boolean => clientCommandOf(c.args) !== undefined;

function parse(c: DocCommand) {
  const args = c.lang === 'text' || c.lang === '' ? synopsisArgs(c.args) : c.args;
  return parseArgs({ args, options: OPTIONS, strict: true, allowPositionals: true });
}

/**
 * A client command line as the client reads it: a synopsis by its option table (`get|post` is the first
 * verb, `-o FORMAT` any value), a runnable one by the client's whole check (values, verb, the options
 * the verb takes).
 */
function parseClient(c: DocCommand): void {
  if (c.lang === 'text' || c.lang === '') {
    const args = synopsisArgs(c.args).map((a) => (a === '--no-color' ? '--color' : a));
    const { positionals } = parseArgs({ args, options: CLIENT_OPTIONS, strict: true, allowPositionals: true });
    const at = positionals[0] === 'help' ? 1 : 0;
    const command = positionals[at];
    if (!isClientCommand(command)) throw new Error(`${command} is not a client command`);
    const verbs = COMMAND_SPECS[command].verbs;
    const verb = (positionals[at + 1] ?? '').split('|')[0]!;
    if (verbs && verb !== '' && !verbs.includes(verb)) throw new Error(`${verb} is not a ${command} verb`);
    return;
  }
  const parsed = parseClientArgs(c.args);
  if (parsed.help) return;
  // The command's own check of its words and options (commands.ts), as the entry runs it.
  const [command, ...after] = parsed.words;
  if (!isClientCommand(command)) throw new Error(`${command} is not a client command`);
  const spec = COMMAND_SPECS[command];
  if (spec.verbs && !spec.verbs.includes(after[0] ?? '')) throw new Error(`${after[0]} is not a ${command} verb`);
  spec.prepare(spec.verbs ? after[0]! : '', spec.verbs ? after.slice(1) : after, parsed);
}

t.test('every svcproxy command line in the docs parses with the program\'s options', async (t) => {
  t.ok(commands.length >= 10, `found ${commands.length} command lines`);
  t.ok(known.size >= 7, `the entry point's commands: ${[...known].join(', ')}`);
  for (const c of commands) {
    if (isClient(c)) {
      try {
        parseClient(c);
        t.pass(`${c.where}: ${c.text}`);
      } catch (err) {
        t.fail(`${c.where}: ${c.text}: ${(err as Error).message}`);
      }
      continue;
    }
    let parsed: ReturnType<typeof parse> | undefined;
    try {
      parsed = parse(c);
    } catch (err) {
      t.fail(`${c.where}: ${c.text}: ${(err as Error).message}`);
      continue;
    }
    const command = parsed.positionals[0];
    if (command === undefined) t.ok(parsed.values.help, `${c.where}: a command or --help`);
    else t.ok(known.has(command), `${c.where}: ${command} is a command (${[...known].join(', ')})`);
  }
});

t.test('every option is documented in docs/, and every --flag in the prose is an option', async (t) => {
  const docsText = docFiles().filter((f) => f.startsWith('docs/')).map((f) => readFileSync(path.join(ROOT, f), 'utf8')).join('\n');
  const undocumented = [...Object.keys(OPTIONS), ...Object.keys(CLIENT_OPTIONS)].filter((name) => !new RegExp(`--${name}(?![a-z0-9-])`).test(docsText));
  t.same(undocumented, [], 'every option of src/flags.ts and src/client/args.ts is written as --NAME somewhere in docs/');
  const unknown = docFiles().flatMap(proseFlags).filter(({ flag }) => !(flag in OPTIONS) && !(flag in CLIENT_OPTIONS) && !(flag in FOREIGN));
  t.same(unknown.map(({ flag, where }) => `${where}: --${flag}`), [], 'every --flag in the prose is an option of svcproxy (or listed in FOREIGN)');
});

t.test('docs/commands.md\'s table of the flags each command reads is the program\'s (FLAG_HELP)', async (t) => {
  const text = readFileSync(path.join(ROOT, 'docs/commands.md'), 'utf8');
  const section = text.split('Which command reads which flags')[1]?.split('\nExit codes')[0] ?? '';
  // The table's shorthands: "the limits", "as `ingress`, plus ...", and what the sentence above it
  // says every record reader and every command reads.
  const limits = ['headers-timeout', 'idle-timeout', 'max-connections', 'max-requests-per-connection', 'max-concurrent-streams', 'max-event-loop-delay'];
  const implicit = new Set(['log-level', 'verbose', 'debug', 'help', 'app-domain', 'direct-domain', 'internal-domain', 'vendor']);
  const rows = new Map<string, Set<string>>();
  for (const line of section.split('\n')) {
    const m = /^\| `([a-z]+)` \| (.*) \|$/.exec(line);
    if (!m) continue;
    const flags = [...m[2]!.matchAll(/--([a-z-]+)/g)].map((x) => x[1]!);
    if (m[2]!.includes('the limits')) flags.push(...limits);
    const as = /^as `([a-z]+)`/.exec(m[2]!)?.[1];
    if (as !== undefined) flags.push(...(rows.get(as) ?? []));
    rows.set(m[1]!, new Set(flags));
  }
  for (const command of flagsModule.COMMANDS) {
    const listedHere = [...(rows.get(command) ?? [])].sort();
    const takes = flagsModule.flagsOf(command).filter((f) => !implicit.has(f)).sort();
    t.same(listedHere, takes, `${command}: the flags the table lists are the ones it takes`);
  }
});

/** The records a `--config /etc/svcproxy` stands for. */
function writeRecords(dir: string): void {
  const workload = (name: string) => `kind: workload
name: ${name}
gvc: shop
spec:
  type: standard
  containers:
    - name: ${name}
      image: ${name}:1
      ports: [{ number: 8080, protocol: http }]
  firewallConfig:
    external:
      inboundAllowCIDR: [0.0.0.0/0]
`;
  const docs = [
    `kind: org\nname: ${ORG}\n`,
    'kind: location\nname: aws-us-east-2\nprovider: aws\nregion: us-east-2\n',
    'kind: gvc\nname: shop\nalias: abcdefghij123\nspec:\n  staticPlacement:\n    locationLinks: [//location/aws-us-east-2]\n',
    workload('web'),
    workload('api'),
    workload('echo'),
  ];
  writeFileSync(path.join(dir, 'records.yaml'), docs.join('---\n'));
}

function rulesExample(): string {
  const doc = readFileSync(path.join(ROOT, 'docs/rate-limiting.md'), 'utf8');
  const example = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith('domain:'));
  if (!example) throw new Error('docs/rate-limiting.md has no rules example');
  return example;
}

interface Prepared {
  readonly argv: string[];
  readonly env: NodeJS.ProcessEnv;
  readonly admin?: string;
}

async function prepare(c: DocCommand, work: string, cleanups: (() => void)[]): Promise<Prepared> {
  const { values, positionals } = parse(c);
  const command = positionals[0] ?? 'help';
  const identity = { gvc: values.gvc ?? c.env.SVC_GVC ?? 'shop', workload: values.workload ?? c.env.SVC_WORKLOAD ?? 'web' };
  const args = [...c.args];
  const address = async () => `127.0.0.1:${await freePort()}`;
  let meshFiles: Record<string, string> | undefined;
  let tls: ReturnType<typeof testCert> | undefined;
  for (let i = 0; i < args.length - 1; i++) {
    const flag = args[i]!;
    if (['--listen', '--listen-tls', '--admin', '--status', '--metrics', '--mesh', '--mesh-inbound'].includes(flag)) args[i + 1] = await address();
    else if (flag === '--config' || flag === '-c') {
      const given = path.resolve(ROOT, args[i + 1]!);
      if (command === 'ratelimit') {
        args[i + 1] = path.join(work, 'rules.yaml');
        writeFileSync(args[i + 1]!, rulesExample());
      } else if (existsSync(given)) args[i + 1] = given;
      else {
        args[i + 1] = path.join(work, 'records');
        mkdirSync(args[i + 1]!, { recursive: true });
        writeRecords(args[i + 1]!);
      }
    } else if (['--tls-cert', '--tls-key', '--tls-client-ca'].includes(flag)) {
      if (!tls) {
        tls = testCert();
        cleanups.push(tls.cleanup);
      }
      args[i + 1] = flag === '--tls-key' ? tls.keyFile : tls.certFile;
    } else if (['--mesh-cert', '--mesh-key', '--mesh-ca'].includes(flag)) {
      if (!meshFiles) {
        const ca = await LocalCa.open(path.join(work, 'ca'), { org: ORG });
        const creds = await ca.issue(`spiffe://${ORG}/gvc/${identity.gvc}/workload/${identity.workload}`, 24 * 3600_000);
        meshFiles = { '--mesh-cert': path.join(work, 'tls.crt'), '--mesh-key': path.join(work, 'tls.key'), '--mesh-ca': path.join(work, 'ca.crt') };
        writeFileSync(meshFiles['--mesh-cert']!, creds.certPem);
        writeFileSync(meshFiles['--mesh-key']!, creds.keyPem);
        writeFileSync(meshFiles['--mesh-ca']!, creds.caPem);
      }
      args[i + 1] = meshFiles[flag]!;
    }
  }
  let admin: string | undefined;
  if (LONG_RUNNING.has(command) && !values.help) {
    if (!values.listen) args.push('--listen', await address());
    if (!values.admin) args.push('--admin', await address());
    if (command === 'up' && !values.mesh) args.push('--mesh', await address());
    admin = args[args.lastIndexOf('--admin') + 1];
  }
  if (command === 'logs') {
    const dir = path.join(work, 'logs');
    for (const [gvc, workload] of [['shop', 'api'], ['shop', 'echo']] as const) {
      mkdirSync(path.join(dir, gvc), { recursive: true });
      const line = { time: new Date().toISOString(), workload, gvc, location: 'aws-us-east-2', replica: `${workload}-0`, container: 'app', msg: 'listening' };
      writeFileSync(path.join(dir, gvc, `${workload}.jsonl`), `${JSON.stringify(line)}\n`);
    }
    args.push('--log-dir', dir);
  }
  return { argv: [path.join(ROOT, 'bin/svcproxy.js'), ...args], env: { ...process.env, ...c.env }, ...(admin ? { admin } : {}) };
}

/** Runs one documented command in its own folder; resolves with what went wrong, or undefined. */
async function run(c: DocCommand): Promise<string | undefined> {
  const work = mkdtempSync(path.join(tmpdir(), 'svcproxy-docs-'));
  symlinkSync(path.join(ROOT, 'dist'), path.join(work, 'dist'));
  const cleanups: (() => void)[] = [];
  try {
    let p: Prepared;
    try {
      p = await prepare(c, work, cleanups);
    } catch (err) {
      return `cannot prepare: ${(err as Error).message}`;
    }
    const child = spawn(process.execPath, p.argv, { cwd: work, env: p.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const ran = `node ${p.argv.map((a) => path.relative(ROOT, a).startsWith('..') ? a : path.relative(ROOT, a) || a).join(' ')}`;
    if (p.admin) {
      // Ready, or gone: a role that exits (a usage error, a bad record) ends the wait at once.
      let gone = false;
      void exited.then(() => (gone = true));
      const ready = async () => gone || (await fetch(`http://${p.admin}/ready`).catch(() => undefined))?.status === 200;
      if (!(await eventually(ready, 60_000, 100)) || gone) {
        child.kill('SIGKILL');
        const code = await exited;
        return `${ran}: not ready (exit ${code}): ${out.slice(-2000)}`;
      }
      child.kill('SIGTERM');
    }
    const code = await exited;
    return code === 0 ? undefined : `${ran}: exit ${code}: ${out.slice(-2000)}`;
  } finally {
    for (const cleanup of cleanups) cleanup();
    rmSync(work, { recursive: true, force: true });
  }
}

t.test('every command in an sh block runs', async (t) => {
  const runnable = commands.filter((c) => RUNNABLE_LANGS.has(c.lang) && c.notRun === undefined && !isClient(c));
  const skipped = commands.filter((c) => RUNNABLE_LANGS.has(c.lang) && c.notRun !== undefined);
  for (const c of skipped) t.comment(`not run: ${c.where}: ${c.notRun}`);
  t.ok(runnable.some((c) => parse(c).positionals[0] === 'up'), 'the docs run up');
  // Two at a time: a machine of two cores, each role's start costs one for a second or two.
  const queue = [...runnable];
  const worker = async () => {
    for (let c = queue.shift(); c; c = queue.shift()) {
      const problem = await run(c);
      t.equal(problem, undefined, `${c.where}: ${c.text}`);
    }
  };
  await Promise.all([worker(), worker()]);
});

/** The records of the org a client command names (`/org/NAME`), as writeRecords writes them. */
function orgRecords(org: string): Record<string, unknown>[] {
  const workload = (name: string) => ({
    kind: 'workload', name, gvc: 'shop',
    spec: { type: 'standard', containers: [{ name, image: `${name}:1`, ports: [{ number: 8080, protocol: 'http' }] }], firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } } },
  });
  return [
    { kind: 'org', name: org },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: 'shop', alias: 'abcdefghij123', description: 'the shop', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
    workload('web'), workload('api'),
    // echo runs (the demo's echo app), so `svcproxy connect echo` has a replica to connect to.
    { ...workload('echo'), spec: { ...workload('echo').spec, containers: [{ name: 'echo', command: process.execPath, args: [echoScriptPath()], ports: [{ number: 8080, protocol: 'http' }] }] } },
  ];
}

/**
 * The client's commands (`svcproxy rest ...`) in sh blocks, run as a shell runs them (`sh -c`, with
 * `svcproxy` on PATH as the built program), in each page's order, against a real `up` of the org the
 * line names (acme by default), from the folder it runs in (so the local default and its key are what
 * they are for a user). Changed before a line runs: `127.0.0.1:15080` is that up's API (also in
 * SVCPROXY_API), a `--profile NAME` exists (svc and cpln) for it, the files a page shows (`# NAME.yaml`
 * blocks) are in the folder, and EDITOR is `true` unless the line sets one.
 */
t.test('every client command in an sh block runs against up', async (t) => {
  const runnable = commands.filter((c) => RUNNABLE_LANGS.has(c.lang) && c.notRun === undefined && isClient(c));
  t.ok(runnable.length >= 5, `${runnable.length} client command lines`);
  const home = mkdtempSync(path.join(tmpdir(), 'svcproxy-docs-client-'));
  t.teardown(() => rmSync(home, { recursive: true, force: true }));
  const bin = path.join(home, 'bin');
  mkdirSync(bin);
  writeFileSync(path.join(bin, 'svcproxy'), `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(path.join(ROOT, 'bin/svcproxy.js'))} "$@"\n`, { mode: 0o755 });
  const ups = new Map<string, ApiUp>();
  const written = new Set<string>();
  for (const c of runnable) {
    const org = /\/org\/([a-z0-9-]+)/.exec(c.text)?.[1] ?? ORG;
    let up = ups.get(org);
    if (!up) ups.set(org, (up = await startApi(t, orgRecords(org))));
    const file = c.where.split(':')[0]!;
    if (!written.has(`${org} ${file}`)) {
      for (const f of filesIn(file)) writeFileSync(path.join(up.dir, f.name), f.content);
      written.add(`${org} ${file}`);
    }
    for (const m of c.text.matchAll(/--profile[ =]([\w.-]+)/g)) {
      for (const vendor of ['svc', 'cpln']) {
        mkdirSync(path.join(home, vendor, 'profiles'), { recursive: true });
        writeFileSync(path.join(home, vendor, 'profiles', `${m[1]}.json`), JSON.stringify({ name: m[1], request: { endpoint: up.url, token: up.key }, context: { org, gvc: 'shop' } }));
      }
    }
    const line = c.text.replace(/^\$\s+/, '').replace(/\b(npx svcproxy|node bin\/svcproxy\.js)\b/g, 'svcproxy').replaceAll('127.0.0.1:15080', up.address);
    const env = {
      PATH: `${bin}:${process.env.PATH}`, HOME: home, SVCPROXY_API: up.address, SVC_HOME: path.join(home, 'svc'), CPLN_HOME: path.join(home, 'cpln'),
      CPLN_SKIP_UPDATE_CHECK: '1', EDITOR: 'true', NO_COLOR: '1',
    };
    // Asynchronously: up answers in this process.
    const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn('/bin/sh', ['-c', line], { cwd: up!.dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      child.once('exit', (code) => {
        clearTimeout(timer);
        resolve({ code, out });
      });
    });
    t.equal(r.code, 0, `${c.where}: ${c.text}${r.code === 0 ? '' : `: ${r.out}`}`);
  }
});
