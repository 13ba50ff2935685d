/**
 * `svcproxy connect` against a real `svcproxy up` with real replicas (one per file): a command run
 * as a replica of `caller` reaches `target` through the mesh as `caller` (the target's app sees
 * caller's identity in x-forwarded-client-cert), with the replica's environment and working folder;
 * the location, replica and container chosen and said on stderr in the platform CLI's words (the
 * container with ports of two), nothing said for those given; the GVC of an org with several must be
 * given (exit 2); the command's exit code passed through (in process and as the installed program
 * with its own streams); 127 for a command that cannot start; an unknown replica refused 404 (exit 1);
 * the route refused to a workload's own token from its replica and to a caller without a credential
 * (403), and `-d` showing the exchange but not the environment (it holds the replica's token).
 * Also `GET /` and the org learned from `GET /org` when none is given.
 */
import t from 'tap';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { runBin, runClient, startApi } from '../helpers/client.js';
import { NODE, echoContainer, meshWorkload, startMeshUp, tempDir } from '../mesh/fixtures.js';

const IDLE = 'setInterval(() => {}, 1 << 30)';

t.test('svcproxy connect under up', async (t) => {
  const { up } = await startMeshUp(t, [
    meshWorkload('g1', 'caller', { containers: [{ name: 'side', command: NODE, args: ['-e', IDLE] }, echoContainer('app', 8080)] }),
    meshWorkload('g1', 'target', { internal: { inboundAllowType: 'same-org' } }),
  ], { api: { address: '127.0.0.1:0' } });
  const url = up.api.url!;
  const dir = await tempDir(t, 'svcproxy-connect-');
  await mkdir(path.join(dir, '.svcproxy'));
  await writeFile(path.join(dir, '.svcproxy', 'api-token'), await readFile(up.operatorKeyFile));
  const key = (await readFile(up.operatorKeyFile, 'utf8')).trim();
  // The local up by default: its address, the key of the folder, the org it serves (GET /org).
  const local = { env: { SVCPROXY_API: new URL(url).host, HOME: dir }, cwd: dir };
  const callerEnv = up.supervisor.processes().find((p) => p.workload === 'g1/caller' && p.container === 'app')!.env;

  t.test('a command as the replica reaches another workload through the mesh as it', async (t) => {
    const r = await runClient(['connect', 'caller', '--gvc', 'g1', '--', 'curl', '-s', 'http://target.g1.internal.localhost:8080/from-connect'], local);
    t.equal(r.code, 0, r.stderr);
    const seen = JSON.parse(r.stdout) as { path: string; headers: Record<string, string> };
    t.equal(seen.path, '/from-connect');
    t.match(seen.headers['x-forwarded-client-cert'], /;URI=spiffe:\/\/acme\/gvc\/g1\/workload\/caller$/, 'the target sees the caller\'s identity');
    t.equal(r.stderr, [
      "Defaulting to location 'loc1' because no location was specified in the command.",
      "Defaulting to replica 'caller-0' because no replica was specified in the command.",
      "Defaulting to container 'app' because no container was specified in the command.",
      '',
    ].join('\n'), 'each default said as the platform CLI says it; the container with ports of two');
  });

  t.test('the replica\'s environment and folder; the exit code passed through', async (t) => {
    const r = await runClient(['connect', 'caller', '--gvc', 'g1', '--location', 'loc1', '--replica', 'caller-0', '--container', 'side', '--', 'sh', '-c', 'echo "$SVC_WORKLOAD $SVC_REPLICA $SVC_TOKEN $PORT"; pwd; exit 7'], local);
    t.equal(r.code, 7, 'the command\'s exit code');
    const [vars, cwd] = r.stdout.split('\n');
    const side = up.supervisor.processes().find((p) => p.workload === 'g1/caller' && p.container === 'side')!;
    t.equal(vars, `caller caller-0 ${side.env.SVC_TOKEN} `, 'the side container\'s own variables (no PORT: it has no ports)');
    t.equal(cwd, process.cwd(), 'the replicas\' folder: up\'s');
    t.equal(r.stderr, '', 'nothing defaulted, nothing said');
    const shell = await runClient(['connect', 'caller', '--gvc', 'g1', '--shell', 'sh'], { ...local, stdin: 'echo "$SVC_WORKLOAD in $SVC_LOCATION"\nexit 4\n' });
    t.equal(shell.code, 4, 'the shell, reading its commands from stdin (not a terminal): its exit code');
    t.equal(shell.stdout, 'caller in loc1\n');
    const bash = await runClient(['connect', 'caller', '--gvc', 'g1'], { ...local, stdin: 'echo "$BASH_VERSION" | cut -c1-1\n' });
    t.equal(bash.code, 0);
    t.match(bash.stdout, /^\d\n$/, 'bash by default');
    const killed = await runClient(['connect', 'caller', '--gvc', 'g1', '--', 'sh', '-c', 'kill -TERM $$'], local);
    t.equal(killed.code, 128 + 15, 'a signal: 128+N');
    const missing = await runClient(['connect', 'caller', '--gvc', 'g1', '--', 'no-such-command-here'], local);
    t.equal(missing.code, 127);
    t.match(missing.stderr, /svcproxy: cannot run no-such-command-here in .*: not found/);
  });

  t.test('the installed program: the command on its own streams, its code', async (t) => {
    const r = await runBin(['connect', 'caller', '--gvc', 'g1', '--container', 'app', '--', 'sh', '-c', 'read line; echo "got $line from $SVC_WORKLOAD"; exit 3'], { ...local, stdin: 'hello\n' });
    t.equal(r.code, 3);
    t.equal(r.stdout, 'got hello from caller\n');
    t.notMatch(r.stderr, /container/, 'the container given: not said');
  });

  t.test('what must be given, and what is refused', async (t) => {
    const noGvc = await runClient(['connect', 'caller', '--', 'true'], local);
    t.equal(noGvc.code, 2);
    t.match(noGvc.stderr, 'svcproxy: no GVC given (--gvc GVC, SVC_GVC or a profile\'s); org acme has 2: g1, g2');
    const unknown = await runClient(['connect', 'caller', '--gvc', 'g1', '--replica', 'caller-9', '--', 'true'], local);
    t.equal(unknown.code, 1);
    t.match(JSON.parse(unknown.stderr.trim().split('\n\n')[0]!), [{ status: 404, code: 'not_found', message: 'workload caller has no replica caller-9 in location loc1', details: { replicas: ['caller-0'] } }]);
    const nowhere = await runClient(['connect', 'caller', '--gvc', 'g1', '--location', 'aws-us-east-2', '--', 'true'], local);
    t.match(nowhere.stderr, 'has no replica running in location aws-us-east-2');
    const noWorkload = await runClient(['connect', 'nope', '--gvc', 'g1', '--', 'true'], local);
    t.equal(noWorkload.code, 1);
    t.match(noWorkload.stderr, '"status": 404');
    for (const [argv, message] of [
      [['connect'], /connect needs a WORKLOAD\nrun "svcproxy connect --help" for usage/],
      [['connect', 'a', 'b'], /connect takes one WORKLOAD/],
      [['connect', 'caller', '--shell', 'sh', '--', 'true'], /--shell or -- CMD, not both/],
      [['connect', 'caller', '--'], /-- needs a command/],
      [['connect', 'caller', '-f', 'x'], /connect does not take --file/],
    ] as const) {
      const r = await runClient(argv, local);
      t.equal(r.code, 2, argv.join(' '));
      t.match(r.stderr, message);
    }
    const help = await runClient(['connect', '--help'], local);
    t.equal(help.code, 0);
    t.match(help.stdout, /--replica REPLICA/);
  });

  t.test('only the operator key: a workload\'s own token and no credential are refused', async (t) => {
    const own = await runClient(['connect', 'caller', '--gvc', 'g1', '--', 'sh', '-c', 'curl -s -H "Authorization: Bearer $SVC_TOKEN" "$SVC_ENDPOINT/org/acme/gvc/g1/workload/caller/-connect"'], local);
    t.equal(own.code, 0, own.stderr);
    t.match(JSON.parse(own.stdout), { status: 403, code: 'permission_denied', message: /only the operator key/ }, 'the replica\'s own token, from its replica');
    t.notMatch(own.stdout, callerEnv.SVC_TOKEN!);
    const direct = await fetch(`${url}/org/acme/gvc/g1/workload/caller/-connect`, { headers: { authorization: `Bearer ${callerEnv.SVC_TOKEN}` } });
    t.equal(direct.status, 403, 'the token from outside every workload');
    const anonymous = await runClient(['connect', 'caller', '--gvc', 'g1', '--org', 'acme', '--endpoint', url, '--', 'true'], { env: { HOME: dir }, cwd: dir });
    t.equal(anonymous.code, 1);
    t.match(anonymous.stderr, /"message": "only the operator key[\s\S]*"status": 403/);
  });

  t.test('-d shows the exchange, not the environment', async (t) => {
    const r = await runClient(['connect', 'caller', '--gvc', 'g1', '-d', '--', 'true'], local);
    t.equal(r.code, 0, r.stderr);
    t.match(r.stderr, /> GET \/org\/acme\/gvc\/g1\/workload\/caller\/-connect\n/);
    t.match(r.stderr, /< 200 OK\n[\s\S]*\(the replica's environment, not shown: it holds its SVC_TOKEN\)/);
    t.notMatch(r.stderr, callerEnv.SVC_TOKEN!);
    t.notMatch(r.stderr, key);
  });

  t.test('GET / and the org of // paths from GET /org', async (t) => {
    const root = await runClient(['rest', 'get', '', '-o', 'json'], local);
    t.equal(root.code, 0, root.stderr);
    const links = (JSON.parse(root.stdout) as { links: { rel: string; href: string }[] }).links;
    t.same(links.slice(0, 4), [{ rel: 'self', href: '/' }, { rel: 'orgs', href: '/org' }, { rel: 'org', href: '/org/acme' }, { rel: 'gvc', href: '/org/acme/gvc' }]);
    t.ok(links.some((l) => l.rel === 'quota' && l.href === '/org/acme/quota'));
    const anonymousRoot = await fetch(`${url}/`);
    t.equal(anonymousRoot.status, 200, 'anyone may read it, as the org');
    const learned = await runClient(['rest', 'get', '//gvc', '-o', 'names', '-v', '--max', '0'], local);
    t.equal(learned.stdout, 'g1\ng2\n');
    t.match(learned.stderr, 'svcproxy: org acme (the endpoint\'s only org, GET /org)');
  });
});

t.test('a workload up runs nothing for: 404, with the reason, and nothing run', async (t) => {
  const api = await startApi(t, [
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: 'shop', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] } } },
    { kind: 'workload', name: 'api', gvc: 'shop', spec: { type: 'standard', containers: [{ name: 'app', image: 'api:1', ports: [{ number: 8080, protocol: 'http' }] }] } },
  ]);
  const marker = path.join(api.dir, 'ran');
  const r = await runClient(['connect', 'api', '--', 'touch', marker], { env: { SVCPROXY_API: api.address, HOME: api.dir }, cwd: api.dir });
  t.equal(r.code, 1);
  t.match(r.stderr, "Defaulting to gvc 'shop' because no gvc was specified in the command.", 'the org\'s only GVC, said');
  t.match(r.stderr, /"message": "workload api has no replica running \(not started yet, scaled to zero, or nothing up runs: a container without a command\)"/);
  t.match(r.stderr, '"status": 404');
  await t.rejects(readFile(marker), 'nothing was run');
});
