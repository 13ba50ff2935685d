/**
 * The platform API under `svcproxy up` (DESIGN §12), with real replica processes calling it as
 * workload code does: `SVC_ENDPOINT` with `SVC_TOKEN`, through the replica's own HTTP_PROXY
 * (fixtures/api-client.mjs: an absolute-URI request to the proxy, or undici's EnvHttpProxyAgent,
 * which tunnels), and a shell's calls to the `--api` listener. Checks each endpoint's answer and
 * error body, the token matrix (own replica, sibling replica, another workload, outside, no
 * credential, bad tokens), that no answer carries a secret's data, and that a POSTed GVC is routed
 * and survives a reload from files (a workload added to the file in it then answers).
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import { readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startUp } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { echoScriptPath } from '../../src/local/index.js';
import { request, waitFor } from '../helpers/harness.js';
import { tempDir, NODE } from '../mesh/fixtures.js';
import { cpln } from '../helpers/cpln.js';

const CLIENT = fileURLToPath(new URL('./fixtures/api-client.mjs', import.meta.url));
const SECRET_VALUES = ['TOPSECRET-payload-7f3a', 'hunter2-password-9c1d'];

function clientWorkload(gvc: string, name: string, opts: { identity?: boolean; replicas?: number } = {}): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc,
    spec: {
      type: 'standard',
      ...(opts.identity ? { identityLink: `//gvc/${gvc}/identity/${name}-id` } : {}),
      containers: [{ name: 'app', command: NODE, args: [CLIENT], ports: [{ number: 8080, protocol: 'http' }], cpu: '250m', memory: '256Mi' }],
      defaultOptions: { autoscaling: { minScale: opts.replicas ?? 1, maxScale: opts.replicas ?? 1 }, timeoutSeconds: 5 },
      firewallConfig: { internal: { inboundAllowType: 'same-org' }, external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
    },
  };
}

const RECORDS = [
  { kind: 'org', name: 'acme', description: 'the org' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  clientWorkload('g1', 'caller', { identity: true, replicas: 2 }),
  clientWorkload('g1', 'noid'),
  clientWorkload('g2', 'other', { identity: true }),
  { kind: 'identity', name: 'caller-id', gvc: 'g1', description: 'the caller\'s identity' },
  { kind: 'identity', name: 'other-id', gvc: 'g2' },
  { kind: 'secret', name: 'db', type: 'opaque', description: 'database', data: { payload: SECRET_VALUES[0], encoding: 'plain' } },
  { kind: 'secret', name: 'login', type: 'userpass', data: { username: 'app', password: SECRET_VALUES[1] } },
  { kind: 'auditctx', name: 'default', origin: 'default' },
  { kind: 'agent', name: 'a1' },
  { kind: 'cloudaccount', name: 'c1' },
];

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
  json: Record<string, any>;
}

const bodies: string[] = [];

function answer(status: number, headers: Answer['headers'], body: string): Answer {
  bodies.push(body);
  let json: Record<string, any> = {};
  try {
    json = JSON.parse(body) as Record<string, any>;
  } catch {
    // left empty: the assertion on the status says what came
  }
  return { status, headers, body, json };
}

t.test('the platform API under up', async (t) => {
  const dir = await tempDir(t, 'svcproxy-api-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify(RECORDS));
  const up = await startUp({
    settings: defaultSettings,
    configPaths: [file],
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    api: { address: '127.0.0.1:0' },
    logger: silentLogger(),
    watch: false,
    stateDir: join(dir, 'state'),
    limits: { maxEventLoopDelayMs: 0 },
  });
  t.teardown(() => up.stop(5000));
  await waitFor(() => up.runtime.replicas.all().length === 4 && up.runtime.replicas.all().every((r) => r.ready), 60_000, 'replicas ready');

  const procs = up.supervisor.processes();
  const proc = (workload: string, index = 0): typeof procs[number] => {
    const p = procs.filter((x) => x.workload === workload).sort((a, b) => a.replica.localeCompare(b.replica))[index];
    if (!p) throw new Error(`no process ${workload}#${index}`);
    return p;
  };
  const tokenOf = (workload: string): string => proc(workload).env.SVC_TOKEN!;

  /** A call made by a replica's own process through its HTTP_PROXY. */
  const fromReplica = async (workload: string, spec: Record<string, unknown>, index = 0): Promise<Answer> => {
    const port = Number(proc(workload, index).env.PORT);
    const res = await request(port, '127.0.0.1', '/call', { method: 'POST', body: JSON.stringify(spec), headers: { 'content-type': 'application/json' } });
    if (res.status !== 200) throw new Error(`client failed: ${res.body}`);
    const got = JSON.parse(res.body) as { status: number; headers: Answer['headers']; body: string };
    return answer(got.status, got.headers, got.body);
  };
  /** A call from outside every workload, to the --api listener. */
  const apiUrl = new URL(up.api.url!);
  const fromOutside = async (path: string, init: { method?: string; token?: string; body?: string; contentType?: string } = {}): Promise<Answer> => {
    const headers: http.OutgoingHttpHeaders = {};
    if (init.token !== undefined) headers.authorization = `Bearer ${init.token}`;
    if (init.body !== undefined) headers['content-type'] = init.contentType ?? 'application/json';
    const res = await request(Number(apiUrl.port), apiUrl.host, path, { method: init.method ?? 'GET', headers, ...(init.body !== undefined ? { body: init.body } : {}) });
    return answer(res.status, res.headers, res.body);
  };
  const isErrorBody = (tt: Test, a: Answer, status: number, code: string): void => {
    tt.equal(a.status, status, `${status} ${code}: ${a.body}`);
    tt.same(Object.keys(a.json).sort(), ['code', 'details', 'id', 'message', 'status']);
    tt.equal(a.json.status, status);
    tt.equal(a.json.code, code);
    tt.type(a.json.message, 'string');
    tt.type(a.json.details, 'object');
    tt.match(a.json.id, /^[0-9a-f-]{36}$/);
    tt.match(String(a.headers['content-type']), /^application\/json/);
  };

  t.test('each replica has SVC_ENDPOINT naming the API through its own proxy', async (t) => {
    for (const p of procs) {
      t.equal(p.env.SVC_ENDPOINT, 'http://api.internal.localhost', p.replica);
      t.match(p.env.HTTP_PROXY, /^http:\/\/127\.0\.0\.1:\d+$/);
    }
    t.not(proc('g1/caller', 0).env.HTTP_PROXY, proc('g1/caller', 1).env.HTTP_PROXY, 'each replica its own outbound listener');
    t.equal(tokenOf('g1/caller'), proc('g1/caller', 1).env.SVC_TOKEN, 'one token per workload');
    t.not(tokenOf('g1/caller'), tokenOf('g2/other'));
  });

  t.test('the operator key: an org administrator, which the platform CLI uses as is', async (t) => {
    const key = (await readFile(up.operatorKeyFile, 'utf8')).trim();
    t.equal(up.operatorKeyFile, join(dir, 'state', 'api-token'));
    t.equal((await stat(up.operatorKeyFile)).mode & 0o777, 0o600);
    t.equal((await fromOutside('/org/acme/gvc/g1', { token: key })).status, 200, 'from outside every workload');
    t.equal((await fromOutside('/org/acme/secret/db', { token: key })).status, 200);
    t.equal((await fromReplica('g1/noid', { path: '/org/acme/gvc/g1', token: key })).status, 200, 'from a replica without an identity too');
    isErrorBody(t, await fromOutside('/org/acme/gvc/g1', { token: `${key}x` }), 403, 'invalid_token');
    const home = await tempDir(t, 'svcproxy-cpln-');
    const got = await cpln(['gvc', 'get', 'g1', '-o', 'json'], { endpoint: up.api.url!, token: key, org: 'acme', home });
    t.equal(got.code, 0, got.stderr);
    t.equal(JSON.parse(got.stdout).name, 'g1');
    // The profile the summary prints: its org comes from the key.
    const profile = await cpln(['profile', 'update', 'local', '--endpoint', up.api.url!, '--token', key], { home });
    t.equal(profile.code, 0, profile.stderr);
    const viaProfile = await cpln(['gvc', 'get', 'g1', '-o', 'json', '--profile', 'local'], { home });
    t.equal(viaProfile.code, 0, viaProfile.stderr);
    t.equal(JSON.parse(viaProfile.stdout).name, 'g1');
  });

  t.test('the token matrix', async (t) => {
    const path = '/org/acme/gvc/g1';
    const own = await fromReplica('g1/caller', { path, token: 'own' });
    t.equal(own.status, 200, 'own replica, own token');
    t.equal(own.json.name, 'g1');
    t.equal((await fromReplica('g1/caller', { path, token: 'own', auth: 'raw' })).status, 200, 'the raw token (no Bearer)');
    t.equal((await fromReplica('g1/caller', { path, token: 'own', via: 'undici' })).status, 200, 'undici EnvHttpProxyAgent (CONNECT tunnel)');
    t.equal((await fromReplica('g1/caller', { path, token: tokenOf('g1/caller') }, 1)).status, 200, 'the sibling replica of the same workload');
    isErrorBody(t, await fromReplica('g2/other', { path, token: tokenOf('g1/caller') }), 403, 'token_outside_workload');
    isErrorBody(t, await fromReplica('g2/other', { path, token: tokenOf('g1/caller'), via: 'undici' }), 403, 'token_outside_workload');
    isErrorBody(t, await fromReplica('g1/noid', { path, token: tokenOf('g1/caller') }), 403, 'token_outside_workload');
    isErrorBody(t, await fromOutside(path, { token: tokenOf('g1/caller') }), 403, 'token_outside_workload');
    isErrorBody(t, await fromOutside('/org/acme', { token: tokenOf('g1/caller') }), 403, 'token_outside_workload');
    // No credential: the parent org only (spec, Authentication 4), from a replica or from outside.
    t.equal((await fromReplica('g1/caller', { path: '/org/acme' })).status, 200, 'no credential: the org');
    t.equal((await fromOutside('/org/acme')).status, 200, 'no credential from outside: the org');
    isErrorBody(t, await fromReplica('g1/caller', { path }), 403, 'permission_denied');
    isErrorBody(t, await fromOutside(path), 403, 'permission_denied');
    // A workload without an identity: its org, nothing else.
    t.equal((await fromReplica('g1/noid', { path: '/org/acme', token: 'own' })).status, 200, 'no identity: the org');
    isErrorBody(t, await fromReplica('g1/noid', { path, token: 'own' }), 403, 'permission_denied');
    // Bad tokens.
    isErrorBody(t, await fromReplica('g1/caller', { path, token: 'local.bogus' }), 403, 'invalid_token');
    isErrorBody(t, await fromReplica('g1/caller', { path, token: `${tokenOf('g1/caller')}x` }), 403, 'invalid_token');
    isErrorBody(t, await fromReplica('g1/caller', { path, token: `Basic ${tokenOf('g1/caller')}`, auth: 'raw' }), 403, 'invalid_token');
    isErrorBody(t, await fromOutside(path, { token: 'local.bogus' }), 403, 'invalid_token');
  });

  const get = (path: string, workload = 'g1/caller'): Promise<Answer> => fromReplica(workload, { path, token: 'own' });

  t.test('the records', async (t) => {
    const org = await get('/org/acme');
    t.equal(org.status, 200);
    t.match(org.json, { kind: 'org', name: 'acme', description: 'the org', version: 1, links: [{ rel: 'self', href: '/org/acme' }] });
    t.match(org.json.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    t.ok(Date.parse(org.json.created) > 0 && org.json.lastModified === org.json.created);
    t.equal((await get('/org/acme')).json.id, org.json.id, 'a record\'s id is stable');

    const gvc = await get('/org/acme/gvc/g1');
    t.match(gvc.json, { kind: 'gvc', name: 'g1', alias: up.runtime.store.current.gvcs.get('g1')!.alias });
    t.same(gvc.json.links, [{ rel: 'self', href: '/org/acme/gvc/g1' }, { rel: 'org', href: '/org/acme' }]);
    isErrorBody(t, await get('/org/acme/gvc/nope'), 404, 'not_found');

    const workload = await get('/org/acme/gvc/g1/workload/noid');
    t.match(workload.json, { kind: 'workload', name: 'noid', spec: { type: 'standard' } });
    t.same(workload.json.links[0], { rel: 'self', href: '/org/acme/gvc/g1/workload/noid' });
    isErrorBody(t, await get('/org/acme/gvc/g2/workload/noid'), 404, 'not_found');
    isErrorBody(t, await get('/org/acme/gvc/g9/workload/noid'), 404, 'not_found');

    const secret = await get('/org/acme/secret/db');
    t.equal(secret.status, 200);
    t.match(secret.json, { kind: 'secret', name: 'db', type: 'opaque', description: 'database' });
    t.notOk('data' in secret.json, 'no data');
    t.notOk('data' in (await get('/org/acme/secret/login')).json);
    isErrorBody(t, await get('/org/acme/secret/nope'), 404, 'not_found');

    // -reveal: the operator key and workloads with an identity only (DESIGN §13).
    const revealed = await get('/org/acme/secret/db/-reveal');
    t.equal(revealed.status, 200);
    t.equal(revealed.json.data.payload, SECRET_VALUES[0]);
    bodies.pop();
    isErrorBody(t, await fromReplica('g1/noid', { path: '/org/acme/secret/db/-reveal', token: 'own' }), 403, 'permission_denied');
    isErrorBody(t, await fromOutside('/org/acme/secret/db/-reveal'), 403, 'permission_denied');
    isErrorBody(t, await fromOutside('/org/acme/secret/db/-reveal', { token: tokenOf('g1/caller') }), 403, 'token_outside_workload');
    const byKey = await fromOutside('/org/acme/secret/login/-reveal', { token: (await readFile(up.operatorKeyFile, 'utf8')).trim() });
    t.equal(byKey.json.data.password, SECRET_VALUES[1]);
    bodies.pop();

    const ids = await get('/org/acme/gvc/g1/identity');
    t.match(ids.json, { kind: 'list', itemKind: 'identity', links: [{ rel: 'self', href: '/org/acme/gvc/g1/identity' }] });
    t.same(ids.json.items.map((i: { name: string }) => i.name), ['caller-id']);
    t.same((await get('/org/acme/gvc/g2/identity')).json.items.map((i: { name: string }) => i.name), ['other-id']);
    isErrorBody(t, await get('/org/acme/gvc/g9/identity'), 404, 'not_found');

    t.match((await get('/org/acme/auditctx/default')).json, { kind: 'auditctx', name: 'default', origin: 'default' });
    isErrorBody(t, await get('/org/acme/auditctx/nope'), 404, 'not_found');

    isErrorBody(t, await get('/org/other'), 404, 'not_found');
    isErrorBody(t, await fromReplica('g1/caller', { method: 'POST', path: '/org/other/gvc', body: JSON.stringify({ name: 'gx' }), token: 'own' }), 404, 'not_found');
    isErrorBody(t, await fromReplica('g1/caller', { method: 'DELETE', path: '/org/other/gvc/g1', token: 'own' }), 404, 'not_found');
    isErrorBody(t, await get('/org/other/gvc/g1'), 404, 'not_found');
    isErrorBody(t, await get('/org/acme/nothing'), 404, 'not_found');
    isErrorBody(t, await get('/elsewhere'), 404, 'not_found');
    const root = await fromOutside('/');
    t.equal(root.status, 200, 'GET /: the references of everything served, to anyone');
    t.match(JSON.parse(root.body), { links: [{ rel: 'self', href: '/' }, { rel: 'orgs', href: '/org' }, { rel: 'org', href: '/org/acme' }] });
    isErrorBody(t, await fromOutside('/', { method: 'POST' }), 405, 'method_not_allowed');
    const wrongMethod = await fromReplica('g1/caller', { path: '/org/acme/quota', method: 'DELETE', token: 'own' });
    isErrorBody(t, wrongMethod, 405, 'method_not_allowed');
    t.equal(wrongMethod.headers.allow, 'GET');
  });

  t.test('quotas: the built-in ones with CURRENT from the records', async (t) => {
    const q = await get('/org/acme/quota');
    t.equal(q.status, 200);
    t.equal(q.json.kind, 'list');
    t.equal(q.json.itemKind, 'quota');
    const byName = (name: string, gvc?: string): Record<string, any> | undefined =>
      q.json.items.find((i: Record<string, any>) => i.name === name && (gvc === undefined || i.dimensions.gvcLink === `/org/acme/gvc/${gvc}`));
    for (const name of ['agents', 'workloads-per-gvc', 'memory-per-workload', 'replicas-per-workload', 'cpu-per-workload', 'identities-per-gvc', 'gvcs', 'domains', 'cloudaccounts']) {
      const item = byName(name);
      t.ok(item, name);
      t.match(item, { kind: 'quota', origin: 'builtin', current: Number, max: Number, unit: String, dimensions: Object, id: String, description: String });
    }
    t.equal(byName('gvcs')!.current, 2);
    t.equal(byName('agents')!.current, 1);
    t.equal(byName('cloudaccounts')!.current, 1);
    t.equal(byName('domains')!.current, 0);
    t.equal(byName('workloads-per-gvc', 'g1')!.current, 2);
    t.equal(byName('workloads-per-gvc', 'g2')!.current, 1);
    t.equal(byName('identities-per-gvc', 'g1')!.current, 1);
    t.same(byName('identities-per-gvc', 'g1')!.dimensions, { gvcLink: '/org/acme/gvc/g1' });
    t.same(byName('gvcs')!.dimensions, {});
    t.match(byName('memory-per-workload'), { current: 256, unit: 'MiB' });
    t.match(byName('cpu-per-workload'), { current: 250, unit: 'millicore' });
    t.match(byName('replicas-per-workload'), { current: 2, unit: 'count' });
  });

  t.test('POST /org/acme/gvc: created, routed, kept by a reload from files', async (t) => {
    const post = (body: unknown, workload = 'g1/caller', token: string | null = 'own'): Promise<Answer> =>
      fromReplica(workload, { method: 'POST', path: '/org/acme/gvc', body: typeof body === 'string' ? body : JSON.stringify(body), ...(token ? { token } : {}) });
    const g3 = { name: 'g3', description: 'posted', id: 'ignored', alias: 'zzzzzzzzzzzzz', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } };
    isErrorBody(t, await post(g3, 'g1/caller', null), 403, 'permission_denied');
    isErrorBody(t, await post(g3, 'g1/noid'), 403, 'permission_denied');
    isErrorBody(t, await fromOutside('/org/acme/gvc', { method: 'POST', body: JSON.stringify(g3) }), 403, 'permission_denied');
    isErrorBody(t, await fromOutside('/org/acme/gvc', { method: 'POST', body: JSON.stringify(g3), token: tokenOf('g1/caller') }), 403, 'token_outside_workload');
    t.notOk(up.runtime.store.current.gvcs.has('g3'), 'nothing refused was applied');

    const created = await post(g3);
    t.equal(created.status, 201, created.body);
    t.equal(created.headers.location, '/org/acme/gvc/g3');
    t.match(created.json, { kind: 'gvc', name: 'g3', description: 'posted', version: 1, spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } });
    t.not(created.json.id, 'ignored', 'read-only id is the platform\'s');
    t.not(created.json.alias, 'zzzzzzzzzzzzz', 'read-only alias is the platform\'s');
    t.equal(created.json.alias, up.runtime.store.current.gvcs.get('g3')?.alias);
    t.same((await get('/org/acme/gvc/g3')).json, created.json, 'GET shows what POST answered');
    t.equal((await get('/org/acme/quota')).json.items.find((i: { name: string }) => i.name === 'gvcs').current, 3);

    isErrorBody(t, await post(g3), 409, 'already_exists');
    isErrorBody(t, await post({ ...g3, name: 'g1' }), 409, 'already_exists');
    const bad = await post({ name: 'g4', spec: { endpointNamingFormat: 'sideways', staticPlacement: { locationLinks: ['//location/nowhere'] } } });
    isErrorBody(t, bad, 400, 'invalid_record');
    t.match(bad.json.details.errors, [/spec\.endpointNamingFormat/, /nowhere/]);
    isErrorBody(t, await post({ kind: 'workload', name: 'g5' }), 400, 'bad_request');
    isErrorBody(t, await post({ name: 'Not A Name!' }), 400, 'invalid_record');
    isErrorBody(t, await post('{not json'), 400, 'bad_request');
    isErrorBody(t, await post('[1]'), 400, 'bad_request');
    isErrorBody(t, await fromReplica('g1/caller', { method: 'POST', path: '/org/acme/gvc', body: 'name: g6', contentType: 'text/plain', token: 'own' }), 415, 'unsupported_media_type');
    t.notOk(up.runtime.store.current.gvcs.has('g4'));

    // A workload added to the file in the POSTed GVC: the reload keeps g3 and the workload answers.
    await writeFile(file, JSON.stringify([...RECORDS, {
      kind: 'workload', name: 'late', gvc: 'g3',
      spec: {
        type: 'standard',
        containers: [{ name: 'app', command: NODE, args: [echoScriptPath()], ports: [{ number: 8080, protocol: 'http' }] }],
        defaultOptions: { autoscaling: { minScale: 1 } },
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      },
    }]));
    t.equal(await up.runtime.store.reload(), true, 'the reload is applied');
    t.ok(up.runtime.store.current.gvcs.has('g3'), 'the POSTed GVC is kept');
    await waitFor(() => up.runtime.replicas.all().some((r) => r.workload === 'g3/late' && r.ready), 60_000, 'g3/late ready');
    const alias = up.runtime.store.current.gvcs.get('g3')!.alias;
    const routed = await request(up.runtime.listeners[0]!.address.port, `late-${alias}.app.localhost`, '/hi');
    t.equal(routed.status, 200);
    t.equal(JSON.parse(routed.body).workload, 'late');
    t.equal((await get('/org/acme/gvc/g3/workload/late')).status, 200);
  });

  t.test('no answer carries a secret\'s data', async (t) => {
    t.ok(bodies.length > 50, `${bodies.length} answers looked at`);
    // The check can fail: the records the API serves do hold the values.
    t.ok(JSON.stringify(up.runtime.store.current.records).includes(SECRET_VALUES[0]!));
    const carrying = bodies.filter((body) => SECRET_VALUES.some((value) => body.includes(value)));
    t.same(carrying, [], 'no answer carries a secret value');
  });
});
