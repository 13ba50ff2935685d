/**
 * `svcproxy rest` starts without the data plane (issue 38: a client is started hundreds of times in
 * scripts): the installed program, run with a preloaded module that records every ES module resolved
 * and every CommonJS module required, loads for `rest get -o json` only dist/client/ (and the
 * suggestion module of usage errors), not dist/cli.js, the V8 and allocator settings, pino, undici,
 * js-yaml or string-width; YAML output loads js-yaml and nothing more. The data plane's commands and
 * `--help` still start the data plane's entry. What a start costs in time is measured by bench/, not
 * asserted here.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { BIN, ROOT } from '../helpers/client.js';
import { clientCommandOf } from '../../src/client/words.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { writeResolveHooks } from '../helpers/proxy-process.js';

const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-startup-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const LOG = path.join(dir, 'loaded.txt');
writeFileSync(path.join(dir, 'probe.mjs'), `
import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
register(${JSON.stringify(writeResolveHooks(dir))}, import.meta.url, { data: { log: process.env.LOADED_LOG } });
const require = createRequire(import.meta.url);
process.on('exit', () => appendFileSync(process.env.LOADED_LOG, Object.keys(require.cache).map((f) => 'cjs:' + f).join('\\n') + '\\n'));
`);

const DEPENDENCIES = Object.keys((JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies);
/** A module of one of the program's dependencies (tap's own, which it preloads into children, are not). */
const isDependency = (m: string): boolean => DEPENDENCIES.some((d) => m.startsWith(`node_modules/${d}/`));

/** The program's own modules outside the client's (the client's entry may load the suggestion module of usage errors). */
const outsideClient = (modules: readonly string[]): string[] =>
  modules.filter((m) => (m.startsWith('dist/') || m.startsWith('bin/')) && !m.startsWith('dist/client/') && m !== 'bin/svcproxy.js' && m !== 'dist/config/suggest.js');

/** The modules one run of the program loaded, relative to the repository where they are in it. */
function loaded(argv: string[]): Promise<{ code: number; modules: string[]; stderr: string }> {
  writeFileSync(LOG, '');
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', pathToFileURL(path.join(dir, 'probe.mjs')).href, BIN, ...argv], { env: { PATH: process.env.PATH, HOME: dir, LOADED_LOG: LOG }, cwd: dir }, (err, _stdout, stderr) => {
      const modules = [...new Set(readFileSync(LOG, 'utf8').split('\n').filter((l) => l !== '' && !l.startsWith('node:')))]
        .map((m) => m.replace(/^cjs:/, '').replace(/^file:\/\//, ''))
        .map((m) => (m.startsWith(ROOT) ? m.slice(ROOT.length) : m));
      resolve({ code: err ? ((err as { code?: number }).code ?? -1) : 0, modules, stderr });
    });
  });
}

t.test('which command lines are the client\'s', async (t) => {
  t.equal(clientCommandOf(['rest', 'get', '/x']), 'rest');
  t.equal(clientCommandOf(['--org', 'acme', '-o', 'json', 'rest', 'get']), 'rest', 'options and their values before the command');
  t.equal(clientCommandOf(['help', 'rest']), 'rest');
  t.equal(clientCommandOf(['--gvc', 'shop', 'connect', 'api', '--', 'curl']), 'connect');
  t.equal(clientCommandOf(['--location', 'loc1', '--replica', 'api-0', 'connect']), 'connect', 'connect\'s options and their values before the command');
  t.equal(clientCommandOf(['-v', 'rest']), 'rest');
  t.equal(clientCommandOf(['--color=false', '--output=json', 'rest']), 'rest');
  for (const argv of [['up'], ['--help'], [], ['help'], ['-c', 'rest', 'validate'], ['--config=x', 'rest'], ['validate', '--config', 'rest'], ['explain', 'rest'], ['--', 'rest']]) {
    t.equal(clientCommandOf(argv), undefined, JSON.stringify(argv));
  }
});

t.test('rest get loads the client only', async (t) => {
  const port = await freePort();
  const json = await loaded(['rest', 'get', '/org/acme', '-o', 'json', '--endpoint', `http://127.0.0.1:${port}`]);
  t.equal(json.code, 1, 'it ran (the endpoint refused)');
  t.match(json.stderr, 'ECONNREFUSED');
  const ours = json.modules.filter((m) => m.startsWith('dist/') || m.startsWith('bin/'));
  t.ok(ours.includes('dist/client/main.js'), 'the client\'s entry');
  t.same(outsideClient(json.modules), [], 'nothing of the data plane');
  t.same(json.modules.filter(isDependency), [], 'none of the dependencies: not pino, undici, js-yaml or string-width');
  const yaml = await loaded(['rest', 'get', '/org/acme', '-o', 'yaml', '--endpoint', `http://127.0.0.1:${port}`]);
  t.same([...new Set(yaml.modules.filter(isDependency).map((m) => m.split('/')[1]))], ['js-yaml'], 'YAML (the error printed as YAML): js-yaml only');
  const connect = await loaded(['connect', 'api', '--gvc', 'shop', '--org', 'acme', '--endpoint', `http://127.0.0.1:${port}`, '--', 'true']);
  t.equal(connect.code, 1, 'connect ran (the endpoint refused)');
  t.same(outsideClient(connect.modules), [], 'connect: nothing of the data plane');
  t.same(connect.modules.filter(isDependency), [], 'connect: none of the dependencies');
  const quota = await loaded(['quota', 'get', '-o', 'json', '--org', 'acme', '--endpoint', `http://127.0.0.1:${port}`]);
  t.equal(quota.code, 1, 'quota ran (the endpoint refused)');
  t.same(outsideClient(quota.modules), [], 'quota: nothing of the data plane');
  t.same(quota.modules.filter(isDependency), [], 'quota: none of the dependencies');
});

t.test('the data plane\'s commands start its entry', async (t) => {
  const help = await loaded(['--help']);
  t.equal(help.code, 0);
  t.ok(help.modules.includes('dist/cli.js'));
  t.ok(help.modules.includes('dist/v8-flags.js'));
  const restHelp = await loaded(['help', 'rest']);
  t.equal(restHelp.code, 0);
  t.notOk(restHelp.modules.includes('dist/cli.js'), 'help rest is the client\'s');
});
