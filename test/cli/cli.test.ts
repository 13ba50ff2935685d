/**
 * The installed command as a user runs it (`bin/svcproxy.js`, compiled by `npm test`'s build step):
 * `validate` exit codes and error lines, `endpoints` in every output format, usage errors.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import jsyaml from 'js-yaml';
import { ALIAS, records, yamlDocuments } from '../helpers/harness.js';

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));

function run(args: string[], env: Record<string, string> = {}): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', env: { ...process.env, ...env }, timeout: 20_000 });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function configFile(docs: unknown[]): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-cli-'));
  const file = path.join(dir, 'config.yaml');
  writeFileSync(file, yamlDocuments(docs));
  return file;
}

const good = records({
  replicas: { 'aws-us-east-2': ['127.0.0.1:9'] },
  workload: 'my-api-v2',
  workloadSpec: { type: 'stateful', loadBalancer: { replicaDirect: true } },
});

t.test('validate: exit 0 for a valid config', async (t) => {
  const r = run(['validate', '--config', configFile(good)]);
  t.equal(r.code, 0, r.stderr);
  t.match(r.stdout, /^valid: /);
});

t.test('validate: exit 1 with every error and its path', async (t) => {
  const bad = [
    ...good,
    { kind: 'workload', name: 'x'.repeat(65), gvc: 'shop', spec: { type: 'standard', containers: [] } },
    { kind: 'workload', name: 'slow', gvc: 'shop', description: 'd'.repeat(251), spec: { type: 'standard', defaultOptions: { timeoutSeconds: 0 } } },
  ];
  const r = run(['validate', '--config', configFile(bad)]);
  t.equal(r.code, 1);
  t.match(r.stderr, /workload\/x{65}: name: /);
  t.match(r.stderr, /workload\/slow: description: /);
  t.match(r.stderr, /workload\/slow: spec\.defaultOptions\.timeoutSeconds: /);
});

t.test('validate: a missing file and a YAML syntax error', async (t) => {
  const missing = run(['validate', '--config', '/nonexistent/config.yaml']);
  t.equal(missing.code, 1);
  t.match(missing.stderr, /nonexistent/);
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-cli-'));
  const file = path.join(dir, 'bad.yaml');
  writeFileSync(file, 'kind: workload\nname: [unclosed\n');
  const syntax = run(['validate', '--config', file]);
  t.equal(syntax.code, 1);
  t.match(syntax.stderr, /bad\.yaml/);
});

t.test('endpoints: text, json and yaml', async (t) => {
  const file = configFile(good);
  const json = run(['endpoints', '--config', file, '-o', 'json']);
  t.equal(json.code, 0, json.stderr);
  const list = JSON.parse(json.stdout) as { workload: string; gvc: string; kind: string; host: string; location?: string; replica?: number }[];
  const kinds = new Set(list.map((e) => e.kind));
  for (const kind of ['canonical', 'location', 'replica', 'internal', 'internal-replica']) t.ok(kinds.has(kind), `has ${kind}`);
  t.ok(list.some((e) => e.kind === 'canonical' && e.host === `my-api-v2-${ALIAS}.app.localhost` && e.workload === 'my-api-v2' && e.gvc === 'shop'));
  t.ok(list.some((e) => e.kind === 'replica' && e.host === `my-api-v2-${ALIAS}-0.aws-us-east-2.direct.localhost`));
  const yaml = run(['endpoints', '--config', file, '-o', 'yaml']);
  t.same(jsyaml.load(yaml.stdout), list);
  const text = run(['endpoints', '--config', file]);
  t.match(text.stdout, `my-api-v2-${ALIAS}.app.localhost`);
  const custom = run(['endpoints', '--config', file, '-o', 'json'], { SVCPROXY_APP_DOMAIN: 'apps.example.net' });
  t.match(custom.stdout, `my-api-v2-${ALIAS}.apps.example.net`, 'flags come from SVCPROXY_<NAME> too');
});

t.test('usage errors exit 2', async (t) => {
  t.equal(run(['frobnicate']).code, 2);
  t.equal(run(['validate']).code, 2);
  t.equal(run(['validate', '--no-such-flag']).code, 2);
  t.equal(run(['--help']).code, 0);
  const file = configFile(good);
  const tls = run(['ingress', '--config', file, '--location', 'aws-us-east-2', '--listen-tls', '127.0.0.1:0', '--admin', '127.0.0.1:0']);
  t.equal(tls.code, 2, '--listen-tls without a certificate is a usage error');
  t.match(tls.stderr, '--listen-tls needs --tls-cert FILE and --tls-key FILE');
  const typo = run(['ingress', '--config', file, '--location', 'aws-us-east2', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0']);
  t.equal(typo.code, 2, 'a mistyped --location is a usage error');
  t.match(typo.stderr, /--location aws-us-east2 is not a location of the configuration \(known: .*aws-us-east-2/);
});
