/**
 * Rules parsing (the reference server's YAML format, errors with their paths) and matching (nested
 * descriptors, exact values before `*` prefixes before key-only wildcards, depth must match).
 */
import t from 'tap';
import { mkdtempSync, writeFileSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadRules, parseRules, rulesFrom, type DomainRules } from '../../src/ratelimit/service/rules.js';
import { applyReplaces, findLimit } from '../../src/ratelimit/service/match.js';

function domainOf(source: string): DomainRules {
  const r = parseRules(source, 'rules.yaml');
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.domain;
}

function errorsOf(source: string): string[] {
  const r = parseRules(source, 'rules.yaml');
  return r.ok ? [] : r.errors;
}

const entries = (...pairs: [string, string][]): { key: string; value: string }[] => pairs.map(([key, value]) => ({ key, value }));

t.test('a reference-server rules file parses as written', async (t) => {
  const d = domainOf(`
domain: mongo_cps
descriptors:
  - key: database
    value: users
    rate_limit:
      unit: second
      requests_per_unit: 500
  - key: database
    value: default
    rate_limit:
      unit: Second
      requests_per_unit: 500
  - key: client_id
    value: foo
    detailed_metric: true
    shadow_mode: true
    rate_limit:
      name: foo-limit
      unit: MINUTE
      requests_per_unit: 10
      replaces:
        - name: general
`);
  t.equal(d.name, 'mongo_cps');
  t.equal(d.algorithm, 'fixed-window');
  const users = findLimit(d, entries(['database', 'users']))!;
  t.same({ n: users.requestsPerUnit, unit: users.unit, w: users.windowSeconds, key: users.fullKey }, { n: 500, unit: 'SECOND', w: 1, key: 'mongo_cps.database_users' });
  t.equal(findLimit(d, entries(['database', 'default']))!.unit, 'SECOND', 'units are case-insensitive');
  const foo = findLimit(d, entries(['client_id', 'foo']))!;
  t.same({ shadow: foo.shadowMode, name: foo.name, replaces: foo.replaces, unit: foo.unit }, { shadow: true, name: 'foo-limit', replaces: ['general'], unit: 'MINUTE' });
  t.equal(findLimit(d, entries(['database', 'other'])), undefined, 'a value without a rule has no limit');
});

t.test('month and year: 30- and 365-day windows, as the reference server counts them', async (t) => {
  const d = domainOf(`
domain: quota
descriptors:
  - key: plan
    value: monthly
    rate_limit: { unit: month, requests_per_unit: 100000 }
  - key: plan
    value: yearly
    rate_limit: { unit: YEAR, requests_per_unit: 1000000 }
`);
  const m = findLimit(d, entries(['plan', 'monthly']))!;
  const y = findLimit(d, entries(['plan', 'yearly']))!;
  t.same([m.unit, m.windowSeconds], ['MONTH', 2_592_000]);
  t.same([y.unit, y.windowSeconds], ['YEAR', 31_536_000]);
});

t.test('every error, each with its file and path', async (t) => {
  const errors = errorsOf(`
domain: edge
algorithm: leaky
extra: 1
descriptors:
  - key: remote_address
    rate_limit:
      unit: fortnight
      requests_per_unit: 10
  - value: nokey
  - key: path
    rate_limit:
      unit: minute
      requests_per_unit: -3
    descriptors:
      - key: method
        shadow_mode: maybe
        rate_limit:
          unlimited: true
          unit: second
      - key: method
  - key: header
    rate_limit:
      unit: hour
    bogus: true
  - key: x
    rate_limit:
      unit: day
      requests_per_unit: 1
      algorithm: token-bucket
      name: a
      replaces:
        - name: a
        - {}
  - not-a-mapping
`);
  t.same(errors.sort(), [
    'rules.yaml: domain.algorithm: must be one of fixed-window, sliding-window',
    'rules.yaml: domain.descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, month, year',
    'rules.yaml: domain.descriptors[1].key: must be a non-empty string',
    'rules.yaml: domain.descriptors[2].descriptors[0].rate_limit.unit: must not be set when unlimited is true',
    'rules.yaml: domain.descriptors[2].descriptors[0].shadow_mode: must be true or false',
    'rules.yaml: domain.descriptors[2].descriptors[1]: duplicate descriptor "method" (first at domain.descriptors[2].descriptors[0])',
    'rules.yaml: domain.descriptors[2].rate_limit.requests_per_unit: must be a whole number from 0 to 4294967295',
    'rules.yaml: domain.descriptors[3].bogus: unknown member (allowed: key, value, rate_limit, descriptors, shadow_mode, detailed_metric)',
    'rules.yaml: domain.descriptors[3].rate_limit.requests_per_unit: is required',
    'rules.yaml: domain.descriptors[4].rate_limit.algorithm: must be one of fixed-window, sliding-window',
    'rules.yaml: domain.descriptors[4].rate_limit.replaces[0].name: must not name the limit that replaces it',
    'rules.yaml: domain.descriptors[4].rate_limit.replaces[1].name: must be a non-empty string',
    'rules.yaml: domain.descriptors[5]: must be a mapping with key',
    'rules.yaml: domain.extra: unknown member (allowed: domain, descriptors, algorithm)',
  ].sort());
});

t.test('document-level errors', async (t) => {
  t.same(errorsOf('descriptors: []\n'), ['rules.yaml: domain: must be a non-empty string']);
  t.same(errorsOf('- a\n- b\n'), ['rules.yaml: domain: must be a mapping with domain and descriptors']);
  t.same(errorsOf('domain: a\n---\ndomain: b\n'), ['rules.yaml: must hold exactly one YAML document (one domain), found 2']);
  t.same(errorsOf('domain: a\ndescriptors: {}\n'), ['rules.yaml: domain.descriptors: must be a list']);
  const syntax = errorsOf('domain: a\ndescriptors:\n  - key: [unclosed\n');
  t.equal(syntax.length >= 1, true);
  t.match(syntax[0], /^rules\.yaml: line \d+, column \d+: /, 'YAML syntax errors carry the position');
  t.same(errorsOf('domain: a\n'), [], 'a domain without descriptors is valid (it limits nothing)');
});

t.test('nested descriptors: the limit applies where the whole descriptor ends', async (t) => {
  const d = domainOf(`
domain: edge
descriptors:
  - key: authority
    rate_limit: {unit: minute, requests_per_unit: 100}
    descriptors:
      - key: path
        value: /login
        rate_limit: {unit: minute, requests_per_unit: 5}
      - key: path
        descriptors:
          - key: method
            value: POST
            rate_limit: {unit: second, requests_per_unit: 2}
`);
  const cases: [string, [string, string][], number | undefined][] = [
    ['one entry at a node with a limit', [['authority', 'a.example']], 100],
    ['exact value at depth 2', [['authority', 'a.example'], ['path', '/login']], 5],
    ['key-only at depth 2 has no limit of its own', [['authority', 'a.example'], ['path', '/other']], undefined],
    ['depth 3 through the key-only node', [['authority', 'a.example'], ['path', '/x'], ['method', 'POST']], 2],
    ['depth 3 with another method value', [['authority', 'a.example'], ['path', '/x'], ['method', 'GET']], undefined],
    ['/login has no children: depth 3 does not match', [['authority', 'a.example'], ['path', '/login'], ['method', 'POST']], undefined],
    ['longer than the rules', [['authority', 'a'], ['path', '/x'], ['method', 'POST'], ['extra', '1']], undefined],
    ['entries in another order', [['path', '/login'], ['authority', 'a.example']], undefined],
    ['unknown first key', [['remote_address', '10.0.0.1']], undefined],
  ];
  for (const [name, e, want] of cases) t.equal(findLimit(d, entries(...e))?.requestsPerUnit, want, name);
});

t.test('wildcards: exact value wins over a * prefix, which wins over key-only', async (t) => {
  const d = domainOf(`
domain: w
descriptors:
  - key: user
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: user
    value: admin
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: user
    value: svc-*
    rate_limit: {unit: second, requests_per_unit: 50}
  - key: other
    value: "007"
    rate_limit: {unit: second, requests_per_unit: 7}
`);
  t.equal(findLimit(d, entries(['user', 'admin']))!.requestsPerUnit, 100, 'the exact value');
  t.equal(findLimit(d, entries(['user', 'svc-billing']))!.requestsPerUnit, 50, 'the prefix rule');
  t.equal(findLimit(d, entries(['user', 'alice']))!.requestsPerUnit, 1, 'any other value takes the key-only rule');
  t.equal(findLimit(d, entries(['other', '007']))!.requestsPerUnit, 7, 'values are read as written (not as numbers)');
  t.equal(findLimit(d, entries(['other', '7'])), undefined);
});

t.test('unlimited, shadow mode, algorithms per domain and per rule', async (t) => {
  const d = domainOf(`
domain: s
algorithm: sliding-window
descriptors:
  - key: a
    rate_limit: {unlimited: true}
  - key: b
    shadow_mode: true
    rate_limit: {unit: hour, requests_per_unit: 3}
  - key: c
    rate_limit: {unit: day, requests_per_unit: 3, algorithm: fixed-window}
`);
  t.equal(d.algorithm, 'sliding-window');
  t.same({ u: findLimit(d, entries(['a', 'x']))!.unlimited }, { u: true });
  const b = findLimit(d, entries(['b', 'x']))!;
  t.same({ shadow: b.shadowMode, algorithm: b.algorithm, w: b.windowSeconds }, { shadow: true, algorithm: 'sliding-window', w: 3600 });
  t.equal(findLimit(d, entries(['c', 'x']))!.algorithm, 'fixed-window', 'a rule overrides its domain');
});

t.test('replaces drops the named limit when both match', async (t) => {
  const d = domainOf(`
domain: r
descriptors:
  - key: general
    rate_limit: {name: general, unit: second, requests_per_unit: 10}
  - key: special
    rate_limit: {unit: second, requests_per_unit: 100, replaces: [{name: general}]}
`);
  const limits = applyReplaces([findLimit(d, entries(['general', 'x'])), findLimit(d, entries(['special', 'y']))]);
  t.equal(limits[0], undefined);
  t.equal(limits[1]!.requestsPerUnit, 100);
  t.equal(applyReplaces([findLimit(d, entries(['general', 'x']))])[0]!.requestsPerUnit, 10, 'alone it applies');
});

t.test('files and folders: one domain each, every error of every file', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-rules-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const folder = path.join(dir, 'rules');
  mkdirSync(folder);
  writeFileSync(path.join(folder, 'a.yaml'), 'domain: a\ndescriptors: [{key: k, rate_limit: {unit: second, requests_per_unit: 1}}]\n');
  writeFileSync(path.join(folder, 'b.yml'), 'domain: b\n');
  writeFileSync(path.join(folder, 'notes.txt'), 'ignored');
  writeFileSync(path.join(folder, '.hidden.yaml'), 'ignored: true');
  const ok = await loadRules([folder]);
  t.equal(ok.ok, true);
  if (ok.ok) t.same([...ok.rules.domains.keys()], ['a', 'b']);

  writeFileSync(path.join(folder, 'c.yaml'), 'domain: a\n');
  writeFileSync(path.join(folder, 'd.yaml'), 'domain: d\ndescriptors: [{key: k, rate_limit: {unit: week, requests_per_unit: 1}}]\n');
  const bad = await loadRules([folder]);
  t.equal(bad.ok, false);
  if (!bad.ok) {
    t.same(bad.errors, [
      `${path.join(folder, 'c.yaml')}: domain: "a" is already defined in ${path.join(folder, 'a.yaml')}`,
      `${path.join(folder, 'd.yaml')}: domain.descriptors[0].rate_limit.unit: must be one of second, minute, hour, day, month, year`,
    ]);
  }
  const missing = await loadRules([path.join(dir, 'nope.yaml')]);
  t.same(missing.ok ? [] : missing.errors, [`${path.join(dir, 'nope.yaml')}: cannot read: ENOENT`]);
  const fromMemory = rulesFrom([{ file: 'x.yaml', source: 'domain: x\n' }, { file: 'y.yaml', source: 'domain: x\n' }]);
  t.same(fromMemory.ok ? [] : fromMemory.errors, ['y.yaml: domain: "x" is already defined in x.yaml']);
});

t.test('the rules example of docs/rate-limiting.md parses and means what it says', async (t) => {
  const doc = readFileSync(new URL('../../docs/rate-limiting.md', import.meta.url), 'utf8');
  const example = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((b) => b.startsWith('domain:'));
  t.ok(example, 'the example is there');
  const d = domainOf(example!);
  t.equal(d.algorithm, 'sliding-window');
  t.same(findLimit(d, entries(['remote_address', '1.2.3.4'], ['path', '/login']))!.requestsPerUnit, 5);
  t.same(findLimit(d, entries(['remote_address', '1.2.3.4'], ['path', '/x']))!.algorithm, 'fixed-window');
  t.equal(findLimit(d, entries(['header_match', 'health-check']))!.unlimited, true);
  t.equal(findLimit(d, entries(['plan', 'free']))!.shadowMode, true);
});
