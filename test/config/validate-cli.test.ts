/**
 * `svcproxy validate` as a user runs it (`node bin/svcproxy.js`, after `npm run build`): exit codes,
 * what stdout says was checked, and stderr's error and warning lines with the file and the line
 * computed from the text the test wrote. `SVCPROXY_BIN` may name another build's bin/svcproxy.js.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import jsyaml from 'js-yaml';
import { baseRecords, find, setPath, type Rec } from '../fixtures/config/base.js';

const BIN = process.env.SVCPROXY_BIN ?? fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));

function run(...args: string[]): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [BIN, 'validate', ...args], { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

function lineOf(text: string, needle: string): number {
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} is not in the text`);
  return text.slice(0, at).split('\n').length;
}

const yamlDocs = (docs: readonly Rec[]): string => docs.map((d) => jsyaml.dump(d, { lineWidth: -1 })).join('---\n');
const RULES = 'domain: shop\ndescriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 60}\n';

t.test('valid records, a kind svcproxy does not read, and a rules file: exit 0, each counted for what it is', async (t) => {
  const text = yamlDocs([...baseRecords(), { kind: 'secret', name: 'db' }]);
  const dir = t.testdir({ 'shop.yaml': text, 'rules.yaml': RULES });
  const r = run('--config', dir);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, [
    'valid: 8 records checked (org 1, location 2, gvc 1, workload 2, domain 1, deployment 1); 1 not checked, of kinds svcproxy does not read (secret 1)',
    'valid: 1 rate-limit rules file checked (domain shop)',
    '',
  ].join('\n'));
  t.equal(r.stderr, `warning: ${join(dir, 'shop.yaml')}:${lineOf(text, 'kind: secret')}: secret/db: kind: "secret" is a platform kind svcproxy does not read; not checked\n`);
});

t.test('errors: exit 1, each with its file and the line of its path', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'workload/api'), 'spec.containers[0].ports[0].number', 70000);
  setPath(find(records, 'workload/spare'), 'tags', { 'svc/timout': '5' });
  records.push({ kind: 'worklaod', name: 'lost', gvc: 'demo' });
  const text = yamlDocs(records);
  const json = JSON.stringify([{ kind: 'location', name: 'Bad_Name' }], null, 2);
  const rules = RULES.replace('minute', 'fortnight');
  const dir = t.testdir({ 'shop.yaml': text, 'more.json': json, 'rules.yaml': rules });
  const r = run('--config', dir);
  t.equal(r.code, 1);
  const shop = join(dir, 'shop.yaml');
  t.equal(r.stderr, [
    `${join(dir, 'more.json')}:${lineOf(json, '"name": "Bad_Name"')}: location/Bad_Name: name: must be lowercase letters, digits and hyphens, starting and ending with a letter or digit`,
    `${shop}:${lineOf(text, 'number: 70000')}: workload/api: spec.containers[0].ports[0].number: must be an integer from 1 to 65535`,
    `${shop}:${lineOf(text, 'kind: worklaod')}: worklaod/lost: kind: "worklaod" is not a platform kind (did you mean "workload"?)`,
    `${join(dir, 'rules.yaml')}:${lineOf(rules, 'fortnight')}: domain.descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, month, year`,
    `warning: ${shop}:${lineOf(text, 'svc/timout')}: workload/spare: tags.svc/timout: unknown svc/ tag (did you mean svc/timeoutSecondsOverride? ignored)`,
    'svcproxy: configuration invalid (4 errors)',
    '',
  ].join('\n'));
  t.match(r.stdout, /^invalid: 9 records checked/);
});

t.test('a file that does not parse: exit 1, its line, and no record counted as valid', async (t) => {
  const dir = t.testdir({ 'bad.yaml': 'kind: workload\nname: [unclosed\n' });
  const r = run('--config', dir);
  t.equal(r.code, 1);
  t.match(r.stderr, new RegExp(`^${join(dir, 'bad.yaml').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: line \\d+: `));
  t.match(r.stdout, /^invalid: 0 records checked$/m);
});
