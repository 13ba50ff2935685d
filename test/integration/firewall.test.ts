/**
 * The external firewall end to end: deny by default, allow and block lists (blocked wins; bare
 * addresses; IPv4-mapped IPv6), the client address after the GVC's trusted proxies (0, 1, 2),
 * header filters, the mesh listener left to the internal firewall, WebSocket upgrades, metrics.
 */
import t, { type Test } from 'tap';
import net from 'node:net';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

async function plane(t: Test, firewall: Record<string, unknown> | undefined, gvcSpec?: Record<string, unknown>, extra: { mesh?: boolean } = {}) {
  const app = await startHttpServer(t, echoHandler('app'));
  const recs = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, ...(gvcSpec ? { gvcSpec } : {}) });
  const workload = recs.find((r) => r.kind === 'workload') as { spec: Record<string, unknown> };
  if (firewall === undefined) delete workload.spec.firewallConfig;
  else workload.spec.firewallConfig = firewall;
  const p = await startPlane(t, recs, extra.mesh ? { mesh: ['127.0.0.1:0'] } : {});
  await p.ready();
  return p;
}

const external = (e: Record<string, unknown>) => ({ external: e });

t.test('deny by default, allow and block lists', async (t) => {
  const none = await plane(t, undefined);
  const res = await request(none.port, CANONICAL, '/');
  t.equal(res.status, 403, 'no inboundAllowCIDR: nothing external gets in');
  const body = JSON.parse(res.body);
  t.same({ status: body.status, message: body.message, code: body.code }, { status: 403, message: 'blocked by firewall', code: 'FIREWALL_BLOCKED' });

  const cases: [Record<string, unknown>, number, string][] = [
    [{ inboundAllowCIDR: ['10.0.0.0/8'] }, 403, 'not in the allow list'],
    [{ inboundAllowCIDR: ['127.0.0.1'] }, 200, 'a bare address is one host'],
    [{ inboundAllowCIDR: ['127.0.0.2'] }, 403, 'another host'],
    [{ inboundAllowCIDR: ['127.0.0.0/8'] }, 200, 'in range'],
    [{ inboundAllowCIDR: ['::ffff:127.0.0.1'] }, 200, 'IPv4-mapped IPv6 is the IPv4 address'],
    [{ inboundAllowCIDR: ['::/0'] }, 403, '::/0 does not admit IPv4 clients'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], inboundBlockedCIDR: ['127.0.0.0/8'] }, 403, 'blocked wins'],
    [{ inboundAllowCIDR: ['127.0.0.1'], inboundBlockedCIDR: ['127.0.0.1'] }, 403, 'blocked wins over the same host'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], inboundBlockedCIDR: ['10.0.0.0/8'] }, 200, 'a block elsewhere'],
  ];
  for (const [config, status, why] of cases) {
    const p = await plane(t, external(config));
    t.equal((await request(p.port, CANONICAL, '/')).status, status, `${JSON.stringify(config)}: ${why}`);
  }
});

t.test('the client address after trusted proxies', async (t) => {
  const allow10 = external({ inboundAllowCIDR: ['10.0.0.0/8'] });
  const zero = await plane(t, allow10);
  t.equal((await request(zero.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '10.1.1.1' } })).status, 403, '0 trusted proxies: x-forwarded-for is ignored');

  const one = await plane(t, allow10, { loadBalancer: { trustedProxies: 1 } });
  t.equal((await request(one.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '203.0.113.5, 10.1.1.1' } })).status, 200, '1: the last entry');
  t.equal((await request(one.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '10.1.1.1, 203.0.113.5' } })).status, 403, '1: a spoofed first entry does not count');
  t.equal((await request(one.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '::ffff:10.9.9.9' } })).status, 200, 'a mapped address in x-forwarded-for');
  t.equal((await request(one.port, CANONICAL, '/')).status, 403, 'no x-forwarded-for: the peer');

  const two = await plane(t, allow10, { loadBalancer: { trustedProxies: 2 } });
  t.equal((await request(two.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '10.1.1.1, 203.0.113.5' } })).status, 200, '2: the second from the right');
  t.equal((await request(two.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '203.0.113.9, 203.0.113.5, 10.1.1.1' } })).status, 403);

  const blocked = await plane(t, external({ inboundAllowCIDR: ['0.0.0.0/0'], inboundBlockedCIDR: ['198.51.100.0/24'] }), { loadBalancer: { trustedProxies: 1 } });
  t.equal((await request(blocked.port, CANONICAL, '/', { headers: { 'x-forwarded-for': '198.51.100.7' } })).status, 403, 'the blocked list sees the client too');
});

t.test('header filters', async (t) => {
  const allowed = await plane(t, external({ inboundAllowCIDR: ['0.0.0.0/0'], http: { inboundHeaderFilter: [{ key: 'User-Agent', allowedValues: ['.*Mozilla.*', 'curl/8\\..*'] }] } }));
  t.equal((await request(allowed.port, CANONICAL, '/', { headers: { 'user-agent': 'Mozilla/5.0 (X11)' } })).status, 200);
  t.equal((await request(allowed.port, CANONICAL, '/', { headers: { 'user-agent': 'curl/8.5.0' } })).status, 200);
  t.equal((await request(allowed.port, CANONICAL, '/', { headers: { 'user-agent': 'python-requests' } })).status, 403, 'no allowed value matches');
  t.equal((await request(allowed.port, CANONICAL, '/', { headers: { 'user-agent': 'xcurl/8.1' } })).status, 403, 'regexes match the whole value');
  t.equal((await request(allowed.port, CANONICAL, '/')).status, 403, 'missing header: not allowed');

  const blocked = await plane(t, external({ inboundAllowCIDR: ['0.0.0.0/0'], http: { inboundHeaderFilter: [{ key: 'x-client', blockedValues: ['evil.*', 'bad'] }] } }));
  t.equal((await request(blocked.port, CANONICAL, '/', { headers: { 'x-client': 'evil-bot' } })).status, 403);
  t.equal((await request(blocked.port, CANONICAL, '/', { headers: { 'x-client': 'bad' } })).status, 403);
  t.equal((await request(blocked.port, CANONICAL, '/', { headers: { 'x-client': 'not-bad' } })).status, 200);
  t.equal((await request(blocked.port, CANONICAL, '/')).status, 200, 'missing header: nothing blocked');

  const metrics = await (await fetch(`${blocked.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_firewall_blocked_total\{workload="shop\/api",reason="header_filter"\} 2/);
});

t.test('the mesh listener is not the external firewall’s', async (t) => {
  const p = await plane(t, { internal: { inboundAllowType: 'same-org' } }, undefined, { mesh: true });
  const meshPort = p.runtime.meshListeners[0]!.address.port;
  t.equal((await request(meshPort, 'api.shop.internal.localhost:8080', '/')).status, 200, 'an internal caller gets in');
  t.equal((await request(meshPort, CANONICAL, '/')).status, 200, 'also by the canonical name on the mesh listener');
  t.equal((await request(p.port, CANONICAL, '/')).status, 403, 'from outside it does not');
  const metrics = await (await fetch(`${p.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_firewall_blocked_total\{workload="shop\/api",reason="not_allowed"\} 1/);
});

t.test('WebSocket upgrades go through the firewall too', async (t) => {
  const p = await plane(t, external({ inboundAllowCIDR: ['10.0.0.0/8'] }));
  const status = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(p.port, '127.0.0.1', () => {
      socket.write(`GET /ws HTTP/1.1\r\nHost: ${CANONICAL}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
    });
    let data = '';
    socket.on('data', (c: Buffer) => (data += c));
    socket.on('end', () => resolve(data.split('\r\n')[0]!));
    socket.on('error', reject);
  });
  t.match(status, /^HTTP\/1\.1 403/);
});
