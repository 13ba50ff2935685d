/**
 * The mesh under `svcproxy up`, end to end with real processes: every replica's calls leave through
 * its own outbound listener (the one its HTTP_PROXY names) and reach the target replica's mTLS
 * listener with its own certificate, where the target's internal firewall decides by the caller's
 * identity. The matrix of every `inboundAllowType` against every kind of caller; the
 * `x-forwarded-client-cert` the app receives (a client-sent one never passes); sibling containers
 * by name; curl and Python's urllib as the apps' HTTP clients, going through HTTP_PROXY unchanged.
 */
import t from 'tap';
import { pino } from 'pino';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { X509Certificate, createHash } from 'node:crypto';
import { startUp, type Up } from '../../src/roles/up.js';
import { echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { request, waitFor } from '../helpers/harness.js';

const run = promisify(execFile);
const NODE = process.execPath;
const SIDE = "require('http').createServer((q,s)=>s.end('side '+q.headers.host)).listen(process.env.PORT,'127.0.0.1')";

function workload(gvc: string, name: string, internal: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc, tags: extra.tags ?? {},
    spec: {
      type: 'standard',
      containers: extra.containers ?? [{ name: 'app', command: NODE, args: [echoScriptPath()], ports: [{ number: 8080, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale: 1 }, timeoutSeconds: 5 },
      firewallConfig: { internal },
    },
  };
}

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
  workload('g1', 't-none', { inboundAllowType: 'none' }),
  workload('g1', 't-gvc', { inboundAllowType: 'same-gvc' }),
  workload('g1', 't-org', { inboundAllowType: 'same-org' }),
  workload('g1', 't-list', { inboundAllowType: 'workload-list', inboundAllowWorkload: ['//gvc/g2/workload/c2'] }),
  workload('g1', 'c1', {}, {
    containers: [
      { name: 'app', command: NODE, args: [echoScriptPath()], ports: [{ number: 8080, protocol: 'http' }] },
      { name: 'side', command: NODE, args: ['-e', SIDE], ports: [{ number: 9000, protocol: 'http' }] },
    ],
  }),
  workload('g2', 'c2', {}),
  workload('g2', 'c3', {}),
];

/** The outbound proxy port of a workload's replica, as its processes see it in HTTP_PROXY. */
function proxyPort(up: Up, workload: string): number {
  const p = up.supervisor.processes().find((x) => x.workload === workload);
  if (!p) throw new Error(`no process of ${workload}`);
  return Number(new URL(p.env.HTTP_PROXY!).port);
}

t.test('the mesh under up', async (t) => {
  const caDir = mkdtempSync(join(tmpdir(), 'svcproxy-ca-'));
  t.teardown(() => rmSync(caDir, { recursive: true, force: true }));
  const logLines: string[] = [];
  const up = await startUp({
    settings: defaultSettings,
    records: RECORDS,
    listen: ['127.0.0.1:0'],
    mesh: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) }),
    deps: { logger: silentLogger() },
    watch: false,
    caDir,
  });
  t.teardown(() => up.stop(5000));
  const { runtime } = up;
  await waitFor(() => runtime.replicas.all().length === 7 && runtime.replicas.all().every((r) => r.ready), 60_000, 'replicas ready');
  t.ok(runtime.replicas.all().every((r) => r.mesh !== undefined), 'every replica has its own mTLS listener');

  const outsidePort = runtime.meshListeners[0]!.address.port;
  const callers: Record<string, number> = {
    c1: proxyPort(up, 'g1/c1'),
    c2: proxyPort(up, 'g2/c2'),
    c3: proxyPort(up, 'g2/c3'),
    outside: outsidePort,
  };
  const expected: Record<string, Record<string, number>> = {
    't-none': { self: 200, c1: 403, c2: 403, c3: 403, outside: 403 },
    't-gvc': { self: 200, c1: 200, c2: 403, c3: 403, outside: 403 },
    't-org': { self: 200, c1: 200, c2: 200, c3: 200, outside: 200 },
    't-list': { self: 200, c1: 403, c2: 200, c3: 403, outside: 403 },
  };
  for (const [target, row] of Object.entries(expected)) {
    for (const [caller, status] of Object.entries(row)) {
      const port = caller === 'self' ? proxyPort(up, `g1/${target}`) : callers[caller]!;
      const res = await request(port, `${target}.g1.internal.localhost:8080`, '/who', { headers: { 'x-forwarded-client-cert': 'By=spiffe://acme/gvc/g1/workload/evil;URI=spiffe://acme/gvc/g1/workload/evil' } });
      t.equal(res.status, status, `${caller} -> ${target}`);
      if (status === 403) {
        t.equal(JSON.parse(res.body).message, 'blocked by firewall', `${caller} -> ${target}: the firewall's answer`);
        continue;
      }
      const xfcc = JSON.parse(res.body).headers['x-forwarded-client-cert'] as string;
      const callerUri = caller === 'outside' ? 'spiffe://acme/ingress'
        : caller === 'self' ? `spiffe://acme/gvc/g1/workload/${target}` : `spiffe://acme/gvc/${caller === 'c1' ? 'g1' : 'g2'}/workload/${caller}`;
      t.match(xfcc, new RegExp(`^By=spiffe://acme/gvc/g1/workload/${target};Hash=[0-9a-f]{64};URI=${callerUri.replace(/\//g, '\\/')}$`), `${caller} -> ${target}: XFCC names the verified caller, the spoofed one is gone`);
    }
  }

  // The target's own side decides too: the caller's sidecar is not trusted to have asked.
  const metrics = await request(runtime.admin!.address.port, 'admin', '/metrics');
  t.match(metrics.body, /svcproxy_mesh_requests_total\{reporter="destination",source_workload="c2",source_gvc="g2",destination_workload="t-list",destination_gvc="g1",response_code="200",outcome="allowed"\} 1/);
  t.match(metrics.body, /svcproxy_mesh_requests_total\{reporter="source",source_workload="c3",source_gvc="g2",destination_workload="t-list",destination_gvc="g1",response_code="403",outcome="denied"\} 1/);
  t.match(metrics.body, /svcproxy_mesh_tls_handshakes_total\{side="server"\} \d+/);

  await t.test('access-log lines name both ends of a mesh call', async (t) => {
    const entries = logLines.map((l) => JSON.parse(l) as Record<string, unknown>).filter((e) => e.path === '/who');
    const target = entries.find((e) => e.sourcePrincipal === 'spiffe://acme/gvc/g2/workload/c2' && e.workload === 't-list');
    t.ok(target, 'the target\'s line carries the verified caller');
    t.equal(target?.status, 200);
    const denied = entries.find((e) => e.sourcePrincipal === 'spiffe://acme/gvc/g1/workload/c1' && e.workload === 't-none');
    t.equal(denied?.status, 403, 'a denial is logged with the peer\'s identity');
    const source = entries.find((e) => e.destinationPrincipal === 'spiffe://acme/gvc/g1/workload/t-org' && e.sourcePrincipal === 'spiffe://acme/gvc/g2/workload/c3');
    t.ok(source, 'the caller\'s line names itself and the identity it required of the target');
  });

  await t.test('a container reaches its sibling by name, and localhost stays local', async (t) => {
    const res = await request(callers.c1!, 'side:9000', '/');
    t.equal(res.status, 200);
    t.equal(res.body, 'side side:9000');
    const unknown = await request(callers.c1!, 'nosuch:9000', '/');
    t.equal(unknown.status, 403, 'an unknown single-label name is egress, denied by default');
  });

  await t.test('real HTTP clients go through HTTP_PROXY unchanged', async (t) => {
    const p = up.supervisor.processes().find((x) => x.workload === 'g1/c1' && x.container === 'app')!;
    const env = { ...process.env, ...p.env };
    const curl = await run('curl', ['-s', '-w', '\\n%{http_code}', 'http://t-gvc.g1.internal.localhost:8080/by-curl'], { env });
    const [body, code] = curl.stdout.split('\n');
    t.equal(code, '200', 'curl');
    t.equal(JSON.parse(body!).path, '/by-curl');
    const denied = await run('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code}', 'http://t-none.g1.internal.localhost:8080/'], { env });
    t.equal(denied.stdout, '403', 'curl, denied');
    const py = await run('python3', ['-c', "import urllib.request;print(urllib.request.urlopen('http://side:9000/py').read().decode())"], { env });
    t.equal(py.stdout.trim(), 'side side:9000', 'python urllib reaches the sibling container');
    const node = await run(NODE, ['-e', "const {EnvHttpProxyAgent,request}=require('undici');request('http://t-org.g1.internal.localhost:8080/undici',{dispatcher:new EnvHttpProxyAgent()}).then(async r=>{console.log(r.statusCode,(await r.body.json()).path)})"], { env, cwd: process.cwd() });
    t.equal(node.stdout.trim(), '200 /undici', "Node's EnvHttpProxyAgent");
  });

  await t.test('the certificate the target sees is the caller replica\'s own', async (t) => {
    const res = await request(callers.c1!, 't-org.g1.internal.localhost:8080', '/');
    const xfcc = JSON.parse(res.body).headers['x-forwarded-client-cert'] as string;
    const hash = /Hash=([0-9a-f]{64})/.exec(xfcc)![1];
    t.ok(hash, 'hash present');
    const ca = new X509Certificate(readFileSync(join(caDir, 'ca.pem')));
    t.ok(ca.ca, 'the local CA is kept in the CA folder');
    t.not(hash, createHash('sha256').update(ca.raw).digest('hex'));
  });
});
