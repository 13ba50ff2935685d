/**
 * WebSocket upgrades and CONNECT tunnels are observed like requests, against real peers on loopback:
 * a real OTLP receiver, a real access-log server built from Envoy's protos, a WebSocket app and a TCP
 * echo app. One server span per tunnel (continuing the caller's W3C or B3 trace, status 101 or 200,
 * ending when the connection closes, with the payload bytes each way) and one client span for the
 * upstream attempt, whose context the app (or the replica's sidecar) receives; one access-log
 * service entry and one access-log line when it closes (duration of the whole connection, bytes
 * counted); refusals and upstream failures with their status and flags. Through standalone
 * sidecars, the trace continues across both hops (a CONNECT is re-issued to the sidecar with the
 * trace context) and only the sidecar writes the entry.
 */
import t from 'tap';
import type net from 'node:net';
import { randomBytes } from 'node:crypto';
import pino from 'pino';
import { Registry } from 'prom-client';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { createTelemetry } from '../../src/tracing/index.js';
import { silentLogger } from '../../src/log.js';
import { ALIAS, records, startHttpServer, startPlane } from '../helpers/harness.js';
import { PARENT_ID, TRACE_ID, startOtlpGrpc, tracingSpec, waitForSpans, type ReceivedSpan } from '../tracing/fixtures.js';
import { accessLog, cluster, startAlsServer, waitUntil } from '../accesslog/fixtures.js';
import { readBytes, readHead, readAll } from '../fixtures/ws.js';
import { closed, connectRequest, rawConnect, startTcpEcho, startWsApp, upgradeRequest } from '../fixtures/tunnels.js';

const LOCATION = 'aws-us-east-2';
const API = `api-${ALIAS}.app.localhost`;
const DB = `db-${ALIAS}.app.localhost:5432`;
const B3_TRACE = '463ac35c9f6413ad48485a3953bb6124';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function envoy(alsPort: number): Record<string, unknown> {
  return { sidecar: { envoy: { accessLog: [accessLog('als', { flush: '0.05s' })], clusters: [cluster('als', alsPort)] } } };
}

/** The api (WebSocket) and db (tcp) workloads, each with its replicas' addresses. */
function recordsFor(otlp: string, alsPort: number, api: string[], db: string[], broken?: string): Record<string, unknown>[] {
  const only = (r: Record<string, unknown>): boolean => r.kind === 'workload' || r.kind === 'deployment';
  return records({
    replicas: { [LOCATION]: api },
    gvcSpec: { ...tracingSpec(otlp), ...envoy(alsPort) },
    extra: [
      ...records({ workload: 'db', ports: [{ number: 5432, protocol: 'tcp' }], replicas: { [LOCATION]: db } }).filter(only),
      ...(broken ? records({ workload: 'broken', replicas: { [LOCATION]: [broken] } }).filter(only) : []),
    ],
  });
}

/** A logger that keeps every line (the access-log lines are `component: access`). */
function capture(): { logger: pino.Logger; access: () => Record<string, any>[] } {
  const lines: Record<string, any>[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, access: () => lines.filter((l) => l.component === 'access') };
}

function kind(spans: ReceivedSpan[], k: string, service?: string): ReceivedSpan[] {
  return spans.filter((s) => s.kind === `SPAN_KIND_${k}` && (service === undefined || s.resource['service.name'] === service));
}

const ms = (d: { seconds: string; nanos: number } | null): number => (d ? Number(d.seconds) * 1000 + d.nanos / 1e6 : -1);

/** Hold the tunnel open for `holdMs`, then close it from the client side and wait for the close. */
async function finish(socket: net.Socket, holdMs: number): Promise<void> {
  await sleep(holdMs);
  socket.end();
  socket.resume();
  await closed(socket);
}

t.test('at the ingress: spans, an access-log entry and line per tunnel; refusals and failures', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const als = await startAlsServer(t);
  const ws = await startWsApp(t);
  const echo = await startTcpEcho(t);
  // Accepts the connection, then drops every upgrade request.
  const broken = await startHttpServer(t, (_req, res) => res.end());
  broken.server.on('upgrade', (_req, socket: net.Socket) => socket.destroy());
  const recs = recordsFor(otlp.endpoint, als.port, [`127.0.0.1:${ws.port}`], [`127.0.0.1:${echo.port}`], `127.0.0.1:${broken.port}`);
  const telemetry = await createTelemetry(buildSnapshot(recs, defaultSettings), {
    role: 'ingress', logger: silentLogger(), registry: new Registry(), location: LOCATION, batch: { scheduledDelayMillis: 50 },
  });
  const log = capture();
  const plane = await startPlane(t, recs, { telemetry, logger: log.logger, location: LOCATION });
  await plane.ready();

  t.test('WebSocket: 101, one server and one client span, the app continues the trace', async (t) => {
    const socket = await rawConnect(t, plane.port);
    socket.write(upgradeRequest(API, '/raw', `traceparent: 00-${TRACE_ID}-${PARENT_ID}-01\r\nuser-agent: ws-test/1\r\n`));
    const head = await readHead(socket);
    t.equal(head.status, 101);
    const payload = randomBytes(1000);
    socket.write(payload);
    t.ok((await readBytes(socket, 1000, head.rest)).equals(payload), 'frames flow');
    await finish(socket, 150);

    await telemetry.flush();
    const spans = await waitForSpans(otlp, 2, 30_000, (s) => s.traceId === TRACE_ID);
    const [server] = kind(spans, 'SERVER');
    const [client] = kind(spans, 'CLIENT');
    t.ok(server && client, 'a server span and a client span');
    t.equal(server!.name, 'GET');
    t.equal(server!.parentSpanId, PARENT_ID, 'the caller\'s trace continues');
    t.equal(client!.parentSpanId, server!.spanId, 'the attempt is a child of the tunnel');
    t.equal(ws.seen.at(-1)!.headers.traceparent, `00-${TRACE_ID}-${client!.spanId}-01`, 'the upgrade request carries the attempt\'s context');
    t.match(server!.attributes, {
      'http.request.method': 'GET', 'url.path': '/raw', 'server.address': API,
      'http.response.status_code': 101, 'user_agent.original': 'ws-test/1', 'svc.workload': 'api', 'svc.replica': 'api-0',
      'http.request.body.size': 1000, 'http.response.body.size': 1000,
    });
    t.match(client!.attributes, { 'http.response.status_code': 101, 'server.port': ws.port });
    t.ok(server!.endNs - server!.startNs >= 140_000_000n, 'the span lasts as long as the connection');
    t.equal(server!.status, 'STATUS_CODE_UNSET');

    await waitUntil(() => als.entries().some((e) => e.request.path === '/raw'), 30_000, 'the entry');
    const e = als.entries().find((x) => x.request.path === '/raw')!;
    t.match(e.request, { request_method: 'GET', authority: API, request_body_bytes: '1000', user_agent: 'ws-test/1' });
    t.match(e.response, { response_code: { value: 101 }, response_body_bytes: '1000', response_code_details: 'via_upstream' });
    t.ok(Number(e.response.response_headers_bytes) > 20, 'the 101\'s header bytes');
    t.match(e.common_properties, { upstream_cluster: 'shop/api', upstream_request_attempt_count: 1, upstream_remote_address: { socket_address: { port_value: ws.port } } });
    t.ok(ms(e.common_properties.duration) >= 140, `duration is the connection's (${ms(e.common_properties.duration)} ms)`);
    t.equal(e.common_properties.response_flags, null);

    const line = log.access().find((l) => l.path === '/raw');
    t.match(line, { status: 101, tunnel: 'websocket', bytesSent: 1000, bytesReceived: 1000, workload: 'api', replica: 'api-0', method: 'GET' });
    t.ok(line!.durationMs >= 140);
  });

  t.test('CONNECT: 200, spans from a B3 caller, the entry with the bytes each way', async (t) => {
    const socket = await rawConnect(t, plane.port);
    socket.write(`${connectRequest(DB, `b3: ${B3_TRACE}-${PARENT_ID}-1\r\n`)}early`);
    const head = await readHead(socket);
    t.equal(head.status, 200);
    t.equal((await readBytes(socket, 5, head.rest)).toString(), 'early');
    socket.write('hello tcp');
    t.equal((await readBytes(socket, 9)).toString(), 'hello tcp');
    await finish(socket, 100);

    await telemetry.flush();
    const spans = await waitForSpans(otlp, 2, 30_000, (s) => s.traceId === B3_TRACE);
    const [server] = kind(spans, 'SERVER');
    const [client] = kind(spans, 'CLIENT');
    t.equal(server!.name, 'CONNECT');
    t.equal(server!.parentSpanId, PARENT_ID);
    t.equal(client!.parentSpanId, server!.spanId);
    t.match(server!.attributes, {
      'http.request.method': 'CONNECT', 'server.address': `db-${ALIAS}.app.localhost`, 'server.port': 5432,
      'http.response.status_code': 200, 'svc.workload': 'db', 'http.request.body.size': 14, 'http.response.body.size': 14,
    });
    t.notOk('url.path' in server!.attributes, 'a CONNECT has no path');
    t.match(client!.attributes, { 'http.response.status_code': 200, 'server.port': echo.port });

    await waitUntil(() => als.entries().some((e) => e.request.request_method === 'CONNECT' && e.response.response_code?.value === 200), 30_000, 'the entry');
    const e = als.entries().find((x) => x.request.request_method === 'CONNECT' && x.response.response_code?.value === 200)!;
    t.match(e.request, { authority: DB, path: '', request_body_bytes: '14' });
    t.match(e.response, { response_body_bytes: '14', response_headers_bytes: '0', response_code_details: 'via_upstream' });
    t.match(e.common_properties, { upstream_cluster: 'shop/db', upstream_remote_address: { socket_address: { port_value: echo.port } } });
    t.ok(ms(e.common_properties.duration) >= 90);
    t.match(log.access().find((l) => l.method === 'CONNECT' && l.status === 200), { tunnel: 'connect', bytesSent: 14, bytesReceived: 14, workload: 'db' });
  });

  t.test('a refused CONNECT and a failed upgrade are logged and traced with their status', async (t) => {
    const refused = await rawConnect(t, plane.port);
    refused.write(connectRequest(`api-${ALIAS}.app.localhost:443`, `traceparent: 00-${'1'.repeat(32)}-${PARENT_ID}-01\r\n`));
    t.equal((await readHead(refused)).status, 404, 'CONNECT to an http port');
    await readAll(refused);

    const failed = await rawConnect(t, plane.port);
    failed.write(upgradeRequest(`broken-${ALIAS}.app.localhost`, '/chat', `traceparent: 00-${'2'.repeat(32)}-${PARENT_ID}-01\r\n`));
    t.equal((await readHead(failed)).status, 503, 'the app dropped the upgrade');
    await readAll(failed);

    await telemetry.flush();
    const [notFound] = await waitForSpans(otlp, 1, 30_000, (s) => s.traceId === '1'.repeat(32) && s.kind === 'SPAN_KIND_SERVER');
    t.match(notFound!.attributes, { 'http.response.status_code': 404, 'error.type': 'no_route' });
    const spans = await waitForSpans(otlp, 2, 30_000, (s) => s.traceId === '2'.repeat(32));
    t.match(kind(spans, 'SERVER')[0]!.attributes, { 'http.response.status_code': 503, 'error.type': 'upstream_reset' });
    t.equal(kind(spans, 'SERVER')[0]!.status, 'STATUS_CODE_ERROR');
    t.match(kind(spans, 'CLIENT')[0]!.attributes, { 'error.type': 'reset' });

    await waitUntil(() => als.entries().filter((e) => [404, 503].includes(e.response.response_code?.value)).length === 2, 30_000, 'both entries');
    const e404 = als.entries().find((e) => e.response.response_code?.value === 404)!;
    t.match(e404.request, { request_method: 'CONNECT', authority: `api-${ALIAS}.app.localhost:443` });
    t.match(e404.common_properties.response_flags, { no_route_found: true });
    t.ok(Number(e404.response.response_body_bytes) > 0, 'the refusal\'s body counted');
    const e503 = als.entries().find((e) => e.response.response_code?.value === 503)!;
    t.match(e503.common_properties.response_flags, { upstream_remote_reset: true });
    t.equal(e503.response.response_code_details, 'upstream_reset');
    t.match(log.access().find((l) => l.status === 503 && l.tunnel === 'websocket'), { error: 'UPSTREAM_RESET', workload: 'broken' });
  });
});

t.test('through standalone sidecars: the trace spans both hops; only the sidecar logs', async (t) => {
  const otlp = await startOtlpGrpc(t);
  const als = await startAlsServer(t);
  const ws = await startWsApp(t);
  const echo = await startTcpEcho(t);
  const base = recordsFor(otlp.endpoint, als.port, [`127.0.0.1:${ws.port}`], [`127.0.0.1:${echo.port}`]);
  const apiSidecar = await startPlane(t, base, { role: 'sidecar', location: LOCATION, sidecar: { workload: 'shop/api', location: LOCATION, replica: 'api-0', app: `127.0.0.1:${ws.port}` } });
  const dbSidecar = await startPlane(t, base, { role: 'sidecar', location: LOCATION, sidecar: { workload: 'shop/db', location: LOCATION, replica: 'db-0', app: `127.0.0.1:${echo.port}` } });
  const viaSidecars = base.map((r) => {
    if (r.kind !== 'deployment') return r;
    const [address, sidecar] = r.name === 'api' ? [ws.port, apiSidecar.port] : [echo.port, dbSidecar.port];
    return { ...r, status: { locations: [{ name: LOCATION, replicas: [{ name: `${r.name as string}-0`, address: `127.0.0.1:${address}`, sidecar: `127.0.0.1:${sidecar}` }] }] } };
  });
  const ingress = await startPlane(t, viaSidecars, { location: LOCATION });
  await ingress.ready();

  const socket = await rawConnect(t, ingress.port);
  socket.write(upgradeRequest(API, '/raw', `traceparent: 00-${TRACE_ID}-${PARENT_ID}-01\r\n`));
  const head = await readHead(socket);
  t.equal(head.status, 101);
  socket.write('through');
  t.equal((await readBytes(socket, 7, head.rest)).toString(), 'through');
  await finish(socket, 50);

  const tunnel = await rawConnect(t, ingress.port);
  tunnel.write(`${connectRequest(DB, `traceparent: 00-${B3_TRACE}-${PARENT_ID}-01\r\nauthorization: Bearer t\r\n`)}early`);
  const connected = await readHead(tunnel);
  t.equal(connected.status, 200, 'the sidecar opened the tunnel; its answer is relayed');
  t.equal((await readBytes(tunnel, 5, connected.rest)).toString(), 'early', 'bytes sent with the CONNECT reach the app through both hops');
  tunnel.write('hello tcp');
  t.equal((await readBytes(tunnel, 9)).toString(), 'hello tcp');
  await finish(tunnel, 50);

  for (const [trace, service, name] of [[TRACE_ID, 'api', 'GET'], [B3_TRACE, 'db', 'CONNECT']] as const) {
    const spans = await waitForSpans(otlp, 4, 30_000, (s) => s.traceId === trace);
    const [ingressServer] = kind(spans, 'SERVER', 'svcproxy-ingress');
    const [ingressClient] = kind(spans, 'CLIENT', 'svcproxy-ingress');
    const [sidecarServer] = kind(spans, 'SERVER', service);
    const [sidecarClient] = kind(spans, 'CLIENT', service);
    t.ok(ingressServer && ingressClient && sidecarServer && sidecarClient, `${name}: server and client spans at both hops`);
    t.equal(ingressServer!.name, name);
    t.equal(ingressServer!.parentSpanId, PARENT_ID);
    t.equal(ingressClient!.parentSpanId, ingressServer!.spanId);
    t.equal(sidecarServer!.parentSpanId, ingressClient!.spanId, `${name}: the sidecar continues the ingress attempt`);
    t.equal(sidecarClient!.parentSpanId, sidecarServer!.spanId);
    t.match(sidecarServer!.attributes, { 'http.response.status_code': name === 'GET' ? 101 : 200, 'svc.replica': `${service}-0` });
    t.match(ingressClient!.attributes, { 'server.port': service === 'api' ? apiSidecar.port : dbSidecar.port });
  }
  t.equal(String(ws.seen.at(-1)!.headers.traceparent).split('-')[1], TRACE_ID, 'the app is in the trace');

  await waitUntil(() => als.entries().length >= 2, 30_000, 'the sidecars\' entries');
  await sleep(200);
  t.equal(als.entries().length, 2, 'one entry per tunnel: the ingress does not log what a sidecar logs');
  const nodes = als.streams.map((s) => s[0]!.identifier!.node.id).sort();
  t.same(nodes, ['api-0', 'db-0'], 'written by the sidecars');
  const connect = als.entries().find((e) => e.request.request_method === 'CONNECT')!;
  t.match(connect.request, { authority: DB, request_body_bytes: '14' });
  t.match(connect.response, { response_code: { value: 200 }, response_body_bytes: '14' });
  t.match(connect.common_properties, { downstream_remote_address: { socket_address: { address: '127.0.0.1' } } });
});

t.test('without tracing or access-log services, a tunnel still gets its access-log line', async (t) => {
  const echo = await startTcpEcho(t);
  const log = capture();
  const plane = await startPlane(t, records({ workload: 'db', ports: [{ number: 5432, protocol: 'tcp' }], replicas: { [LOCATION]: [`127.0.0.1:${echo.port}`] } }), { logger: log.logger });
  await plane.ready();
  const socket = await rawConnect(t, plane.port);
  socket.write(connectRequest(DB));
  const head = await readHead(socket);
  t.equal(head.status, 200);
  socket.write('x');
  await readBytes(socket, 1, head.rest);
  await finish(socket, 10);
  await waitUntil(() => log.access().length === 1, 30_000, 'the line');
  t.match(log.access()[0], { method: 'CONNECT', host: DB, status: 200, tunnel: 'connect', bytesSent: 1, bytesReceived: 1, workload: 'db' });
});
