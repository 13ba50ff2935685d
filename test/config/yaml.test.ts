/**
 * src/yaml.ts, the one YAML library as svcproxy uses it: the values are js-yaml's (compared with a
 * plain `loadAll`), the lines of documents, mapping keys, sequence items and collections follow a
 * hand table (a value after `key:` on the next line, comments and blank lines in front, flow style,
 * aliases), a syntax error keeps its position and loses the text it quoted, an alias expansion past
 * the bound is refused (the billion laughs) while ordinary reuse is read, and `dumpYaml` writes the
 * platform CLI's bytes (its own `toSortedYamlString` is the oracle).
 */
import { createRequire } from 'node:module';
import t from 'tap';
import jsyaml from 'js-yaml';
import { dumpYaml, MAX_ALIAS_EXPANSION, readYaml, type YamlRead } from '../../src/yaml.js';

function ok(read: YamlRead): Extract<YamlRead, { ok: true }> {
  if (!read.ok) throw new Error(`not read: ${JSON.stringify(read.error)}`);
  return read;
}

const TEXT = [
  '# leading comment', //                    1
  'kind: workload', //                       2
  'name: api', //                            3
  'spec:', //                                4
  '  # a comment before the value', //       5
  '', //                                     6
  '  containers:', //                        7
  '    - name: app', //                      8
  '      ports:', //                         9
  '        - number: 8080', //              10
  '          protocol: http', //            11
  '    -', //                               12
  '      name: side', //                    13
  '  tags: {a: 1, b: [x, y]}', //           14
  '---', //                                 15
  '# only a comment', //                    16
  '---', //                                 17
  '- one', //                               18
  '- &shared {k: v}', //                    19
  '- *shared', //                           20
].join('\n');

t.test('values are js-yaml\'s, lines follow the text', async (t) => {
  const read = ok(readYaml(TEXT));
  t.strictSame(read.docs.map((d) => d.value), jsyaml.loadAll(TEXT), 'the documents js-yaml reads, empty ones as null');
  t.same(read.docs.map((d) => d.line), [2, 17, 18], 'each document\'s first content line (the empty one: where the next begins)');
  const { lines } = read;
  const w = read.docs[0]!.value as { spec: { containers: { ports: object[] }[]; tags: { b: string[] } } };
  t.equal(lines.of(w), 2);
  t.equal(lines.key(w, 'kind'), 2);
  t.equal(lines.key(w, 'spec'), 4);
  t.equal(lines.of(w.spec), 7, 'a value after its key\'s line starts where its content does');
  t.equal(lines.key(w.spec, 'containers'), 7);
  t.equal(lines.item(w.spec.containers, 0), 8);
  t.equal(lines.item(w.spec.containers, 1), 13, 'an item whose content starts on the line after its dash');
  t.equal(lines.key(w.spec.containers[0], 'ports'), 9);
  t.equal(lines.item(w.spec.containers[0]!.ports, 0), 10);
  t.equal(lines.key(w.spec.containers[0]!.ports[0], 'protocol'), 11);
  t.equal(lines.key(w.spec, 'tags'), 14);
  t.equal(lines.key(w.spec.tags, 'b'), 14, 'flow style: the line of the key');
  t.equal(lines.item(w.spec.tags.b, 1), 14);
  const list = read.docs[2]!.value as object[];
  t.equal(lines.item(list, 0), 18);
  t.equal(list[1], list[2], 'an alias is the anchored value itself, as js-yaml makes it');
  t.equal(lines.of(list[2]), 19, 'and has the anchor\'s line');
  t.equal(lines.item(list, 2), 20, 'the alias item has its own');
  t.equal(lines.of({}), undefined, 'a value from elsewhere has none');
  t.equal(lines.key(w, 'nope'), undefined);
});

t.test('a flow mapping with a key and no value still places its keys', async (t) => {
  const read = ok(readYaml('m: {a, b: 2,\n  c}\n'));
  const m = (read.docs[0]!.value as { m: object }).m;
  t.strictSame(m, { a: null, b: 2, c: null });
  t.equal(read.lines.key(m, 'b'), 1);
  t.equal(read.lines.key(m, 'c'), 2);
});

t.test('syntax errors: the first, with its position, without text of the file', async (t) => {
  const cases: [text: string, line: number, column: number, message: string][] = [
    ['kind: gvc\nname: a\nname: b\n', 3, 1, 'duplicated mapping key'],
    ['a: 1\nsecret: *hunter2\n', 2, 17, 'unidentified alias'],
    ['a: !<tag:hunter2> x\n', 1, 20, 'unknown tag'],
    ['a: !hunter2 x\n', 1, 14, 'unknown tag'],
    ['a: [1, 2\n', 2, 1, 'unexpected end of the stream within a flow collection'],
  ];
  for (const [text, line, column, message] of cases) {
    const read = readYaml(text);
    t.notOk(read.ok, JSON.stringify(text));
    if (read.ok) continue;
    t.same(read.error, { line, column, message }, JSON.stringify(text));
    t.notMatch(read.error.message, /hunter2/, 'no text of the file');
  }
  t.ok(ok(readYaml('a: 1\na: 2\n', { json: true })), 'json: a repeated key wins, as in JSON.parse');
});

t.test('aliases: ordinary reuse is read, a billion laughs is refused', async (t) => {
  const block = '&c {name: app, image: x, ports: [{number: 80, protocol: http}], env: [{name: A, value: b}]}';
  const reuse = ['shared: ' + block, ...Array.from({ length: 300 }, (_, i) => `w${i}: *c`)].join('\n');
  t.ok(readYaml(reuse).ok, '300 aliases of a 12-node mapping');
  let laughs = 'a: &a [x, x, x, x, x, x, x, x, x]\n';
  for (let i = 1; i < 9; i++) {
    const prev = String.fromCharCode(96 + i);
    const next = String.fromCharCode(97 + i);
    laughs += `${next}: &${next} [${Array(9).fill(`*${prev}`).join(', ')}]\n`;
  }
  const read = readYaml(laughs);
  t.notOk(read.ok);
  if (!read.ok) t.same(read.error, { line: 1, column: 1, message: `its aliases expand to more than ${MAX_ALIAS_EXPANSION} nodes` });
  // Each alias of a 9-item list adds 9 nodes (10 written out, 1 as written): just within the bound, and past it.
  const many = (n: number): string => ['s: &s [1, 2, 3, 4, 5, 6, 7, 8, 9]', ...Array.from({ length: n }, (_, i) => `k${i}: *s`)].join('\n');
  const within = Math.floor(MAX_ALIAS_EXPANSION / 9);
  t.ok(readYaml(many(within)).ok, `${within} aliases add ${within * 9} nodes`);
  t.notOk(readYaml(many(within + 1)).ok, `${within + 1} aliases add ${(within + 1) * 9}`);
});

t.test('dumpYaml prints what the platform CLI prints', async (t) => {
  const { toSortedYamlString } = createRequire(import.meta.url)('@controlplane/cli/dist/src/util/format.js') as { toSortedYamlString(v: unknown): string };
  // Keys already in the CLI's order (it sorts them; svcproxy keeps its own order).
  const values: unknown[] = [
    [{ kind: 'endpoint', name: '1', a: 'yes', e: '', n: 1, s: 'a long line '.repeat(12), t: ['x', 2, true, null], u: { v: '0x1F', w: '2026-11-25' } }],
    { kind: 'x', name: 'multi\nline', description: ' leading space', tags: { 'svc/a': 'b: c', z: '#hash' } },
  ];
  for (const v of values) t.equal(dumpYaml(v), toSortedYamlString(v));
});
