/**
 * The access-log service end to end, against a real gRPC server built from Envoy's own accesslog
 * protos: entries arrive with their fields filled and the extra headers and trailers asked for; the
 * identifier only in a stream's first message; batching by interval and by size; `excludedWorkloads`
 * on logs and clusters; a server restart (entries buffered meanwhile, then a new stream with the
 * identifier again); the buffer bound while down (drops counted); local replies' response flags; a
 * standalone sidecar logs what it serves and the ingress in front of it does not log it again.
 */
import t from 'tap';
import http from 'node:http';
import { Registry } from 'prom-client';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { createTelemetry } from '../../src/tracing/index.js';
import { silentLogger } from '../../src/log.js';
import { ALIAS, records, request, startHttpServer, startPlane, startSidecarBehindIngress, type TapLike } from '../helpers/harness.js';
import { accessLog, cluster, startAlsServer, waitUntil } from '../accesslog/fixtures.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';

/** An app that answers 201 with a header, a body and a trailer. */
async function app(t: TapLike): Promise<{ port: number }> {
  return startHttpServer(t, (req, res) => {
    let received = 0;
    req.on('data', (c: Buffer) => (received += c.length));
    req.on('end', () => {
      res.writeHead(201, { 'x-app': 'yes', 'content-type': 'text/plain', trailer: 'grpc-status' });
      res.write(`got ${received}`);
      res.addTrailers({ 'grpc-status': '0' });
      res.end();
    });
  });
}

function envoy(alsPort: number, log: Record<string, unknown> = accessLog('als', { flush: '0.1s' })): Record<string, unknown> {
  return { sidecar: { envoy: { accessLog: [log], clusters: [cluster('als', alsPort)] } } };
}

/** A chunked POST (no content-length). */
function post(port: number, path: string, headers: http.OutgoingHttpHeaders, chunks: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path, method: 'POST', headers: { host: CANONICAL, ...headers }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    for (const c of chunks) req.write(c);
    req.end();
  });
}

t.test('entries carry Envoy\'s fields; the identifier comes only first in a stream', async (t) => {
  const als = await startAlsServer(t);
  const upstream = await app(t);
  const log = accessLog('als', {
    flush: '0.1s',
    typed: {
      additional_request_headers_to_log: ['X-Tenant', 'x-missing'],
      additional_response_headers_to_log: ['x-app'],
      additional_response_trailers_to_log: ['grpc-status'],
    },
  });
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: envoy(als.port, log) }), { location: LOCATION });
  await plane.ready();

  const status = await post(plane.port, '/orders?x=1', {
    'user-agent': 'als-test/1', referer: 'https://ref.example/', 'x-tenant': 't-42', 'x-request-id': 'req-1', 'x-forwarded-for': '203.0.113.9',
  }, ['hello ', 'world']);
  t.equal(status, 201);
  await waitUntil(() => als.entries().length === 1, 30_000, 'first entry');
  await request(plane.port, CANONICAL, '/second');
  await waitUntil(() => als.entries().length === 2, 30_000, 'second entry');

  t.equal(als.streams.length, 1, 'one stream');
  const [first, second] = als.streams[0]!;
  t.match(first!.identifier, { log_name: 'edge', node: { id: `svcproxy-ingress.${LOCATION}`, cluster: 'api', user_agent_name: 'svcproxy', locality: { region: LOCATION } } });
  t.equal(second!.identifier, null, 'later messages carry no identifier');

  const e = first!.http_logs!.log_entry[0]!;
  t.equal(e.protocol_version, 'HTTP11');
  t.match(e.request, {
    request_method: 'POST',
    scheme: 'http',
    authority: CANONICAL,
    path: '/orders?x=1',
    user_agent: 'als-test/1',
    referer: 'https://ref.example/',
    forwarded_for: '203.0.113.9',
    request_id: 'req-1',
    request_body_bytes: '11',
    request_headers: { 'x-tenant': 't-42' },
  });
  t.notOk('x-missing' in e.request.request_headers, 'absent headers are not logged');
  t.ok(Number(e.request.request_headers_bytes) > 50, 'request header bytes');
  t.match(e.response, {
    response_code: { value: 201 },
    response_body_bytes: '6',
    response_headers: { 'x-app': 'yes' },
    response_trailers: { 'grpc-status': '0' },
    response_code_details: 'via_upstream',
  });
  t.ok(Number(e.response.response_headers_bytes) > 10, 'response header bytes');
  const c = e.common_properties;
  t.match(c.downstream_remote_address, { socket_address: { address: '127.0.0.1' } });
  t.match(c.downstream_local_address, { socket_address: { address: '127.0.0.1', port_value: plane.port } });
  t.match(c.upstream_remote_address, { socket_address: { address: '127.0.0.1', port_value: upstream.port } });
  t.equal(c.upstream_cluster, 'shop/api');
  t.equal(c.upstream_request_attempt_count, 1);
  const started = Number(c.start_time.seconds) * 1000;
  t.ok(Math.abs(started - Date.now()) < 10_000, 'start time is wall-clock time');
  const ms = (d: { seconds: string; nanos: number } | null): number => (d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : -1);
  const rx = ms(c.time_to_last_rx_byte);
  const tx = ms(c.time_to_first_upstream_tx_byte);
  const urx = ms(c.time_to_first_upstream_rx_byte);
  const last = ms(c.time_to_last_downstream_tx_byte);
  t.ok(tx >= 0 && urx >= tx && last >= urx && rx >= 0 && rx <= last, `timings in order: rx ${rx}, upstream tx ${tx}, upstream rx ${urx}, last tx ${last}`);
  t.equal(c.response_flags, null, 'no response flags for a normal answer');

  const get = second!.http_logs!.log_entry[0]!;
  t.match(get.request, { request_method: 'GET', path: '/second', request_body_bytes: '0' });
});

t.test('batching: by interval and by size', async (t) => {
  const als = await startAlsServer(t);
  const upstream = await app(t);
  const byInterval = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: envoy(als.port, accessLog('als', { flush: '0.3s' })) }));
  await byInterval.ready();
  await Promise.all(Array.from({ length: 12 }, (_, i) => request(byInterval.port, CANONICAL, `/b${i}`)));
  await waitUntil(() => als.entries().length === 12, 30_000, '12 entries');
  const sizes = als.streams.flat().map((m) => m.http_logs!.log_entry.length);
  t.ok(Math.max(...sizes) >= 6, `entries batched per message: ${sizes.join(', ')}`);

  const bySize = await startAlsServer(t);
  const small = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: envoy(bySize.port, accessLog('als', { flush: '60s', bytes: 1 })) }));
  await small.ready();
  for (let i = 0; i < 3; i++) await request(small.port, CANONICAL, `/s${i}`);
  await waitUntil(() => bySize.entries().length === 3, 30_000, 'entries flushed by size despite a 60 s interval');
  t.ok(bySize.streams.flat().every((m) => m.http_logs!.log_entry.length === 1), 'a message per entry at a 1-byte buffer');
});

t.test('excludedWorkloads on logs and clusters; a workload\'s own logs', async (t) => {
  const als = await startAlsServer(t);
  const upstream = await app(t);
  const web = {
    kind: 'workload', name: 'web', gvc: 'shop',
    spec: {
      type: 'standard',
      containers: [{ name: 'app', image: 'x', ports: [{ number: 8080, protocol: 'http' }] }],
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
      // Its own log, through a cluster of the GVC that excludes it: not logged.
      sidecar: { envoy: { accessLog: [accessLog('als-excluded', { logName: 'web-own' })] } },
    },
  };
  const webDeployment = { kind: 'deployment', name: 'web', gvc: 'shop', status: { locations: [{ name: LOCATION, replicas: [{ name: 'web-0', address: `127.0.0.1:${upstream.port}` }] }] } };
  const recs = records({
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    gvcSpec: {
      sidecar: {
        envoy: {
          accessLog: [accessLog('als', { flush: '0.05s', excludedWorkloads: ['//workload/web'] })],
          clusters: [cluster('als', als.port), cluster('als-excluded', als.port, { excludedWorkloads: ['web'] })],
        },
      },
    },
    extra: [web, webDeployment],
  });
  const plane = await startPlane(t, recs);
  await plane.ready();
  t.equal((await request(plane.port, `web-${ALIAS}.app.localhost`, '/web')).status, 201);
  t.equal((await request(plane.port, CANONICAL, '/api')).status, 201);
  await waitUntil(() => als.entries().length >= 1, 30_000, 'the api entry');
  await new Promise((r) => setTimeout(r, 300));
  t.same(als.entries().map((e) => e.request.path), ['/api'], 'the excluded workload is not logged');
});

t.test('a restarted server gets a new stream with the identifier; entries buffered meanwhile', async (t) => {
  const als = await startAlsServer(t);
  const upstream = await app(t);
  const recs = records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: envoy(als.port, accessLog('als', { flush: '0.05s', bytes: 1000 })) });
  const registry = new Registry();
  const telemetry = await createTelemetry(buildSnapshot(recs, defaultSettings), {
    role: 'ingress', logger: silentLogger(), registry, accessLog: { reconnectInitialMs: 50, reconnectMaxMs: 200, maxBufferedBytes: 4000 },
  });
  const plane = await startPlane(t, recs, { telemetry });
  await plane.ready();
  await request(plane.port, CANONICAL, '/before');
  await waitUntil(() => als.entries().length === 1, 30_000, 'first entry');

  await als.stop();
  for (let i = 0; i < 3; i++) t.equal((await request(plane.port, CANONICAL, `/while-down-${i}`)).status, 201, 'requests do not wait for the log');
  await new Promise((r) => setTimeout(r, 300));
  await als.restart();
  await waitUntil(() => als.entries().length === 4, 30_000, 'buffered entries after the restart');
  t.equal(als.streams.length, 2, 'a second stream');
  t.ok(als.streams[1]![0]!.identifier, 'which starts with the identifier');
  t.same(als.entries().slice(1).map((e) => e.request.path), ['/while-down-0', '/while-down-1', '/while-down-2']);

  // Down again, past the buffer bound: entries dropped and counted, requests unaffected.
  await als.stop();
  for (let i = 0; i < 40; i++) t.equal((await request(plane.port, CANONICAL, `/overflow-${i}`)).status, 201);
  const metrics = await registry.metrics();
  t.match(metrics, /svcproxy_accesslog_entries_dropped_total\{workload="shop\/api",log="edge"\} [1-9]/);
  t.match(metrics, /svcproxy_accesslog_stream_failures_total\{workload="shop\/api",log="edge"\} [1-9]/);
});

t.test('local replies carry response flags; a standalone sidecar logs, the ingress in front does not', async (t) => {
  const als = await startAlsServer(t);
  const upstream = await app(t);
  const base = records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] }, gvcSpec: envoy(als.port, accessLog('als', { flush: '0.05s' })) });
  const { ingress } = await startSidecarBehindIngress(t, base, upstream.port, { location: LOCATION, sidecar: { location: LOCATION } });
  await ingress.ready();
  t.equal((await request(ingress.port, CANONICAL, '/through')).status, 201);
  await waitUntil(() => als.entries().length >= 1, 30_000, 'the sidecar entry');
  await new Promise((r) => setTimeout(r, 200));
  t.equal(als.entries().length, 1, 'logged once');
  t.equal(als.streams[0]![0]!.identifier!.node.id, 'api-0', 'by the sidecar, named by its replica');

  const down = records({ replicas: { [LOCATION]: [] }, gvcSpec: envoy(als.port, accessLog('als', { flush: '0.05s' })) });
  const empty = await startPlane(t, down);
  t.equal((await request(empty.port, CANONICAL, '/nothing')).status, 503);
  await waitUntil(() => als.entries().some((e) => e.request.path === '/nothing'), 30_000, 'the 503 entry');
  const e = als.entries().find((x) => x.request.path === '/nothing')!;
  t.match(e.common_properties.response_flags, { no_healthy_upstream: true });
  t.match(e.response, { response_code: { value: 503 }, response_code_details: 'no_healthy_upstream' });
  t.ok(Number(e.response.response_body_bytes) > 0, 'a local reply\'s body counted');
  t.equal(e.common_properties.upstream_remote_address, null);
});
