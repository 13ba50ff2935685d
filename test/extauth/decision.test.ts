/** What an authorization answer means (gRPC CheckResponse, HTTP status), as tables. */
import t from 'tap';
import { actionOf, deniedHeaders, denyStatus, fromCheckResponse, fromHttpResponse, okMutations } from '../../src/extauth/decision.js';
import { authWire, type CheckResponseObject, type HeaderValueOptionObject } from '../../src/extauth/proto.js';

const codes = authWire().statusCodes;
const hv = (key: string, value: string, extra: Partial<HeaderValueOptionObject> = {}): HeaderValueOptionObject => ({
  header: { key, value },
  append: null,
  append_action: 'APPEND_IF_EXISTS_OR_ADD',
  keep_empty_value: false,
  ...extra,
});
const ok = (o: Partial<NonNullable<CheckResponseObject['ok_response']>>): NonNullable<CheckResponseObject['ok_response']> => ({
  headers: [], headers_to_remove: [], response_headers_to_add: [], query_parameters_to_set: [], query_parameters_to_remove: [], ...o,
});

t.test('actionOf: append wins when present, append_action otherwise, default set', async (t) => {
  const cases: [Pick<HeaderValueOptionObject, 'append' | 'append_action'>, string][] = [
    [{ append: null, append_action: 'APPEND_IF_EXISTS_OR_ADD' }, 'set'],
    [{ append: { value: true }, append_action: 'APPEND_IF_EXISTS_OR_ADD' }, 'append'],
    [{ append: { value: false }, append_action: 'ADD_IF_ABSENT' }, 'set'],
    [{ append: null, append_action: 'ADD_IF_ABSENT' }, 'add-if-absent'],
    [{ append: null, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }, 'set'],
    [{ append: null, append_action: 'OVERWRITE_IF_EXISTS' }, 'overwrite-if-exists'],
    [{ append: null, append_action: 3 }, 'overwrite-if-exists'],
  ];
  for (const [option, expect] of cases) t.equal(actionOf(option), expect, JSON.stringify(option));
});

t.test('okMutations over the current request headers', async (t) => {
  const existing = { 'x-a': '1', 'x-b': '2', authorization: 'secret', ':path': '/x' };
  const m = okMutations(
    ok({
      headers: [
        hv('X-New', 'n'),
        hv('x-a', 'A', { append: { value: true } }),
        hv('x-a', 'B', { append: { value: true } }),
        hv('x-b', 'no', { append_action: 'ADD_IF_ABSENT' }),
        hv('x-c', 'no', { append_action: 'OVERWRITE_IF_EXISTS' }),
        hv('x-b', 'yes', { append_action: 'OVERWRITE_IF_EXISTS' }),
        hv('x-empty', ''),
        hv('x-kept-empty', '', { keep_empty_value: true }),
        hv('host', 'evil'),
        hv('content-length', '0'),
        hv('x-utf8', 'é'),
      ],
      headers_to_remove: ['Authorization', 'x-new', 'host', ':path'],
      response_headers_to_add: [hv('x-r', '1'), hv('x-r', '2', { append: { value: true } }), hv('transfer-encoding', 'chunked')],
      query_parameters_to_set: [{ key: 'a', value: '1' }, { key: 'gone', value: 'x' }, { key: '', value: 'y' }],
      query_parameters_to_remove: ['gone', 'b'],
    }),
    existing,
  )!;
  t.same(Object.fromEntries(m.upstreamSet), {
    'x-a': '1,A,B',
    'x-b': 'yes',
    'x-kept-empty': '',
    'x-utf8': Buffer.from('é', 'utf8').toString('latin1'),
  });
  t.same(m.upstreamRemove, ['authorization', 'x-new']);
  t.same(m.responseHeaders, [['x-r', '1', 'set'], ['x-r', '2', 'append']]);
  t.same(m.querySet, [['a', '1']]);
  t.same(m.queryRemove, ['gone', 'b']);
  t.equal(okMutations(ok({}), existing), undefined, 'nothing to do');
  t.throws(() => okMutations(ok({ headers: [hv('bad name', 'x')] }), {}), 'an invalid header is an error');
  t.throws(() => okMutations(ok({ headers: [hv('x', 'a\nb')] }), {}));
});

t.test('fromCheckResponse', async (t) => {
  const base = { status: { code: 0, message: '' } };
  t.same(fromCheckResponse({ ...base, http_response: 'ok_response', ok_response: ok({}) }, {}, codes), { kind: 'ok', mutations: undefined });
  t.same(fromCheckResponse({ status: null }, {}, codes), { kind: 'ok', mutations: undefined }, 'no status: code 0, OK (proto3 default)');
  t.same(fromCheckResponse({ status: { code: 7, message: 'no' } }, {}, codes), { kind: 'denied', status: 403, headers: {}, body: '' });
  t.same(fromCheckResponse({ status: { code: 16, message: '' }, http_response: 'ok_response', ok_response: ok({}) }, {}, codes).kind, 'denied', 'non-OK denies whatever else came');
  const denied = fromCheckResponse(
    {
      status: { code: 7, message: '' },
      http_response: 'denied_response',
      denied_response: { status: { code: 'TooManyRequests' }, headers: [hv('retry-after', '5'), hv('connection', 'close')], body: 'slow down' },
    },
    {},
    codes,
  );
  t.same(denied, { kind: 'denied', status: 429, headers: { 'retry-after': '5' }, body: 'slow down' });
  const statusCases: [unknown, number][] = [[{ code: 'Empty' }, 403], [{ code: 'Continue' }, 403], [null, 403], [{ code: 418 }, 418], [{ code: '451' }, 451], [{ code: 'Found' }, 302]];
  for (const [status, expect] of statusCases) {
    const d = fromCheckResponse({ status: { code: 7, message: '' }, http_response: 'denied_response', denied_response: { status, headers: [], body: '' } as never }, {}, codes);
    t.equal(d.kind === 'denied' && d.status, expect, JSON.stringify(status));
  }
  t.equal(fromCheckResponse({ ...base, http_response: 'ok_response', ok_response: ok({ headers: [hv('x', '\r')] }) }, {}, codes).kind, 'error');
});

t.test('fromHttpResponse', async (t) => {
  t.same(fromHttpResponse(200, { 'x-auth-user': 'u' }, Buffer.alloc(0), []), { kind: 'ok', mutations: undefined }, 'no prefixes: nothing copied');
  const d = fromHttpResponse(200, { 'x-auth-user': 'u', 'x-auth-multi': ['a', 'b'], 'x-other': 'o', 'content-length': '0', 'x-envoy-auth-headers-to-remove': 'x-gone, X-Auth-Multi' }, Buffer.alloc(0), ['x-auth-']);
  t.same(d, { kind: 'ok', mutations: { upstreamSet: [['x-auth-user', 'u']], upstreamRemove: ['x-gone', 'x-auth-multi'], responseHeaders: undefined, querySet: [], queryRemove: [] } });
  const cases: [number, string][] = [[201, 'denied'], [204, 'denied'], [301, 'denied'], [401, 'denied'], [403, 'denied'], [499, 'denied'], [500, 'error'], [502, 'error'], [503, 'error'], [599, 'error']];
  for (const [status, kind] of cases) t.equal(fromHttpResponse(status, {}, Buffer.alloc(0), []).kind, kind, String(status));
  const denied = fromHttpResponse(401, { 'www-authenticate': 'Basic', 'transfer-encoding': 'chunked', 'set-cookie': ['a=1', 'b=2'] }, Buffer.from('no'), []);
  t.same(denied, { kind: 'denied', status: 401, headers: { 'www-authenticate': 'Basic', 'set-cookie': ['a=1', 'b=2'] }, body: Buffer.from('no') });
});

t.test('deniedHeaders and denyStatus', async (t) => {
  t.same(deniedHeaders([hv('X-A', '1'), hv('x-a', '2'), hv('x-b', '1'), hv('x-b', '2', { append: { value: true } }), hv('x y', 'bad'), hv('x-c', 'a\r\nb')]), { 'x-a': '2', 'x-b': ['1', '2'] });
  t.equal(denyStatus(undefined), 403);
  t.equal(denyStatus(0), 403);
  t.equal(denyStatus(199), 403);
  t.equal(denyStatus(200), 200);
  t.equal(denyStatus(599), 599);
  t.equal(denyStatus(600), 403);
});
