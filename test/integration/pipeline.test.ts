/**
 * The HTTP/1.1 request path end to end through a real ingress and real upstreams: every endpoint
 * format, header rewriting, suspend, timeout, readiness, debug headers, domain routes, serverless
 * Host, local replies in the platform's error shape.
 */
import t from 'tap';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

t.test('canonical endpoint forwards and rewrites headers', async (t) => {
  const up = await startHttpServer(t, echoHandler('a'));
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/hello/./world//x?q=1&q=2', {
    headers: {
      'x-svc-location': 'spoofed',
      'x-envoy-original-path': '/admin',
      'x-request-id': 'client-id-1',
      'x-forwarded-for': '203.0.113.9',
      'keep-alive': 'timeout=5',
      connection: 'keep-alive, x-hop',
      'x-hop': 'drop me',
      'x-app': 'kept',
    },
  });
  t.equal(res.status, 200);
  const seen = JSON.parse(res.body);
  t.equal(seen.url, '/hello/world/x?q=1&q=2', 'path normalized once, query kept as sent');
  t.equal(seen.headers.host, CANONICAL);
  t.notOk(seen.headers['x-svc-location'], 'client x-svc-* stripped');
  t.notOk(seen.headers['x-envoy-original-path'], 'client x-envoy-* stripped');
  t.notOk(seen.headers['x-hop'], 'headers named by Connection are hop-by-hop');
  t.notOk(seen.headers['keep-alive']);
  t.equal(seen.headers['x-app'], 'kept');
  t.equal(seen.headers['x-request-id'], 'client-id-1', 'a valid client request id is kept');
  t.equal(seen.headers['x-forwarded-for'], '203.0.113.9, 127.0.0.1');
  t.equal(seen.headers['x-forwarded-proto'], 'http');

  const bad = await request(plane.port, CANONICAL, '/', { headers: { 'x-request-id': 'has space' } });
  const id = JSON.parse(bad.body).headers['x-request-id'];
  t.not(id, 'has space', 'an invalid request id is replaced');
  t.match(id, /^[A-Za-z0-9._-]{1,128}$/);
});

t.test('unknown hosts, bad paths and internal names on the external listener', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  for (const host of ['nope.app.localhost', `api-zzzzzzzzzzzzz.app.localhost`, 'api.shop.internal.localhost', '']) {
    const res = await request(plane.port, host, '/');
    t.equal(res.status, 404, `${host || '(empty)'} → 404`);
    const body = JSON.parse(res.body);
    t.same({ status: body.status, message: body.message, code: body.code }, { status: 404, message: 'no route', code: 'NO_ROUTE' });
    t.type(body.id, 'string');
    t.ok(body.id.length > 0);
  }
  for (const path of ['/a%2Fb', '/a/..;/b', '/a%5cb']) {
    const res = await request(plane.port, CANONICAL, path);
    t.equal(res.status, 400, `${path} → 400`);
    t.equal(JSON.parse(res.body).code, 'BAD_REQUEST');
  }
  // Host matching ignores case, a trailing dot and the port.
  const res = await request(plane.port, `API-${ALIAS.toUpperCase()}.App.Localhost.:8080`, '/');
  t.equal(res.status, 200);
});

t.test('location and replica-direct endpoints', async (t) => {
  const a0 = await startHttpServer(t, echoHandler('east-0'));
  const a1 = await startHttpServer(t, echoHandler('east-1'));
  const b0 = await startHttpServer(t, echoHandler('west-0'));
  const plane = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${a0.port}`, `127.0.0.1:${a1.port}`], 'gcp-us-west1': [`127.0.0.1:${b0.port}`] },
      workloadSpec: { type: 'stateful', loadBalancer: { replicaDirect: true } },
    }),
  );
  await plane.ready();
  const west = await request(plane.port, `api-${ALIAS}.gcp-us-west1.direct.localhost`, '/');
  t.equal(JSON.parse(west.body).name, 'west-0');
  for (let i = 0; i < 4; i++) {
    const east = await request(plane.port, `api-${ALIAS}.aws-us-east-2.direct.localhost`, '/');
    t.match(JSON.parse(east.body).name, /^east-/);
  }
  const r1 = await request(plane.port, `api-${ALIAS}-1.aws-us-east-2.direct.localhost`, '/');
  t.equal(JSON.parse(r1.body).name, 'east-1');
  const r9 = await request(plane.port, `api-${ALIAS}-9.aws-us-east-2.direct.localhost`, '/');
  t.equal(r9.status, 503, 'a replica index that does not exist has no healthy upstream');
  const other = await request(plane.port, `api-${ALIAS}.azure-eastus.direct.localhost`, '/');
  t.equal(other.status, 404, 'a location outside the GVC has no route');
});

t.test('replica-direct is off unless loadBalancer.replicaDirect', async (t) => {
  const a0 = await startHttpServer(t, echoHandler());
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${a0.port}`] } }));
  await plane.ready();
  const res = await request(plane.port, `api-${ALIAS}-0.aws-us-east-2.direct.localhost`, '/');
  t.equal(res.status, 404);
});

t.test('suspend globally and per location', async (t) => {
  const a0 = await startHttpServer(t, echoHandler('east'));
  const b0 = await startHttpServer(t, echoHandler('west'));
  const replicas = { 'aws-us-east-2': [`127.0.0.1:${a0.port}`], 'gcp-us-west1': [`127.0.0.1:${b0.port}`] };
  const global = await startPlane(t, records({ replicas, workloadSpec: { defaultOptions: { suspend: true } } }));
  const res = await request(global.port, CANONICAL, '/');
  t.equal(res.status, 503);
  t.equal(JSON.parse(res.body).message, 'workload suspended');

  const local = await startPlane(
    t,
    records({ replicas, workloadSpec: { localOptions: [{ location: 'aws-us-east-2', suspend: true }] } }),
  );
  await local.ready();
  for (let i = 0; i < 5; i++) {
    const r = await request(local.port, CANONICAL, '/');
    t.equal(JSON.parse(r.body).name, 'west', 'canonical traffic avoids the suspended location');
  }
  const direct = await request(local.port, `api-${ALIAS}.aws-us-east-2.direct.localhost`, '/');
  t.equal(direct.status, 503);
  t.equal(JSON.parse(direct.body).message, 'workload suspended');
});

t.test('timeouts answer 504, the override tag wins, a dead upstream gives 503', async (t) => {
  const slow = await startHttpServer(t, (req, res) => {
    const timer = setTimeout(() => res.end('late'), 3000);
    res.on('close', () => clearTimeout(timer));
  });
  const plane = await startPlane(
    t,
    records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${slow.port}`] }, workloadSpec: { defaultOptions: { timeoutSeconds: 1 } } }),
  );
  await plane.ready();
  const started = Date.now();
  const res = await request(plane.port, CANONICAL, '/');
  t.equal(res.status, 504);
  t.equal(JSON.parse(res.body).message, 'upstream request timeout');
  t.ok(Date.now() - started < 2500, 'answered at the timeout, not when the upstream finished');

  const override = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${slow.port}`] },
      workloadSpec: { defaultOptions: { timeoutSeconds: 1 } },
      tags: { 'svc/timeoutSecondsOverride': 5 },
    }),
  );
  await override.ready();
  const late = await request(override.port, CANONICAL, '/');
  t.equal(late.status, 200);
  t.equal(late.body, 'late');

  // localOptions[].timeoutSeconds is the timeout in its location (DESIGN §2: localOptions override
  // defaultOptions there); the other location keeps defaultOptions'.
  const perLocation = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${slow.port}`], 'gcp-us-east1': [`127.0.0.1:${slow.port}`] },
      workloadSpec: { defaultOptions: { timeoutSeconds: 1 }, localOptions: [{ location: '//location/gcp-us-east1', timeoutSeconds: 5 }] },
    }),
  );
  await perLocation.ready();
  const [inGcp, inAws] = await Promise.all([
    request(perLocation.port, `api-${ALIAS}.gcp-us-east1.direct.localhost`, '/'),
    request(perLocation.port, `api-${ALIAS}.aws-us-east-2.direct.localhost`, '/'),
  ]);
  t.same([inGcp.status, inGcp.body], [200, 'late'], 'gcp-us-east1: its localOptions\' 5 s');
  t.equal(inAws.status, 504, 'aws-us-east-2: defaultOptions\' 1 s');

  // A replica whose port closes after it became ready: refused → 503 with Envoy's message.
  const dying = await startHttpServer(t, echoHandler());
  const plane2 = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${dying.port}`] } }));
  await plane2.ready();
  await new Promise<void>((resolve) => {
    dying.server.closeAllConnections();
    dying.server.close(() => resolve());
  });
  const refused = await request(plane2.port, CANONICAL, '/');
  t.equal(refused.status, 503);
  t.equal(JSON.parse(refused.body).message, 'upstream connect error or disconnect/reset before headers');
});

t.test('no ready replica → 503 no healthy upstream', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const recs = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } });
  const deployment = recs.find((r) => r.kind === 'deployment') as { status: { locations: { replicas: Record<string, unknown>[] }[] } };
  deployment.status.locations[0]!.replicas[0]!.ready = false;
  const plane = await startPlane(t, recs);
  const res = await request(plane.port, CANONICAL, '/');
  t.equal(res.status, 503);
  t.equal(JSON.parse(res.body).message, 'no healthy upstream');
});

t.test('deployment replicas share one traffic mark per workload, set by the first routed request', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const recs = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`, `127.0.0.1:${up.port}`] } });
  const idle = recs.filter((r) => r.kind === 'workload' || r.kind === 'deployment').map((r) => ({ ...r, name: 'idle' }));
  const plane = await startPlane(t, [...recs, ...idle]);
  await plane.ready();
  const of = (workload: string) => plane.runtime.replicas.all().filter((r) => r.workload === workload);
  t.equal(of('shop/api').length, 2);
  t.equal(of('shop/idle').length, 2);
  t.equal(of('shop/api')[0]!.traffic, of('shop/api')[1]!.traffic, "one object for the workload's replicas");
  t.not(of('shop/api')[0]!.traffic, of('shop/idle')[0]!.traffic);
  t.same(of('shop/api').map((r) => r.traffic?.routed), [false, false], 'no traffic before the first request');
  t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  t.same(of('shop/api').map((r) => r.traffic?.routed), [true, true], 'routed once a request went to either replica');
  t.same(of('shop/idle').map((r) => r.traffic?.routed), [false, false], 'the other workload stays quiet (its ready replicas are probed once a minute)');
});

t.test('debug headers only with debug on, the request header, and the canonical host', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { defaultOptions: { debug: true } } }));
  await plane.ready();
  const on = await request(plane.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'true' } });
  t.equal(on.headers['x-svc-location'], 'aws-us-east-2');
  t.equal(on.headers['x-svc-replica'], 'api-0');
  t.notOk(JSON.parse(on.body).headers['x-svc-debug'], 'x-svc-debug is read, then stripped');
  const without = await request(plane.port, CANONICAL, '/');
  t.notOk(without.headers['x-svc-location']);
  const direct = await request(plane.port, `api-${ALIAS}.aws-us-east-2.direct.localhost`, '/', { headers: { 'x-svc-debug': 'true' } });
  t.notOk(direct.headers['x-svc-location'], 'not on location endpoints');

  const off = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await off.ready();
  const none = await request(off.port, CANONICAL, '/', { headers: { 'x-svc-debug': 'true' } });
  t.notOk(none.headers['x-svc-location'], 'not when the workload has debug off');
});

t.test('gvc alias routes to aliasWorkloadLink unless it is globally suspended', async (t) => {
  const up = await startHttpServer(t, echoHandler('aliased'));
  const replicas = { 'aws-us-east-2': [`127.0.0.1:${up.port}`] };
  const plane = await startPlane(t, records({ replicas, gvcSpec: { aliasWorkloadLink: '//workload/api' } }));
  await plane.ready();
  const res = await request(plane.port, `${ALIAS}.app.localhost`, '/');
  t.equal(JSON.parse(res.body).name, 'aliased');
  const suspended = await startPlane(
    t,
    records({ replicas, gvcSpec: { aliasWorkloadLink: '//workload/api' }, workloadSpec: { defaultOptions: { autoscaling: { minScale: 0, maxScale: 0 } } } }),
  );
  const none = await request(suspended.port, `${ALIAS}.app.localhost`, '/');
  t.equal(none.status, 404);
  const unset = await startPlane(t, records({ replicas }));
  t.equal((await request(unset.port, `${ALIAS}.app.localhost`, '/')).status, 404);
});

t.test('domain routes: longest prefix first, replacePrefix, headers, replica', async (t) => {
  const api = await startHttpServer(t, echoHandler('api'));
  const web = await startHttpServer(t, echoHandler('web'));
  const recs = [
    ...records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${api.port}`] } }),
    {
      kind: 'workload',
      name: 'web',
      gvc: 'shop',
      spec: {
        type: 'standard',
        containers: [{ name: 'web', image: 'web:1', ports: [{ number: 3000, protocol: 'http' }] }],
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      },
    },
    { kind: 'deployment', name: 'web', gvc: 'shop', status: { locations: [{ name: 'aws-us-east-2', replicas: [{ name: 'web-0', address: `127.0.0.1:${web.port}` }] }] } },
    {
      kind: 'domain',
      name: 'www.example.com',
      spec: {
        ports: [
          {
            number: 443,
            routes: [
              { prefix: '/', workloadLink: '//gvc/shop/workload/web' },
              { prefix: '/api/', replacePrefix: '/v2/', workloadLink: '//gvc/shop/workload/api', headers: { request: { set: { 'x-route': 'api' } } } },
            ],
          },
        ],
      },
    },
  ];
  const plane = await startPlane(t, recs);
  await plane.ready();
  const a = await request(plane.port, 'WWW.example.com', '/api/users?x=1');
  const seen = JSON.parse(a.body);
  t.equal(seen.name, 'api');
  t.equal(seen.url, '/v2/users?x=1');
  t.equal(seen.headers['x-route'], 'api');
  t.equal(seen.headers.host, 'WWW.example.com', 'the original host is kept for standard workloads');
  const w = await request(plane.port, 'www.example.com', '/index.html');
  t.equal(JSON.parse(w.body).name, 'web');
  t.equal((await request(plane.port, 'other.example.com', '/')).status, 404);
});

t.test('a domain route to an ignored workload (svc/ignore) routes nowhere', async (t) => {
  const app = await startHttpServer(t, echoHandler('api'));
  const recs = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags: { 'svc/ignore': true } });
  recs.push({ kind: 'domain', name: 'old.example.com', spec: { ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: '//gvc/shop/workload/api' }] }] } });
  const plane = await startPlane(t, recs);
  const res = await request(plane.port, 'old.example.com', '/');
  t.equal(res.status, 404);
  t.equal(JSON.parse(res.body).message, 'no route');
});

t.test('serverless targets get the canonical Host and X-Forwarded-Host', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const recs = [
    ...records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, type: 'serverless' }),
    { kind: 'domain', name: 'fn.example.com', spec: { ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: '//gvc/shop/workload/api' }] }] } },
  ];
  const plane = await startPlane(t, recs);
  await plane.ready();
  const res = await request(plane.port, 'fn.example.com', '/');
  const seen = JSON.parse(res.body);
  t.equal(seen.headers.host, CANONICAL);
  t.equal(seen.headers['x-forwarded-host'], 'fn.example.com');
});

t.test('POST bodies stream to the upstream; HEAD and chunked work', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/submit', { method: 'POST', body: 'x'.repeat(100_000), headers: { 'content-type': 'text/plain' } });
  const seen = JSON.parse(res.body);
  t.equal(seen.method, 'POST');
  t.equal(seen.body.length, 100_000);
  const head = await request(plane.port, CANONICAL, '/', { method: 'HEAD' });
  t.equal(head.status, 200);
  t.equal(head.body, '');
});

t.test('admin: healthz, ready, metrics, config', async (t) => {
  const up = await startHttpServer(t, echoHandler());
  const plane = await startPlane(
    t,
    records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }], env: [{ name: 'DB_PASSWORD', value: 'hunter2' }] }] } }),
  );
  await plane.ready();
  await request(plane.port, CANONICAL, '/');
  const get = (path: string): Promise<Response> => fetch(plane.adminUrl + path);
  t.equal((await get('/healthz')).status, 200);
  t.equal((await get('/ready')).status, 200);
  const metrics = await (await get('/metrics')).text();
  t.match(metrics, /svcproxy_requests_total\{workload="shop\/api",location="aws-us-east-2",status_class="2xx"\} 1/);
  t.match(metrics, /svcproxy_upstream_latency_seconds_bucket/);
  t.match(metrics, /svcproxy_open_connections/);
  t.match(metrics, /svcproxy_replicas_ready\{workload="shop\/api",location="aws-us-east-2"\} 1/);
  const config = await (await get('/config')).text();
  t.notMatch(config, /hunter2/, 'secrets are redacted');
  t.match(config, /\[redacted\]/);
  t.equal((await get('/nope')).status, 404);
});

t.test('internal endpoints: mesh listener only, internal firewall, declared ports only', async (t) => {
  const up = await startHttpServer(t, echoHandler('inside'));
  const replicas = { 'aws-us-east-2': [`127.0.0.1:${up.port}`] };
  const closed = await startPlane(t, records({ replicas }), { mesh: ['127.0.0.1:0'] });
  await closed.ready();
  const meshPort = closed.runtime.meshListeners[0]!.address.port;
  const blocked = await request(meshPort, 'api.shop.internal.localhost:8080', '/');
  t.equal(blocked.status, 403, 'inboundAllowType defaults to none');
  t.equal(JSON.parse(blocked.body).message, 'blocked by firewall');

  const open = await startPlane(t, records({ replicas, workloadSpec: { firewallConfig: { internal: { inboundAllowType: 'same-org' } } } }), {
    mesh: ['127.0.0.1:0'],
  });
  await open.ready();
  const port = open.runtime.meshListeners[0]!.address.port;
  const ok = await request(port, 'api.shop.internal.localhost:8080', '/x');
  t.equal(ok.status, 200);
  t.equal(JSON.parse(ok.body).name, 'inside');
  t.equal((await request(port, 'api.shop.internal.localhost', '/')).status, 200, 'the port defaults to the first declared port');
  t.equal((await request(port, 'replica-0.api.aws-us-east-2.shop.internal.localhost:8080', '/')).status, 200);
  t.equal((await request(port, 'api.shop.internal.localhost:9999', '/')).status, 404, 'undeclared ports have no route');
  t.equal((await request(open.port, 'api.shop.internal.localhost:8080', '/')).status, 404, 'never on the external listener');
});

t.test('absolute-form targets are routed by their authority; long URLs get 414', async (t) => {
  const up = await startHttpServer(t, echoHandler('a'));
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const { connect } = await import('node:net');
  const raw = (text: string): Promise<string> =>
    new Promise((resolve, reject) => {
      const s = connect(plane.port, '127.0.0.1', () => s.write(text));
      let out = '';
      s.on('data', (c: Buffer) => (out += c.toString()));
      s.on('end', () => resolve(out));
      s.on('error', reject);
    });
  const foreign = await raw(`GET http://evil.example/admin HTTP/1.1\r\nHost: ${CANONICAL}\r\nConnection: close\r\n\r\n`);
  t.match(foreign, /^HTTP\/1\.1 404 /, 'the authority of the target wins over Host: never an open proxy');
  const own = await raw(`GET http://${CANONICAL}/x?y=1 HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
  t.match(own, /^HTTP\/1\.1 200 /);
  t.match(own, /"url":"\/x\?y=1"/, 'forwarded in origin form');
  const long = await request(plane.port, CANONICAL, '/' + 'a'.repeat(20_000));
  t.equal(long.status, 414);
  t.equal(JSON.parse(long.body).code, 'URI_TOO_LONG');
});
