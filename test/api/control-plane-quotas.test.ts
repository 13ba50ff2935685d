/**
 * The rest of the control plane driven by the platform's own CLI (`cpln` 3.10.1, the oracle) against
 * one `up` that runs no processes: `quota get` (its table and by id), `quota permissions`, `quota
 * query`, `quota patch -f` and `quota edit` (the editor a script), a write past a quota refused at
 * once with the quota in the message (`workload create`'s POST: 429, `apply`'s PUT: 403), each sent
 * exactly once (counted by a proxy between cpln and `up`: the CLI retried neither), `workload query
 * --prop name~fro`, `--tag`, `--rel`, `--match any`, `org get|update|query`, `location get|query`,
 * `policy get` after `apply`, `auditctx get`, and an increase request's lifecycle through `cpln rest`
 * across a restart of `up` (pending, kept, approved by the operator key, the max raised).
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import { once } from 'node:events';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import type { Up } from '../../src/roles/up.js';
import { upOnFile } from '../helpers/api.js';
import { tempDir } from '../mesh/fixtures.js';
import { cpln, type CplnResult } from '../helpers/cpln.js';

// About 30 runs of cpln at a second of CPU each: past tap's two minutes with a core kept busy.
t.setTimeout(300_000);

function workload(name: string, gvc: string, tags: Record<string, string> = {}): Record<string, unknown> {
  return { kind: 'workload', name, gvc, tags, spec: { type: 'standard', containers: [{ name: 'main', image: 'nginx', ports: [{ number: 80, protocol: 'http' }] }] } };
}

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  workload('frontend', 'g1', { tier: 'web' }),
  workload('front-api', 'g1', { tier: 'api' }),
  workload('backend', 'g1', { tier: 'api' }),
  workload('fronted', 'g2', { tier: 'web' }),
  { kind: 'auditctx', name: 'ctx1', origin: 'default' },
];

/** A proxy between cpln and `up` that counts the requests by method and path (retries would show). */
async function countingProxy(t: Test, target: string): Promise<{ url: string; seen: Map<string, number> }> {
  const to = new URL(target);
  const seen = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const what = `${req.method} ${req.url}`;
    seen.set(what, (seen.get(what) ?? 0) + 1);
    const out = http.request({ host: to.hostname, port: to.port, method: req.method, path: req.url, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode!, answer.headers);
      answer.pipe(res);
    });
    out.on('error', () => res.destroy());
    req.pipe(out);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

t.test('the platform CLI: quotas, queries and the other kinds', async (t) => {
  const dir = await tempDir(t, 'svcproxy-cpq-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify(RECORDS));
  const start = (): Promise<Up> => upOnFile(dir, file, 2);
  let up = await start();
  t.teardown(() => up.stop(1000));
  const token = (await readFile(up.operatorKeyFile, 'utf8')).trim();
  let proxy = await countingProxy(t, up.api.url!);
  const home = await tempDir(t, 'svcproxy-cpln-');
  const run = (args: readonly string[], env: Record<string, string> = {}): Promise<CplnResult> =>
    cpln(args, { endpoint: proxy.url, token, org: 'acme', gvc: 'g1', home, cwd: dir, env });
  const ok = (tt: Test, got: CplnResult, what: string): void => {
    tt.equal(got.code, 0, `${what}: ${got.stderr}`);
  };
  const json = async (args: readonly string[]): Promise<any> => {
    const got = await run([...args, '-o', 'json']);
    if (got.code !== 0) throw new Error(`cpln ${args.join(' ')}: ${got.stderr}`);
    return JSON.parse(got.stdout);
  };
  const quotaId = async (name: string, gvc?: string): Promise<string> => {
    const list = await json(['quota', 'get']);
    return (list.items as { id: string; name: string; dimensions: { gvcLink?: string } }[])
      .find((q) => q.name === name && (gvc === undefined || q.dimensions.gvcLink === `/org/acme/gvc/${gvc}`))!.id;
  };

  t.test('quota get, permissions, query', async (t) => {
    const text = await run(['quota', 'get']);
    ok(t, text, 'quota get');
    t.match(text.stdout, /ID\s*\|NAME\s*\|DESCRIPTION\s*\|ORIGIN\s*\|CURRENT\s*\|MAX\s*\|UNIT\s*\|DIMENSIONS/);
    t.match(text.stdout, /\|workloads-per-gvc\s*\|[^|]*\|builtin\s*\|3\s*\|100\s*\|count\s*\|gvcLink="?\/org\/acme\/gvc\/g1/);
    const list = await json(['quota', 'get']);
    t.equal(list.items.length, 11, 'the CLI followed rel next over pages of two');
    const id = await quotaId('gvcs');
    t.match(await json(['quota', 'get', id]), { id, name: 'gvcs', current: 2, max: 25 });
    // Without -o text the CLI prints the answer as JSON (its ListPermissions reads format.output).
    const permissions = await run(['quota', 'permissions', '-o', 'text']);
    ok(t, permissions, 'quota permissions');
    t.match(permissions.stdout, /NAME\s*\|DESCRIPTION\s*\|IMPLIES/);
    t.match(permissions.stdout, /manage\s*\|Full access\s*\|create, edit, manage, view/);
    t.match(permissions.stdout, /edit\s*\|Modify existing quotas\s*\|view/);
    const query = await json(['quota', 'query', '--prop', 'current>2', '--prop', 'name~gvc']);
    t.match(query, { kind: 'queryresult', itemKind: 'quota' });
    t.same(query.items.map((q: { name: string }) => q.name), ['workloads-per-gvc'], 'g1\'s three workloads');
  });

  t.test('quota patch and edit: the max, kept as the quota\'s record', async (t) => {
    const id = await quotaId('workloads-per-gvc', 'g1');
    await writeFile(join(dir, 'max.yaml'), 'max: 4\n');
    const patched = await run(['quota', 'patch', id, '-f', join(dir, 'max.yaml'), '-o', 'json']);
    ok(t, patched, 'quota patch');
    t.match(JSON.parse(patched.stdout), { id, max: 4, current: 3 });
    const editor = join(dir, 'editor.mjs');
    await writeFile(editor, "import { readFileSync, writeFileSync } from 'node:fs';\nconst f = process.argv[2];\nwriteFileSync(f, readFileSync(f, 'utf8').replace(/^max: \\d+$/m, 'max: 3'));\n");
    const edited = await run(['quota', 'edit', id, '-o', 'json'], { EDITOR: `${process.execPath} ${editor}` });
    ok(t, edited, 'quota edit');
    t.match(JSON.parse(edited.stdout), { id, max: 3 });
  });

  t.test('past a quota: refused at once, the quota named, not retried', async (t) => {
    const created = await run(['workload', 'create', '--name', 'extra', '--image', 'nginx', '--port', '80']);
    t.equal(created.code, 1);
    t.match(created.stderr, /quota workloads-per-gvc exceeded: gvc g1 would have 4, over its max of 3/);
    t.match(created.stderr, /quota_exceeded/);
    t.equal(proxy.seen.get('POST /org/acme/gvc/g1/workload'), 1, 'the 429 to the POST was sent once');
    await writeFile(join(dir, 'extra.yaml'), 'kind: workload\nname: extra2\nspec:\n  type: standard\n  containers: [{name: main, image: nginx, ports: [{number: 80, protocol: http}]}]\n');
    const applied = await run(['apply', '-f', join(dir, 'extra.yaml')]);
    t.equal(applied.code, 1);
    t.match(applied.stderr + applied.stdout, /quota workloads-per-gvc exceeded/);
    const puts = [...proxy.seen].filter(([k]) => k.startsWith('PUT ')).reduce((n, [, c]) => n + c, 0);
    t.equal(puts, 1, 'the 403 to apply\'s PUT was sent once');
    t.notOk(up.runtime.store.current.workloads.has('g1/extra') || up.runtime.store.current.workloads.has('g1/extra2'));
  });

  t.test('workload query: --prop, --tag, --rel, --match', async (t) => {
    const names = async (args: readonly string[]): Promise<string[]> => ((await json(['workload', 'query', ...args])).items as { name: string }[]).map((w) => w.name).sort();
    t.same(await names(['--prop', 'name~fro']), ['front-api', 'fronted', 'frontend'], 'across GVCs');
    t.same(await names(['--prop', 'name~fro', '--gvc', 'g1']), ['front-api', 'frontend'], '--gvc: cpln adds rel gvc=g1');
    t.same(await names(['--prop', 'name~fro', '--rel', 'gvc=g2']), ['fronted']);
    t.same(await names(['--tag', 'tier=api']), ['backend', 'front-api']);
    t.same(await names(['--match', 'any', '--prop', 'name=backend', '--tag', 'tier=web']), ['backend', 'fronted', 'frontend']);
    t.same(await names(['--match', 'any', '--prop', 'name=backend', '--gvc', 'g2']), ['backend', 'fronted'], 'any: the gvc term is one of them');
    const text = await run(['workload', 'query', '--prop', 'name~front']);
    ok(t, text, 'workload query (text)');
    t.match(text.stdout, /NAME\s*\|DESCRIPTION\s*\|GVC\s*\|READY/, 'the workload table, by the query\'s kind');
  });

  t.test('org, location, policy, auditctx', async (t) => {
    t.match(await json(['org', 'get']), { items: [{ name: 'acme' }] });
    ok(t, await run(['org', 'update', 'acme', '--set', 'description=our org']), 'org update');
    t.match(await json(['org', 'get', 'acme']), { name: 'acme', description: 'our org' });
    t.same((await json(['org', 'query'])).items.map((o: { name: string }) => o.name), ['acme']);
    const locations = await run(['location', 'get']);
    ok(t, locations, 'location get');
    t.match(locations.stdout, /NAME\s*\|DESCRIPTION\s*\|PROVIDER\s*\|ENABLED\s*\|REGION\s*\|ORIGIN/);
    t.match(locations.stdout, /aws-us-east-1\s*\|[^|]*\|aws\s*\|true\s*\|us-east-1\s*\|builtin/);
    t.match(locations.stdout, /loc1\s*\|\s*\|aws\s*\|true\s*\|r1\s*\|default/);
    const aws = await json(['location', 'query', '--prop', 'provider=gcp']);
    t.ok(aws.items.length > 0 && aws.items.every((l: { provider: string }) => l.provider === 'gcp'));
    await writeFile(join(dir, 'policy.yaml'), 'kind: policy\nname: readers\ntargetKind: secret\ntarget: all\nbindings:\n  - permissions: [reveal]\n    principalLinks: [//gvc/g1/identity/x]\n');
    ok(t, await run(['apply', '-f', join(dir, 'policy.yaml')]), 'apply a policy');
    const policies = await run(['policy', 'get']);
    ok(t, policies, 'policy get');
    t.match(policies.stdout, /readers\s*\|[^|]*\|[^|]+\|secret\s*\|/);
    t.match(await json(['auditctx', 'get', 'ctx1']), { name: 'ctx1', origin: 'default' });
  });

  t.test('an increase request through cpln rest, across a restart', async (t) => {
    await writeFile(join(dir, 'request.json'), JSON.stringify({ quota: 'domains', requestedMax: 100 }));
    const made = await json(['rest', 'post', '/org/acme/quota/-request', '-f', join(dir, 'request.json')]);
    t.match(made, { kind: 'quotarequest', quota: 'domains', requestedMax: 100, status: 'pending' });
    await up.stop(1000);
    up = await start();
    proxy = await countingProxy(t, up.api.url!);
    t.match(await json(['rest', 'get', `/org/acme/quota/-request/${made.id}`]), { id: made.id, status: 'pending' }, 'kept across the restart');
    t.same((await json(['rest', 'get', '/org/acme/quota/-request?status=pending'])).items.map((r: { id: string }) => r.id), [made.id]);
    await writeFile(join(dir, 'approve.json'), JSON.stringify({ status: 'approved' }));
    t.match(await json(['rest', 'patch', `/org/acme/quota/-request/${made.id}`, '-f', join(dir, 'approve.json')]), { status: 'approved' });
    t.match(await json(['quota', 'get', await quotaId('domains')]), { max: 100 });
    t.match(await json(['quota', 'get', await quotaId('workloads-per-gvc', 'g1')]), { max: 3 }, 'the patched max kept too');
  });
});
