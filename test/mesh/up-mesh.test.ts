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
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { X509Certificate, createHash } from 'node:crypto';
import { silentLogger } from '../../src/log.js';
import { request } from '../helpers/harness.js';
import { NODE, echoContainer, meshWorkload, startMeshUp } from './fixtures.js';

const run = promisify(execFile);
const SIDE = "require('http').createServer((q,s)=>s.end('side '+q.headers.host)).listen(process.env.PORT,'127.0.0.1')";

const WORKLOADS = [
  meshWorkload('g1', 't-none', { internal: { inboundAllowType: 'none' } }),
  meshWorkload('g1', 't-gvc', { internal: { inboundAllowType: 'same-gvc' } }),
  meshWorkload('g1', 't-org', { internal: { inboundAllowType: 'same-org' } }),
  meshWorkload('g1', 't-list', { internal: { inboundAllowType: 'workload-list', inboundAllowWorkload: ['//gvc/g2/workload/c2'] } }),
  meshWorkload('g1', 'c1', {
    internal: {},
    containers: [echoContainer(), { name: 'side', command: NODE, args: ['-e', SIDE], ports: [{ number: 9000, protocol: 'http' }] }],
  }),
  meshWorkload('g2', 'c2', { internal: {} }),
  meshWorkload('g2', 'c3', { internal: {} }),
];

t.test('the mesh under up', async (t) => {
  const logLines: string[] = [];
  const { up, caDir, proxyPort, envOf } = await startMeshUp(t, WORKLOADS, {
    mesh: ['127.0.0.1:0'],
    logger: pino({ level: 'info' }, { write: (line: string) => void logLines.push(line) }),
    deps: { logger: silentLogger() },
  });
  const { runtime } = up;
  t.ok(runtime.replicas.all().every((r) => r.mesh !== undefined), 'every replica has its own mTLS listener');

  const outsidePort = runtime.meshListeners[0]!.address.port;
  const callers: Record<string, number> = {
    c1: proxyPort('g1/c1'),
    c2: proxyPort('g2/c2'),
    c3: proxyPort('g2/c3'),
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
      const port = caller === 'self' ? proxyPort(`g1/${target}`) : callers[caller]!;
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
    const env = envOf('g1/c1');
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
