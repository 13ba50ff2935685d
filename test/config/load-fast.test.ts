/**
 * The fast YAML path gives exactly what the full parse gives: the same values (checked against
 * js-yaml's core schema on generated files) and each record's line; files it does not take still load.
 */
import t from 'tap';
import jsyaml from 'js-yaml';
import { parseRecords } from '../../src/config/load.js';
import { buildSnapshot } from '../../src/config/snapshot.js';

function fullParse(text: string): unknown[] {
  return jsyaml.loadAll(text, undefined, { schema: jsyaml.CORE_SCHEMA }).filter((v) => v !== null && v !== undefined);
}

t.test('multi-document files: same values, document lines', async (t) => {
  const text = [
    '# leading comment',
    'kind: org',
    'name: acme',
    '---',
    '',
    '# a comment',
    'kind: gvc',
    'name: shop',
    'spec: { staticPlacement: { locationLinks: ["//location/x"] } }',
    '--- # trailing comment',
    'kind: workload',
    'name: api',
    'tags: { "svc/timeoutSecondsOverride": 900, flag: yes, on: true, n: 0x1F, f: 1.5e3, s: "007", d: 2026-11-25 }',
    '---',
  ].join('\n');
  const r = parseRecords(text, 'f.yaml');
  t.same(r.errors, []);
  t.same(r.records.map((x) => x.record), fullParse(text), 'values as js-yaml reads them (its core schema, YAML 1.2\'s)');
  t.same(r.records.map((x) => x.line), [2, 7, 11]);
});

t.test('generated records agree with the full parse', async (t) => {
  let text = '';
  for (let i = 0; i < 200; i++) {
    text += `---\nkind: workload\nname: w${i}\ngvc: g\ntags:\n  a: "${i}"\n  b: ${i % 2 === 0}\nspec:\n  containers:\n    - name: c\n      ports: [{ number: ${1000 + i}, protocol: http }]\n`;
  }
  const r = parseRecords(text, 'gen.yaml');
  t.same(r.records.map((x) => x.record), fullParse(text));
});

t.test('what the fast path does not take still loads, with lines', async (t) => {
  const lists = parseRecords('- kind: org\n  name: a\n- kind: location\n  name: b\n', 'l.yaml');
  t.same(lists.records.map((x) => x.line), [1, 3], 'a list: each item its own line');
  const aliases = parseRecords('kind: org\nname: &n acme\ndescription: *n\n', 'a.yaml');
  t.same(aliases.records[0]!.record, { kind: 'org', name: 'acme', description: 'acme' });
  const dup = parseRecords('kind: org\nname: a\nname: b\n', 'd.yaml');
  t.equal(dup.records.length, 0);
  t.match(dup.errors[0], /^d\.yaml: line 3: /, 'a duplicate key is reported with its line');
});

t.test('records read from a file are frozen where parsed, and the snapshot keeps them without a copy', async (t) => {
  const text = ['kind: org', 'name: acme', '---', 'kind: location', 'name: aws-us-west-2', 'spec: { labels: { tier: [a, b] } }'].join('\n');
  for (const [name, body] of [['f.yaml', text], ['f.json', JSON.stringify([{ kind: 'org', name: 'acme' }, { kind: 'location', name: 'aws-us-west-2', spec: { labels: { tier: ['a', 'b'] } } }])]] as const) {
    const r = parseRecords(body, name);
    t.equal(r.records.length, 2, name);
    const loc = r.records[1]!.record as { spec: { labels: { tier: string[] } } };
    t.ok(Object.isFrozen(loc) && Object.isFrozen(loc.spec.labels) && Object.isFrozen(loc.spec.labels.tier), `${name}: frozen all the way down`);
    const s = buildSnapshot(r.records);
    t.equal(s.records[1], loc, `${name}: the snapshot holds the parsed record itself`);
  }
  const mine = { kind: 'org', name: 'acme', spec: { tracing: { sampling: 5 } } };
  const s = buildSnapshot([mine]);
  t.not(s.records[0], mine, 'a record given in memory is copied');
  t.notOk(Object.isFrozen(mine.spec), 'and left as it was');
  t.ok(Object.isFrozen((s.records[0] as typeof mine).spec));
});
