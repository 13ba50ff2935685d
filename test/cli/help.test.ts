/**
 * The command line's help and usage errors as a user meets them, on the installed command
 * (`node bin/svcproxy.js`, built by `npm test`'s build step): each command's `--help` lists exactly
 * the flags FLAG_HELP gives it (so every flag is in some command's help), with a synopsis,
 * environment and an example, and `help COMMAND` says the same; usage errors are `svcproxy: MESSAGE`
 * and one hint line, exit 2; every command refuses every flag it does not take (in-process, through
 * the real entry), while a variable of such a flag is ignored; the bin runs from another folder and
 * through the symlinks `npm link` / `npm install -g .` make.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { COMMANDS, FLAG_HELP, OPTIONS, flagsOf, type FlagName } from '../../src/flags.js';
import { parseFlags } from '../../src/cli.js';
import { mainOf } from '../helpers/main.js';
import { records, yamlDocuments } from '../helpers/harness.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const BIN = path.join(ROOT, 'bin/svcproxy.js');

function run(args: string[], opts: { env?: Record<string, string>; cwd?: string; file?: string } = {}): { code: number; stdout: string; stderr: string } {
  const r = opts.file
    ? spawnSync(opts.file, args, { encoding: 'utf8', env: { ...process.env, ...opts.env }, cwd: opts.cwd, timeout: 30_000 })
    : spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...opts.env }, cwd: opts.cwd, timeout: 30_000 });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** The flags a help text lists: its `Flags:` section's `--name` at the start of a line. */
function listedFlags(help: string): string[] {
  const section = help.split('\nFlags:\n')[1]?.split('\n\n')[0] ?? '';
  return [...section.matchAll(/^ {2}--([a-z-]+)/gm)].map((m) => m[1]!);
}

t.test('svcproxy --help: a short overview with one line per command; exit 0', async (t) => {
  // The installed entry once as a process; the rest in this process (a process each cost a minute in all).
  t.equal(run(['--help']).stdout, (await mainOf(['--help'])).stdout, 'the bin prints what main() prints');
  for (const args of [['--help'], ['-h'], ['help']]) {
    const r = await mainOf(args);
    t.equal(r.code, 0, args.join(' '));
    t.equal(r.stderr, '');
    for (const c of COMMANDS) t.match(r.stdout, new RegExp(`^  ${c} +\\S`, 'm'), `lists ${c}`);
    t.match(r.stdout, 'svcproxy COMMAND --help');
    t.same(listedFlags(r.stdout), [], 'no flag list');
    t.ok(r.stdout.split('\n').length < 25, 'short');
  }
  const bare = await mainOf([]);
  t.equal(bare.code, 2, 'no command: a usage error');
  t.match(bare.stderr, 'svcproxy COMMAND --help');
});

t.test('svcproxy COMMAND --help: its synopsis, exactly its flags with defaults, environment, an example', async (t) => {
  const everywhere = new Set<string>();
  for (const c of COMMANDS) {
    const r = await mainOf([c, '--help']);
    t.equal(r.code, 0, `${c} --help exits 0`);
    t.equal(r.stderr, '');
    t.match(r.stdout, new RegExp(`^svcproxy ${c} — `), `${c}: its own title`);
    t.match(r.stdout, new RegExp(`\\nUsage:\\n  svcproxy ${c} `), `${c}: a synopsis`);
    t.match(r.stdout, /\nEnvironment:\n {2}SVCPROXY_<FLAG>/, `${c}: the variables`);
    t.match(r.stdout, new RegExp(`\\nExamples?:\\n  (\\S+=\\S+ )*svcproxy ${c}`), `${c}: an example`);
    const listed = listedFlags(r.stdout);
    t.same(listed, flagsOf(c), `${c}: exactly the flags it takes`);
    for (const name of listed) everywhere.add(name);
    for (const name of flagsOf(c)) {
      const fallback = FLAG_HELP[name].per?.[c]?.default ?? FLAG_HELP[name].default;
      if (fallback !== undefined) t.match(r.stdout, `[default: ${fallback}]`, `${c}: --${name}'s default`);
    }
    t.equal((await mainOf(['help', c])).stdout, r.stdout, `svcproxy help ${c} says the same`);
  }
  t.equal((await mainOf(['sidecar', '-h', '--no-such-flag'])).code, 0, '--help wins over a bad flag');
  for (const name of Object.keys(OPTIONS)) t.ok(everywhere.has(name), `--${name} is in some command's help`);
  for (const name of ['log-level', 'tls-cert', 'tls-key', 'dns-server', 'gvc', 'workload', 'replica', 'app', 'location', 'redis']) {
    t.ok(everywhere.has(name), `--${name} is in the help`);
  }
});

t.test('the sidecar help says exactly which identity variables it reads, in order, the org\'s too', async (t) => {
  const r = await mainOf(['sidecar', '--help']);
  t.match(r.stdout, '  gvc       --gvc, SVCPROXY_GVC, SVC_GVC\n');
  t.match(r.stdout, '  workload  --workload, SVCPROXY_WORKLOAD, SVC_WORKLOAD\n');
  t.match(r.stdout, '  location  --location, SVCPROXY_LOCATION, SVC_LOCATION\n');
  t.match(r.stdout, '  replica   --replica, SVCPROXY_REPLICA, SVC_REPLICA, HOSTNAME, else WORKLOAD-0\n');
  t.match(r.stdout, '  org       the org record\'s name, else --org, SVCPROXY_ORG, SVC_ORG, else "local"\n');
  t.match(r.stdout, /\n {2}--org ORG +the org of this process's identity/, '--org is a sidecar flag');
  t.match(r.stdout, /\n {2}svcproxy sidecar .*\[--org ORG --gvc G/, 'and in its synopsis');
  const ingress = await mainOf(['ingress', '--help']);
  t.match(ingress.stdout, '  org       the org record\'s name, else --org, SVCPROXY_ORG, SVC_ORG, else "local"\n', 'ingress reads it the same way');
  t.match(ingress.stdout, /\n {2}--org ORG +/);
});

t.test('usage errors: the message and one hint line, exit 2', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-help-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = path.join(dir, 'config.yaml');
  writeFileSync(config, yamlDocuments(records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] } })));
  const rules = path.join(dir, 'rules.yaml');
  writeFileSync(rules, 'domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 1}\n');
  const cases: [string[], string | RegExp, string][] = [
    [['validate', '--no-such-flag'], 'unknown flag --no-such-flag', 'validate'],
    [['validate', '--confg', config], 'unknown flag --confg (did you mean --config?)', 'validate'],
    [['validate', '--config'], '--config needs a value', 'validate'],
    [['validate'], '--config PATH (a file or folder of records) is required', 'validate'],
    [['logs'], '--workload W (the workload whose logs to show) is required', 'logs'],
    [['ratelimit'], /^--config RULES\.yaml .* is required$/, 'ratelimit'],
    [['sidecar', '--config', config], '--app HOST:PORT (the address of the app it fronts) is required', 'sidecar'],
    [['endpoints', '--config', config, '-o', 'xml'], '--output must be text, json or yaml, not "xml"', 'endpoints'],
    [['ingress', '--config', config, '--location', 'aws-us-east-2', '--listen', 'nowhere'], '--listen: not a host:port address: "nowhere"', 'ingress'],
    [['ratelimit', '--config', rules, '--admin', 'nowhere'], '--admin: not a host:port address: "nowhere"', 'ratelimit'],
    [['ingress', '--config', config, '--location', 'aws-us-east-2', '--workers', 'two'], /^--workers must be a whole number/, 'ingress'],
    [['validate', '--app', 'x'], 'validate does not take --app (a flag of sidecar)', 'validate'],
    [['ratelimit', '--location', 'x'], 'ratelimit does not take --location (a flag of ingress, sidecar, logs, explain)', 'ratelimit'],
    [['up', '--workers', '2'], 'up runs in one process: --workers is for ingress and sidecar', 'up'],
    [['up', '--mesh-cert-ttl', '1s'], '--mesh-cert-ttl must be a duration of at least 3s, not "1s"', 'up'],
    [['validate', config], /^validate takes flags only, not ".*config\.yaml" \(a path goes after --config: --config /, 'validate'],
    [['validat', '--config', config], 'unknown command "validat" (did you mean validate?)', ''],
    [['frobnicate'], 'unknown command "frobnicate"', ''],
    [['help', 'frobnicate'], 'unknown command "frobnicate"', ''],
  ];
  for (const [args, message, command] of cases) {
    const r = await mainOf(args);
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
    t.equal(r.stdout, '', `${args.join(' ')}: nothing on stdout`);
    const lines = r.stderr.split('\n');
    t.equal(lines.length, 3, `${args.join(' ')}: two lines, not the whole help: ${JSON.stringify(r.stderr)}`);
    t.match(lines[0], /^svcproxy: /);
    if (typeof message === 'string') t.equal(lines[0], `svcproxy: ${message}`);
    else t.match(lines[0]!.slice('svcproxy: '.length), message);
    t.equal(lines[1], command ? `run "svcproxy ${command} --help" for usage` : 'run "svcproxy --help" for the commands');
  }
});

t.test('every command refuses every flag it does not take, naming the command', async (t) => {
  for (const c of COMMANDS) {
    const takes = new Set<FlagName>(flagsOf(c));
    for (const name of Object.keys(OPTIONS) as FlagName[]) {
      if (takes.has(name)) continue;
      const argv = OPTIONS[name].type === 'boolean' ? [c, `--${name}`] : [c, `--${name}`, 'x'];
      const r = await mainOf(argv);
      t.equal(r.code, 2, argv.join(' '));
      t.match(r.stderr, new RegExp(`^svcproxy: ${c} (does not take --${name} |${FLAG_HELP[name].elsewhere ?? '\0'})`), argv.join(' '));
    }
  }
});

t.test('SVCPROXY_<FLAG> fills only the flags the command takes', async (t) => {
  const env = { SVCPROXY_APP: '127.0.0.1:1', SVCPROXY_WORKERS: '2', SVCPROXY_LOCATION: 'x', SVCPROXY_REDIS: 'redis://h:1', SVCPROXY_APP_DOMAIN: 'apps.example.net' };
  const validate = parseFlags(['validate'], env).flags;
  t.same([validate.app, validate.workers, validate.location, validate.redis], [undefined, undefined, undefined, undefined], 'validate ignores the proxies\' variables');
  t.equal(validate['app-domain'], 'apps.example.net', 'and reads its own');
  const ratelimit = parseFlags(['ratelimit'], env).flags;
  t.same([ratelimit.workers, ratelimit['app-domain'], ratelimit.redis], [undefined, undefined, 'redis://h:1'], 'ratelimit: SVCPROXY_WORKERS ignored (it runs in one process), SVCPROXY_REDIS read');
  const sidecar = parseFlags(['sidecar'], env).flags;
  t.same([sidecar.app, sidecar.workers, sidecar.location], ['127.0.0.1:1', '2', 'x']);

  // The installed command: a valid config validates with every proxy variable set.
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-help-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const config = path.join(dir, 'config.yaml');
  writeFileSync(config, yamlDocuments(records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] } })));
  const r = run(['validate', '--config', config], { env });
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^valid: /);
});

t.test('the bin runs from another folder and through the symlinks npm link and npm install -g make', async (t) => {
  // npm's global layout: PREFIX/bin/svcproxy -> ../lib/node_modules/svcproxy/bin/svcproxy.js, and
  // lib/node_modules/svcproxy -> the clone (a folder install is a link).
  const prefix = mkdtempSync(path.join(tmpdir(), 'svcproxy-prefix-'));
  t.teardown(() => rmSync(prefix, { recursive: true, force: true }));
  mkdirSync(path.join(prefix, 'bin'));
  mkdirSync(path.join(prefix, 'lib/node_modules'), { recursive: true });
  symlinkSync(ROOT, path.join(prefix, 'lib/node_modules/svcproxy'), 'dir');
  const linked = path.join(prefix, 'bin/svcproxy');
  symlinkSync('../lib/node_modules/svcproxy/bin/svcproxy.js', linked);
  const work = path.join(prefix, 'work');
  mkdirSync(work);
  writeFileSync(path.join(work, 'config.yaml'), yamlDocuments(records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] } })));
  // The shebang finds node on PATH, as a shell would.
  const env = { PATH: `${path.dirname(process.execPath)}${path.delimiter}${process.env.PATH ?? ''}` };
  const help = run(['sidecar', '--help'], { file: linked, cwd: work, env });
  t.equal(help.code, 0, help.stderr);
  t.match(help.stdout, /^svcproxy sidecar — /);
  const valid = run(['validate', '--config', 'config.yaml'], { file: linked, cwd: work, env });
  t.equal(valid.code, 0, `a relative --config is read from the working folder: ${valid.stderr}`);
  t.match(valid.stdout, /^valid: /);
  const other = run(['endpoints', '--help'], { cwd: tmpdir() });
  t.equal(other.code, 0, 'node bin/svcproxy.js from another folder');
});
