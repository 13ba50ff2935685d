/**
 * Quotas through the control plane (src/local/api/quota.ts, quota-api.ts; DESIGN §13), over plain
 * HTTP against one `up` whose records come from a file: CURRENT counted from the records and MAX from
 * a quota's record (one of the file's sets a GVC's max below what the file already holds: the files
 * are the operator's and load), an API write past a max refused 429 `quota_exceeded` with the quota
 * in its message (judged by the platform CLI's own retry rule, which must not retry it) while writes
 * that do not grow a count pass, a file reload past a max applied, the per-workload quotas on the
 * written workload only, `PATCH` of a quota (versions, conversion, read-only members, back to the
 * default), `-schema/permissions` of every kind, and the increase requests' lifecycle by the local
 * rule (approved at once up to twice the max, pending above and decided by the operator, denied
 * below the usage or at the max), all of it kept across a restart of `up`.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Up } from '../../src/roles/up.js';
import { tempDir } from '../mesh/fixtures.js';
import { apiClient, isError, type Call, type Reply, upOnFile } from '../helpers/api.js';

/** A workload `up` starts no process for (no command). */
function workload(name: string, gvc: string, container: Record<string, unknown> = {}, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc,
    spec: { type: 'standard', containers: [{ name: 'main', image: 'nginx', ports: [{ number: 80, protocol: 'http' }], ...container }], ...spec },
  };
}

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  workload('w1', 'g1', { memory: '1Gi', cpu: '500m' }),
  workload('w2', 'g1'),
  workload('w3', 'g1'),
  { kind: 'identity', name: 'id1', gvc: 'g1' },
  // The file holds three workloads in g1 and says two is its max: the operator's, loaded as it is.
  { kind: 'quota', name: 'workloads-per-gvc', dimensions: { gvcLink: '//gvc/g1' }, max: 2 },
];

interface Quota { id: string; name: string; current: number; max: number; version: number; dimensions: { gvcLink?: string } }

t.test('quotas and increase requests', async (t) => {
  const dir = await tempDir(t, 'svcproxy-quotas-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify(RECORDS));
  const start = (): Promise<Up> => upOnFile(dir, file);
  let up = await start();
  t.teardown(() => up.stop(1000));
  const key = (await readFile(up.operatorKeyFile, 'utf8')).trim();
  let call: Call = apiClient(up.api.url!, key);
  const Q = '/org/acme/quota';
  const quotas = async (): Promise<Quota[]> => (await call('GET', Q)).json.items as Quota[];
  const quota = async (name: string, gvc?: string): Promise<Quota> => {
    const found = (await quotas()).find((q) => q.name === name && (gvc === undefined || q.dimensions.gvcLink === `/org/acme/gvc/${gvc}`));
    if (found === undefined) throw new Error(`no quota ${name} ${gvc ?? ''}`);
    return found;
  };
  const setMax = async (name: string, max: unknown, gvc?: string): Promise<Reply> => call('PATCH', `${Q}/${(await quota(name, gvc)).id}`, { max });

  t.test('the list: CURRENT from the records, MAX from a quota\'s record or the default', async (t) => {
    const list = await call('GET', Q);
    t.equal(list.status, 200);
    t.match(list.json, { kind: 'list', itemKind: 'quota' });
    const items = list.json.items as Quota[];
    t.same(items.map((q) => q.name), [
      'agents', 'workloads-per-gvc', 'workloads-per-gvc', 'memory-per-workload', 'replicas-per-workload', 'cpu-per-workload',
      'identities-per-gvc', 'identities-per-gvc', 'gvcs', 'domains', 'cloudaccounts',
    ]);
    t.match(await quota('workloads-per-gvc', 'g1'), { current: 3, max: 2, unit: 'count', origin: 'builtin' }, 'the file\'s max, below what the file holds');
    t.match(await quota('workloads-per-gvc', 'g2'), { current: 0, max: 100 });
    t.match(await quota('identities-per-gvc', 'g1'), { current: 1, max: 50 });
    t.match(await quota('gvcs'), { current: 2, max: 25 });
    t.match(await quota('memory-per-workload'), { current: 1024, max: 8192, unit: 'MiB' });
    t.match(await quota('cpu-per-workload'), { current: 500, unit: 'millicore' });
    for (const q of items) t.match((await call('GET', `${Q}/${q.id}`)).json, { id: q.id, name: q.name, current: q.current }, `GET by id: ${q.name}`);
    t.equal((await call('GET', `${Q}/gvcs`)).json.name, 'gvcs', 'by a name one quota has');
    const shared = await call('GET', `${Q}/workloads-per-gvc`);
    isError(t, shared, 400, 'bad_request');
    t.same(Object.keys(shared.json.details.ids).sort(), ['g1', 'g2'], 'a per-GVC name: the ids to name one by');
    isError(t, await call('GET', `${Q}/nothing`), 404, 'not_found');
    isError(t, await call('DELETE', `${Q}/${items[0]!.id}`), 405, 'method_not_allowed');
  });

  t.test('an API write past a max: 429 naming the quota, nothing applied; the files are not refused', async (t) => {
    const W1 = '/org/acme/gvc/g1/workload';
    const over = await call('POST', W1, workload('w4', 'g1'));
    isError(t, over, 429, 'quota_exceeded');
    t.match(over.json.message, /^quota workloads-per-gvc exceeded: gvc g1 would have 4, over its max of 2/);
    t.match(over.json.details, { quota: 'workloads-per-gvc', gvc: 'g1', current: 4, max: 2 });
    t.notOk(up.runtime.store.current.workloads.has('g1/w4'), 'nothing applied');
    const put = await call('PUT', W1, workload('w4', 'g1'));
    isError(t, put, 403, 'quota_exceeded');
    t.equal(put.json.message, over.json.message, 'to a PUT (cpln apply): the same refusal, 403');
    // The platform's own CLI decides what it retries (its util/axiosRetry.js): a 429 to a POST or
    // PATCH unless its message names a quota; a 429 to a PUT always (axios-retry's idempotent rule).
    const require = createRequire(import.meta.url);
    const { shouldRetryRequest } = require('@controlplane/cli/dist/src/util/axiosRetry.js') as { shouldRetryRequest(e: unknown): boolean };
    const asAxios = (r: Reply, method: string): unknown => ({ response: { status: r.status, data: r.json }, config: { method } });
    t.equal(shouldRetryRequest(asAxios(over, 'post')), false, 'cpln does not retry the 429 to a POST');
    t.equal(shouldRetryRequest(asAxios({ ...over, json: { ...over.json, message: 'slow down' } }, 'post')), true, 'as it would one that names no quota');
    t.equal(shouldRetryRequest(asAxios(over, 'put')), true, 'a 429 to a PUT it would retry ten times');
    t.equal(shouldRetryRequest(asAxios(put, 'put')), false, 'the 403 it does not');

    t.equal((await call('PATCH', `${W1}/w1`, { description: 'a count that does not grow' })).status, 200);
    t.equal((await call('PUT', '/org/acme/gvc/g2/workload', workload('v1', 'g2'))).status, 201, 'another GVC has its own max');
    t.equal((await call('DELETE', `${W1}/w3`)).status, 202, 'a count that shrinks');
    isError(t, await call('POST', W1, workload('w4', 'g1')), 429, 'quota_exceeded');

    // The operator's file may hold more than the max: a reload applies it.
    await writeFile(file, JSON.stringify([...RECORDS, workload('w5', 'g1')]));
    t.equal(await up.runtime.store.reload(), true, 'the file\'s records load past the max');
    t.ok(up.runtime.store.current.workloads.has('g1/w5'));

    t.equal((await setMax('gvcs', 2)).status, 200);
    const gvc = await call('POST', '/org/acme/gvc', { kind: 'gvc', name: 'g3', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } });
    isError(t, gvc, 429, 'quota_exceeded');
    t.match(gvc.json.message, /quota gvcs exceeded: the org would have 3, over its max of 2/);
    t.equal((await setMax('gvcs', null)).status, 200, 'null: the default again');
    t.equal((await quota('gvcs')).max, 25);
  });

  t.test('the per-workload quotas judge the written workload', async (t) => {
    const W2 = '/org/acme/gvc/g2/workload';
    t.equal((await setMax('memory-per-workload', 512)).status, 200);
    const big = await call('POST', W2, workload('big', 'g2', { memory: '768Mi' }));
    isError(t, big, 429, 'quota_exceeded');
    t.match(big.json.message, /quota memory-per-workload exceeded: workload g2\/big would have a container of 768 MiB, over its max of 512 MiB/);
    t.equal((await call('PUT', W2, workload('small', 'g2', { memory: '256Mi' }))).status, 201);
    // w1 (1Gi, from the file) is over the new max: it may change, not grow.
    t.equal((await call('PATCH', '/org/acme/gvc/g1/workload/w1', { description: 'still 1Gi' })).status, 200);
    isError(t, await call('PATCH', '/org/acme/gvc/g1/workload/w1', { spec: { containers: [{ name: 'main', image: 'nginx', memory: '2Gi', ports: [{ number: 80, protocol: 'http' }] }] } }), 429, 'quota_exceeded');
    const scaled = await call('PATCH', `${W2}/small`, { spec: { defaultOptions: { autoscaling: { maxScale: 30 } } } });
    isError(t, scaled, 429, 'quota_exceeded');
    t.match(scaled.json.message, /quota replicas-per-workload exceeded: workload g2\/small would scale to 30, over its max of 20/);
    t.equal((await setMax('cpu-per-workload', 100)).status, 200);
    isError(t, await call('PATCH', `${W2}/small`, { spec: { containers: [{ name: 'main', image: 'nginx', cpu: '0.25', ports: [{ number: 80, protocol: 'http' }] }] } }), 429, 'quota_exceeded');
    t.equal((await setMax('memory-per-workload', null)).status, 200);
    t.equal((await setMax('cpu-per-workload', null)).status, 200);
  });

  t.test('PATCH of a quota: versions, conversion, read-only members, the operator\'s', async (t) => {
    const before = await quota('identities-per-gvc', 'g2');
    t.equal(before.version, 1, 'a quota without a record is at version 1');
    const patched = await call('PATCH', `${Q}/${before.id}`, { version: 1, max: '60', current: 999, unit: 'MiB', tags: { team: 'a' } });
    t.equal(patched.status, 200, patched.text);
    t.match(patched.json, { id: before.id, max: 60, current: 0, unit: 'count', version: 2, tags: { team: 'a' } }, '"60" is 60; current and unit are not written');
    isError(t, await call('PATCH', `${Q}/${before.id}`, { version: 1, max: 61 }), 409, 'version_conflict');
    const bad = await call('PATCH', `${Q}/${before.id}`, { max: -1 });
    isError(t, bad, 400, 'invalid_record');
    t.match(bad.json.details.errors, [/quota\/identities-per-gvc: max: must be an integer of at least 0/]);
    t.equal((await quota('identities-per-gvc', 'g2')).max, 60);
    t.equal((await quota('identities-per-gvc', 'g1')).max, 50, 'the other GVC\'s quota is its own');
    isError(t, await call('PATCH', `${Q}/${before.id}`, { max: 5 }, { authorization: '' }), 403, 'permission_denied');
  });

  t.test('-schema/permissions of every kind', async (t) => {
    const q = await call('GET', `${Q}/-schema/permissions`);
    t.equal(q.status, 200);
    t.same(q.json, {
      kind: 'permissions',
      targetKind: 'quota',
      items: [
        { name: 'create', description: 'Create new quotas' },
        { name: 'edit', description: 'Modify existing quotas' },
        { name: 'manage', description: 'Full access' },
        { name: 'view', description: 'Read-only view' },
      ],
      implied: { edit: ['view'], manage: ['create', 'edit', 'manage', 'view'] },
      links: [{ rel: 'self', href: `${Q}/-schema/permissions` }],
    }, 'the spec\'s grantable permissions of a quota');
    for (const [path, kind, must] of [
      ['/org/-schema/permissions', 'org', 'viewAccessReport'],
      ['/org/acme/gvc/-schema/permissions', 'gvc', 'delete'],
      ['/org/acme/workload/-schema/permissions', 'workload', 'exec.runCronWorkload'],
      ['/org/acme/identity/-schema/permissions', 'identity', 'use'],
      ['/org/acme/secret/-schema/permissions', 'secret', 'reveal'],
      ['/org/acme/domain/-schema/permissions', 'domain', 'edit'],
      ['/org/acme/policy/-schema/permissions', 'policy', 'manage'],
      ['/org/acme/location/-schema/permissions', 'location', 'view'],
      ['/org/acme/auditctx/-schema/permissions', 'auditctx', 'writeAudit'],
    ] as const) {
      const got = await call('GET', path);
      t.equal(got.status, 200, path);
      t.equal(got.json.targetKind, kind);
      t.ok((got.json.items as { name: string }[]).some((p) => p.name === must), `${kind} has ${must}`);
      const names = (got.json.items as { name: string }[]).map((p) => p.name);
      t.same(got.json.implied.manage, [...names].sort(), `${kind}: manage implies every permission`);
    }
  });

  const requests = async (status?: string): Promise<Record<string, any>[]> => (await call('GET', `${Q}/-request${status === undefined ? '' : `?status=${status}`}`)).json.items as Record<string, any>[];

  t.test('increase requests: decided by the local rule, the pending ones by the operator', async (t) => {
    const domains = await quota('domains');
    const approved = await call('POST', `${Q}/-request`, { quota: 'domains', requestedMax: 40 });
    t.equal(approved.status, 201, approved.text);
    t.match(approved.json, { kind: 'quotarequest', quota: 'domains', requestedMax: 40, status: 'approved' });
    t.equal(approved.headers.location, `${Q}/-request/${approved.json.id}`);
    t.equal((await quota('domains')).max, 40, 'approved: the max raised at once');
    t.equal((await call('GET', approved.headers.location!)).json.status, 'approved');

    const pending = await call('POST', `${Q}/-request`, { quota: domains.id, requestedMax: '500' });
    t.match(pending.json, { status: 'pending', requestedMax: 500 }, 'by id, more than twice the max');
    t.equal((await quota('domains')).max, 40, 'a pending request raises nothing');
    t.match((await call('POST', `${Q}/-request`, { quota: 'workloads-per-gvc', gvc: 'g1', requestedMax: 2 })).json, { status: 'denied', reason: /below the current usage of 3/, dimensions: { gvcLink: '/org/acme/gvc/g1' } }, 'below the usage (w1, w2, w5)');
    t.match((await call('POST', `${Q}/-request`, { quota: 'agents', requestedMax: 10 })).json, { status: 'denied' }, 'not above the max');

    t.same((await requests()).map((r) => [r.quota, r.status]), [['domains', 'approved'], ['domains', 'pending'], ['workloads-per-gvc', 'denied'], ['agents', 'denied']]);
    t.same((await requests('pending')).map((r) => r.id), [pending.json.id]);
    isError(t, await call('GET', `${Q}/-request?status=maybe`), 400, 'bad_request');
    isError(t, await call('POST', `${Q}/-request`, { quota: 'domains', requestedMax: 1.5 }), 400, 'bad_request');
    isError(t, await call('POST', `${Q}/-request`, { quota: 'nothing', requestedMax: 5 }), 404, 'not_found');
    isError(t, await call('POST', `${Q}/-request`, { quota: 'workloads-per-gvc', requestedMax: 5 }), 400, 'bad_request');
    isError(t, await call('GET', `${Q}/-request/nope`), 404, 'not_found');

    isError(t, await call('PATCH', `${Q}/-request/${pending.json.id}`, { status: 'approved' }, { authorization: '' }), 403, 'permission_denied');
    isError(t, await call('PATCH', `${Q}/-request/${pending.json.id}`, { status: 'pending' }), 400, 'bad_request');
    const decided = await call('PATCH', `${Q}/-request/${pending.json.id}`, { status: 'approved', reason: 'big launch' });
    t.equal(decided.status, 200, decided.text);
    t.match(decided.json, { status: 'approved', reason: 'big launch' });
    t.equal((await quota('domains')).max, 500, 'approved by the operator: the max raised');
    isError(t, await call('PATCH', `${Q}/-request/${pending.json.id}`, { status: 'denied' }), 409, 'already_decided');
  });

  t.test('a restart keeps the maxes and the requests', async (t) => {
    const maxes = (await quotas()).map((q) => [q.id, q.max]);
    const before = await requests();
    await up.stop(1000);
    up = await start();
    call = apiClient(up.api.url!, key);
    t.same((await quotas()).map((q) => [q.id, q.max]), maxes);
    t.same(await requests(), before);
    t.match(await quota('domains'), { max: 500 });
  });
});
