/**
 * `svcproxy rest` against a real `svcproxy up` (its platform API on a free port, one per file): the
 * platform CLI (`cpln rest get`, a real process) and `svcproxy rest get` (the installed program)
 * print the same bytes and exit codes for a handful of paths and formats, errors included; the rest
 * in process through the client's entry: the local `up` by default (SVCPROXY_API and the key of the
 * folder, and what is said when there is none), `//` paths, profiles in a temporary home for both
 * vendors, `-d` with the token masked, `-v`, colour on a terminal only, usage errors (exit 2), an
 * unreachable endpoint (exit 1, fast), `-o tf|crd` refused before anything is sent, POST and create
 * from a file and from stdin (`-f -`), and `edit` with a scripted $EDITOR where nothing is sent.
 */
import t from 'tap';
import { chmod, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cpln } from '../helpers/cpln.js';
import { runBin, runClient, startApi } from '../helpers/client.js';
import { freePort } from '../fixtures/ratelimit/servers.js';

const RECORDS = [
  { kind: 'org', name: 'acme', description: 'the org', tags: { team: 'platform' } },
  { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
  { kind: 'gvc', name: 'shop', description: 'the shop', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
  {
    kind: 'workload', name: 'api', gvc: 'shop', description: 'the api',
    spec: { type: 'standard', containers: [{ name: 'app', image: 'api:1', ports: [{ number: 8080, protocol: 'http' }] }], firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } } },
  },
  { kind: 'identity', name: 'api-id', gvc: 'shop', description: 'the api\'s identity' },
  { kind: 'secret', name: 'db', type: 'opaque', description: 'database', data: { payload: 'TOPSECRET-7f3a', encoding: 'plain' } },
  { kind: 'auditctx', name: 'default', origin: 'default' },
];

/** The same error answer twice differs only by its id (a fresh UUID each time). */
const sameId = (s: string): string => s.replace(/("id": |^\s*-? ?id: )"?[0-9a-f-]{36}"?/gm, '$1ID');

t.test('svcproxy rest against up', async (t) => {
  const api = await startApi(t, RECORDS);
  const env = { SVCPROXY_API: api.address, HOME: api.dir };
  const withKey = { env, cwd: api.dir };

  t.test('the platform CLI and svcproxy print the same bytes (real processes)', async (t) => {
    const home = await mkdtemp(path.join(tmpdir(), 'svcproxy-cpln-'));
    t.teardown(() => rm(home, { recursive: true, force: true }));
    const cases: [string, string[]][] = [
      ['/org/acme/gvc/shop', ['-o', 'yaml']],
      ['/org/acme', []],
      ['/org/acme/quota', ['-o', 'json-slim']],
      ['/org/acme/secret/db', ['-o', 'names']],
      ['/org/acme/gvc/nope', []],
      ['/org/acme/gvc/nope', ['-o', 'yaml']],
    ];
    const runs = cases.map(async ([p, extra]) => {
      const args = ['rest', 'get', p, ...extra, '--endpoint', api.url, '--token', api.key];
      const [theirs, ours] = await Promise.all([cpln(args, { home }), runBin(args, { cwd: home, env: { NO_COLOR: '1' } })]);
      return { p, extra, theirs, ours };
    });
    for (const { p, extra, theirs, ours } of await Promise.all(runs)) {
      const what = `rest get ${p} ${extra.join(' ')}`;
      t.equal(ours.code, theirs.code, `${what}: exit ${theirs.code}`);
      t.equal(ours.stdout, theirs.stdout, `${what}: stdout`);
      t.equal(sameId(ours.stderr), sameId(theirs.stderr), `${what}: stderr`);
    }
  });

  t.test('by default: the local up of SVCPROXY_API with the key of the folder', async (t) => {
    const r = await runClient(['rest', 'get', '/org/acme', '-o', 'json'], withKey);
    t.equal(r.code, 0, r.stderr);
    t.equal(JSON.parse(r.stdout).name, 'acme');
    const byOrg = await runClient(['rest', 'get', '//gvc/shop', '-o', 'names'], withKey);
    t.equal(byOrg.stdout, 'shop\n', '// paths take the org the local up serves (GET /org)');
    const scoped = await runClient(['rest', 'get', '//workload/api', '--gvc', 'shop', '-o', 'names'], withKey);
    t.equal(scoped.stdout, 'api\n', '//workload paths take --gvc');
    const noGvc = await runClient(['rest', 'get', '//workload/api'], withKey);
    t.equal(noGvc.code, 2);
    t.match(noGvc.stderr, /a workload is in a GVC: --gvc GVC, SVC_GVC/);
    const empty = await mkdtemp(path.join(tmpdir(), 'svcproxy-nokey-'));
    t.teardown(() => rm(empty, { recursive: true, force: true }));
    const noKey = await runClient(['rest', 'get', '/org/acme/secret/db'], { env, cwd: empty });
    t.equal(noKey.code, 1);
    t.match(noKey.stderr, /"status": 403/);
    t.match(noKey.stderr, /sent without a credential: .* has no \.svcproxy\/api-token/);
  });

  t.test('-d: every exchange on stderr, the token masked; -v: where each setting came from', async (t) => {
    const r = await runClient(['rest', 'get', '/org/acme', '-d', '-o', 'names'], withKey);
    t.equal(r.code, 0);
    t.equal(r.stdout, 'acme\n');
    t.match(r.stderr, /^\S.* >>>>\n> GET \/org\/acme\n> Host: 127\.0\.0\.1\n> Accept: application\/json, text\/plain, \*\/\*\n> User-Agent: svcproxy /m);
    t.match(r.stderr, `> Authorization: ${api.key.slice(0, 3)}...${api.key.slice(-3)}\n`);
    t.notMatch(r.stderr, api.key, 'the token itself is never written');
    t.notMatch(r.stderr, api.key.slice(3, -3));
    t.match(r.stderr, /<<<<\n< 200 OK\n< content-type: application\/json\n[\s\S]*"name": "acme"[\s\S]*\n<<<<<<<<\n$/);
    const v = await runClient(['rest', 'get', '//org', '-v', '-o', 'names'], withKey);
    t.match(v.stderr, `svcproxy: endpoint http://${api.address} (the local up)`);
    t.match(v.stderr, 'svcproxy: token from the key file');
    t.match(v.stderr, 'svcproxy: org acme (the endpoint\'s only org, GET /org)', 'no org given: the local up\'s, asked of it');
    t.notMatch(v.stderr, api.key);
  });

  t.test('profiles in a temporary home, svc and cpln, and their variables', async (t) => {
    const home = await mkdtemp(path.join(tmpdir(), 'svcproxy-home-'));
    t.teardown(() => rm(home, { recursive: true, force: true }));
    const profile = (name: string, org: string) => ({ name, request: { endpoint: api.url, token: api.key }, context: { org, gvc: 'shop' }, format: { output: 'names' } });
    for (const vendor of ['svc', 'cpln']) {
      await mkdir(path.join(home, vendor, 'profiles'), { recursive: true });
      await writeFile(path.join(home, vendor, 'profiles', 'local.json'), JSON.stringify(profile('local', 'acme')));
      await writeFile(path.join(home, vendor, 'profiles', 'other.json'), JSON.stringify(profile('other', 'nope')));
    }
    const cwd = home; // no key here: the profile is what works
    const base = { HOME: home, XDG_CONFIG_HOME: home };
    const svc = await runClient(['rest', 'get', '//gvc/shop', '--profile', 'local'], { env: base, cwd });
    t.equal(svc.stdout, 'shop\n', 'svc: --profile, its endpoint, token, org and output');
    const cplnVendor = await runClient(['rest', 'get', '//workload/api', '--vendor', 'cpln'], { env: { ...base, CPLN_PROFILE: 'local' }, cwd });
    t.equal(cplnVendor.stdout, 'api\n', 'cpln: CPLN_PROFILE, its gvc');
    const vendorVar = await runClient(['rest', 'get', '//gvc/shop'], { env: { ...base, SVCPROXY_VENDOR: 'cpln', CPLN_PROFILE: 'other', CPLN_ORG: 'acme' }, cwd });
    t.equal(vendorVar.stdout, 'shop\n', 'SVCPROXY_VENDOR; CPLN_ORG over the profile\'s org');
    await writeFile(path.join(home, 'svc', 'profiles', 'default'), 'local');
    const byDefault = await runClient(['rest', 'get', '/org/acme', '-o', 'json'], { env: base, cwd });
    t.equal(JSON.parse(byDefault.stdout).name, 'acme', 'the default file names the profile');
    const flagWins = await runClient(['rest', 'get', '//gvc/shop', '--org', 'acme', '--profile', 'other'], { env: base, cwd });
    t.equal(flagWins.stdout, 'shop\n', '--org over the profile\'s');
    const missing = await runClient(['rest', 'get', '/org/acme'], { env: { ...base, SVC_PROFILE: 'gone' }, cwd });
    t.equal(missing.code, 1);
    t.match(missing.stderr, "svcproxy: Profile 'gone' does not exist.\n\nThe profile was specified by the SVC_PROFILE environment variable.");
    const svcHome = await runClient(['rest', 'get', '/org/acme'], { env: { HOME: home, SVC_HOME: path.join(home, 'svc') }, cwd });
    t.equal(svcHome.stdout, 'acme\n', 'SVC_HOME');
  });

  t.test('errors: the API\'s error body on stderr, exit 1; unreachable: fast, with a hint for the local up', async (t) => {
    const r = await runClient(['rest', 'get', '/org/acme/gvc/nope'], withKey);
    t.equal(r.code, 1);
    t.equal(r.stdout, '');
    const body = JSON.parse(r.stderr) as [{ status: number; code: string }];
    t.same(body.map((b) => [b.status, b.code]), [[404, 'not_found']]);
    t.match(r.stderr, /\]\n\n$/, 'then an empty line, as the platform CLI');
    const port = await freePort();
    const started = Date.now();
    const refused = await runClient(['rest', 'get', '/org/acme'], { env: { SVCPROXY_API: `127.0.0.1:${port}` }, cwd: api.dir });
    t.equal(refused.code, 1);
    t.match(refused.stderr, `"code": "ECONNREFUSED"`);
    t.match(refused.stderr, `svcproxy: no platform API answers at http://127.0.0.1:${port} (the default: a local svcproxy up)`);
    t.ok(Date.now() - started < 30_000, 'not retried for minutes');
    const named = await runClient(['rest', 'get', '/org/acme', '--endpoint', `http://127.0.0.1:${port}`], withKey);
    t.equal(named.code, 1);
    t.notMatch(named.stderr, 'svcproxy up', 'a named endpoint gets no hint about up');
  });

  t.test('usage errors: exit 2 and a hint', async (t) => {
    const cases: [string[], RegExp][] = [
      [['rest', 'gett', '/x'], /unknown rest command "gett" \(did you mean get\?\)/],
      [['rest', 'get'], /rest get needs a PATH/],
      [['rest', 'get', '/a', '/b'], /takes one PATH/],
      [['rest', 'get', '/a', '-f', 'x.yaml'], /rest get does not take --file/],
      [['rest', 'patch', '/a'], /rest patch needs --file FILE/],
      [['rest', 'get', '/a', '-o', 'xml'], /--output must be one of text, json, yaml/],
      [['rest', 'get', '/a', '--max', 'ten'], /--max must be a whole number/],
      [['rest', 'get', '/a', '--ts', 'unix'], /--ts must be one of iso, local, age/],
      [['rest', 'get', '/a', '--prfile', 'x'], /unknown flag --prfile \(did you mean --profile\?\)/],
      [['rest', 'get', 'org/acme'], /PATH must start with \//],
      [['rest', 'get', '/a', '-H', 'no colon'], /not 'NAME: VALUE'/],
      [['rest', 'get', '/a', '--color=maybe'], /--color takes no value/],
    ];
    for (const [argv, message] of cases) {
      const r = await runClient(argv, withKey);
      t.equal(r.code, 2, argv.join(' '));
      t.match(r.stderr, message, argv.join(' '));
      t.match(r.stderr, /\nrun "svcproxy rest( \w+)? --help" for usage\n$/);
    }
    const bare = await runClient(['rest'], withKey);
    t.equal(bare.code, 2);
    t.match(bare.stderr, /^svcproxy rest — /, 'no verb: the help, on stderr');
  });

  t.test('--help: the usage, every option, the environment, examples', async (t) => {
    for (const argv of [['rest', '--help'], ['help', 'rest'], ['rest', 'get', '--help'], ['rest', 'edit', '-h']]) {
      const r = await runClient(argv);
      t.equal(r.code, 0, argv.join(' '));
      t.equal(r.stderr, '');
      t.match(r.stdout, /\nUsage:\n {2}svcproxy rest \w+ /);
      for (const flag of ['--profile', '--org', '--gvc', '--output, -o', '--color', '--ts', '--max', '--token', '--endpoint', '--insecure, -k', '--vendor', '--verbose, -v', '--debug, -d', '--help, -h']) t.match(r.stdout, `\n  ${flag}`);
      t.match(r.stdout, /\nEnvironment[^\n]*\n[\s\S]*SVCPROXY_API/);
    }
    const get = await runClient(['rest', 'get', '--help']);
    t.notMatch(get.stdout, '--file', 'get takes no --file');
    t.match((await runClient(['rest', 'post', '--help'])).stdout, '--file, -f FILE|-');
  });

  t.test('-o tf and -o crd: refused with a clear message before anything is sent', async (t) => {
    for (const output of ['tf', 'crd']) {
      const r = await runClient(['rest', 'get', '/org/acme/gvc/shop', '-o', output, '-d'], withKey);
      t.equal(r.code, 1);
      t.match(r.stderr, `svcproxy: -o ${output}: http://${api.address} does not render`);
      t.match(r.stderr, 'GET /discovery answered 404');
      t.notMatch(r.stderr, '> GET /org/acme/gvc/shop', 'the request itself is not sent');
    }
    const gvc = path.join(api.dir, 'g-tf.yaml');
    await writeFile(gvc, 'kind: gvc\nname: g-tf\n');
    const post = await runClient(['rest', 'post', '/org/acme/gvc', '-f', gvc, '-o', 'tf'], withKey);
    t.equal(post.code, 1);
    t.equal((await runClient(['rest', 'get', '/org/acme/gvc/g-tf'], withKey)).code, 1, 'nothing was created');
  });

  t.test('post and create: a body from a file or stdin, JSON or YAML', async (t) => {
    const file = path.join(api.dir, 'g-file.json');
    await writeFile(file, JSON.stringify({ kind: 'gvc', name: 'g-file', description: 'from a file' }));
    const post = await runClient(['rest', 'post', '/org/acme/gvc', '-f', file, '-o', 'json'], withKey);
    t.equal(post.code, 0, post.stderr);
    t.equal(JSON.parse(post.stdout).description, 'from a file');
    const created = await runClient(['rest', 'create', '/org/acme/gvc', '-f', '-', '-o', 'yaml', '-d'], { ...withKey, stdin: 'kind: gvc\nname: g-stdin\ndescription: from stdin\n' });
    t.equal(created.code, 0, created.stderr);
    t.match(created.stdout, /^kind: gvc\nname: g-stdin\ndescription: from stdin\n/);
    t.match(created.stderr, /> POST \/org\/acme\/gvc\n[\s\S]*< 201 Created\n[\s\S]*location: \/org\/acme\/gvc\/g-stdin\n[\s\S]*> GET \/org\/acme\/gvc\/g-stdin\n/, 'POST, then GET of the Location');
    const again = await runClient(['rest', 'create', '/org/acme/gvc', '-f', '-'], { ...withKey, stdin: '{"kind": "gvc", "name": "g-stdin"}' });
    t.equal(again.code, 1);
    t.match(again.stderr, '"code": "already_exists"');
    const bad = await runClient(['rest', 'post', '/org/acme/gvc', '-f', '-'], { ...withKey, stdin: 'kind: gvc\n  name: : x\n' });
    t.equal(bad.code, 1);
    t.match(bad.stderr, /^svcproxy: .*<stdin>/);
    const none = await runClient(['rest', 'post', '/org/acme/gvc', '-f', path.join(api.dir, 'missing.yaml')], withKey);
    t.equal(none.code, 1);
    t.match(none.stderr, 'missing.yaml: ENOENT');
  });

  t.test('edit: nothing is sent when nothing changed, the file is emptied, or the editor fails', async (t) => {
    const bin = await mkdtemp(path.join(tmpdir(), 'svcproxy-editor-'));
    t.teardown(() => rm(bin, { recursive: true, force: true }));
    const script = async (name: string, body: string): Promise<string> => {
      const file = path.join(bin, name);
      await writeFile(file, `#!/bin/sh\n${body}\n`);
      await chmod(file, 0o755);
      return file;
    };
    const seen = path.join(bin, 'seen.yaml');
    const keep = await script('keep', `cp "$1" ${seen}`);
    const unchanged = await runClient(['rest', 'edit', '/org/acme/gvc/shop', '-d'], { env: { ...env, EDITOR: keep }, cwd: api.dir });
    t.equal(unchanged.code, 0, unchanged.stderr);
    t.equal(unchanged.stdout, 'Resource was not modified. No changes have been submitted\n');
    t.notMatch(unchanged.stderr, '> PATCH', 'nothing sent');
    const shown = await readFile(seen, 'utf8');
    t.match(shown, /^# You are about to PATCH \/org\/acme\/gvc\/shop\n# You are performing this operation as svcproxy-up \(a service account of acme\)\n/);
    t.match(shown, /\nkind: gvc\nname: shop\ndescription: the shop\n/, 'the resource as YAML, in the platform CLI\'s order');
    const reorder = await script('reorder', `sed -i 's/^# .*//' "$1"`);
    const comments = await runClient(['rest', 'edit', '/org/acme/gvc/shop', '-d'], { env: { ...env, VISUAL: reorder, EDITOR: 'false' }, cwd: api.dir });
    t.equal(comments.stdout, 'Resource was not modified. No changes have been submitted\n', '$VISUAL first; the same resource: nothing sent');
    t.notMatch(comments.stderr, '> PATCH');
    const emptied = await runClient(['rest', 'edit', '/org/acme/gvc/shop'], { env: { ...env, EDITOR: await script('empty', ': > "$1"') }, cwd: api.dir });
    t.equal(emptied.code, 0);
    t.match(emptied.stdout, 'Edit cancelled: the file is empty');
    const failed = await runClient(['rest', 'edit', '/org/acme/gvc/shop'], { env: { ...env, EDITOR: 'false' }, cwd: api.dir });
    t.equal(failed.code, 1);
    t.match(failed.stderr, 'svcproxy: the editor (false) exited with code 1: nothing was sent');
  });

  t.test('colour: on a terminal only, and never with NO_COLOR or --no-color', async (t) => {
    const tty = await runClient(['rest', 'get', '/org/acme', '-o', 'json'], { ...withKey, tty: true });
    t.match(tty.stdout, '\u001b[', 'a terminal gets colour');
    for (const [extra, e] of [[[], { NO_COLOR: '1' }], [['--no-color'], {}], [['--color=false'], {}]] as const) {
      const r = await runClient(['rest', 'get', '/org/acme', '-o', 'json', ...extra], { env: { ...env, ...e }, cwd: api.dir, tty: true });
      t.notMatch(r.stdout, '\u001b[', `no colour: ${JSON.stringify([extra, e])}`);
    }
    const pipe = await runClient(['rest', 'get', '/org/acme', '-o', 'json', '--color'], withKey);
    t.notMatch(pipe.stdout, '\u001b[', 'not a terminal: no colour even when asked');
    const table = await runClient(['rest', 'get', '/org/acme'], { ...withKey, tty: true });
    t.match(table.stdout, /^┌/, 'tables with box lines on a terminal');
  });

  t.test('--ts: timestamps of text tables', async (t) => {
    const created = JSON.parse((await runClient(['rest', 'get', '/org/acme/gvc/shop', '-o', 'json'], withKey)).stdout).created as string;
    const now = () => new Date(Date.parse(created) + 3 * 3_600_000 + 5 * 60_000);
    t.match((await runClient(['rest', 'get', '/org/acme/gvc/shop', '--ts', 'age'], { ...withKey, now })).stdout, '|3 hours ago ');
    t.match((await runClient(['rest', 'get', '/org/acme/gvc/shop', '--ts', 'local'], withKey)).stdout, `|${new Date(created).toLocaleString()} `);
    t.match((await runClient(['rest', 'get', '/org/acme/gvc/shop'], withKey)).stdout, `|${created} `);
  });
});
