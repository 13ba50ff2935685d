/** The twelve external-auth tags compiled with their defaults, as a table. */
import t from 'tap';
import { compileExtAuthTags, EXTAUTH_DEFAULTS, authority } from '../../src/extauth/tags.js';

t.test('no address, no config', async (t) => {
  t.same(compileExtAuthTags({}, 'svc'), { config: undefined, problems: [] });
  t.equal(compileExtAuthTags({ 'svc/externalAuthPort': '80' }, 'svc').config, undefined);
  t.equal(compileExtAuthTags({ 'svc/externalAuthAddress': '' }, 'svc').config, undefined);
  t.equal(compileExtAuthTags({ 'svc/externalAuthAddress': 'a.example' }, 'cpln').config, undefined, 'the vendor prefix counts');
});

t.test('defaults', async (t) => {
  const { config, problems } = compileExtAuthTags({ 'svc/externalAuthAddress': 'auth.example' }, 'svc');
  t.same(problems, []);
  t.same(config, {
    address: 'auth.example',
    port: 443,
    protocol: 'grpc',
    scheme: 'https',
    timeoutMs: 1000,
    failureAllow: true,
    packAsBytes: false,
    removeRequestBody: false,
    includePeerCert: false,
    pathPrefix: '',
    upstreamHeaderPrefixes: [],
  });
  t.ok(Object.isFrozen(config));
  t.equal(EXTAUTH_DEFAULTS.port, 443);
});

const A = { 'cpln/externalAuthAddress': '10.0.0.9' };
const cases: [tags: Record<string, string>, expect: Record<string, unknown>][] = [
  [{ 'cpln/externalAuthPort': '9001' }, { port: 9001 }],
  [{ 'cpln/externalAuthProtocol': 'http' }, { protocol: 'http' }],
  [{ 'cpln/externalAuthScheme': 'http' }, { scheme: 'http' }],
  [{ 'cpln/externalAuthTimeout': '250ms' }, { timeoutMs: 250 }],
  [{ 'cpln/externalAuthTimeout': '1.5s' }, { timeoutMs: 1500 }],
  [{ 'cpln/externalAuthTimeout': '2' }, { timeoutMs: 2000 }],
  [{ 'cpln/externalAuthTimeout': '1m' }, { timeoutMs: 60_000 }],
  [{ 'cpln/externalAuthFailureAllow': 'false' }, { failureAllow: false }],
  [{ 'cpln/externalAuthPackAsBytes': 'true' }, { packAsBytes: true }],
  [{ 'cpln/externalAuthRemoveRequestBody': 'true' }, { removeRequestBody: true }],
  [{ 'cpln/externalAuthIncludePeerCert': 'true' }, { includePeerCert: true }],
  [{ 'cpln/externalAuthPathPrefix': '/authz' }, { pathPrefix: '/authz' }],
  [{ 'cpln/externalAuthPathPrefix': '/authz/' }, { pathPrefix: '/authz' }],
  [{ 'cpln/externalAuthUpstreamHeaderPrefixes': 'X-Auth-, x-user ,,' }, { upstreamHeaderPrefixes: ['x-auth-', 'x-user'] }],
  [{ 'cpln/externalAuthListenPort': '8080' }, { listenPort: 8080 }],
];

t.test('each tag (vendor cpln)', async (t) => {
  for (const [tags, expect] of cases) {
    const { config, problems } = compileExtAuthTags({ ...A, ...tags }, 'cpln');
    t.same(problems, [], JSON.stringify(tags));
    t.match(config, expect, JSON.stringify(tags));
  }
});

t.test('values that validation would reject fall back, a bad failure switch to closed', async (t) => {
  const bad: [Record<string, string>, Record<string, unknown>][] = [
    [{ 'svc/externalAuthPort': '99999' }, { port: 443 }],
    [{ 'svc/externalAuthProtocol': 'tcp' }, { protocol: 'grpc' }],
    [{ 'svc/externalAuthScheme': 'ftp' }, { scheme: 'https' }],
    [{ 'svc/externalAuthTimeout': 'soon' }, { timeoutMs: 1000 }],
    [{ 'svc/externalAuthTimeout': '0s' }, { timeoutMs: 1000 }],
    [{ 'svc/externalAuthFailureAllow': 'yes' }, { failureAllow: false }],
    [{ 'svc/externalAuthPackAsBytes': 'maybe' }, { packAsBytes: false }],
    [{ 'svc/externalAuthPathPrefix': 'authz' }, { pathPrefix: '/authz' }],
  ];
  for (const [tags, expect] of bad) {
    const { config, problems } = compileExtAuthTags({ 'svc/externalAuthAddress': 'a', ...tags }, 'svc');
    t.equal(problems.length, 1, JSON.stringify(tags));
    t.match(config, expect);
  }
  const weird = compileExtAuthTags({ 'svc/externalAuthAddress': 'not a host!' }, 'svc');
  t.ok(weird.config, 'an undialable address still means "authorize": the failure mode decides');
  t.equal(weird.problems.length, 1);
});

t.test('authority', async (t) => {
  t.equal(authority({ address: 'auth.example', port: 443 }), 'auth.example:443');
  t.equal(authority({ address: '10.0.0.1', port: 9000 }), '10.0.0.1:9000');
  t.equal(authority({ address: '2001:db8::1', port: 9000 }), '[2001:db8::1]:9000');
});
