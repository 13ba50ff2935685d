/**
 * Routing under attack. Never an open proxy: absolute-form targets and CONNECT to foreign hosts, to
 * loopback addresses or to non-tcp ports get 404 and reach no one. Host tricks: two Hosts, userinfo,
 * an empty or missing Host, bad ports. And every path-normalization bypass tried against an
 * authorization exclusion and against domain routes, raw on the wire (encoded dots, mixed case,
 * `;` parameters, encoded and raw slashes and backslashes, double encoding, overlong UTF-8,
 * absolute form): each spelling is either rejected with 400, or checked, or excluded — and then the
 * app receives exactly the path that was matched, so the proxy and the app never disagree about
 * which path a request is for.
 */
import t, { type Test } from 'tap';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { startGrpcAuth } from '../fixtures/extauth/servers.js';
import { raw, startRecorder } from './fixtures.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const DOMAIN = 'shop.example.com';

async function setup(t: Test) {
  const api = await startRecorder(t);
  const web = await startRecorder(t);
  // Denies everything: a request that reaches the api app was not checked.
  const auth = await startGrpcAuth(t, () => ({ status: { code: 7 } }));
  const recs = [
    ...records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${api.port}`] },
      tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': auth.port, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false },
      workloadSpec: { sidecar: { envoy: { excludedExternalAuth: [{ match: { prefix: '/public' } }] } } },
    }),
    {
      kind: 'workload', name: 'web', gvc: 'shop',
      spec: { type: 'standard', containers: [{ name: 'web', image: 'web:1', ports: [{ number: 3000, protocol: 'http' }] }], firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } } },
    },
    { kind: 'deployment', name: 'web', gvc: 'shop', status: { locations: [{ name: 'aws-us-east-2', replicas: [{ name: 'web-0', address: `127.0.0.1:${web.port}` }] }] } },
    {
      kind: 'domain', name: DOMAIN,
      spec: { ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: '//gvc/shop/workload/web' }, { prefix: '/admin', workloadLink: '//gvc/shop/workload/api' }] }] },
    },
  ];
  const plane = await startPlane(t, recs);
  await plane.ready();
  return { api, web, auth, plane };
}

const get = (target: string, host: string, extra = ''): string => `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`;

t.test('never an open proxy: absolute-form and CONNECT to anything but a workload get 404', async (t) => {
  const { api, web, plane } = await setup(t);
  const local = `127.0.0.1:${api.port}`;
  const cases: [name: string, bytes: string, status: number][] = [
    ['absolute-form to a foreign host', get('http://example.com/', CANONICAL), 404],
    ['absolute-form to https on a foreign host', get('https://example.com:443/x', CANONICAL), 404],
    ['absolute-form to the app\'s own loopback address', get(`http://${local}/`, CANONICAL), 404],
    ['absolute-form with userinfo', get(`http://user:pw@${CANONICAL}/`, CANONICAL), 400],
    ['absolute-form with an unknown scheme', get(`ftp://${CANONICAL}/`, CANONICAL), 400],
    ['CONNECT to a foreign host', `CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n`, 404],
    ['CONNECT to the app\'s loopback port', `CONNECT ${local} HTTP/1.1\r\nHost: ${local}\r\n\r\n`, 404],
    ['CONNECT to a workload\'s http port', `CONNECT ${CANONICAL}:8080 HTTP/1.1\r\nHost: ${CANONICAL}:8080\r\n\r\n`, 404],
    ['CONNECT to an internal name', `CONNECT api.shop.internal.localhost:8080 HTTP/1.1\r\nHost: api.shop.internal.localhost:8080\r\n\r\n`, 404],
    ['Host: the app\'s address', get('/', local), 404],
    ['Host: a foreign name', get('/', 'example.com'), 404],
  ];
  for (const [name, bytes, status] of cases) {
    const answer = await raw(plane.port, bytes);
    t.same(answer.statuses, [status], `${name}: ${status}`);
  }
  t.equal(api.seen.length + web.seen.length, 0, 'nothing reached any app');

  // Absolute form names the target; the Host header loses (RFC 9112 §3.2.2) and is not trusted.
  const abs = await raw(plane.port, get(`http://${CANONICAL}/via-absolute`, 'example.com'));
  t.same(abs.statuses, [403], 'absolute-form to a workload is routed by its authority (here: checked, denied)');
});

t.test('Host tricks', async (t) => {
  const { api, web, auth, plane } = await setup(t);
  const cases: [name: string, bytes: string, status: number][] = [
    ['two Host headers', `GET /public/x HTTP/1.1\r\nHost: ${CANONICAL}\r\nHost: ${DOMAIN}\r\n\r\n`, 400],
    ['two Host headers, in other case', `GET /public/x HTTP/1.1\r\nhost: ${CANONICAL}\r\nHOST: ${DOMAIN}\r\n\r\n`, 400],
    ['Host with userinfo', get('/public/x', `user@${CANONICAL}`), 400],
    ['Host with userinfo and a port', get('/public/x', `${CANONICAL}:80@evil.example`), 400],
    ['an empty Host', get('/public/x', ''), 404],
    ['no Host (HTTP/1.0)', 'GET /public/x HTTP/1.0\r\n\r\n', 404],
    ['Host with a path', get('/public/x', `${CANONICAL}/evil`), 404],
    ['Host with a bad port', get('/public/x', `${CANONICAL}:99999`), 404],
    ['Host with two ports', get('/public/x', `${CANONICAL}:80:81`), 404],
    ['Host with a space inside', get('/public/x', `api- ${ALIAS}.app.localhost`), 404],
  ];
  for (const [name, bytes, status] of cases) {
    const answer = await raw(plane.port, bytes);
    t.same(answer.statuses, [status], `${name}: ${status}`);
    t.ok(answer.closed, `${name}: closed`);
  }
  t.equal(api.seen.length + web.seen.length + auth.calls.length, 0, 'none was routed');
  const ok = await raw(plane.port, get('/public/x', `${CANONICAL.toUpperCase()}.:8080`));
  t.same(ok.statuses, [200], 'the control: case, a trailing dot and a port are fine');
});

t.test('path-normalization bypasses against an authorization exclusion (prefix /public)', async (t) => {
  const { api, auth, plane } = await setup(t);
  // Spellings of a protected path: each must be checked (and denied), under its normalized path.
  const checked = [
    '/admin', '//admin', '/public/../admin', '/public/%2e%2e/admin', '/public/%2E%2e/admin', '/public/.%2e/admin',
    '/public/%2e./admin', '/public/./../admin', '/./public/../admin', '/public/x/../../admin', '/public/../../../admin',
    '/public;x/../admin', '/%70ublic/../admin', '/PUBLIC/x', '/Public/x', '/admin?x=/public', '/admin?/public',
    '/publicx/../admin', `http://${CANONICAL}/public/../admin`, '/public/..', '/x/..%2e/admin',
  ];
  const rejected = [
    '/public%2F..%2Fadmin', '/public%2f..%2fadmin', '/public/..%2Fadmin', '/public/..;/admin', '/public/.;/admin', '/public/..%3b/admin',
    '/public/..%3B/admin', '/public%5C..%5Cadmin', '/public/..%5cadmin', '/public\\..\\admin', '/public/..%00/admin', '/public/%00',
    '/public/%', '/public/%zz/../admin', '/public/%2', '/%2fpublic', 'public/../admin', '*',
  ];
  // Excluded spellings: not checked, and the app receives the very path the exclusion matched.
  const excluded: [target: string, appSees: string][] = [
    ['/public/x', '/public/x'],
    ['/%70ublic/x', '/public/x'],
    ['/public//x/./y', '/public/x/y'],
    ['/public/%252e%252e/admin', '/public/%252e%252e/admin'],
    ['/public/%c0%ae%c0%ae/admin', '/public/%C0%AE%C0%AE/admin'],
    ['/public/..%252fadmin', '/public/..%252fadmin'],
    ['/public/%u002e%u002e/admin', undefined as unknown as string],
  ];
  for (const target of checked) {
    const before = auth.calls.length;
    const answer = await raw(plane.port, get(target, CANONICAL));
    t.same(answer.statuses, [403], `${target}: checked, denied`);
    t.equal(auth.calls.length - before, 1, `${target}: one check`);
    const seen = auth.calls.at(-1)?.attributes.request.http.path ?? '';
    t.notMatch(seen, /(^|\/)\.\.?(\/|$)|\/\/|%2e/i, `${target}: the auth server sees a normalized path (${seen})`);
  }
  for (const target of rejected) {
    const before = auth.calls.length;
    const answer = await raw(plane.port, get(target, CANONICAL));
    t.same(answer.statuses, [400], `${JSON.stringify(target)}: 400`);
    t.equal(auth.calls.length - before, 0, `${JSON.stringify(target)}: no check, not forwarded`);
  }
  for (const [target, appSees] of excluded) {
    const before = api.seen.length;
    const answer = await raw(plane.port, get(target, CANONICAL));
    if (appSees === undefined) {
      // `%u` is no percent-encoding: rejected as malformed.
      t.same(answer.statuses, [400], `${target}: 400`);
      continue;
    }
    t.same(answer.statuses, [200], `${target}: excluded, served`);
    t.equal(api.seen[before]?.url, appSees, `${target}: the app receives ${appSees}, the path the exclusion matched`);
  }
  t.ok(api.seen.every((s) => s.url.startsWith('/public/') || s.url === '/public'), 'everything the app received unchecked is under /public');
});

t.test('path-normalization bypasses against domain routes (/admin → the checked workload, / → web)', async (t) => {
  const { api, web, auth, plane } = await setup(t);
  const toAdmin = ['/admin', '//admin', '/admin/', '/./admin', '/x/../admin', '/%61dmin', '/%2e/admin', '/x/%2e%2e/admin', '/web/../admin/x', '/%61%64%6d%69%6e/x', '/x/.%2e/admin'];
  for (const target of toAdmin) {
    const before = auth.calls.length;
    const answer = await raw(plane.port, get(target, DOMAIN));
    t.same(answer.statuses, [403], `${target}: routed to the admin route, checked, denied`);
    t.equal(auth.calls.length - before, 1);
  }
  for (const target of ['/x%2F..%2Fadmin', '/x/..%2fadmin', '/x/..;/admin', '/x\\..\\admin', '/x/%2e%2e%5cadmin']) {
    t.same((await raw(plane.port, get(target, DOMAIN))).statuses, [400], `${target}: 400`);
  }
  const before = web.seen.length;
  t.same((await raw(plane.port, get('/ADMIN', DOMAIN))).statuses, [200], '/ADMIN: prefix routes are case-sensitive (as Envoy): the web route');
  t.equal(web.seen[before]?.url, '/ADMIN', 'and web receives /ADMIN as matched');
  t.notOk(web.seen.some((s) => /^\/admin(\/|$)/.test(s.url)), 'web never receives a path the admin route matches');
  t.equal(api.seen.length, 0, 'the admin app never received an unchecked request');
});
