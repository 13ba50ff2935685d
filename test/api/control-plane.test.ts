/**
 * `up` as the control plane (DESIGN §13), driven by the platform's own CLI (`cpln`, the oracle: a
 * client no one here wrote) against one real `up` with replica processes: `gvc get` (list, items,
 * `--max` over pages of two), `workload get` (its READY column from the deployments), `apply -f`
 * (Created, then Updated), `apply --ready` (returns once the replicas serve), `workload update --set`
 * (string numbers and booleans converted), `rest get|post|put|patch|delete`, `secret get` (no data)
 * and `secret reveal`, `delete -f` (which polls until the workload is gone), a workload's token from
 * outside (403) and a bad record (400 with every finding). After each write the change is seen on
 * the data plane, through up's listener: a new workload's host answers, a patched timeout and a
 * suspend apply at the next request, a deleted workload's host is 404. No answer and no log line
 * carries a secret's value.
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startUp, type Up } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { echoScriptPath } from '../../src/local/index.js';
import { request, waitFor } from '../helpers/harness.js';
import { NODE, captureLogger, tempDir } from '../mesh/fixtures.js';
import { cpln, type CplnResult } from '../helpers/cpln.js';

// About 33 runs of cpln (a second of CPU each) and one apply --ready (it polls every 5 s): well past
// tap's two minutes on a machine with a core kept busy.
t.setTimeout(300_000);

const SECRET_VALUE = 'TOPSECRET-cp-4b1e9';

function echoWorkload(name: string, spec: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'workload', name,
    spec: {
      type: 'standard',
      containers: [{ name: 'main', command: NODE, args: [echoScriptPath()], ports: [{ number: 8080, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale: 1, maxScale: 3 }, timeoutSeconds: 600 },
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      ...spec,
    },
  };
}

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'location', name: 'loc2', provider: 'gcp', region: 'r2' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1', '//location/loc2'] } } },
  { kind: 'gvc', name: 'g2', description: 'second', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { kind: 'gvc', name: 'g3', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { ...echoWorkload('echo'), gvc: 'g1' },
  { kind: 'secret', name: 'db', type: 'opaque', description: 'database', data: { payload: SECRET_VALUE, encoding: 'plain' } },
];

t.test('the platform CLI manages a running up', async (t) => {
  const dir = await tempDir(t, 'svcproxy-cp-');
  const file = join(dir, 'records.json');
  await writeFile(file, JSON.stringify(RECORDS));
  const log = captureLogger();
  const up: Up = await startUp({
    settings: defaultSettings,
    configPaths: [file],
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    api: { address: '127.0.0.1:0', pageSize: 2 },
    logger: log.logger,
    watch: false,
    stateDir: join(dir, 'state'),
    limits: { maxEventLoopDelayMs: 0 },
  });
  t.teardown(() => up.stop(5000));
  const token = (await import('node:fs/promises')).readFile(up.operatorKeyFile, 'utf8');
  const home = await tempDir(t, 'svcproxy-cpln-');
  const answers: string[] = [];
  const run = async (args: readonly string[], opts: { token?: string; stdin?: string } = {}): Promise<CplnResult> => {
    const got = await cpln(args, { endpoint: up.api.url!, token: opts.token ?? (await token).trim(), org: 'acme', gvc: 'g1', home, cwd: dir, ...(opts.stdin !== undefined ? { stdin: opts.stdin } : {}) });
    answers.push(got.stdout, got.stderr);
    return got;
  };
  const ok = (tt: typeof t, got: CplnResult, what: string): void => {
    tt.equal(got.code, 0, `${what}: ${got.stderr}`);
  };
  const port = up.runtime.listeners[0]!.address.port;
  const alias = (gvc: string): string => up.runtime.store.current.gvcs.get(gvc)!.alias;
  const through = (workload: string, path = '/', gvc = 'g1') => request(port, `${workload}-${alias(gvc)}.app.localhost`, path);
  const readyIn = (key: string, n: number): boolean => up.runtime.replicas.all().filter((r) => r.workload === key && r.ready).length >= n;
  await waitFor(() => readyIn('g1/echo', 2), 60_000, 'echo ready in both locations');

  t.test('gvc get: a list over pages, --max, items', async (t) => {
    const all = await run(['gvc', 'get', '-o', 'json']);
    ok(t, all, 'gvc get');
    const list = JSON.parse(all.stdout);
    t.equal(list.kind, 'list');
    t.same(list.items.map((g: { name: string }) => g.name), ['g1', 'g2', 'g3'], 'the CLI followed rel next over pages of two');
    t.equal(list.items[0].alias, alias('g1'));
    const text = await run(['gvc', 'get']);
    ok(t, text, 'gvc get (text)');
    t.match(text.stdout, /NAME\s*\|DESCRIPTION\s*\|CREATED\s*\|ALIAS\s*\|DOMAIN\s*\|LOCATIONS/);
    t.match(text.stdout, new RegExp(`g1\\s*\\|\\s*\\|[^|]+\\|${alias('g1')}\\s*\\|\\s*\\|loc1`));
    const max = await run(['gvc', 'get', '--max', '2', '-o', 'names']);
    ok(t, max, 'gvc get --max 2');
    t.same(max.stdout.trim().split('\n'), ['g1', 'g2']);
    t.match(max.stderr + max.stdout, /More records are available\. Showing first 2 results/);
    const items = await run(['gvc', 'get', 'g2', 'g3', '-o', 'json']);
    ok(t, items, 'gvc get g2 g3');
    t.same(JSON.parse(items.stdout).items.map((g: { name: string; description?: string }) => [g.name, g.description]), [['g2', 'second'], ['g3', undefined]]);
    const missing = await run(['gvc', 'get', 'nope']);
    t.equal(missing.code, 1);
    t.match(missing.stderr, /not_found/);
  });

  t.test('workload get: READY from the deployments, the endpoint on up\'s listener', async (t) => {
    const text = await run(['workload', 'get']);
    ok(t, text, 'workload get');
    t.match(text.stdout, /NAME\s*\|DESCRIPTION\s*\|GVC\s*\|READY\s*\|CREATED\s*\|ENDPOINT/);
    t.match(text.stdout, new RegExp(`echo\\s*\\|\\s*\\|g1\\s*\\|true\\s*\\|[^|]+\\|http://echo-${alias('g1')}\\.app\\.localhost:${port}`));
    const json = JSON.parse((await run(['workload', 'get', 'echo', '-o', 'json'])).stdout);
    t.match(json.status, { ready: true, readyLatest: true, internalName: 'echo.g1.internal.localhost', endpoint: `http://echo-${alias('g1')}.app.localhost:${port}` });
    const deployments = JSON.parse((await run(['workload', 'get-deployments', 'echo', '-o', 'json'])).stdout);
    t.same(deployments.items.map((d: { name: string }) => d.name), ['loc1', 'loc2']);
    t.match(deployments.items[0].status, { ready: true, internal: { syncFailed: false }, lastProcessedVersion: 1, expectedDeploymentVersion: 1, versions: [{ workload: 1, ready: true, containers: { main: { ready: true } } }] });
  });

  t.test('apply -f: Created, in force at once, then Updated', async (t) => {
    const hello = join(dir, 'hello.yaml');
    await writeFile(hello, JSON.stringify(echoWorkload('hello')));
    const created = await run(['apply', '-f', hello]);
    ok(t, created, 'apply (create)');
    t.equal(created.stdout.trim(), 'Created /org/acme/gvc/g1/workload/hello');
    await waitFor(() => readyIn('g1/hello', 2), 60_000, 'hello ready');
    const answered = await through('hello', '/hi');
    t.equal(answered.status, 200);
    t.equal(JSON.parse(answered.body).workload, 'hello');
    await writeFile(hello, JSON.stringify({ ...echoWorkload('hello'), description: 'applied twice' }));
    const updated = await run(['apply', '-f', hello]);
    ok(t, updated, 'apply (update)');
    t.equal(updated.stdout.trim(), 'Updated workload \'hello\'');
    const json = JSON.parse((await run(['workload', 'get', 'hello', '-o', 'json'])).stdout);
    t.match(json, { description: 'applied twice', version: 2 });
  });

  t.test('workload update --set: strings converted, scaled, suspended, resumed', async (t) => {
    const set = await run(['workload', 'update', 'hello', '--set', 'spec.defaultOptions.autoscaling.minScale=2', '--set', 'spec.containers.main.env.GREETING.value=hi', '-o', 'json']);
    ok(t, set, 'update --set');
    const json = JSON.parse(set.stdout);
    t.equal(json.spec.defaultOptions.autoscaling.minScale, 2, 'the string "2" is stored as the number 2');
    t.same(json.spec.containers[0].env, [{ name: 'GREETING', value: 'hi' }]);
    t.equal(json.version, 3);
    await waitFor(() => readyIn('g1/hello', 4) && up.supervisor.processes().filter((p) => p.workload === 'g1/hello').every((p) => p.env.GREETING === 'hi'), 60_000, 'two replicas of the new version per location');
    const suspended = await run(['workload', 'update', 'hello', '--set', 'spec.defaultOptions.suspend=true']);
    ok(t, suspended, 'suspend');
    const refused = await through('hello');
    t.equal(refused.status, 503);
    t.equal(JSON.parse(refused.body).message, 'workload suspended');
    ok(t, await run(['workload', 'update', 'hello', '--set', 'spec.defaultOptions.suspend=false']), 'resume');
    await waitFor(() => readyIn('g1/hello', 1), 60_000, 'hello back');
    t.equal((await through('hello')).status, 200);
  });

  t.test('rest get|post|put|patch|delete', async (t) => {
    const got = await run(['rest', 'get', '/org/acme/gvc/g1/workload/echo', '-o', 'json']);
    ok(t, got, 'rest get');
    t.equal(JSON.parse(got.stdout).name, 'echo');
    const identity = join(dir, 'identity.json');
    await writeFile(identity, JSON.stringify({ kind: 'identity', name: 'echo-id', description: 'posted' }));
    ok(t, await run(['rest', 'post', '/org/acme/gvc/g1/identity', '-f', identity]), 'rest post');
    const again = await run(['rest', 'post', '/org/acme/gvc/g1/identity', '-f', identity]);
    t.equal(again.code, 1);
    t.match(again.stderr, /already_exists/);
    await writeFile(identity, JSON.stringify({ kind: 'identity', name: 'echo-id', description: 'put' }));
    ok(t, await run(['rest', 'put', '/org/acme/gvc/g1/identity', '-f', identity]), 'rest put');
    t.match(JSON.parse((await run(['identity', 'get', 'echo-id', '-o', 'json'])).stdout), { description: 'put', version: 2, links: [{ rel: 'self', href: '/org/acme/gvc/g1/identity/echo-id' }] });
    // A patched timeout is in force at the next request: /delay that outlasts it is cut at 1 s
    // (the workload's own 600 s would hold it ten minutes).
    const patch = join(dir, 'patch.json');
    await writeFile(patch, JSON.stringify({ spec: { defaultOptions: { timeoutSeconds: 1 } } }));
    const patched = await run(['rest', 'patch', '/org/acme/gvc/g1/workload/echo', '-f', patch, '-o', 'json']);
    ok(t, patched, 'rest patch');
    t.equal(JSON.parse(patched.stdout).spec.defaultOptions.timeoutSeconds, 1);
    const cut = await through('echo', '/delay?ms=600000');
    t.equal(cut.status, 504);
    t.equal(JSON.parse(cut.body).message, 'upstream request timeout');
    ok(t, await run(['rest', 'delete', '/org/acme/gvc/g1/identity/echo-id']), 'rest delete');
    t.equal((await run(['identity', 'get', 'echo-id'])).code, 1);
  });

  t.test('secret get shows no data; reveal does', async (t) => {
    const listed = await run(['secret', 'get', '-o', 'json']);
    ok(t, listed, 'secret get');
    t.equal(JSON.parse(listed.stdout).items[0].name, 'db');
    t.notOk(listed.stdout.includes(SECRET_VALUE));
    const one = await run(['secret', 'get', 'db', '-o', 'yaml']);
    t.notOk(one.stdout.includes(SECRET_VALUE));
    t.match(one.stdout, /type: opaque/);
    const revealed = await run(['secret', 'reveal', 'db', '-o', 'json']);
    ok(t, revealed, 'secret reveal');
    t.equal(JSON.parse(revealed.stdout).data.payload, SECRET_VALUE);
    answers.pop();
    answers.pop();
  });

  t.test('refusals: a workload token from outside, a bad record', async (t) => {
    const workloadToken = up.supervisor.processes().find((p) => p.workload === 'g1/echo')!.env.SVC_TOKEN!;
    const outside = await run(['gvc', 'get', 'g1'], { token: workloadToken });
    t.equal(outside.code, 1);
    t.match(outside.stderr, /"status": 403/);
    t.match(outside.stderr, /token_outside_workload/);
    const bad = join(dir, 'bad.yaml');
    await writeFile(bad, 'kind: workload\nname: bad\nspec:\n  type: sideways\n  containers:\n    - name: main\n      ports: [{number: 99999}]\n');
    const refused = await run(['apply', '-f', bad]);
    t.equal(refused.code, 1);
    t.match(refused.stderr, /"status": 400/);
    t.match(refused.stderr, /invalid_record/);
    t.match(refused.stderr, /workload\/bad: spec\.type: must be one of/);
    t.match(refused.stderr, /workload\/bad: spec\.containers\[0\]\.ports\[0\]\.number: must be an integer from 1 to 65535/);
    t.notOk(up.runtime.store.current.workloads.has('g1/bad'), 'nothing of it applied');
  });

  t.test('delete -f: deleted, drained, its name 404', async (t) => {
    const hello = join(dir, 'hello.yaml');
    const deleted = await run(['delete', '-f', hello]);
    ok(t, deleted, 'delete -f');
    t.equal(deleted.stdout.trim(), 'Deleted workload \'hello\'');
    const gone = await through('hello');
    t.equal(gone.status, 404);
    await waitFor(() => up.supervisor.processes().every((p) => p.workload !== 'g1/hello'), 60_000, 'hello\'s processes stopped');
  });

  t.test('apply --ready returns once the replicas serve', async (t) => {
    const late = join(dir, 'late.yaml');
    await writeFile(late, JSON.stringify(echoWorkload('late')));
    const applied = await run(['apply', '-f', late, '--ready']);
    ok(t, applied, 'apply --ready');
    t.ok(readyIn('g1/late', 2), 'a replica ready in each location when it returned');
    t.equal((await through('late')).status, 200);
  });

  t.test('no answer and no log line carries a secret\'s value', async (t) => {
    t.ok(answers.length > 30);
    t.same(answers.filter((a) => a.includes(SECRET_VALUE)), []);
    t.same(log.entries.filter((e) => JSON.stringify(e).includes(SECRET_VALUE)), []);
  });
});
