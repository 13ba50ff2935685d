/**
 * The line reader (readPlainYaml) answers exactly what js-yaml's core schema reads, or declines:
 * hand-written edge cases and generated files (random records dumped by js-yaml in several styles,
 * with comments and blank lines strewn in), each compared with js-yaml's values and the document
 * lines the full parse gives (src/yaml.ts, itself tested against hand tables in yaml.test.ts). The
 * record files it must not decline are checked too, so that the quick path is the one taken.
 */
import t, { type Test } from 'tap';
import jsyaml from 'js-yaml';
import { coreScalar, readPlainYaml } from '../../src/config/yaml-fast.js';
import { readYaml } from '../../src/yaml.js';

/** js-yaml's documents (empty ones dropped) and the line each starts on, per the full parse. */
function reference(text: string): { docs: unknown[]; lines: number[] } {
  const docs = jsyaml.loadAll(text, undefined, { schema: jsyaml.CORE_SCHEMA }).filter((d) => d !== null && d !== undefined);
  const read = readYaml(text);
  if (!read.ok) throw new Error(read.error.message);
  const lines = read.docs.filter((d) => d.value !== null && d.value !== undefined).map((d) => d.line);
  return { docs, lines };
}

/** Reads `text` both ways; `true` when the reader took it (and then agreed), `false` when it declined. */
function agrees(t: Test, text: string, label: string): boolean {
  let ref: { docs: unknown[]; lines: number[] } | undefined;
  try {
    ref = reference(text);
  } catch {
    ref = undefined; // js-yaml refuses it: the reader must decline too
  }
  const got = readPlainYaml(text);
  if (got === undefined) return false;
  if (ref === undefined) {
    t.fail(`${label}: js-yaml refuses this text, the reader read it`, { text, got: got.docs });
    return true;
  }
  t.strictSame(got.docs, ref.docs, `${label}: same values`, { text });
  t.same(got.lines, ref.lines, `${label}: same lines`, { text });
  return true;
}

t.test('record files as they are written are read, with js-yaml\'s values', async (t) => {
  const text = [
    '# the bench configuration',
    'kind: org',
    'name: bench',
    '---',
    'kind: gvc',
    'name: bench',
    'alias: benchalias001',
    'spec:',
    '  staticPlacement:',
    '    locationLinks:',
    '      - //location/aws-us-east-2',
    '---   # a comment on the separator',
    '',
    'kind: workload',
    'name: w00000',
    'gvc: bench',
    'tags: {}',
    'description: "a quoted # that is no comment"',
    'spec:',
    '  type: standard   # trailing comment',
    '  containers:',
    '  - name: app',
    '    image: \'bench:1\'',
    '    env: []',
    '    ports:',
    '      -   number: 8080',
    '          protocol: http',
    '    args:',
    '      -',
    '      - "x"',
    '      - -1',
    '      - ~',
    '  defaultOptions:',
    '    autoscaling:',
    '      minScale: 1',
    '      metric: disabled',
    '      target: 0.5',
    '    debug: false',
    '  firewallConfig:',
    '    external:',
    '      inboundAllowCIDR:',
    '        - 0.0.0.0/0',
    '        - ::/0',
    '      note: a#b',
    '    "svc/timeoutSecondsOverride": 900',
    '    \'it\'\'s\': yes',
    '    8080: port',
    '    empty:',
    '    null: ~',
    '---',
  ].join('\n');
  t.ok(agrees(t, text, 'bench-like file'), 'taken, not declined');
  t.ok(agrees(t, text.replaceAll('\n', '\r\n'), 'CRLF'), 'CRLF line ends are taken too');
  t.ok(agrees(t, 'kind: org\nname: a', 'no final newline'));
  t.ok(agrees(t, '---\n---\nkind: org\n---\n# only a comment\n---\nkind: location\nname: x\n', 'empty documents'));
  t.ok(agrees(t, '', 'empty file'));
});

t.test('what the reader declines, js-yaml (or the full parse) reads', async (t) => {
  const declined = [
    'kind: org\nname: a\nname: b\n', // duplicate key
    'kind: org\n\tname: a\n', // tab
    'kind: org\nname: &a x\nother: *a\n', // anchor, alias
    'kind: org\nname: !!str 5\n', // tag
    'kind: org\ndescription: |\n  two\n  lines\n', // block scalar
    'kind: org\ndescription: >-\n  folded\n', // folded scalar
    'kind: org\ndescription: first\n  continued\n', // multi-line plain scalar
    'kind: org\ndescription: "first\n  continued"\n', // multi-line quoted scalar
    'kind: org\ndescription: "tab\\tescape"\n', // escapes
    'kind: org\nspec: { a: 1 }\n', // flow mapping with members
    'kind: org\nspec: [a, b]\n', // flow sequence with members
    'kind: org\nspec:\n  - - nested\n', // compact nested sequence
    '- kind: org\n  name: a\n', // a list document
    '  kind: org\n  name: a\n', // an indented document
    'just a scalar\n',
    '%YAML 1.2\n---\nkind: org\n',
    'kind: org\n...\n',
    '--- kind: org\n',
    'kind: org\nname: a: b\n',
    'kind: org\nname: a:\n',
    'kind: org\nkey with space: 1\n',
    'kind: org\n0x1F: hex key\n',
    'kind: org\n1.0: float key\n',
    'kind: org\nTrue: a key js-yaml writes as "true"\n',
    'kind: org\n__proto__: x\n',
    'kind: org\nname: "a"b\n',
    'kind: org\nname: "a"#b\n',
    'kind: org\nname: @x\n',
    'kind: org\nname: `x`\n',
    'kind: org\nname: - x\n',
    'kind: org\nspec:\n    a: 1\n  b: 2\n', // a dedent to no open level
    'kind: org\nspec:\n  scalar on its own line\n',
    'kind: org\r\nname: a\rb\r\n', // a lone CR
    'kind: org\nname: \u0007\n', // non-printable
  ];
  for (const text of declined) t.equal(readPlainYaml(text), undefined, JSON.stringify(text));
});

t.test('plain scalars are typed as js-yaml\'s core schema types them', async (t) => {
  const samples = ['~', 'null', 'Null', 'NULL', 'nULL', 'true', 'True', 'TRUE', 'tRUE', 'false', 'yes', 'no', 'on', 'off', 'y',
    '0', '-0', '+1', '007', '0o17', '0x1F', '0b101', '1_000', '12:30', '1.5', '-1.5e3', '1e3', '.5', '5.', '.inf', '-.Inf', '.NaN', '.nan',
    'nan', 'inf', '2026-11-25', '1.2.3', '-', '-x', 'f', 't', 'n', 'N', 'F', 'T', 'x'];
  for (const s of samples) {
    if (s !== '-') t.strictSame(coreScalar(s), (jsyaml.load(`v: ${s}`, { schema: jsyaml.CORE_SCHEMA }) as { v: unknown }).v, s);
    const text = `kind: org\nv: ${s}\nlist:\n  - ${s}\n`;
    agrees(t, text, `scalar ${s}`);
  }
});

/** A small deterministic random source (mulberry32), so a failure can be reproduced. */
function random(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const STRINGS = ['', ' ', 'a b', 'a: b', 'a:b', 'a #b', 'a#b', '#a', '-', '- a', '-1', '::/0', '0.0.0.0/0', 'true', 'True', 'yes', 'null',
  '~', '0x1F', '1e3', '.inf', '007', '1_000', "it's", 'say "hi"', 'back\\slash', 'multi\nline', 'ünï ✓', '{a}', '[a]', '{}', '[]', '@x',
  '`x`', '%x', '&x', '*x', '!x', '|', '>', "'", '"', 'a,b', 'a]b', 'x:', '?x', '? x', ': x', 'trailing ', ' leading', '//location/x',
  'bench:1', 'http://a.b/c?d=e#f', '12:30', 'ends with #'];
const KEYS = ['kind', 'name', 'spec', 'a-b', 'a.b', 'a/b', 'svc/timeoutSecondsOverride', '8080', 'true', 'null', '0x1F', '1.0', 'a b',
  'it\'s', '"q"', '', 'ключ', '-x', '$ref', '_x'];

/** Strings as records hold them (names, images, CIDRs, paths): what the reader must take. */
const ORDINARY = ['app', 'bench:1', 'w00001', '0.0.0.0/0', '::/0', '//location/aws-us-east-2', '/health', 'http', 'a b c', 'true', '8080',
  "it's", 'x-y_z.q', 'ünï', 'GET', 'https://example.com/a?b=c'];

function value(rnd: () => number, depth: number, strings = STRINGS): unknown {
  const r = rnd();
  if (depth < 3 && r < 0.2) return object(rnd, depth + 1, strings);
  if (depth < 3 && r < 0.3) return Array.from({ length: Math.floor(rnd() * 4) }, () => value(rnd, depth + 1, strings));
  if (r < 0.75) return strings[Math.floor(rnd() * strings.length)];
  if (r < 0.85) return Math.floor((rnd() - 0.5) * 100000) / (rnd() < 0.5 ? 1 : 100);
  if (r < 0.95) return rnd() < 0.5;
  return null;
}

function object(rnd: () => number, depth: number, strings = STRINGS): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  const n = Math.floor(rnd() * 5);
  const keys = strings === STRINGS ? KEYS : KEYS.slice(0, 8);
  for (let i = 0; i < n; i++) out[keys[Math.floor(rnd() * keys.length)]!] = value(rnd, depth, strings);
  return out;
}

/** Comments and blank lines at random places between lines (never inside a block scalar's lines). */
function strew(rnd: () => number, text: string): string {
  if (/[|>][-+]?\n/.test(text)) return text;
  return text.split('\n').map((line) => {
    const r = rnd();
    const indent = ' '.repeat(Math.floor(rnd() * 6));
    if (r < 0.05) return `${indent}# a comment\n${line}`;
    if (r < 0.1) return `\n${line}`;
    return line;
  }).join('\n');
}

/** js-yaml's ways of writing the same records: indents, sequences under their key or not, quotes. */
const STYLES: readonly jsyaml.DumpOptions[] = [
  {},
  { indent: 4, noArrayIndent: true },
  { quotingType: '"' },
  { noArrayIndent: true, forceQuotes: true, lineWidth: -1 },
];

t.test('generated files: the reader agrees with js-yaml whenever it reads one', async (t) => {
  for (const [label, strings, least] of [['tricky strings', STRINGS, 0.25], ['ordinary strings', ORDINARY, 0.95]] as const) {
    const rnd = random(20261127);
    let taken = 0;
    const total = 400;
    for (let i = 0; i < total; i++) {
      const records = Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => ({ kind: 'workload', name: `w${i}`, ...object(rnd, 0, strings) }));
      const style = i % 4;
      const docs = records.map((r) => jsyaml.dump(r, STYLES[style]));
      let text = docs.join('---\n');
      if (i % 3 === 0) text = strew(rnd, text);
      if (agrees(t, text, `${label}: generated ${i} (style ${style})`)) taken++;
    }
    t.ok(taken >= total * least, `${label}: the reader took ${taken} of ${total} generated files`);
  }
});
