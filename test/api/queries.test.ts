/**
 * `-query` on every collection of the control plane (src/local/api/query.ts) and the kinds beyond
 * the core ones (kinds.ts, org.ts), over plain HTTP against one `up`. Queries: the platform's
 * `queryresult` shape, the terms `cpln KIND query` sends (`--prop name~fro` fuzzy, `--tag`, `--rel
 * gvc=G`, `--match any|none`, a bare `~text` on every property), across GVCs at `/org/O/workload`,
 * judged by the one query implementation against a plain filter of the same items (generated
 * queries, seeded), `sort`, pages followed by `rel: next` with GET, no body as every item, bad
 * queries and cursors refused, a secret's data neither searched nor shown. The org (`/org`, PATCH
 * of its description and tags only), locations (the platform's own beside the records, a record
 * overriding one), policies (written, listed, validated, not enforced) and audit contexts.
 */
import t from 'tap';
import { readFile } from 'node:fs/promises';
import type { Up } from '../../src/roles/up.js';
import { PLATFORM_LOCATION_NAMES } from '../../src/config/platform-locations.js';
import { fuzzyContains } from '../../src/config/location-query.js';
import { tempDir } from '../mesh/fixtures.js';
import { allPages, apiClient, isError, upWithApi } from '../helpers/api.js';
import { prng, testSeed } from '../helpers/seed.js';

const SECRET_VALUE = 'TOPSECRET-q-7d21';

function workload(name: string, gvc: string, tags: Record<string, string> = {}): Record<string, unknown> {
  return { kind: 'workload', name, gvc, tags, spec: { type: 'standard', containers: [{ name: 'main', image: 'nginx', ports: [{ number: 80, protocol: 'http' }] }] } };
}

const NAMES = ['frontend', 'front-api', 'backend', 'billing', 'frozen', 'worker', 'web'];
const RECORDS = [
  { kind: 'org', name: 'acme', description: 'the org', spec: { tracing: { sampling: 10, provider: { otel: { endpoint: '127.0.0.1:4317' } } } } },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'location', name: 'aws-us-east-2', provider: 'lab', region: 'rack-1', description: 'overrides the platform\'s' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  ...NAMES.map((n, i) => workload(n, i % 2 === 0 ? 'g1' : 'g2', { tier: i < 3 ? 'web' : 'batch', ...(i === 4 ? { legacy: 'true' } : {}) })),
  { kind: 'secret', name: 'db', type: 'opaque', data: { payload: SECRET_VALUE } },
  { kind: 'secret', name: 'frontend-cert', type: 'opaque', data: { payload: 'x' } },
  { kind: 'auditctx', name: 'ctx1', origin: 'default', description: 'audit' },
];

interface Named { name: string; gvc?: string; links: { rel: string; href: string }[]; tags?: Record<string, string> }

t.test('queries and the other kinds', async (t) => {
  const dir = await tempDir(t, 'svcproxy-queries-');
  const up: Up = await upWithApi(dir, { records: RECORDS }, { pageSize: 3 });
  t.teardown(() => up.stop(1000));
  const key = (await readFile(up.operatorKeyFile, 'utf8')).trim();
  const call = apiClient(up.api.url!, key);
  const query = async (path: string, body?: unknown): Promise<Named[]> => {
    const first = await call('POST', path, body);
    if (first.status !== 200) throw new Error(`${path}: ${first.status} ${first.text}`);
    return (await allPages(call, first)) as unknown as Named[];
  };
  const names = (items: Named[]): string[] => items.map((i) => i.name);
  const gvcOf = (i: Named): string | undefined => i.links.find((l) => l.rel === 'gvc')?.href.split('/').pop();
  const W = '/org/acme/workload/-query';

  t.test('the answer: a queryresult, across GVCs, in pages', async (t) => {
    const first = await call('POST', W, { spec: { match: 'all', terms: [{ op: '~', property: 'name', value: 'FRO' }] } });
    t.equal(first.status, 200, first.text);
    t.match(first.json, { kind: 'queryresult', itemKind: 'workload', query: { kind: 'workload', spec: { match: 'all', terms: [{ op: '~', property: 'name', value: 'FRO' }] } } });
    t.same(first.json.links[0], { rel: 'self', href: W });
    const all = (await allPages(call, first)) as unknown as Named[];
    t.same(names(all).sort(), ['front-api', 'frontend', 'frozen'], '~ is "contains", ignoring case, across GVCs');
    t.same(all.map(gvcOf).sort(), ['g1', 'g1', 'g2']);
    t.same(names(await query(W)).length, NAMES.length, 'no body: every item');
    t.same(names(await query(W, {})).length, NAMES.length);
    t.same(names(await query(W, { spec: { terms: [{ op: '=', rel: 'gvc', value: 'g2' }] } })).sort(), ['billing', 'front-api', 'worker'], 'rel gvc (what cpln adds for its profile\'s GVC)');
    t.same(names(await query(W, { spec: { terms: [{ op: '=', tag: 'tier', value: 'batch' }] } })).sort(), ['billing', 'frozen', 'web', 'worker']);
    t.same(names(await query(W, { spec: { match: 'any', terms: [{ op: 'exists', tag: 'legacy' }, { op: '=', property: 'name', value: 'web' }] } })).sort(), ['frozen', 'web']);
    t.same(names(await query(W, { spec: { match: 'none', terms: [{ op: '~', property: 'name', value: 'end' }] } })).length, NAMES.length - 2);
    t.same(names(await query(W, { spec: { terms: [{ op: '~', property: '*', value: 'bill' }] } })), ['billing'], 'a bare ~text searches every property');
    const sorted = await query(W, { spec: { terms: [], sort: { by: 'name', order: 'desc' } } });
    t.same(names(sorted), [...NAMES].sort().reverse(), 'sort, over pages');
    t.same(names(await query('/org/acme/gvc/-query', { spec: { terms: [{ op: '=', property: 'name', value: 'g2' }] } })), ['g2']);
  });

  const SEED = testSeed('API_QUERY_SEED', 20260412);
  t.test(`generated queries against a plain filter of the same workloads (seed ${SEED})`, async (t) => {
    const random = prng(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
    const everything = await query(W);
    for (let i = 0; i < 25; i++) {
      const terms: { op: string; property?: string; tag?: string; rel?: string; value?: string }[] = [];
      const n = 1 + Math.floor(random() * 3);
      for (let k = 0; k < n; k++) {
        const kind = pick(['name', 'tag', 'rel'] as const);
        if (kind === 'name') terms.push({ op: pick(['=', '~', '!=']), property: 'name', value: pick([...NAMES, 'fro', 'e', 'zz', 'FRO']).slice(0, 1 + Math.floor(random() * 6)) });
        else if (kind === 'tag') terms.push({ op: pick(['=', 'exists', '!exists']), tag: pick(['tier', 'legacy']), value: pick(['web', 'batch', 'true']) });
        else terms.push({ op: '=', rel: 'gvc', value: pick(['g1', 'g2', 'g3']) });
      }
      const match = pick(['all', 'any', 'none'] as const);
      const holds = (w: Named, term: (typeof terms)[number]): boolean => {
        const value = term.property !== undefined ? w.name : term.tag !== undefined ? w.tags?.[term.tag] : gvcOf(w);
        if (term.op === 'exists') return value !== undefined;
        if (term.op === '!exists') return value === undefined;
        if (term.op === '~') return value !== undefined && fuzzyContains(value, term.value!);
        if (term.op === '!=') return value !== term.value;
        return value === term.value;
      };
      const want = everything.filter((w) => {
        const results = terms.map((term) => holds(w, term));
        return match === 'all' ? results.every(Boolean) : match === 'any' ? results.some(Boolean) : !results.some(Boolean);
      });
      const got = await query(`${W}?limit=2`, { spec: { match, terms } });
      t.same(names(got), names(want), JSON.stringify({ match, terms }));
    }
  });

  t.test('bad queries and cursors', async (t) => {
    const bad = await call('POST', W, { spec: { terms: [{ op: 'like', property: 'name', value: 'x' }] } });
    isError(t, bad, 400, 'bad_request');
    t.match(bad.json.details.errors, [/query: spec\.terms\[0\]\.op: must be one of/]);
    isError(t, await call('POST', W, { spec: { terms: [{ op: '=', property: 'name', tag: 'x', value: 'y' }] } }), 400, 'bad_request');
    isError(t, await call('POST', W, { kind: 'gvc', spec: {} }), 400, 'bad_request');
    isError(t, await call('POST', W, '[1]'), 400, 'bad_request');
    isError(t, await call('GET', W), 400, 'bad_request');
    isError(t, await call('GET', `${W}?cursor=bm90IGEgY3Vyc29y`), 400, 'bad_request');
    isError(t, await call('POST', W, {}, { authorization: '' }), 403, 'permission_denied');
  });

  t.test('every collection answers -query', async (t) => {
    t.same(names(await query('/org/acme/identity/-query')), []);
    t.same(names(await query('/org/acme/domain/-query')), []);
    t.same(names(await query('/org/acme/auditctx/-query')), ['ctx1']);
    t.same(names(await query('/org/-query')), ['acme'], 'the org (cpln org query posts to /org/-query)');
    t.same(names(await query('/org/acme/quota/-query', { spec: { terms: [{ op: '>', property: 'current', value: 0 }] } })).sort(), ['gvcs', 'replicas-per-workload', 'workloads-per-gvc', 'workloads-per-gvc']);
    const locations = await query('/org/acme/location/-query', { spec: { terms: [{ op: '=', property: 'provider', value: 'aws' }] } });
    t.ok(names(locations).includes('loc1') && names(locations).includes('aws-us-east-1'), 'the records\' and the platform\'s locations');
    t.notOk(names(locations).includes('aws-us-east-2'), 'the record of that name (provider lab) overrides the platform\'s');
    const secrets = await call('POST', '/org/acme/secret/-query', { spec: { terms: [{ op: '~', property: '*', value: SECRET_VALUE }] } });
    t.same(secrets.json.items, [], 'a secret\'s data is not searched');
    const all = await call('POST', '/org/acme/secret/-query');
    t.same(names(all.json.items as Named[]), ['db', 'frontend-cert']);
    t.notOk(all.text.includes(SECRET_VALUE), 'nor shown');
  });

  t.test('the org: /org, PATCH of description and tags only', async (t) => {
    const list = await call('GET', '/org');
    t.match(list.json, { kind: 'list', itemKind: 'org', items: [{ name: 'acme', description: 'the org' }] });
    t.match((await call('GET', '/org', undefined, { authorization: '' })).json, { items: [{ name: 'acme' }] }, 'anyone may read their org');
    const before = (await call('GET', '/org/acme')).json;
    const patched = await call('PATCH', '/org/acme', { description: 'changed', tags: { team: 'core' } });
    t.equal(patched.status, 200, patched.text);
    t.match(patched.json, { name: 'acme', description: 'changed', tags: { team: 'core' }, version: before.version + 1 });
    const edited = await call('PATCH', '/org/acme', { ...patched.json, description: 'edited whole' });
    t.equal(edited.status, 200, 'the whole org sent back (cpln org edit), the rest as it is');
    const spec = await call('PATCH', '/org/acme', { spec: { tracing: { sampling: 50 } } });
    isError(t, spec, 400, 'bad_request');
    t.match(spec.json.message, /only description and tags change through the API; spec is the configuration's/);
    isError(t, await call('PATCH', '/org/acme', { version: 1, description: 'stale' }), 409, 'version_conflict');
    isError(t, await call('PATCH', '/org/other', { description: 'x' }), 404, 'not_found');
    t.equal(up.runtime.store.current.records.find((r) => r.kind === 'org')?.description, 'edited whole');
  });

  t.test('locations: the platform\'s own and the records\'', async (t) => {
    const list = (await allPages(call, await call('GET', '/org/acme/location'))) as unknown as (Named & { origin: string; provider: string; spec: { enabled: boolean } })[];
    const want = [...new Set([...PLATFORM_LOCATION_NAMES, 'loc1'])].sort();
    t.same(names(list), want);
    t.match(list.find((l) => l.name === 'aws-us-east-1'), { origin: 'builtin', provider: 'aws', region: 'us-east-1', spec: { enabled: true } });
    t.match(list.find((l) => l.name === 'aws-us-east-2'), { origin: 'default', provider: 'lab', region: 'rack-1' });
    t.match((await call('GET', '/org/acme/location/gcp-us-east1')).json, { kind: 'location', name: 'gcp-us-east1', provider: 'gcp' });
    isError(t, await call('GET', '/org/acme/location/mars-1'), 404, 'not_found');
    isError(t, await call('PATCH', '/org/acme/location/loc1', {}), 405, 'method_not_allowed');
  });

  t.test('policies: stored, listed, validated, not enforced', async (t) => {
    const policy = { kind: 'policy', name: 'readers', targetKind: 'secret', targetLinks: ['//secret/db'], bindings: [{ permissions: ['reveal'], principalLinks: ['//gvc/g1/identity/x'] }] };
    const created = await call('POST', '/org/acme/policy', policy);
    t.equal(created.status, 201, created.text);
    t.match(created.json, { kind: 'policy', name: 'readers', origin: 'default', version: 1 });
    t.match((await call('PATCH', '/org/acme/policy/readers', { description: 'who reads db' })).json, { version: 2, description: 'who reads db' });
    const bad = await call('PUT', '/org/acme/policy', { ...policy, name: 'bad', targetKind: 'wrokload', bindings: [{ permissions: ['view'] }] });
    isError(t, bad, 400, 'invalid_record');
    t.equal(bad.json.details.errors.length, 2, bad.text);
    t.same(names((await call('GET', '/org/acme/policy')).json.items as Named[]), ['readers']);
    t.same(names(await query('/org/acme/policy/-query', { spec: { terms: [{ op: '=', property: 'targetKind', value: 'secret' }] } })), ['readers']);
    t.equal((await call('DELETE', '/org/acme/policy/readers')).status, 204);
  });

  t.test('audit contexts: read', async (t) => {
    t.match((await call('GET', '/org/acme/auditctx/ctx1')).json, { kind: 'auditctx', name: 'ctx1', origin: 'default' });
    isError(t, await call('POST', '/org/acme/auditctx', { kind: 'auditctx', name: 'x' }), 405, 'method_not_allowed');
  });
});
