/**
 * The start-up summary of `ingress`, `sidecar` and `ratelimit` on the installed command: real
 * processes on free loopback ports, each waited for until its summary arrives (a hang guard, not a
 * timing). With stdout a pipe it is one log line `<role> started` whose fields are what the process
 * serves (its admin address answers `/ready`, its listener accepts); on a terminal (`script` gives
 * one) a block. The sidecar's identity comes from flags or variables in the order its help states;
 * ratelimit's Redis URL is shown with the password hidden.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TapLike } from '../helpers/harness.js';
import { redisMissing, startRedis } from '../fixtures/ratelimit/servers.js';
import { LocalCa } from '../../src/mesh/ca.js';
import { writeCredentials } from '../mesh/fixtures.js';

t.setTimeout(300_000);

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  {
    kind: 'workload', name: 'api', gvc: 'g1',
    spec: { type: 'standard', containers: [{ name: 'app', ports: [{ number: 8080, protocol: 'http' }] }], firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } } },
  },
  { kind: 'domain', name: 'shop.example.com', spec: { ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: '//gvc/g1/workload/api' }] }] } },
  {
    kind: 'deployment', name: 'api', gvc: 'g1',
    status: { locations: [{ name: 'loc1', replicas: [{ name: 'api-0', address: '127.0.0.1:9' }, { name: 'api-1', address: '127.0.0.1:10' }] }] },
  },
];

const RULES = 'domain: shop\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 10}\n  - key: user\n    descriptors:\n      - key: plan\n        value: free\n        rate_limit: {unit: hour, requests_per_unit: 5}\n';

function folder(t: TapLike): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-summary-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(path.join(dir, 'records.json'), JSON.stringify(RECORDS));
  writeFileSync(path.join(dir, 'rules.yaml'), RULES);
  return dir;
}

/** Runs the command until its `<role> started` line arrives; returns that line's fields. */
async function summaryOf(t: TapLike, args: string[], env: Record<string, string | undefined> = {}): Promise<Record<string, unknown>> {
  // An undefined value removes the variable (spawn would pass the text "undefined").
  const merged = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined));
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: merged });
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const role = args[0]!;
  const line = await new Promise<string>((resolve, reject) => {
    const guard = setTimeout(() => reject(new Error(`no '${role} started' line within 60 s: ${out}`)), 60_000);
    child.once('exit', (code) => reject(new Error(`exited ${code} before its summary: ${out}`)));
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
      const found = out.split('\n').find((l) => l.includes(`"msg":"${role} started"`));
      if (found) {
        clearTimeout(guard);
        resolve(found);
      }
    });
  });
  // Still running (the teardown stops it): the addresses it names can be tried.
  return JSON.parse(line) as Record<string, unknown>;
}

function accepts(address: string): Promise<boolean> {
  const i = address.lastIndexOf(':');
  return new Promise((resolve) => {
    const s = net.connect(Number(address.slice(i + 1)), address.slice(0, i), () => (s.destroy(), resolve(true)));
    s.once('error', () => resolve(false));
  });
}

t.test('ingress: one log line with location, listeners, admin, config and its records', async (t) => {
  const dir = folder(t);
  const config = path.join(dir, 'records.json');
  const s = await summaryOf(t, ['ingress', '--config', config, '--location', 'loc1', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0']);
  t.equal(s.role, 'ingress');
  t.equal(s.location, 'loc1');
  t.equal(s.org, 'acme', 'the org record\'s');
  t.same(s.config, { paths: [config], records: 6, workloads: 1, gvcs: 1, domains: 1, deploymentReplicas: 2 });
  t.equal(s.workers, 1);
  const listeners = s.listeners as { address: string; kind: string }[];
  t.equal(listeners.length, 1);
  t.equal(listeners[0]!.kind, 'http');
  t.ok(await accepts(listeners[0]!.address), 'the listener it names is the bound one');
  t.equal((await fetch(`http://${String(s.admin)}/healthz`)).status, 200, 'and so is the admin address');
  t.notOk('sidecar' in s);
});

t.test('sidecar: its workload, replica and app from flags', async (t) => {
  const dir = folder(t);
  const s = await summaryOf(t, [
    'sidecar', '--config', path.join(dir, 'records.json'), '--app', '127.0.0.1:9', '--gvc', 'g1', '--workload', 'api', '--location', 'loc1',
    '--replica', 'api-0', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--mesh', '127.0.0.1:0',
  ]);
  t.equal(s.role, 'sidecar');
  t.equal(s.location, 'loc1');
  t.same(s.sidecar, { workload: 'g1/api', replica: 'api-0', app: '127.0.0.1:9' });
  t.same((s.listeners as { kind: string }[]).map((l) => l.kind), ['http', 'mesh']);
});

t.test('sidecar identity from variables, in the order the help states', async (t) => {
  const dir = folder(t);
  const base = ['sidecar', '--config', path.join(dir, 'records.json'), '--app', '127.0.0.1:9', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'];
  // SVC_*, and HOSTNAME for the replica when no SVC_REPLICA.
  const svc = await summaryOf(t, base, { SVC_GVC: 'g1', SVC_WORKLOAD: 'api', SVC_LOCATION: 'loc1', SVC_REPLICA: undefined, SVCPROXY_REPLICA: undefined, HOSTNAME: 'api-7f9c' });
  t.same(svc.sidecar, { workload: 'g1/api', replica: 'api-7f9c', app: '127.0.0.1:9' });
  t.equal(svc.location, 'loc1');
  // --vendor cpln reads CPLN_*, not SVC_*; SVCPROXY_<FLAG> comes before them; --flag before both.
  const cpln = await summaryOf(t, [...base, '--vendor', 'cpln', '--workload', 'api'], {
    CPLN_GVC: 'g1', CPLN_WORKLOAD: 'other', CPLN_LOCATION: 'elsewhere', SVCPROXY_LOCATION: 'loc1', CPLN_REPLICA: 'api-3', SVC_REPLICA: 'wrong', HOSTNAME: 'wrong-too',
  });
  t.same(cpln.sidecar, { workload: 'g1/api', replica: 'api-3', app: '127.0.0.1:9' });
  t.equal(cpln.location, 'loc1');
  // Its GVC is also the GVC of records that name none (as cpln apply --gvc): two GVCs, and the
  // workload and deployment name neither.
  const unplaced = RECORDS.map((r) => (r.kind === 'workload' || r.kind === 'deployment' ? Object.fromEntries(Object.entries(r).filter(([k]) => k !== 'gvc')) : r));
  writeFileSync(path.join(dir, 'applied.json'), JSON.stringify([...unplaced, { kind: 'gvc', name: 'g2' }]));
  const applied = await summaryOf(t, ['sidecar', '--config', path.join(dir, 'applied.json'), '--app', '127.0.0.1:9', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0'], {
    SVC_GVC: 'g1', SVC_WORKLOAD: 'api', SVC_LOCATION: 'loc1', SVC_REPLICA: 'api-0',
  });
  t.same(applied.sidecar, { workload: 'g1/api', replica: 'api-0', app: '127.0.0.1:9' }, 'records without gvc are its GVC\'s');
  const config = await (await fetch(`http://${String(applied.admin)}/config`)).json() as { records?: { kind: string; name: string; gvc?: string }[] };
  t.same(config.records?.filter((r) => r.kind === 'workload' || r.kind === 'deployment').map((r) => r.gvc), ['g1', 'g1'], 'the configuration in force places them there');
});

t.test('sidecar: the org of its identity from SVC_ORG when the records have none (and its certificate of that org)', async (t) => {
  const dir = folder(t);
  const config = path.join(dir, 'no-org.json');
  writeFileSync(config, JSON.stringify(RECORDS.filter((r) => r.kind !== 'org')));
  const ca = await LocalCa.open(path.join(dir, 'ca'), { org: 'acme' });
  const mesh = await writeCredentials(dir, await ca.issue('spiffe://acme/gvc/g1/workload/api', 3600_000));
  const s = await summaryOf(t, [
    'sidecar', '--config', config, '--app', '127.0.0.1:9', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--mesh-inbound', '127.0.0.1:0',
    '--mesh-cert', mesh.cert, '--mesh-key', mesh.key, '--mesh-ca', mesh.ca,
  ], { SVC_ORG: 'acme', SVC_GVC: 'g1', SVC_WORKLOAD: 'api', SVC_LOCATION: 'loc1', SVC_REPLICA: 'api-0' });
  t.equal(s.org, 'acme');
  t.equal(s.identity, 'spiffe://acme/gvc/g1/workload/api');
  t.same(s.sidecar, { workload: 'g1/api', replica: 'api-0', app: '127.0.0.1:9' });
});

t.test('ratelimit: listener, domains, rule count and the store', async (t) => {
  const dir = folder(t);
  const rules = path.join(dir, 'rules.yaml');
  const s = await summaryOf(t, ['ratelimit', '--config', rules, '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0']);
  t.equal(s.role, 'ratelimit');
  t.same(s.rules, { paths: [rules], files: 1, domains: ['shop'], rules: 2 });
  t.equal(s.store, 'memory');
  t.equal(s.tls, false);
  t.ok(await accepts(String(s.listen)), 'the gRPC listener it names is the bound one');
  t.equal((await fetch(`http://${String(s.admin)}/healthz`)).status, 200);
});

t.test('ratelimit with Redis: the URL with its password hidden', { skip: redisMissing() }, async (t) => {
  const redis = await startRedis(t);
  await new Promise<void>((resolve, reject) => {
    const s = net.connect(redis.port, '127.0.0.1', () => s.write('CONFIG SET requirepass s3cret-pw\r\n'));
    s.once('data', (d) => (s.destroy(), d.toString().startsWith('+OK') ? resolve() : reject(new Error(d.toString()))));
    s.once('error', reject);
  });
  const dir = folder(t);
  const line = await summaryOf(t, ['ratelimit', '--config', path.join(dir, 'rules.yaml'), '--listen', '127.0.0.1:0', '--redis', `redis://:s3cret-pw@127.0.0.1:${redis.port}`]);
  t.equal(line.store, `redis://:***@127.0.0.1:${redis.port}`);
  t.notMatch(JSON.stringify(line), 's3cret-pw');
});

const script = spawnSync('script', ['--version'], { encoding: 'utf8' });
t.test('on a terminal: a block, as up prints', { skip: script.status === 0 ? false : 'util-linux script is not installed' }, async (t) => {
  const dir = folder(t);
  const config = path.join(dir, 'records.json');
  const command = [process.execPath, BIN, 'ingress', '--config', config, '--location', 'loc1', '--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0']
    .map((a) => `'${a}'`).join(' ');
  // script gives the process a pseudo-terminal as stdout, in a session of its own: killing script's
  // group does not reach it, and the SIGHUP of its closed terminal is a reload to svcproxy. The
  // teardown stops script's group, then the process whose command line names this test's config.
  const child = spawn('script', ['-qfec', command, '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  t.teardown(() => {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
    for (const pid of readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
      try {
        if (readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes(config)) process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone meanwhile, or not ours to read
      }
    }
  });
  let out = '';
  const block = await new Promise<string>((resolve, reject) => {
    const guard = setTimeout(() => reject(new Error(`no block within 60 s: ${out}`)), 60_000);
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString().replace(/\r\n/g, '\n');
      const start = out.indexOf('svcproxy ingress\n');
      if (start !== -1 && /\n {2}workers +1\n/.test(out.slice(start))) {
        clearTimeout(guard);
        resolve(out.slice(start, out.indexOf('\n  workers', start)));
      }
    });
  });
  t.match(block, /^svcproxy ingress\n {2}location +loc1\n {2}org +acme\n {2}listening +http:\/\/127\.0\.0\.1:\d+\n {2}admin +http:\/\/127\.0\.0\.1:\d+ /);
  t.match(block, `config       ${config}  (6 records: 1 workload, 1 gvc, 1 domain, 2 deployment replicas)`);
});
