/**
 * svcproxy turns off V8's allocation-site pretenuring before its modules are loaded (bin/svcproxy.js
 * applies dist/v8-flags.js first). Observed from outside with `--trace-pretenuring-statistics`,
 * which makes V8 print the feedback it weighs for pretenuring at every garbage collection: the
 * program prints none, while a child that allocates objects outliving several scavenges before
 * loading the program shows the report appears when pretenuring is on (which decision V8 reaches
 * depends on timing, so only the report is asserted). Loading the program's modules first and
 * setting the flag afterwards (in cli.ts alone) also prints reports, from the collections during
 * the load: the second control. The young generation is held at its start size until
 * startupDone() (the program calls it once it serves): a child in which objects survive
 * scavenges shows it stays put before and grows after.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { records, yamlDocuments } from '../helpers/harness.js';

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));
const CLI = pathToFileURL(fileURLToPath(new URL('../../dist/cli.js', import.meta.url))).href;
const REPORT = /pretenuring: AllocationSite\(.*\): \(created, found, ratio\)/;

/** Objects kept alive across scavenges from one site (an object literal with nested literals). */
const ALLOCATE = `
const keep = [];
const make = (i) => ({ a: i, b: [i, i + 1], c: { d: i } });
for (let i = 0; i < 3e6; i++) { keep.push(make(i)); if (keep.length > 1e6) keep.length = 0; }
`;

/**
 * Runs a child as users run svcproxy: without the NODE_OPTIONS tap puts into every child's
 * environment (its process tracking, which it adds back whatever `env` the spawn is given, hence
 * `env -u`). Its `--import` runs module hooks on a thread of their own, whose isolate on Node 22
 * prints a pretenuring report of its own.
 */
function traced(args: string[]): string {
  const r = spawnSync('env', ['-u', 'NODE_OPTIONS', process.execPath, '--trace-pretenuring-statistics', ...args], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, `child exited 0 (${r.stderr.trim().slice(0, 200)})`);
  return r.stdout;
}

function configFile(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-v8-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, yamlDocuments(records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] } })));
  return file;
}

t.test('control: with pretenuring on, V8 reports the feedback of a site whose objects survive scavenges', async (t) => {
  t.match(traced(['--input-type=module', '-e', `${ALLOCATE}\nawait import(${JSON.stringify(CLI)});`]), REPORT);
});

t.test('control: the flag set only once the modules are loaded leaves the load under pretenuring', async (t) => {
  t.match(traced(['--input-type=module', '-e', `await import(${JSON.stringify(CLI)});`]), REPORT);
});

t.test('svcproxy runs with allocation-site pretenuring off from its first module on', async (t) => {
  const out = traced([BIN, 'validate', '--config', configFile()]);
  t.match(out, /^valid: /m);
  t.notMatch(out, /pretenuring:/);
});

t.test('after dist/v8-flags.js, allocations that survive scavenges get no pretenuring', async (t) => {
  const flags = pathToFileURL(fileURLToPath(new URL('../../dist/v8-flags.js', import.meta.url))).href;
  t.notMatch(traced(['--input-type=module', '-e', `await import(${JSON.stringify(flags)});\n${ALLOCATE}`]), /pretenuring:/);
});

/**
 * The young generation's size after objects survived scavenges: in a child that imports
 * dist/v8-flags.js, allocates (ALLOCATE), calls startupDone() when asked, and allocates again.
 */
function youngSizes(done: boolean): { starting: number; serving: number } {
  const flags = pathToFileURL(fileURLToPath(new URL('../../dist/v8-flags.js', import.meta.url))).href;
  const young = `(await import('node:v8')).default.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size`;
  const script = `const { startupDone } = await import(${JSON.stringify(flags)});
{${ALLOCATE}}
const starting = ${young};
${done ? 'startupDone();' : ''}
{${ALLOCATE}}
console.log(JSON.stringify({ starting, serving: ${young} }));`;
  const r = spawnSync('env', ['-u', 'NODE_OPTIONS', process.execPath, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 60_000 });
  t.equal(r.status, 0, `child exited 0 (${r.stderr.trim().slice(0, 200)})`);
  return JSON.parse(r.stdout) as { starting: number; serving: number };
}

t.test('the young generation does not grow while the program starts, and grows once it serves', async (t) => {
  const held = youngSizes(false);
  t.equal(held.serving, held.starting, 'without startupDone() it stays at its start size however much survives');
  const grown = youngSizes(true);
  t.equal(grown.starting, held.starting, 'the same start size');
  t.ok(grown.serving > 4 * grown.starting, `after startupDone() it grows (${grown.starting} → ${grown.serving} bytes)`);
});

/** The functions TurboFan compiled, by name, from `--trace-opt` (`completed compiling` when synchronous). */
function optimized(out: string): string[] {
  return [...out.matchAll(/completed (?:compiling|optimizing) \S+ <JSFunction ([^ >]*)/g)].map((m) => m[1]!);
}

/** A function run hot enough that TurboFan, when on, optimizes it (synchronously: `--no-concurrent-recompilation`). */
const hot = (name: string): string => `function ${name}(x) { return (x * 31 + 7) % 1000003; }\n{ let s = 0; for (let i = 0; i < 2e5; i++) s += ${name}(i); }`;

t.test('TurboFan is off until modulesLoaded() and optimizes again after it', async (t) => {
  const flags = pathToFileURL(fileURLToPath(new URL('../../dist/v8-flags.js', import.meta.url))).href;
  const script = `const { modulesLoaded } = await import(${JSON.stringify(flags)});\n${hot('whileLoading')}\nmodulesLoaded();\n${hot('afterLoading')}`;
  const names = optimized(traced(['--trace-opt', '--no-concurrent-recompilation', '--input-type=module', '-e', script]));
  t.notOk(names.includes('whileLoading'), 'the function run before modulesLoaded() is not optimized');
  t.ok(names.includes('afterLoading'), 'the same function run after it is');
  const control = optimized(traced(['--trace-opt', '--no-concurrent-recompilation', '--input-type=module', '-e', hot('whileLoading')]));
  t.ok(control.includes('whileLoading'), 'control: without dist/v8-flags.js the loop is hot enough to be optimized');
});

t.test("Node's module loader is not optimized while svcproxy's modules load", async (t) => {
  // Loading some 200 modules makes the loader's own URL and path functions hot.
  const LOADER = ['getPathFromURLPosix', 'normalizeString', 'isURL'];
  const flags = pathToFileURL(fileURLToPath(new URL('../../dist/v8-flags.js', import.meta.url))).href;
  const args = ['--trace-opt', '--no-concurrent-recompilation', '--input-type=module', '-e'];
  const control = optimized(traced([...args, `await import(${JSON.stringify(flags)});\n(await import('node:v8')).default.setFlagsFromString('--turbofan');\nawait import(${JSON.stringify(CLI)});`]));
  t.ok(LOADER.some((f) => control.includes(f)), `control: with TurboFan on while they load, the loader is optimized (${LOADER.filter((f) => control.includes(f)).join(', ')})`);
  const names = optimized(traced(['--trace-opt', '--no-concurrent-recompilation', BIN, 'validate', '--config', configFile()]));
  t.same(names.filter((f) => LOADER.includes(f)), [], 'svcproxy validate optimizes none of them');
});
