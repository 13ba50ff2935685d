/**
 * explain's verdict equals what a running data plane does with the same request (the oracle): a
 * table of requests over one realistic configuration (fixtures.ts: canonical, alias, location,
 * replica-direct, internal, domain prefix and regex routes, firewall deny, ext_authz with an
 * exclusion, rate limiting with descriptors, retries, suspended, no replica), then seeded generated
 * requests over the same names, paths, methods and headers. Compared: forwarded or refused (and the
 * status), the workload, location and replica that answered and the upstream path, whether the
 * authorization service was asked, the descriptor the rate-limit service got, the attempts.
 */
import t from 'tap';
import { ALIAS } from '../helpers/harness.js';
import { prng, testSeed } from '../helpers/seed.js';
import { differences, liveVsExplained, startWorld, type Case } from './fixtures.js';

const API = `api-${ALIAS}.app.localhost`;

t.test('a table of requests: explain says what the plane does', async (t) => {
  const world = await startWorld(t);
  const P = world.plane.port;
  const cases: [string, Case, Record<string, unknown>][] = [
    ['canonical: geo picks the tiered azure (10 ms pinned) over gcp (30) and the own location', { host: API, path: '/v1/items?x=1', headers: { 'x-tenant': 'acme' } }, { kind: 'canonical', routes: true, location: 'azure-eastus' }],
    ['canonical, auth exclusion /health: not checked', { host: API, path: '/health' }, { routes: true, auth: 'skipped' }],
    ['canonical, rate-limit exclusion /static/', { host: API, path: '/static/app.css', headers: { 'x-tenant': 'acme' } }, { routes: true, rl: 'skipped' }],
    ['canonical, no x-tenant: no descriptor', { host: API, path: '/v1/x', method: 'POST' }, { routes: true, rl: 'skipped' }],
    ['alias: the GVC\'s aliasWorkloadLink (web), gcp suspended', { host: `${ALIAS}.app.localhost`, path: '/' }, { kind: 'alias', routes: true, location: 'aws-us-east-2' }],
    ['location name', { host: `api-${ALIAS}.gcp-us-east1.direct.localhost`, path: '/a' }, { kind: 'location', routes: true, location: 'gcp-us-east1' }],
    ['replica-direct name', { host: `api-${ALIAS}-1.aws-us-east-2.direct.localhost`, path: '/r' }, { kind: 'replica', routes: true }],
    ['replica-direct, no such replica', { host: `api-${ALIAS}-7.aws-us-east-2.direct.localhost`, path: '/r' }, { routes: false, status: 503 }],
    ['internal name on the mesh listener (same-org)', { host: 'api.shop.internal.localhost:8080', path: '/i', mesh: true }, { kind: 'internal', routes: true }],
    ['internal name, internal firewall none', { host: 'web.shop.internal.localhost:8080', path: '/i', mesh: true }, { routes: false, status: 403 }],
    ['internal replica name', { host: 'replica-0.api.gcp-us-east1.shop.internal.localhost', path: '/ir', mesh: true }, { kind: 'internal-replica', routes: true }],
    ['domain prefix route with replacePrefix', { host: `shop.example.com:${P}`, path: '/api/v2/list?q=1', headers: { 'x-tenant': 't' } }, { kind: 'domain', routes: true }],
    ['domain prefix route to web', { host: `shop.example.com:${P}`, path: '/web/index.html' }, { kind: 'domain', routes: true }],
    ['domain route to replica 0', { host: `shop.example.com:${P}`, path: '/one/x' }, { kind: 'domain', routes: true }],
    ['domain, no route', { host: `shop.example.com:${P}`, path: '/nothing' }, { routes: false, status: 404 }],
    ['domain regex route', { host: `re.example.com:${P}`, path: '/v3/things' }, { routes: true }],
    ['domain regex, whole path only', { host: `re.example.com:${P}`, path: '/x/v3/things' }, { routes: false, status: 404 }],
    ['firewall: blocked CIDR through the trusted proxy', { host: API, path: '/', headers: { 'x-forwarded-for': '198.51.100.7' } }, { routes: false, status: 403 }],
    ['firewall: no inboundAllowCIDR', { host: `priv-${ALIAS}.app.localhost`, path: '/' }, { routes: false, status: 403 }],
    ['suspended globally', { host: `old-${ALIAS}.app.localhost`, path: '/' }, { routes: false, status: 503, suspended: true }],
    ['suspended in the location the name fixes', { host: `web-${ALIAS}.gcp-us-east1.direct.localhost`, path: '/' }, { routes: false, status: 503, suspended: true }],
    ['no replica anywhere', { host: `gone-${ALIAS}.app.localhost`, path: '/' }, { routes: false, status: 503 }],
    ['retries: 503 retried twice', { host: `flaky-${ALIAS}.app.localhost`, path: '/' }, { routes: true }],
    ['unknown host', { host: 'nobody.example.org', path: '/' }, { routes: false, status: 404 }],
    ['a path that does not normalize', { host: API, path: '/a/%2Fb' }, { routes: false, status: 400 }],
  ];
  for (const [name, c, want] of cases) {
    const o = await liveVsExplained(world, c);
    t.same(differences(o), [], `${name}: explain equals the plane`);
    const e = o.explained;
    t.equal(e.verdict.routes, want.routes, `${name}: routes ${String(want.routes)} (${e.verdict.reason})`);
    if (want.kind !== undefined) t.equal(e.host?.kind, want.kind, `${name}: host kind`);
    if (want.location !== undefined) t.equal(e.location?.chosen, want.location, `${name}: location`);
    if (want.status !== undefined) t.equal(e.verdict.status, want.status, `${name}: status`);
    if (want.suspended !== undefined) t.equal(e.suspended, want.suspended, `${name}: suspended`);
    if (want.auth !== undefined) t.equal(e.filters?.sidecar.find((f) => f.name === 'ext_authz')?.action, want.auth, `${name}: ext_authz`);
    if (want.rl !== undefined) t.equal(e.filters?.sidecar.find((f) => f.name === 'ratelimit')?.action, want.rl, `${name}: ratelimit`);
  }
  // Debug answers on the canonical name name the same route and location as explain.
  const o = await liveVsExplained(world, { host: API, path: '/d', headers: { 'x-svc-debug': 'true' } });
  t.ok(o.explained.debug?.applies, 'explain: debug answers apply');
  t.equal(o.live.headers['x-svc-location'], o.explained.location?.chosen, 'x-svc-location is explain\'s location');
  t.match(String(o.live.headers['x-svc-route']), new RegExp(`^${o.explained.host?.kind}; gvc=shop; workload=api; port=${o.explained.route?.port}`), 'x-svc-route names explain\'s kind, workload and port');
  const web = await liveVsExplained(world, { host: `${ALIAS}.app.localhost`, path: '/', headers: { 'x-svc-debug': 'true' } });
  t.notOk(web.explained.debug?.applies, 'debug off for web');
  t.equal(web.live.headers['x-svc-route'], undefined, 'and the plane adds no debug answer');
});

t.test('generated requests: explain routes as the plane does', async (t) => {
  const seed = testSeed('EXPLAIN_SEED', 29);
  t.comment(`seed ${seed} (EXPLAIN_SEED=${seed} replays it)`);
  const random = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const world = await startWorld(t);
  const P = world.plane.port;
  const hosts: Case[] = [
    { host: API, path: '' }, { host: `${ALIAS}.app.localhost`, path: '' }, { host: `web-${ALIAS}.app.localhost`, path: '' },
    { host: `api-${ALIAS}.azure-eastus.direct.localhost`, path: '' }, { host: `api-${ALIAS}.aws-us-east-2.direct.localhost`, path: '' },
    { host: `api-${ALIAS}-0.aws-us-east-2.direct.localhost`, path: '' }, { host: `api-${ALIAS}-1.gcp-us-east1.direct.localhost`, path: '' },
    { host: `web-${ALIAS}.gcp-us-east1.direct.localhost`, path: '' }, { host: `priv-${ALIAS}.app.localhost`, path: '' },
    { host: `old-${ALIAS}.app.localhost`, path: '' }, { host: `shop.example.com:${P}`, path: '' }, { host: `re.example.com:${P}`, path: '' },
    { host: 'api.shop.internal.localhost', path: '', mesh: true }, { host: 'web.shop.internal.localhost', path: '', mesh: true },
    { host: 'replica-1.api.aws-us-east-2.shop.internal.localhost:8080', path: '', mesh: true },
    { host: `API-${ALIAS}.APP.localhost.`, path: '' }, { host: `nobody-${ALIAS}.app.localhost`, path: '' },
  ];
  const segments = ['api', 'web', 'one', 'v1', 'v22', 'w', 'health', 'static', 'x', '.', '..', 'a%2Fb', ''];
  const failures: string[] = [];
  const verdicts = new Map<string, number>();
  for (let i = 0; i < 60; i++) {
    const base = pick(hosts);
    // Domain names mostly get a path under one of their routes' prefixes or regexes.
    const lead = base.host.includes('example.com') && random() < 0.7 ? pick(['/api', '/web', '/one', '/v2', '/w']) : '';
    const path = lead + '/' + Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(segments)).join('/') + (random() < 0.3 ? `?q=${i}` : '');
    const headers: Record<string, string> = {};
    if (random() < 0.5) headers['x-tenant'] = pick(['acme', 'beta']);
    if (random() < 0.2) headers['x-forwarded-for'] = pick(['198.51.100.9', '203.0.113.4', '10.1.2.3, 192.0.2.1']);
    const c: Case = { ...base, path, method: pick(['GET', 'POST', 'PUT', 'DELETE']), headers };
    const o = await liveVsExplained(world, c);
    const verdict = o.explained.verdict.routes ? `routes (${o.explained.host?.kind})` : String(o.explained.verdict.status);
    verdicts.set(verdict, (verdicts.get(verdict) ?? 0) + 1);
    const diff = differences(o);
    if (diff.length > 0) failures.push(`${c.method} ${c.host}${c.path} ${JSON.stringify(headers)}: ${diff.join('; ')}`);
  }
  t.comment(`verdicts: ${[...verdicts].map(([v, n]) => `${v} ${n}`).join(', ')}`);
  t.ok([...verdicts.keys()].filter((v) => v.startsWith('routes')).length >= 4, 'the requests reach several kinds of names');
  t.same(failures, [], `60 generated requests (seed ${seed})`);
});
