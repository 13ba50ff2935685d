/**
 * Replicas found by DNS (DESIGN §8b) against a real DNS server (Debian's dnsmasq on a loopback port):
 * a deployment replica's address is `api.test:PORT`, and while steady traffic flows through the
 * ingress the name's answer changes (addresses come, go, all but one go), the DNS server dies and
 * comes back. Every request succeeds; an address that left gets no new request, and a request it was
 * serving when it left finishes; a failed lookup keeps the last answer. Then the real program,
 * `svcproxy ingress --dns-server`, routes by the same name.
 */
import t from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ALIAS, records, request, startPlane, waitFor, yamlDocuments, type TapLike } from '../helpers/harness.js';
import { startDnsmasq } from '../fixtures/dns/dnsmasq.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { tempDir } from '../mesh/fixtures.js';
import { eventually } from '../faults/fixtures.js';
import type { Replica } from '../../src/routing/replicas.js';

const HOST = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';
const IPS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'] as const;

interface Backend {
  readonly ip: string;
  served: number;
  /** `/slow` requests wait here until released. */
  readonly held: (() => void)[];
  close(): Promise<void>;
}

/** One HTTP server per loopback address, all on one port (as pods of a headless Service are). */
async function startBackends(t: TapLike): Promise<{ port: number; backends: Map<string, Backend> }> {
  for (let attempt = 0; ; attempt++) {
    const servers: http.Server[] = [];
    try {
      let port = 0;
      const backends = new Map<string, Backend>();
      for (const ip of IPS) {
        const backend: Backend = { ip, served: 0, held: [], close: async () => undefined };
        const server = http.createServer((req, res) => {
          backend.served++;
          const answer = (): void => void res.writeHead(200, { 'x-backend': ip }).end(ip);
          if (req.url === '/slow') backend.held.push(answer);
          else answer();
        });
        servers.push(server);
        await new Promise<void>((resolve, reject) => {
          server.once('error', reject);
          server.listen(port, ip, () => resolve());
        });
        port = (server.address() as AddressInfo).port;
        backend.close = () => new Promise((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        backends.set(ip, backend);
        t.teardown(() => backend.close());
      }
      return { port, backends };
    } catch (err) {
      for (const s of servers) s.close();
      if (attempt >= 4) throw err;
    }
  }
}

/** Requests on keep-alive connections, `concurrency` at a time, until `stop()`; counts what failed. */
function steadyTraffic(port: number, concurrency = 4): { failures: string[]; total: () => number; stop: () => Promise<void> } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const failures: string[] = [];
  let total = 0;
  let running = true;
  const one = (): Promise<void> => new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', headers: { host: HOST }, agent }, (res) => {
      res.resume();
      res.on('end', () => {
        total++;
        if (res.statusCode !== 200) failures.push(`status ${res.statusCode} ${String(res.headers['x-svc-error'] ?? '')}`);
        resolve();
      });
    });
    req.on('error', (err) => {
      failures.push(err.message);
      resolve();
    });
    req.end();
  });
  const loops = Array.from({ length: concurrency }, async () => {
    while (running) await one();
  });
  return {
    failures,
    total: () => total,
    stop: async () => {
      running = false;
      await Promise.all(loops);
      agent.destroy();
    },
  };
}

t.test('an ingress follows a name\'s answers under steady traffic with no failed request', async (t) => {
  const { port, backends } = await startBackends(t);
  const b = (ip: string): Backend => backends.get(ip)!;
  const dns = await startDnsmasq(t, { 'api.test': ['127.0.0.2', '127.0.0.3'] });
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`api.test:${port}`] } }), {
    location: LOCATION,
    dnsServers: [dns.server],
  });
  const replicas = (): string[] => plane.runtime.replicas.list('shop/api', LOCATION).filter((r) => r.ready).map((r) => `${r.index} ${r.name}`);
  const replicaAt = (ip: string): Replica => plane.runtime.replicas.list('shop/api', LOCATION).find((r) => r.name === `api-0@${ip}`)!;
  const routed = (ips: string[]): boolean => JSON.stringify(replicas()) === JSON.stringify(ips.map((ip, i) => `${i} api-0@${ip}`));
  await waitFor(() => routed(['127.0.0.2', '127.0.0.3']), 30_000, 'both first addresses ready');

  const traffic = steadyTraffic(plane.port);
  t.teardown(() => traffic.stop());
  await waitFor(() => b('127.0.0.2').served > 10 && b('127.0.0.3').served > 10, 30_000, 'both serving');

  // Requests in flight on 127.0.0.2 when it leaves the answer finish there.
  const slow = Array.from({ length: 4 }, () => request(plane.port, HOST, '/slow'));
  await waitFor(() => b('127.0.0.2').held.length + b('127.0.0.3').held.length === 4, 30_000, 'slow requests held');
  const heldOnTwo = b('127.0.0.2').held.length;
  t.ok(heldOnTwo > 0, `${heldOnTwo} slow requests are on 127.0.0.2`);

  const leavingTwo = replicaAt('127.0.0.2');
  await dns.set({ 'api.test': ['127.0.0.3', '127.0.0.4'] });
  await waitFor(() => routed(['127.0.0.3', '127.0.0.4']), 30_000, '127.0.0.4 in, 127.0.0.2 out');
  // Requests routed to it before it left may still be on their way; then only the held ones remain.
  await waitFor(() => leavingTwo.outstanding === heldOnTwo, 30_000, 'the requests sent before it left arrived');
  const servedByTwo = b('127.0.0.2').served;
  const fourBefore = b('127.0.0.4').served;
  await waitFor(() => b('127.0.0.4').served > fourBefore + 50, 30_000, 'the new address serving');
  t.equal(b('127.0.0.2').served, servedByTwo, 'no new request reached the address that left');
  for (const answer of [...b('127.0.0.2').held, ...b('127.0.0.3').held]) answer();
  const slowAnswers = await Promise.all(slow);
  t.same(slowAnswers.map((r) => r.status), [200, 200, 200, 200], 'requests in flight when their address left finished');
  await b('127.0.0.2').close();

  const leavingThree = replicaAt('127.0.0.3');
  await dns.set({ 'api.test': ['127.0.0.4'] });
  await waitFor(() => routed(['127.0.0.4']), 30_000, 'only 127.0.0.4');
  await waitFor(() => leavingThree.outstanding === 0, 30_000, 'the requests sent before it left answered');
  const servedByThree = b('127.0.0.3').served;
  let fourNow = b('127.0.0.4').served;
  await waitFor(() => b('127.0.0.4').served > fourNow + 50, 30_000, 'one address serving alone');
  t.equal(b('127.0.0.3').served, servedByThree, '127.0.0.3 got nothing after it left');

  // The DNS server dies: lookups fail, the last answer is kept, traffic goes on.
  const failuresCounted = async (): Promise<number> => {
    const text = await plane.runtime.metrics.registry.getSingleMetricAsString('svcproxy_dns_lookups_total');
    return Number(/outcome="failure"} (\d+)/.exec(text)?.[1] ?? 0);
  };
  await dns.stop();
  t.ok(await eventually(async () => (await failuresCounted()) >= 2, 60_000, 50), 'failed lookups counted');
  t.ok(routed(['127.0.0.4']), 'the last answer is kept while lookups fail');
  fourNow = b('127.0.0.4').served;
  await waitFor(() => b('127.0.0.4').served > fourNow + 50, 30_000, 'still serving');

  // It comes back with a new answer.
  await dns.start();
  await dns.set({ 'api.test': ['127.0.0.3', '127.0.0.4'] });
  await waitFor(() => routed(['127.0.0.3', '127.0.0.4']), 60_000, 'followed again after the server came back');
  const threeBack = b('127.0.0.3').served;
  await waitFor(() => b('127.0.0.3').served > threeBack + 20, 30_000, '127.0.0.3 serving again');

  await traffic.stop();
  t.same(traffic.failures, [], `no failed request out of ${traffic.total()}`);
  const gauge = await plane.runtime.metrics.registry.getSingleMetricAsString('svcproxy_dns_addresses');
  t.match(gauge, /svcproxy_dns_addresses\{name="api\.test"\} 2/);
});

t.test('svcproxy ingress --dns-server routes to the addresses a name answers', async (t) => {
  const { port, backends } = await startBackends(t);
  const dns = await startDnsmasq(t, { 'api.test': ['127.0.0.3'] });
  const dir = await tempDir(t, 'dns-');
  const config = join(dir, 'records.yaml');
  await writeFile(config, yamlDocuments(records({ replicas: { [LOCATION]: [`api.test:${port}`] } })));
  const proxy = await startProxyProcess(t, ['ingress', '--config', config, '--location', LOCATION, '--dns-server', dns.server]);
  let answer = await request(proxy.port, HOST, '/');
  // The replica's first readiness check may still be out: the request waits for it (FIRST_CHECK_WAIT_MS).
  t.equal(answer.status, 200, answer.body);
  t.equal(answer.headers['x-backend'], '127.0.0.3');
  await dns.set({ 'api.test': ['127.0.0.4'] });
  const moved = await eventually(async () => {
    answer = await request(proxy.port, HOST, '/');
    return answer.status === 200 && answer.headers['x-backend'] === '127.0.0.4';
  }, 30_000, 50);
  t.ok(moved, 'the new address answers once the name moved');
  const left = backends.get('127.0.0.3')!.served;
  for (let i = 0; i < 20; i++) t.equal((await request(proxy.port, HOST, '/')).headers['x-backend'], '127.0.0.4');
  t.equal(backends.get('127.0.0.3')!.served, left, 'the address that left got nothing more');
  proxy.child.kill('SIGTERM');
  t.equal(await proxy.exited, 0);
  t.match(proxy.output(), /dns answer/);
});

t.test('a replica\'s app, sidecar and mTLS listener are ports of each address answered', async (t) => {
  const dns = await startDnsmasq(t, { 'api.test': ['127.0.0.4', '127.0.0.2'] });
  const recs = records({ replicas: { [LOCATION]: [] } }).map((r) => r.kind === 'deployment'
    ? { ...r, status: { locations: [{ name: LOCATION, replicas: [
      { name: 'fixed', address: '127.0.0.9:7000' },
      { name: 'api', address: 'api.test:8080', sidecar: 'api.test:15006', mesh: 'api.test:15008' },
      { name: 'last', address: 'localhost:7001' },
    ] }] } }
    : r);
  const plane = await startPlane(t, recs, { location: LOCATION, dnsServers: [dns.server] });
  const view = (): unknown => plane.runtime.replicas.list('shop/api', LOCATION).map((r) => ({
    index: r.index, name: r.name, app: r.ports.get(8080), sidecar: r.sidecar, mesh: r.mesh,
  }));
  t.same(view(), [
    { index: 0, name: 'fixed', app: { host: '127.0.0.9', port: 7000 }, sidecar: undefined, mesh: undefined },
    { index: 1, name: 'api@127.0.0.2', app: { host: '127.0.0.2', port: 8080 }, sidecar: { host: '127.0.0.2', port: 15006 }, mesh: { host: '127.0.0.2', port: 15008 } },
    { index: 2, name: 'api@127.0.0.4', app: { host: '127.0.0.4', port: 8080 }, sidecar: { host: '127.0.0.4', port: 15006 }, mesh: { host: '127.0.0.4', port: 15008 } },
    { index: 3, name: 'last', app: { host: 'localhost', port: 7001 }, sidecar: undefined, mesh: undefined },
  ], 'known before the listeners open; numbered in address order among the fixed ones');
  await dns.set({ 'api.test': ['127.0.0.3'] });
  await waitFor(() => plane.runtime.replicas.list('shop/api', LOCATION).length === 3, 30_000, 'the new answer');
  t.same(plane.runtime.replicas.list('shop/api', LOCATION).map((r) => `${r.index} ${r.name}`), ['0 fixed', '1 api@127.0.0.3', '2 last']);
});
