/** The Envoy route-match subset of `excludedExternalAuth`, as tables. */
import t from 'tap';
import {
  compileExclusion, compileExclusions, compileFullRegex, compileHeaderMatcher, compileStringMatcher, firstQueryValue, rawHeaderLookup, type MatchInput,
} from '../../src/extauth/exclusions.js';

function input(path: string, opts: { query?: string; headers?: string[]; listenerPort?: number; targetPort?: number } = {}): MatchInput {
  return {
    path,
    query: opts.query ?? '',
    header: rawHeaderLookup(opts.headers ?? [], 'api.example'),
    listenerPort: opts.listenerPort ?? 8080,
    targetPort: opts.targetPort ?? 3000,
  };
}

t.test('path rules', async (t) => {
  const cases: [match: Record<string, unknown>, path: string, expect: boolean][] = [
    [{ prefix: '/public' }, '/public', true],
    [{ prefix: '/public' }, '/public/x', true],
    [{ prefix: '/public' }, '/publicity', true],
    [{ prefix: '/public/' }, '/publicity', false],
    [{ prefix: '/public' }, '/PUBLIC/x', false],
    [{ prefix: '/public', case_sensitive: false }, '/PUBLIC/x', true],
    [{ prefix: '/public', case_sensitive: true }, '/Public', false],
    [{ prefix: '/' }, '/anything', true],
    [{ path: '/health' }, '/health', true],
    [{ path: '/health' }, '/health/', false],
    [{ path: '/health' }, '/healthz', false],
    [{ path: '/Health', case_sensitive: false }, '/HEALTH', true],
    [{ safe_regex: { regex: '/v[0-9]+/status' } }, '/v12/status', true],
    [{ safe_regex: { regex: '/v[0-9]+/status' } }, '/v12/status/x', false, ],
    [{ safe_regex: { regex: '/v[0-9]+/status' } }, '/x/v1/status', false],
    [{ safe_regex: { regex: '/a|/b' } }, '/b', true],
    [{ safe_regex: { regex: '/a|/b' } }, '/ab', false],
    [{ safe_regex: { regex: '/img/.*' }, case_sensitive: false }, '/IMG/x', false],
    [{ safe_regex: { regex: '(?i)/img/.*' } }, '/IMG/x', true],
  ];
  for (const [match, path, expect] of cases) {
    t.equal(compileExclusion({ match })(input(path)), expect, `${JSON.stringify(match)} ${path}`);
  }
});

t.test('header matchers (Envoy semantics, missing headers, invert)', async (t) => {
  const H = (headers: string[]) => input('/x', { headers });
  const cases: [matcher: Record<string, unknown>, headers: string[], expect: boolean][] = [
    [{ name: 'x-a', exact_match: 'v' }, ['X-A', 'v'], true],
    [{ name: 'x-a', exact_match: 'v' }, ['x-a', 'V'], false],
    [{ name: 'x-a', exact_match: 'v' }, [], false],
    [{ name: 'x-a', exact_match: 'v', invert_match: true }, ['x-a', 'w'], true],
    [{ name: 'x-a', exact_match: 'v', invert_match: true }, ['x-a', 'v'], false],
    [{ name: 'x-a', exact_match: 'v', invert_match: true }, [], false],
    [{ name: 'x-a', exact_match: '', treat_missing_header_as_empty: true }, [], true],
    [{ name: 'x-a', prefix_match: 'Bear' }, ['x-a', 'Bearer x'], true],
    [{ name: 'x-a', suffix_match: '.css' }, ['x-a', 'site.css'], true],
    [{ name: 'x-a', contains_match: 'mid' }, ['x-a', 'a-mid-b'], true],
    [{ name: 'x-a', safe_regex_match: { regex: '[0-9]+' } }, ['x-a', '123'], true],
    [{ name: 'x-a', safe_regex_match: { regex: '[0-9]+' } }, ['x-a', '123a'], false],
    [{ name: 'x-a', present_match: true }, ['x-a', ''], true],
    [{ name: 'x-a', present_match: true }, [], false],
    [{ name: 'x-a', present_match: false }, [], true],
    [{ name: 'x-a', present_match: false }, ['x-a', '1'], false],
    [{ name: 'x-a', present_match: true, invert_match: true }, [], true],
    [{ name: 'x-a', present_match: true, invert_match: true }, ['x-a', '1'], false],
    [{ name: 'x-a' }, ['x-a', 'anything'], true],
    [{ name: 'x-a' }, [], false],
    [{ name: 'x-a', string_match: { exact: 'V', ignore_case: true } }, ['x-a', 'v'], true],
    [{ name: 'x-a', string_match: { exact: 'V' } }, ['x-a', 'v'], false],
    [{ name: 'x-a', string_match: { prefix: 'ab' } }, ['x-a', 'abc'], true],
    [{ name: 'x-a', string_match: { suffix: 'BC', ignore_case: true } }, ['x-a', 'abc'], true],
    [{ name: 'x-a', string_match: { contains: 'b' } }, ['x-a', 'abc'], true],
    [{ name: 'x-a', string_match: { safe_regex: { regex: 'a.c' } } }, ['x-a', 'abc'], true],
    [{ name: 'x-a', exact_match: 'one,two' }, ['x-a', 'one', 'X-A', 'two'], true],
    [{ name: ':authority', exact_match: 'api.example' }, [], true],
    [{ name: 'host', exact_match: 'api.example' }, [], true],
  ];
  for (const [matcher, headers, expect] of cases) {
    t.equal(compileHeaderMatcher(matcher)(H(headers)), expect, `${JSON.stringify(matcher)} ${JSON.stringify(headers)}`);
  }
});

t.test('query parameters', async (t) => {
  const cases: [matcher: Record<string, unknown>, query: string, expect: boolean][] = [
    [{ name: 'debug', present_match: true }, '?debug', true],
    [{ name: 'debug', present_match: true }, '?debug=1', true],
    [{ name: 'debug', present_match: true }, '?x=debug', false],
    [{ name: 'debug', present_match: true }, '', false],
    [{ name: 'v', string_match: { exact: '2' } }, '?v=2', true],
    [{ name: 'v', string_match: { exact: '2' } }, '?v=3&v=2', false],
    [{ name: 'v', string_match: { exact: 'a b' } }, '?v=a%20b', true],
    [{ name: 'v', string_match: { prefix: 'x' } }, '?a=1&v=xyz', true],
    [{ name: 'v' }, '?v=', true],
  ];
  for (const [matcher, query, expect] of cases) {
    t.equal(compileExclusion({ match: { prefix: '/', query_parameters: [matcher] } })(input('/x', { query })), expect, `${JSON.stringify(matcher)} ${query}`);
  }
  t.equal(firstQueryValue('?a=1&a=2', 'a'), '1');
  t.equal(firstQueryValue('?a=%zz', 'a'), '%zz', 'a bad escape is kept');
  t.equal(firstQueryValue('?a+b=1', 'a+b'), '1', '+ is not a space');
});

t.test('port, svcPort, and all members together', async (t) => {
  t.equal(compileExclusion({ port: 8080 })(input('/x', { listenerPort: 8080 })), true);
  t.equal(compileExclusion({ port: 8080 })(input('/x', { listenerPort: 8443 })), false);
  t.equal(compileExclusion({ svcPort: 3000 })(input('/x', { targetPort: 3000 })), true);
  t.equal(compileExclusion({ svcPort: 3000 })(input('/x', { targetPort: 3001 })), false);
  const both = compileExclusion({ match: { prefix: '/metrics' }, svcPort: 9090 });
  t.equal(both(input('/metrics', { targetPort: 9090 })), true);
  t.equal(both(input('/metrics', { targetPort: 3000 })), false, 'every member must match');
  t.equal(both(input('/other', { targetPort: 9090 })), false);
  t.equal(compileExclusion({})(input('/x')), false, 'an empty entry excludes nothing');
});

t.test('lists: GVC and workload, OR; broken entries never match', async (t) => {
  const problems: string[] = [];
  const any = compileExclusions(
    [
      [{ match: { prefix: '/a' } }],
      [{ match: { path: '/b' } }, { match: { safe_regex: { regex: '(' } } }, 'nonsense', { match: { prefix: '/c', headers: [{ exact_match: 'x' }] } }],
    ],
    problems,
  )!;
  t.equal(problems.length, 3, problems.join('; '));
  t.equal(any(input('/a/1')), true);
  t.equal(any(input('/b')), true);
  t.equal(any(input('/c')), false, 'a broken rule fails closed: the request is checked');
  t.equal(any(input('/z')), false);
  t.equal(compileExclusions([undefined, []], []), undefined, 'nothing to match: no matcher');
  const p2: string[] = [];
  t.equal(compileExclusions([{ not: 'a list' }, undefined], p2), undefined);
  t.equal(p2.length, 1);
});

t.test('string matchers and regexes', async (t) => {
  t.throws(() => compileStringMatcher({}));
  t.equal(compileFullRegex('a+').test('aaa'), true);
  t.equal(compileFullRegex('a+').test('aaab'), false);
  t.equal(compileFullRegex('(?i)abc').test('ABC'), true);
  t.equal(compileFullRegex('(?s)a.b').test('a\nb'), true);
});
