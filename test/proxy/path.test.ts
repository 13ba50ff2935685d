import t from 'tap';
import { normalizePath, splitAbsoluteForm } from '../../src/proxy/path.js';
import { newRequestId, validRequestId } from '../../src/proxy/request-id.js';

/** [raw target, expected path + query, or `400` when it must be rejected]. */
const table: [string, string | 400][] = [
  // fast path: unchanged
  ['/', '/'],
  ['/a/b/c', '/a/b/c'],
  ['/static/app.min.js', '/static/app.min.js'],
  ['/a/b/', '/a/b/'],
  ['/a.b/c.', '/a.b/c.'],
  ['/a;b=c/d', '/a;b=c/d'],
  ['/a?x=1&y=%2F..//', '/a?x=1&y=%2F..//'],
  ['/?', '/?'],
  ['/a?', '/a?'],
  ['/a?b?c', '/a?b?c'],
  ['/caf\u00e9', '/caf\u00e9'],
  // the bypasses
  ['//admin', '/admin'],
  ['/public/../admin', '/admin'],
  ['/public/%2e%2e/admin', '/admin'],
  ['/public/%2E%2E/admin', '/admin'],
  ['/public/.%2e/admin', '/admin'],
  ['/public%2F..%2Fadmin', 400],
  ['/public%2f..%2fadmin', 400],
  ['/public/..;/admin', 400],
  ['/public/..;jsessionid=1/admin', 400],
  ['/public/.;/admin', 400],
  ['/public/%2e%2e;/admin', 400],
  ['/public/..%3B/admin', 400],
  ['/public/..%3b/admin', 400],
  ['/%2e%2e/', '/'],
  ['/%2e%2e', '/'],
  ['/a/./b', '/a/b'],
  ['/a/%2E/b', '/a/b'],
  ['/a/%2e/b', '/a/b'],
  // dot segments
  ['/a/b/../c', '/a/c'],
  ['/a/b/../../c', '/c'],
  ['/../../../etc/passwd', '/etc/passwd'],
  ['/..', '/'],
  ['/.', '/'],
  ['/./', '/'],
  ['/a/..', '/'],
  ['/a/b/..', '/a/'],
  ['/a/b/.', '/a/b/'],
  ['/a/b/./', '/a/b/'],
  ['/a/.../b', '/a/.../b'],
  ['/a/..b/c', '/a/..b/c'],
  ['/a/.b/c', '/a/.b/c'],
  ['/a/b;x/../c', '/a/c'],
  ['/a/..?x=/../', '/?x=/../'],
  // slashes
  ['///a///b//', '/a/b/'],
  ['//', '/'],
  ['/a//', '/a/'],
  ['//.//..//a', '/a'],
  // percent-decoding: unreserved decoded, others upper-cased and kept
  ['/%41%62%63', '/Abc'],
  ['/%7e%2D%5f%2E%30', '/~-_.0'],
  ['/a%20b', '/a%20b'],
  ['/a%3a%3Fb', '/a%3A%3Fb'],
  ['/%25', '/%25'],
  ['/%252e%252e/x', '/%252e%252e/x'],
  ['/%c3%a9', '/%C3%A9'],
  ['/a%0ab', '/a%0Ab'],
  ['/a%2ejs?q=%2e', '/a.js?q=%2e'],
  // malformed escapes
  ['/a%', 400],
  ['/a%4', 400],
  ['/a%zz', 400],
  ['/a%4/b', 400],
  ['/%%32%65', 400],
  // encoded slash / backslash, any case
  ['/a%5Cb', 400],
  ['/a%5cb', 400],
  ['/a\\b', 400],
  ['/a/..\\..\\b', 400],
  // NUL and control characters
  ['/a%00b', 400],
  ['/a\u0000b', 400],
  ['/a\nb', 400],
  ['/a\rb', 400],
  ['/a\tb', 400],
  ['/a\u007fb', 400],
  ['/a?x=\u0001', 400],
  // fragments
  ['/a#b', 400],
  ['/a?b#c', 400],
  ['#', 400],
  // not origin-form
  ['', 400],
  ['a/b', 400],
  ['*', 400],
  ['example.com:443', 400],
  ['../a', 400],
  ['%2F', 400],
  // absolute-form: the path is normalized, the authority split off
  ['http://example.com/a/../b?q=1', '/b?q=1'],
  ['HTTPS://example.com:8443//x', '/x'],
  ['http://example.com', '/'],
  ['http://example.com?q', '/?q'],
  ['http://user@example.com/', 400],
  ['http:///x', 400],
  ['ftp://example.com/x', 400],
  ['http://example.com/%2F', 400],
];

t.test('normalizePath table', async (t) => {
  for (const [raw, want] of table) {
    const got = normalizePath(raw);
    if (want === 400) {
      t.equal(got.ok, false, `${JSON.stringify(raw)} is rejected`);
      if (!got.ok) t.type(got.reason, 'string');
    } else {
      t.same(got.ok ? got.path + got.query : got, want, JSON.stringify(raw));
    }
  }
});

t.test('query kept as sent, path and query split', async (t) => {
  t.same(normalizePath('/a/./b?x=%2e%2E&y=/..//#'), { ok: false, reason: '"#" in request target' });
  t.same(normalizePath('/a/./b?x=%2e%2E&y=/..//'), { ok: true, path: '/a/b', query: '?x=%2e%2E&y=/..//' });
  t.same(normalizePath('/a'), { ok: true, path: '/a', query: '' });
});

t.test('reasons name the problem', async (t) => {
  const reason = (raw: string): string => {
    const r = normalizePath(raw);
    return r.ok ? 'ok' : r.reason;
  };
  t.match(reason('/a%2Fb'), /encoded slash/);
  t.match(reason('/a%5cb'), /encoded backslash/);
  t.match(reason('/a\\b'), /backslash/);
  t.match(reason('/..;/x'), /dot segment/);
  t.match(reason('/%00'), /NUL/);
  t.match(reason('/\u0000'), /NUL/);
  t.match(reason('/\u0007'), /control character/);
  t.match(reason('/#'), /#/);
  t.match(reason('x'), /start with "\/"/);
  t.match(reason('/%zz'), /percent-encoding/);
});

t.test('fast path returns the input unchanged', async (t) => {
  const raw = '/api/v1/users/123/profile.json';
  const r = normalizePath(raw);
  t.ok(r.ok && r.path === raw && r.query === '');
});

t.test('splitAbsoluteForm', async (t) => {
  t.same(splitAbsoluteForm('http://Example.com:80/a?b'), { authority: 'Example.com:80', target: '/a?b' });
  t.same(splitAbsoluteForm('https://[::1]:8443'), { authority: '[::1]:8443', target: '/' });
  t.same(splitAbsoluteForm('http://h?q=1'), { authority: 'h', target: '/?q=1' });
  t.equal(splitAbsoluteForm('/a'), undefined);
  t.equal(splitAbsoluteForm('ws://h/'), undefined);
  t.equal(splitAbsoluteForm('http://'), undefined);
  t.equal(splitAbsoluteForm('xhttp://h/'), undefined);
});

/** mulberry32: deterministic, so a failing case reproduces. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = [
  '/', '/', '/', '//', '.', '..', '%2e', '%2E', '%2e%2e', 'a', 'b', 'admin', '%41', '%7e', '%7E',
  '%20', '%c3%a9', '%25', ';x', '-', '_', '~', '%3b', '%3B', '.js', '%2f', '%5c', '%00', '\\', '?',
  '#', '%', '%4', 'é', '...', ':',
];

t.test('property: idempotent, no dot segments, no doubled slash', async (t) => {
  const random = seeded(20240601);
  let accepted = 0;
  for (let n = 0; n < 20000; n++) {
    let raw = '/';
    const len = 1 + Math.floor(random() * 10);
    for (let i = 0; i < len; i++) raw += PIECES[Math.floor(random() * PIECES.length)];
    const once = normalizePath(raw);
    if (!once.ok) continue;
    accepted++;
    const { path, query } = once;
    const twice = normalizePath(path);
    if (!twice.ok || twice.path !== path || twice.query !== '') {
      t.fail(`not idempotent: ${JSON.stringify(raw)} → ${JSON.stringify(path)} → ${JSON.stringify(twice)}`);
      return;
    }
    const bad =
      !path.startsWith('/') ||
      path.includes('//') ||
      path.includes('/./') ||
      path.includes('/../') ||
      path.endsWith('/.') ||
      path.endsWith('/..') ||
      /%(2e|2f|5c|00)/i.test(path) ||
      /%[0-9A-F]?[a-f]/.test(path) ||
      path.includes('?') ||
      !raw.endsWith(query);
    if (bad) {
      t.fail(`bad output: ${JSON.stringify(raw)} → ${JSON.stringify(path)} + ${JSON.stringify(query)}`);
      return;
    }
  }
  t.ok(accepted > 2000, `enough accepted samples (${accepted})`);
});

t.test('request ids', async (t) => {
  const table: [unknown, boolean][] = [
    ['abc', true],
    ['A-Z_a.z-0.9', true],
    ['x'.repeat(128), true],
    ['x'.repeat(129), false],
    ['', false],
    ['a b', false],
    ['a/b', false],
    ['a\nb', false],
    ['é', false],
    ['550e8400-e29b-41d4-a716-446655440000', true],
    [undefined, false],
  ];
  for (const [s, want] of table) t.equal(validRequestId(s as string | undefined), want, JSON.stringify(s));

  const ids = new Set<string>();
  for (let i = 0; i < 1000; i++) ids.add(newRequestId());
  t.equal(ids.size, 1000, 'unique');
  for (const id of ids) if (!validRequestId(id)) t.fail(`generated id is not valid: ${id}`);
  // 1,000 ids draw the pooled random bytes (256 ids a fill) four times over.
  const V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  t.equal([...ids].filter((id) => V4.test(id)).length, 1000, 'every generated id is a version-4 UUID');
  const spread = Array.from({ length: 36 }, (_, i) => new Set([...ids].map((id) => id[i])).size);
  t.same(spread.map((n, i) => (n >= 14 ? 'random' : [8, 13, 18, 23].includes(i) ? (n === 1 ? 'dash' : n) : i === 14 ? (n === 1 ? 'version' : n) : i === 19 ? (n === 4 ? 'variant' : n) : n)),
    Array.from({ length: 36 }, (_, i) => ([8, 13, 18, 23].includes(i) ? 'dash' : i === 14 ? 'version' : i === 19 ? 'variant' : 'random')),
    'every random position takes (nearly) all 16 values; version and variant fixed');

  const a = newRequestId(seeded(1));
  t.equal(a, newRequestId(seeded(1)), 'deterministic with an injected random source');
  t.match(a, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  t.ok(validRequestId(a));
});
