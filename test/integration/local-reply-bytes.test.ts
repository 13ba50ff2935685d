/**
 * The proxy's own answers count the body bytes they write, as Envoy's %BYTES_SENT% counts a local
 * reply's: the 504 `upstream request timeout` (and a 404 `no route`) on the quick HTTP/1.1 path, on
 * Node's HTTP/1.1 server (a request with a body) and on HTTP/2, each compared with the bytes the
 * client received, in the three places that report them: the JSON access log's `bytesSent`, the
 * access-log service's `response_body_bytes` (a real gRPC receiver built from Envoy's protos) and the
 * server span's `http.response.body.size` (a real OTLP receiver). A HEAD answer and a gRPC
 * trailers-only answer write no body: 0 in all three.
 */
import t from 'tap';
import http2 from 'node:http2';
import { pino } from 'pino';
import { ALIAS, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
import { accessLog, cluster, startAlsServer, waitUntil } from '../accesslog/fixtures.js';
import { startOtlpGrpc, tracingSpec, waitForSpans } from '../tracing/fixtures.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';

/** One HTTP/2 (h2c, prior knowledge) request: status and the body bytes received. */
function h2(port: number, headers: http2.OutgoingHttpHeaders, body?: string): Promise<{ status: number; bytes: number; grpcStatus?: string }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(`http://127.0.0.1:${port}`);
    session.on('error', reject);
    const stream = session.request({ ':authority': CANONICAL, ...headers }, { endStream: body === undefined });
    let status = 0;
    let grpcStatus: string | undefined;
    let bytes = 0;
    stream.on('response', (h) => {
      status = Number(h[':status']);
      if (h['grpc-status'] !== undefined) grpcStatus = String(h['grpc-status']);
    });
    stream.on('data', (c: Buffer) => (bytes += c.length));
    stream.on('end', () => {
      session.close();
      resolve({ status, bytes, ...(grpcStatus !== undefined ? { grpcStatus } : {}) });
    });
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

t.test('a local reply\'s body bytes: access log, access-log service and span agree with the wire', async (t) => {
  // An app that never answers /hang: the workload's 1 s timeout answers 504 instead.
  const { port: appPort } = await startHttpServer(t, (req, res) => {
    if (req.url?.startsWith('/hang')) return;
    res.end('ok');
  });
  const als = await startAlsServer(t);
  const otlp = await startOtlpGrpc(t);
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  const recs = records({
    replicas: { [LOCATION]: [`127.0.0.1:${appPort}`] },
    gvcSpec: {
      ...tracingSpec(otlp.endpoint),
      sidecar: { envoy: { accessLog: [accessLog('als', { flush: '0.05s' })], clusters: [cluster('als', als.port)] } },
    },
    workloadSpec: { defaultOptions: { timeoutSeconds: 1, autoscaling: { minScale: 1, maxScale: 3 } } },
  });
  const plane = await startPlane(t, recs, { location: LOCATION, logger });
  await plane.ready();

  const sent: { id: string; what: string; status: number; bytes: number }[] = [];
  const http1 = async (id: string, what: string, init: Parameters<typeof request>[3], host = CANONICAL, path = '/hang'): Promise<void> => {
    const res = await request(plane.port, host, path, { ...init, headers: { 'x-request-id': id, ...init?.headers } });
    sent.push({ id, what, status: res.status, bytes: Buffer.byteLength(res.body) });
  };
  await http1('quick-504', 'HTTP/1.1 GET (the quick path)', {});
  await http1('node-504', 'HTTP/1.1 POST with a body (Node\'s server)', { method: 'POST', body: 'payload' });
  await http1('head-504', 'HTTP/1.1 HEAD', { method: 'HEAD' });
  await http1('quick-404', 'HTTP/1.1 GET of an unknown host', {}, 'nobody.app.localhost', '/');
  const h2get = await h2(plane.port, { ':path': '/hang', 'x-request-id': 'h2-504' });
  sent.push({ id: 'h2-504', what: 'HTTP/2 GET', status: h2get.status, bytes: h2get.bytes });
  const grpc = await h2(plane.port, { ':method': 'POST', ':path': '/hang.Svc/Call', 'content-type': 'application/grpc', te: 'trailers', 'x-request-id': 'grpc-504' }, '\u0000\u0000\u0000\u0000\u0000');
  t.equal(grpc.grpcStatus, '4', 'gRPC: trailers-only DEADLINE_EXCEEDED');
  sent.push({ id: 'grpc-504', what: 'gRPC over HTTP/2 (trailers-only)', status: grpc.status, bytes: grpc.bytes });

  t.same(sent.map((s) => s.status), [504, 504, 504, 404, 504, 200], 'the proxy answered each itself');
  for (const s of sent) {
    if (s.id.startsWith('head') || s.id.startsWith('grpc')) t.equal(s.bytes, 0, `${s.what}: no body on the wire`);
    else t.ok(s.bytes > 50, `${s.what}: a JSON body of ${s.bytes} bytes on the wire`);
  }

  const access = (id: string) => lines.find((l) => l.component === 'access' && l.requestId === id);
  await waitUntil(() => sent.every((s) => access(s.id)), 30_000, 'an access line per request');
  for (const s of sent) t.equal(access(s.id)!.bytesSent, s.bytes, `${s.what}: access log bytesSent ${s.bytes}`);
  // The unknown host has no workload, hence no access-log service and no trace; every other answer
  // has its entry and its server span.
  const routed = sent.filter((s) => s.id !== 'quick-404');
  await waitUntil(() => routed.every((s) => als.entries().some((e) => e.request.request_id === s.id)), 30_000, 'an access-log service entry per request');
  const spans = await waitForSpans(otlp, routed.length, 30_000, (span) => span.kind === 'SPAN_KIND_SERVER');
  for (const s of routed) {
    const entry = als.entries().find((e) => e.request.request_id === s.id)!;
    t.equal(Number(entry.response.response_body_bytes), s.bytes, `${s.what}: access-log service response_body_bytes ${s.bytes}`);
    const span = spans.find((x) => x.attributes['svc.request_id'] === s.id);
    t.equal(span?.attributes['http.response.body.size'], s.bytes, `${s.what}: span http.response.body.size ${s.bytes}`);
  }
});
