/**
 * Ingress and sidecar as separate listeners, as deployed: the ingress dials a replica's sidecar
 * (`deployment` replica `sidecar`), the sidecar forwards to its app. Also the drain on stop: requests
 * in flight finish, new connections are refused.
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, startSidecarBehindIngress, waitFor } from '../helpers/harness.js';
import { deadPort } from '../fixtures/extauth/servers.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

t.test('ingress → sidecar → app', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const base = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } });
  const { sidecar, ingress } = await startSidecarBehindIngress(t, base, app.port);
  const direct = await request(sidecar.port, CANONICAL, '/from-sidecar');
  t.equal(direct.status, 200);
  t.equal(JSON.parse(direct.body).url, '/from-sidecar');

  await ingress.ready();
  const res = await request(ingress.port, CANONICAL, '/through?x=1', { headers: { 'x-request-id': 'trace-me' } });
  t.equal(res.status, 200);
  const seen = JSON.parse(res.body);
  t.equal(seen.url, '/through?x=1');
  t.equal(seen.headers['x-request-id'], 'trace-me', 'the request id survives both hops');
  t.equal(seen.headers['x-forwarded-for'], '127.0.0.1, 127.0.0.1', 'each hop appends its peer');
  t.equal(seen.headers.host, CANONICAL);

  const unknown = await startPlane(t, base, {
    role: 'sidecar',
    sidecar: { workload: 'shop/missing', location: 'aws-us-east-2', replica: 'x-0', app: `127.0.0.1:${app.port}` },
  });
  t.equal((await request(unknown.port, CANONICAL, '/')).status, 404, 'a sidecar for a workload not in the config has no route');
});

t.test('publishNotReadyAddresses admits not-ready replicas on internal endpoints only', async (t) => {
  const app = await startHttpServer(t, echoHandler('warming'));
  const recs = records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    tags: { 'svc/publishNotReadyAddresses': true },
    workloadSpec: { firewallConfig: { internal: { inboundAllowType: 'same-org' }, external: { inboundAllowCIDR: ['0.0.0.0/0'] } } },
  });
  const deployment = recs.find((r) => r.kind === 'deployment') as { status: { locations: { replicas: Record<string, unknown>[] }[] } };
  deployment.status.locations[0]!.replicas[0]!.ready = false;
  const plane = await startPlane(t, recs, { mesh: ['127.0.0.1:0'] });
  const meshPort = plane.runtime.meshListeners[0]!.address.port;
  t.equal((await request(meshPort, 'api.shop.internal.localhost:8080', '/')).status, 200, 'internal endpoint reaches the not-ready replica');
  t.equal((await request(plane.port, CANONICAL, '/')).status, 503, 'the canonical endpoint does not');
});

t.test("a sidecar's mesh listener serves internal host names, with the target's filters for a replica without a sidecar", async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const other = await startHttpServer(t, echoHandler('other'));
  const base = records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    workloadSpec: { firewallConfig: { internal: { inboundAllowType: 'same-org' }, external: { inboundAllowCIDR: ['0.0.0.0/0'] } } },
  });
  const deadAuth = await deadPort();
  // shop/guarded: checked by an authorization service that is down, failing closed.
  const guarded = base
    .filter((r) => r.kind === 'workload' || r.kind === 'deployment')
    .map((r) => (r.kind === 'workload'
      ? { ...r, name: 'guarded', tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': deadAuth, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false } }
      : { ...r, name: 'guarded', status: { locations: [{ name: 'aws-us-east-2', replicas: [{ name: 'guarded-0', address: `127.0.0.1:${other.port}` }] }] } }));
  const sidecar = await startPlane(t, [...base, ...guarded], {
    role: 'sidecar',
    mesh: ['127.0.0.1:0'],
    sidecar: { workload: 'shop/api', location: 'aws-us-east-2', replica: 'api-0', app: `127.0.0.1:${app.port}` },
  });
  await sidecar.ready();
  const meshPort = sidecar.runtime.meshListeners[0]!.address.port;
  const own = await request(meshPort, 'api.shop.internal.localhost:8080', '/');
  t.equal(own.status, 200, 'an internal host routes to its deployment replica');
  t.equal(JSON.parse(own.body).name, 'app');
  const checked = await request(meshPort, 'guarded.shop.internal.localhost:8080', '/');
  t.equal(checked.status, 403, "the target's external authorization runs in-process (its service is down: closed)");
  t.equal(JSON.parse(checked.body).code, 'AUTH_FAILED');
  t.equal((await request(sidecar.port, 'anything.example', '/in')).status, 200, 'the inbound listener still forwards to its app');
});

t.test('stop drains: in-flight requests finish, new connections are refused', async (t) => {
  // The app holds its answer until the checks below are done: the request is in flight for as long
  // as they take, however busy the machine.
  let arrived = false;
  let release: () => void = () => undefined;
  const released = new Promise<void>((r) => (release = r));
  const slow = await startHttpServer(t, (_req, res) => {
    arrived = true;
    void released.then(() => res.end('finished'));
  });
  t.teardown(release);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${slow.port}`] } }));
  await plane.ready();
  const inflight = request(plane.port, CANONICAL, '/');
  await waitFor(() => arrived, 30_000, 'the request to reach the app');
  // stop() closes the listeners before its first await: a connection attempt from here on is refused.
  const stopping = plane.runtime.stop(60_000);
  const refused = await new Promise<boolean>((resolve) => {
    const s = net.connect(plane.port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });
  t.ok(refused, 'new connections are refused while draining');
  t.equal((await fetch(plane.adminUrl + '/ready').catch(() => ({ status: 0 }))).status === 200, false, 'not ready while draining');
  release();
  const res = await inflight;
  t.equal(res.status, 200);
  t.equal(res.body, 'finished', 'the in-flight request completed');
  await stopping;
});

t.test('response bodies reach the client byte for byte, however small or large, over HTTP/1.1 and HTTP/2', async (t) => {
  // Every byte value, in bodies around the size up to which the last chunk is handed on as text.
  const pattern = (n: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + 3) & 0xff));
  const sizes = [0, 1, 255, 256, 1023, 1024, 1025, 4096, 70_000];
  const app = await startHttpServer(t, (req, res) => {
    const n = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('n'));
    const body = pattern(n);
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': body.length });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  const base = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } });
  const sidecar = await startPlane(t, base, {
    role: 'sidecar',
    sidecar: { workload: 'shop/api', location: 'aws-us-east-2', replica: 'api-0', app: `127.0.0.1:${app.port}` },
  });
  const h1 = (path: string, method = 'GET'): Promise<{ status: number; length: string | undefined; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: sidecar.port, path, method, headers: { host: CANONICAL }, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, length: res.headers['content-length'], body: Buffer.concat(chunks) }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  for (const n of sizes) {
    const res = await h1(`/bytes?n=${n}`);
    t.equal(res.status, 200);
    t.equal(res.length, String(n), `HTTP/1.1 ${n} bytes: content-length kept`);
    t.ok(res.body.equals(pattern(n)), `HTTP/1.1 ${n} bytes: the same bytes`);
  }
  const head = await h1('/bytes?n=300', 'HEAD');
  t.same([head.status, head.length, head.body.length], [200, '300', 0], 'HEAD: the length, no body');

  const session = http2.connect(`http://127.0.0.1:${sidecar.port}`);
  t.teardown(() => session.close());
  for (const n of sizes) {
    const { status, body } = await new Promise<{ status: number; body: Buffer }>((resolve, reject) => {
      const stream = session.request({ ':path': `/bytes?n=${n}`, ':authority': CANONICAL });
      const chunks: Buffer[] = [];
      let status = 0;
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => resolve({ status, body: Buffer.concat(chunks) }));
      stream.on('error', reject);
    });
    t.equal(status, 200);
    t.ok(body.equals(pattern(n)), `HTTP/2 ${n} bytes: the same bytes`);
  }
});
