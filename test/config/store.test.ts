import { once } from 'node:events';
import { rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import t, { type Test } from 'tap';
import { ConfigError, ConfigStore, type Snapshot } from '../../src/config/index.js';

interface Line {
  level: number;
  msg: string;
}

function capture(): { logger: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) });
  return { logger, lines };
}

/** The 1-based line of the first `needle` in `text`. */
function lineOf(text: string, needle: string): number {
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} is not in the text`);
  return text.slice(0, at).split('\n').length;
}

const BASE = `
kind: location
name: local
---
kind: gvc
name: demo
spec:
  staticPlacement:
    locationLinks: [//location/local]
`;
const workloadYaml = (name: string, extra = '') => `
kind: workload
name: ${name}
gvc: demo
spec:
  containers:
    - name: main
      ports: [{number: 8080}]
  firewallConfig:
    external:
      inboundAllowCIDR: [0.0.0.0/0]
${extra}`;

async function openIn(t: Test, files: Record<string, string>) {
  const dir = t.testdir(files);
  const { logger, lines } = capture();
  const store = await ConfigStore.open({ paths: [dir], logger, debounceMs: 20 });
  t.teardown(() => store.close());
  return { dir, store, lines };
}

t.test('a valid reload adds a workload and emits change', async (t) => {
  const { dir, store, lines } = await openIn(t, { 'base.yaml': BASE, 'api.yaml': workloadYaml('api') });
  t.same([...store.current.workloads.keys()], ['demo/api']);
  t.equal(store.current.generation, 1);
  const changes: Snapshot[] = [];
  store.on('change', (s) => changes.push(s));
  await writeFile(join(dir, 'web.yaml'), workloadYaml('web'));
  t.equal(await store.reload(), true);
  t.same([...store.current.workloads.keys()], ['demo/api', 'demo/web']);
  t.equal(store.current.generation, 2);
  t.equal(changes.length, 1);
  t.equal(changes[0], store.current);
  t.equal(store.lastErrors, undefined);
  t.ok(lines.some((l) => l.level === 30 && l.msg === 'configuration loaded'));
});

t.test('an invalid reload keeps the last good snapshot and records every error', async (t) => {
  let clock = 1_000;
  const dir = t.testdir({ 'base.yaml': BASE, 'api.yaml': workloadYaml('api') });
  const { logger, lines } = capture();
  const store = await ConfigStore.open({ paths: [dir], logger, now: () => clock });
  t.teardown(() => store.close());
  const before = store.current;
  let changed = false;
  store.on('change', () => (changed = true));

  clock = 2_000;
  const api = workloadYaml('api', '  defaultOptions:\n    timeoutSeconds: 0\n') + '\ntags:\n  svc/protocol: udp\n';
  await writeFile(join(dir, 'api.yaml'), api);
  await writeFile(join(dir, 'web.yaml'), workloadYaml('web'));
  t.equal(await store.reload(), false);
  t.equal(store.current, before, 'still serving the previous snapshot');
  t.same([...store.current.workloads.keys()], ['demo/api'], 'nothing of the rejected set applied');
  t.equal(changed, false);
  // Each error names the file and the line of its path (the key's line in the text written above).
  const errors = [
    `${join(dir, 'api.yaml')}:${lineOf(api, 'timeoutSeconds:')}: workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600`,
    `${join(dir, 'api.yaml')}:${lineOf(api, 'svc/protocol:')}: workload/api: tags.svc/protocol: must be one of http, http2, grpc, tcp`,
  ];
  t.same(store.lastErrors, errors);
  t.same(store.lastErrorAt, new Date(2_000));
  for (const e of errors) t.ok(lines.some((l) => l.level === 50 && l.msg === `configuration rejected: ${e}`), `logged: ${e}`);

  await writeFile(join(dir, 'broken.yaml'), 'kind: [\n');
  t.equal(await store.reload(), false);
  t.match(store.lastErrors, [/broken\.yaml: line \d+: /]);

  await writeFile(join(dir, 'broken.yaml'), '');
  await writeFile(join(dir, 'api.yaml'), workloadYaml('api'));
  t.equal(await store.reload(), true);
  t.equal(store.lastErrors, undefined);
  t.equal(store.lastErrorAt, undefined);
  t.same([...store.current.workloads.keys()], ['demo/api', 'demo/web']);
  t.equal(store.current.generation, 2, 'rejected loads do not count');
});

t.test('a file replaced by rename is seen by the watcher', async (t) => {
  const { dir, store } = await openIn(t, { 'base.yaml': BASE, 'api.yaml': workloadYaml('api') });
  store.watch();
  const changed = once(store, 'change') as Promise<[Snapshot]>;
  // What editors and `kubectl cp` do: write a temporary file, then rename it over the old one.
  await writeFile(join(dir, '.api.yaml.tmp'), workloadYaml('api') + '---\n' + workloadYaml('web'));
  await rename(join(dir, '.api.yaml.tmp'), join(dir, 'api.yaml'));
  const [snapshot] = await changed;
  t.same([...snapshot.workloads.keys()], ['demo/api', 'demo/web']);
  t.equal(store.current, snapshot);
});

t.test('a watched single file is seen when replaced by rename', async (t) => {
  const dir = t.testdir({ 'all.yaml': BASE + '---\n' + workloadYaml('api'), 'other.yaml': 'not: read' });
  const { logger } = capture();
  const store = await ConfigStore.open({ paths: [join(dir, 'all.yaml')], logger, debounceMs: 20 });
  t.teardown(() => store.close());
  store.watch();
  const changed = once(store, 'change') as Promise<[Snapshot]>;
  await writeFile(join(dir, 'next.yaml'), BASE + '---\n' + workloadYaml('web'));
  await rename(join(dir, 'next.yaml'), join(dir, 'all.yaml'));
  const [snapshot] = await changed;
  t.same([...snapshot.workloads.keys()], ['demo/web']);
});

t.test('an invalid first load throws a ConfigError with every error', async (t) => {
  const api = workloadYaml('api').replace('gvc: demo', 'gvc: nope') + '\ndescription: ' + 'x'.repeat(251) + '\n';
  const dir = t.testdir({ 'base.yaml': BASE, 'api.yaml': api });
  const { logger } = capture();
  const err = await ConfigStore.open({ paths: [dir], logger }).then(() => undefined, (e: unknown) => e);
  t.ok(err instanceof ConfigError);
  const file = join(dir, 'api.yaml');
  t.same((err as ConfigError).errors, [
    `${file}:${lineOf(api, 'description:')}: workload/api: description: must be at most 250 characters`,
    `${file}:${lineOf(api, 'gvc: nope')}: workload/api: gvc: points to gvc nope, which is not defined`,
  ]);
});

t.test('records in memory (the built-in demo)', async (t) => {
  const { logger } = capture();
  const records = [
    { kind: 'location', name: 'local' },
    { kind: 'gvc', name: 'demo', spec: { staticPlacement: { locationLinks: ['//location/local'] } } },
    { kind: 'workload', name: 'hello', gvc: 'demo', spec: { containers: [{ name: 'main', command: 'node', ports: [{ number: 8080 }] }] } },
  ];
  const store = await ConfigStore.open({ records, logger });
  t.same([...store.current.workloads.keys()], ['demo/hello']);
  t.same(store.current.warnings, ['workload/hello: spec.firewallConfig.external.inboundAllowCIDR: not set: the workload accepts no external traffic']);
  t.equal(await store.reload(), true);
  t.equal(store.current.generation, 2);
  store.watch();
  store.close();
});
