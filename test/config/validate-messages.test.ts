/**
 * What `svcproxy validate` says (src/config/validate-report.ts) and where record errors point: every
 * error names its file and the line of its path, whichever way the file was read (the fast YAML
 * path, the full YAML parse, JSON, a list response), checked on generated configurations with
 * unique markers whose lines are computed from the text the test wrote; kinds svcproxy does not read
 * are listed apart, never counted as valid; a misspelt kind is an error; a rate-limit rules file is
 * checked with the rate-limit service's own loader.
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import jsyaml from 'js-yaml';
import { defaultSettings, loadSnapshot } from '../../src/config/index.js';
import { validateReport } from '../../src/config/validate-report.js';
import { loadRules } from '../../src/ratelimit/service/rules.js';
import { baseRecords, setPath, find, type Rec } from '../fixtures/config/base.js';
import { prng, testSeed } from '../helpers/seed.js';

/** The 1-based line of the first `needle` in `text`. */
function lineOf(text: string, needle: string): number {
  const at = text.indexOf(needle);
  if (at < 0) throw new Error(`${needle} is not in the text`);
  return text.slice(0, at).split('\n').length;
}

const yamlDocs = (docs: readonly Rec[]): string => docs.map((d) => jsyaml.dump(d, { lineWidth: -1 })).join('---\n');

t.test('what validate checked, by kind; kinds it does not read listed apart, with file and line', async (t) => {
  const records = baseRecords();
  const text = yamlDocs([...records, { kind: 'secret', name: 'db', spec: { password: 'x' } }, { kind: 'identity', name: 'id' }]);
  const json = JSON.stringify([{ kind: 'auditctx', name: 'audit' }], null, 2);
  const dir = t.testdir({ 'a.yaml': text, 'b.json': json });
  const report = await validateReport([dir], defaultSettings);
  const a = join(dir, 'a.yaml');
  const b = join(dir, 'b.json');
  t.equal(report.exitCode, 0);
  t.same(report.stdout, [
    'valid: 8 records checked (org 1, location 2, gvc 1, workload 2, domain 1, deployment 1); 3 not checked, of kinds svcproxy does not read (secret 1, identity 1, auditctx 1)',
  ]);
  t.same(report.stderr, [
    `warning: ${a}:${lineOf(text, 'kind: secret')}: secret/db: kind: "secret" is a platform kind svcproxy does not read; not checked`,
    `warning: ${a}:${lineOf(text, 'kind: identity')}: identity/id: kind: "identity" is a platform kind svcproxy does not read; not checked`,
    `warning: ${b}:${lineOf(json, '"kind": "auditctx"')}: auditctx/audit: kind: "auditctx" is a platform kind svcproxy does not read; not checked`,
  ]);
});

t.test('a kind that is no platform kind is an error, with the nearest kind', async (t) => {
  const text = yamlDocs([...baseRecords(), { kind: 'worklaod', name: 'lost', gvc: 'demo' }]);
  const dir = t.testdir({ 'a.yaml': text });
  const report = await validateReport([dir], defaultSettings);
  const a = join(dir, 'a.yaml');
  t.equal(report.exitCode, 1);
  t.same(report.stdout, ['invalid: 8 records checked (org 1, location 2, gvc 1, workload 2, domain 1, deployment 1)']);
  t.same(report.stderr, [
    `${a}:${lineOf(text, 'kind: worklaod')}: worklaod/lost: kind: "worklaod" is not a platform kind (did you mean "workload"?)`,
    'svcproxy: configuration invalid (1 error)',
  ]);
  // `up` reads the same files the same way: the typo stops it too, with the same line.
  const up = await loadSnapshot([dir]);
  t.same(up.ok ? [] : up.errors, report.stderr.slice(0, 1));
});

t.test('a misspelt tag: a warning with "did you mean", for the vendor prefix in use', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'workload/api'), 'tags', { 'cpln/timout': '5', 'svc/protocl': 'http' });
  const text = yamlDocs(records);
  const dir = t.testdir({ 'a.yaml': text });
  const report = await validateReport([dir], { ...defaultSettings, vendor: 'cpln' });
  t.equal(report.exitCode, 0);
  t.same(report.stderr, [
    `warning: ${join(dir, 'a.yaml')}:${lineOf(text, 'cpln/timout')}: workload/api: tags.cpln/timout: unknown cpln/ tag (did you mean cpln/timeoutSecondsOverride? ignored)`,
  ], 'svc/protocl is no vendor tag under --vendor cpln');
});

const RULES = `domain: shop
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 60
  - key: path
    value: /checkout
    rate_limit: {unit: second, requests_per_unit: 5}
`;

t.test('a rate-limit rules file is found and checked with the service loader', async (t) => {
  const dir = t.testdir({ 'config.yaml': yamlDocs(baseRecords()), 'rules.yaml': RULES });
  const ok = await validateReport([dir], defaultSettings);
  t.equal(ok.exitCode, 0, ok.stderr.join('\n'));
  t.same(ok.stdout, [
    'valid: 8 records checked (org 1, location 2, gvc 1, workload 2, domain 1, deployment 1)',
    'valid: 1 rate-limit rules file checked (domain shop)',
  ]);

  const bad = RULES.replace('unit: minute', 'unit: fortnight').replace('    value: /checkout\n', '    value: /checkout\n    shadow: true\n');
  const file = join(dir, 'rules.yaml');
  writeFileSync(file, bad);
  const report = await validateReport([file], defaultSettings);
  t.equal(report.exitCode, 1);
  t.same(report.stdout, ['invalid: 1 rate-limit rules file checked']);
  const service = await loadRules([file]);
  if (service.ok) return t.fail('the service took the broken rules');
  // The service's own messages, each with the line of its path.
  t.same(report.stderr.slice(0, -1), [
    `${file}:${lineOf(bad, 'unit: fortnight')}: domain.descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, month, year`,
    `${file}:${lineOf(bad, 'shadow: true')}: domain.descriptors[1].shadow: unknown member (allowed: key, value, rate_limit, descriptors, shadow_mode, detailed_metric)`,
  ].sort());
  t.same(report.stderr.slice(0, -1).map((e) => e.replace(/^(.*?):\d+: /, '$1: ')).sort(), [...service.errors].sort());

  // A domain defined twice, in two files: the second file's `domain` line.
  const again = `# the same domain\n${RULES}`;
  writeFileSync(join(dir, 'rules2.yaml'), again);
  writeFileSync(file, RULES);
  const twice = await validateReport([dir], defaultSettings);
  t.same(twice.stderr, [
    `${join(dir, 'rules2.yaml')}:${lineOf(again, 'domain: shop')}: domain: "shop" is already defined in ${file}`,
    'svcproxy: configuration invalid (1 error)',
  ]);
});

t.test('a rules document given to up is explained, not taken for a record without a kind', async (t) => {
  const dir = t.testdir({ 'config.yaml': `${yamlDocs(baseRecords())}---\n${RULES}` });
  const up = await loadSnapshot([dir]);
  t.match(up.ok ? [] : up.errors, [/config\.yaml:\d+: \?\/\?: kind: is required \(this is a rate-limit rules document: `svcproxy ratelimit --config` reads it\)$/]);
});

/** A way of writing records that the loader reads by a different path. */
const FORMATS: Readonly<Record<string, { ext: string; write: (records: Rec[]) => string }>> = {
  'YAML, fast path': { ext: 'yaml', write: yamlDocs },
  // An anchor sends the file to the full parse (load.ts).
  'YAML, full parse': { ext: 'yaml', write: (records) => yamlDocs(records).replace('name: acme', 'name: &org acme') },
  'YAML, one list': { ext: 'yaml', write: (records) => jsyaml.dump(records, { lineWidth: -1 }) },
  'JSON array': { ext: 'json', write: (records) => JSON.stringify(records, null, 2) },
  'JSON list response': { ext: 'json', write: (records) => JSON.stringify({ kind: 'list', items: records }, null, 1) },
};

/** Places a value or a member can be broken at; `M` is the marker, unique in the file. */
const BREAKS: readonly { label: string; path: (m: string) => string; value: (m: string) => unknown; needle: (m: string) => string; error: boolean }[] = [
  { label: 'workload/api', path: () => 'spec.containers[0].ports[0].number', value: (m) => m, needle: (m) => m, error: true },
  { label: 'workload/api', path: () => 'spec.defaultOptions.timeoutSeconds', value: (m) => m, needle: (m) => m, error: true },
  { label: 'workload/spare', path: () => 'spec.firewallConfig.external.inboundAllowCIDR[0]', value: (m) => m, needle: (m) => m, error: true },
  { label: 'domain/example.com', path: () => 'spec.ports[0].routes[1].prefix', value: (m) => m, needle: (m) => m, error: true },
  { label: 'deployment/api', path: () => 'status.locations[0].replicas[0].address', value: (m) => m, needle: (m) => m, error: true },
  { label: 'gvc/demo', path: (m) => `spec.staticPlacement.locationOptions[0].${m}`, value: () => 1, needle: (m) => m, error: true },
  { label: 'gvc/demo', path: () => 'spec.staticPlacement.locationOptions[0].routingTier', value: (m) => m, needle: (m) => m, error: true },
  { label: 'workload/spare', path: (m) => `tags.svc/${m}`, value: () => 'x', needle: (m) => `svc/${m}`, error: false },
];

t.test('every error and warning points at the line of its path, however the file is read', async (t) => {
  const seed = testSeed('VALIDATE_LINES_SEED', 28);
  t.comment(`seed ${seed} (VALIDATE_LINES_SEED=${seed} replays it)`);
  const random = prng(seed);
  const dir = t.testdir({});
  for (let round = 0; round < 40; round++) {
    const [format, { ext, write }] = Object.entries(FORMATS)[Math.floor(random() * Object.keys(FORMATS).length)]!;
    const records = baseRecords();
    const chosen = BREAKS.filter(() => random() < 0.4);
    const breaks = chosen.map((b, i) => {
      const marker = `bad${round}x${i}`;
      setPath(find(records, b.label), b.path(marker), b.value(marker));
      return { ...b, marker };
    });
    const text = write(records);
    const file = join(dir, `c${round}.${ext}`);
    writeFileSync(file, text);
    const report = await validateReport([file], defaultSettings);
    const context = { seed, round, format, text };
    for (const b of breaks) {
      const want = `${b.error ? '' : 'warning: '}${file}:${lineOf(text, b.needle(b.marker))}: ${b.label}: ${b.path(b.marker)}: `;
      if (!report.stderr.some((line) => line.startsWith(want))) t.fail(`${format}: no line starting ${want}`, { ...context, stderr: report.stderr });
    }
    t.equal(report.exitCode, breaks.some((b) => b.error) ? 1 : 0, `${format}: exit code`, context);
    // `up` (loadSnapshot) says the same errors, at the same lines.
    const up = await loadSnapshot([file]);
    t.same(up.ok ? [] : up.errors, report.stderr.filter((l) => !l.startsWith('warning: ') && !l.startsWith('svcproxy: ')), `${format}: up says the same`, context);
  }
});

t.test('a record without a line (JSON) that is missing a member: the line of the member above', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'workload/api'), 'spec.containers[0].name', undefined);
  const text = JSON.stringify(records, null, 2);
  const dir = t.testdir({ 'c.json': text });
  const report = await validateReport([dir], defaultSettings);
  // `containers[0]` starts on the line after `"containers": [`.
  t.same(report.stderr[0], `${join(dir, 'c.json')}:${lineOf(text, '"containers": [') + 1}: workload/api: spec.containers[0].name: is required`);
});

t.test('a file rewritten between the load and the lookup: the record keeps its own line', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'workload/api'), 'spec.defaultOptions.timeoutSeconds', 'bad');
  const text = yamlDocs(records);
  const dir = t.testdir({ 'a.yaml': text });
  const file = join(dir, 'a.yaml');
  const recordLine = lineOf(text, 'name: api');
  // Read again, the file holds other records (renamed): their lines would be wrong, so none is taken.
  const renamed = text.replace('name: api\n', 'name: api2\n');
  let reads = 0;
  const moved = await validateReport([dir], defaultSettings, async () => (reads++ === 0 ? text : renamed));
  t.equal(reads, 2, 'read to load, then again for the lines');
  t.same(moved.stderr[0], `${file}:${lineOf(text, 'kind: workload')}: workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600`);
  t.not(recordLine, lineOf(text, 'timeoutSeconds'), 'the two lines differ, so the test tells them apart');
});
