import { join } from 'node:path';
import t from 'tap';
import { parseRecords, readRecords } from '../../src/config/load.js';

const labels = (records: readonly { record: Readonly<Record<string, unknown>> }[]): string[] =>
  records.map((r) => `${String(r.record.kind)}/${String(r.record.name)}`);

t.test('multi-document YAML, empty documents skipped, lines kept', async (t) => {
  const text = ['# config', 'kind: gvc', 'name: a', '---', '# nothing here', '---', 'kind: workload', 'name: w', 'gvc: a', '---', ''].join('\n');
  const { records, errors } = parseRecords(text, 'x.yaml');
  t.same(errors, []);
  t.same(labels(records), ['gvc/a', 'workload/w']);
  t.same(records.map((r) => [r.source, r.line]), [['x.yaml', 2], ['x.yaml', 7]]);
});

t.test('a YAML sequence of records, and a list response', async (t) => {
  const seq = parseRecords('- kind: location\n  name: l1\n- kind: location\n  name: l2\n', 'seq.yml');
  t.same(labels(seq.records), ['location/l1', 'location/l2']);
  t.same(seq.records.map((r) => r.line), [1, 3]);
  const list = parseRecords('kind: workload\nitems:\n  - name: a\n    gvc: g\n  - kind: domain\n    name: b.com\nlinks: []\n', 'list.yaml');
  t.same(labels(list.records), ['workload/a', 'domain/b.com']);
  t.same(list.records.map((r) => r.line), [3, 5]);
  const generic = parseRecords('{"kind": "list", "items": [{"kind": "gvc", "name": "g"}, {"name": "nokind"}]}', 'l.json');
  t.same(labels(generic.records), ['gvc/g', 'undefined/nokind'], 'a generic list gives its items no kind');
});

t.test('JSON: an array, one object, an empty file', async (t) => {
  t.same(labels(parseRecords('[{"kind":"gvc","name":"a"},{"kind":"gvc","name":"b"}]', 'a.json').records), ['gvc/a', 'gvc/b']);
  t.same(labels(parseRecords('\uFEFF{"kind":"gvc","name":"a"}', 'a.json').records), ['gvc/a'], 'a byte-order mark is skipped');
  t.same(parseRecords('  \n', 'a.json'), { records: [], errors: [] });
});

t.test('syntax errors carry the file and the line', async (t) => {
  t.same(parseRecords('kind: gvc\nname: a\nname: b\n', 'dup.yaml').errors, ['dup.yaml: line 3: duplicated mapping key']);
  const flow = parseRecords('kind: gvc\nspec: {a: [1, 2}\n', 'flow.yaml').errors;
  t.equal(flow.length > 0, true);
  t.match(flow[0], /^flow\.yaml: line 2: /);
  // V8's wording differs between Node versions; the file, line and column are svcproxy's.
  t.match(parseRecords('[\n  {"kind": "gvc",\n   "name": "a",},\n]', 'trailing.json').errors, [/^trailing\.json: line 3: .+ \(column 16\)$/]);
  t.match(parseRecords('[\n  1,\n  2,\n]', 'array.json').errors, [/^array\.json: line 4: .+ \(column 1\)$/]);
  t.match(parseRecords('{\n  "kind": "gvc"\n  "name": "a"\n}', 'comma.json').errors, [/^comma\.json: line 3: .+ \(column 3\)$/]);
  t.match(parseRecords('{\n  "kind": "gvc",\n', 'short.json').errors, [/^short\.json: line 3: .+ \(column 1\)$/]);
});

t.test('documents that are not records', async (t) => {
  const msg = 'must be a record (an object with kind and name), a list of records, or a list response';
  t.same(parseRecords('kind: gvc\nname: a\n---\njust text\n', 'a.yaml').errors, [`a.yaml: line 4: ${msg}`]);
  t.same(parseRecords('[{"kind": "gvc", "name": "a"}, 3]', 'a.json').errors, [`a.json: item 2: ${msg}`]);
});

t.test('folders: config files in name order, nothing else', async (t) => {
  const dir = t.testdir({
    'b.yaml': 'kind: gvc\nname: b\n',
    'a.json': '{"kind": "gvc", "name": "a"}',
    'c.yml': 'kind: gvc\nname: c\n',
    'notes.txt': 'kind: gvc\nname: txt\n',
    '.hidden.yaml': 'kind: gvc\nname: hidden\n',
    sub: { 'd.yaml': 'kind: gvc\nname: d\n' },
    'single.conf': 'kind: gvc\nname: single\n',
  });
  const { records, errors } = await readRecords([dir, join(dir, 'single.conf')]);
  t.same(errors, []);
  t.same(labels(records), ['gvc/a', 'gvc/b', 'gvc/c', 'gvc/single']);
  t.same(records.map((r) => r.source), ['a.json', 'b.yaml', 'c.yml', 'single.conf'].map((f) => join(dir, f)));
});

t.test('every file is read and every error kept', async (t) => {
  const dir = t.testdir({ 'bad1.yaml': 'a: [\n', 'bad2.json': '{,}', 'good.yaml': 'kind: gvc\nname: g\n' });
  const { records, errors } = await readRecords([dir, join(dir, 'missing.yaml')]);
  t.same(labels(records), ['gvc/g']);
  t.equal(errors.length, 3);
  t.match(errors[0], new RegExp(`^${join(dir, 'bad1.yaml')}: line \\d+: `));
  t.match(errors[1], new RegExp(`^${join(dir, 'bad2.json')}: line 1: .+ \\(column 2\\)$`));
  t.equal(errors[2], `${join(dir, 'missing.yaml')}: no such file or folder`);
});

t.test('readRecords with a cache: the files whose bytes did not change are not parsed again', async (t) => {
  const { mkdtemp, rm, writeFile } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const dir = await mkdtemp(join(tmpdir(), 'svcproxy-read-cache-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const a = join(dir, 'a.yaml');
  const b = join(dir, 'b.json');
  const c = join(dir, 'c.yaml');
  await writeFile(a, 'kind: gvc\nname: g1\n---\nkind: workload\nname: w1\ngvc: g1\n');
  await writeFile(b, JSON.stringify([{ kind: 'workload', name: 'w2', gvc: 'g1' }]));
  await writeFile(c, 'kind: workload\nname: [unclosed\n');
  const cache: import('../../src/config/load.js').ReadCache = new Map();
  const first = await readRecords([dir], cache);
  t.same(first, await readRecords([dir]), 'the first read is what a read without a cache finds');
  t.equal(first.errors.length, 1, 'c.yaml does not parse');

  // b.json rewritten with other bytes, c.yaml deleted, a.yaml rewritten with the same bytes.
  await writeFile(a, 'kind: gvc\nname: g1\n---\nkind: workload\nname: w1\ngvc: g1\n');
  await writeFile(b, JSON.stringify([{ kind: 'workload', name: 'w2', gvc: 'g1', description: 'changed' }]));
  await rm(c);
  const second = await readRecords([dir], cache);
  t.same(second, await readRecords([dir]), 'the next read is what a read without a cache finds');
  t.equal(second.records[0], first.records[0], 'a.yaml, same bytes: its records are the objects read before');
  t.equal(second.records[1], first.records[1]);
  t.not(second.records[2], first.records[2], 'b.json, other bytes: parsed again');
  t.same(second.records[2]!.record.description, 'changed');
  t.same([...cache.keys()].sort(), [a, b], 'the deleted file is no longer remembered');
});
