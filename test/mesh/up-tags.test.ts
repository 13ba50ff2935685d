/**
 * The mesh tags and egress under `svcproxy up`, with real replicas: `svc/bypassProxyOutbound` (no
 * proxy variables), `svc/disableServiceMeshInboundPort` (that port is reached without the sidecar:
 * no mTLS, no filters), `svc/disableServiceMeshOutboundPort` (the caller's calls to that port skip
 * the mesh), `svc/discoverCrossGvcReplicas` (replica-direct names of other GVCs), and the egress
 * firewall through a replica's outbound listener (requests and CONNECT tunnels).
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { request } from '../helpers/harness.js';
import { echoContainer, meshWorkload, startMeshUp } from './fixtures.js';

/** A port nothing listens on: the closed external authorization service. */
async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** CONNECT through a proxy; resolves with the proxy's status line and the open socket. */
function connect(proxy: number, authority: string): Promise<{ status: number; socket: net.Socket }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(proxy, '127.0.0.1', () => socket.write(`CONNECT ${authority} HTTP/1.1\r\nhost: ${authority}\r\n\r\n`));
    let seen = '';
    const onData = (c: Buffer): void => {
      seen += c.toString('latin1');
      const end = seen.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      resolve({ status: Number(seen.slice(9, 12)), socket });
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
}

t.test('mesh tags and egress under up', async (t) => {
  // The egress destination: a server on 127.0.0.2 (every 127/8 address is loopback on Linux).
  const outside = http.createServer((req, res) => res.end(`outside ${req.url}`));
  await new Promise<void>((r) => outside.listen(0, '127.0.0.2', r));
  t.teardown(() => outside.close());
  const outsidePort = (outside.address() as net.AddressInfo).port;
  const authPort = await closedPort();

  const { up, proxyPort } = await startMeshUp(t, [
    // Its filters fail every request (ext_authz down, fail-closed) except on the port out of the mesh.
    meshWorkload('g1', 't', {
      containers: [echoContainer('app', 8080), echoContainer('plain', 8081)],
      tags: {
        'svc/disableServiceMeshInboundPort': 8081,
        'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': authPort, 'svc/externalAuthProtocol': 'http',
        'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false,
      },
    }),
    meshWorkload('g1', 'u', { containers: [echoContainer('app', 8080), echoContainer('other', 9090)] }),
    meshWorkload('g1', 'c', { tags: { 'svc/disableServiceMeshOutboundPort': 9090 } }),
    meshWorkload('g1', 'd'),
    meshWorkload('g1', 'direct', { tags: { 'svc/bypassProxyOutbound': true } }),
    meshWorkload('g2', 'x', { tags: { 'svc/discoverCrossGvcReplicas': true } }),
    meshWorkload('g2', 'y'),
    meshWorkload('g1', 'e', { spec: { firewallConfig: { internal: { inboundAllowType: 'same-org' }, external: { outboundAllowCIDR: ['127.0.0.2/32'] } } } }),
  ], { mesh: ['127.0.0.1:0'] });
  const { runtime } = up;
  /** The variables the mesh gave a workload's processes (not merged over this process's). */
  const meshEnv = (workload: string): Readonly<Record<string, string>> => up.supervisor.processes().find((p) => p.workload === workload)!.env;
  const xfccOf = (body: string): string | undefined => JSON.parse(body).headers['x-forwarded-client-cert'];

  await t.test('svc/bypassProxyOutbound: no proxy variables', async (t) => {
    const env = meshEnv('g1/direct');
    for (const name of ['HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy']) t.equal(env[name], process.env[name], `${name} not set by the mesh`);
    const other = meshEnv('g1/d');
    t.match(other.HTTP_PROXY, /^http:\/\/127\.0\.0\.1:\d+$/);
    t.equal(other.NO_PROXY, '127.0.0.1,::1', 'NO_PROXY leaves *.localhost names to the mesh');
  });

  await t.test('svc/disableServiceMeshInboundPort: that port skips the sidecar (no mTLS, no filters)', async (t) => {
    const filtered = await request(proxyPort('g1/d'), 't.g1.internal.localhost:8080', '/');
    t.equal(filtered.status, 403, 'the mesh port runs the filters (ext_authz down, fail-closed)');
    t.equal(JSON.parse(filtered.body).message, 'external authorization failed');
    const plain = await request(proxyPort('g1/d'), 't.g1.internal.localhost:8081', '/');
    // Any other answer's body says which part refused it (the activator, the mesh, the app).
    if (!t.equal(plain.status, 200, 'the excluded port reaches the app without the filters')) t.comment(plain.body);
    else t.equal(xfccOf(plain.body), undefined, 'and without mTLS (no client certificate to forward)');
  });

  await t.test('svc/disableServiceMeshOutboundPort: the caller\'s calls to that port skip the mesh', async (t) => {
    const meshed = await request(proxyPort('g1/c'), 'u.g1.internal.localhost:8080', '/');
    t.match(xfccOf(meshed.body), /URI=spiffe:\/\/acme\/gvc\/g1\/workload\/c$/, 'other ports go over mTLS');
    const skipped = await request(proxyPort('g1/c'), 'u.g1.internal.localhost:9090', '/');
    t.equal(skipped.status, 200);
    t.equal(xfccOf(skipped.body), undefined, 'the excluded port goes in plain text');
    const other = await request(proxyPort('g1/d'), 'u.g1.internal.localhost:9090', '/');
    t.match(xfccOf(other.body), /URI=spiffe:\/\/acme\/gvc\/g1\/workload\/d$/, 'a caller without the tag still uses the mesh there');
  });

  await t.test('svc/discoverCrossGvcReplicas: replica-direct names of other GVCs', async (t) => {
    const host = 'replica-0.u.loc1.g1.internal.localhost:8080';
    t.equal((await request(proxyPort('g2/x'), host, '/')).status, 200, 'with the tag');
    t.equal((await request(proxyPort('g2/y'), host, '/')).status, 404, 'without it the name does not resolve');
    t.equal((await request(proxyPort('g1/d'), host, '/')).status, 200, 'the same GVC needs no tag');
    t.equal((await request(proxyPort('g2/y'), 'u.g1.internal.localhost:8080', '/')).status, 200, 'the workload name resolves across GVCs');
  });

  await t.test('egress: outboundAllowCIDR admits, everything else is blocked', async (t) => {
    const allowed = await request(proxyPort('g1/e'), `127.0.0.2:${outsidePort}`, `http://127.0.0.2:${outsidePort}/out`);
    t.equal(allowed.status, 200);
    t.equal(allowed.body, 'outside /out');
    const blocked = await request(proxyPort('g1/e'), `127.0.0.3:${outsidePort}`, `http://127.0.0.3:${outsidePort}/out`);
    t.equal(blocked.status, 403);
    t.equal(JSON.parse(blocked.body).message, 'blocked by firewall');
    const none = await request(proxyPort('g1/d'), `127.0.0.2:${outsidePort}`, `http://127.0.0.2:${outsidePort}/out`);
    t.equal(none.status, 403, 'no outbound rule: nothing leaves');

    const tunnel = await connect(proxyPort('g1/e'), `127.0.0.2:${outsidePort}`);
    t.equal(tunnel.status, 200, 'CONNECT to an allowed address');
    const answer = await new Promise<string>((resolve) => {
      let got = '';
      tunnel.socket.on('data', (c: Buffer) => {
        got += c.toString();
        if (got.includes('outside /tunnelled')) resolve(got);
      });
      tunnel.socket.write('GET /tunnelled HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
    });
    t.match(answer, /^HTTP\/1\.1 200/);
    tunnel.socket.destroy();
    const refused = await connect(proxyPort('g1/d'), `127.0.0.2:${outsidePort}`);
    t.equal(refused.status, 403, 'CONNECT without an outbound rule');
    refused.socket.destroy();
    const metrics = await request(runtime.admin!.address.port, 'admin', '/metrics');
    t.match(metrics.body, /svcproxy_egress_requests_total\{source_workload="e",source_gvc="g1",outcome="allowed"\} 2/);
    t.match(metrics.body, /svcproxy_egress_requests_total\{source_workload="d",source_gvc="g1",outcome="denied"\} 2/);
  });
});
