/**
 * An upload an HTTP/2 client cuts (HEADERS without END_STREAM, some DATA, then RST_STREAM CANCEL, or
 * its connection closed) reaches the upstream cut, never as a whole body: an HTTP/1.1 upstream sees
 * its request aborted (no terminating chunk, no full Content-Length), an h2 upstream sees its stream
 * reset (no END_STREAM), and the exchange is logged as a client abort (status 0). Every case: both
 * upstream protocols, retries on (the default policy reads the body through the replay buffer) and
 * off, with a Content-Length and without, with and without ext_authz in front, and through an
 * ingress and a sidecar; a control upload that ends with END_STREAM shows the upstreams tell a whole
 * body from a cut one.
 *
 * Two faults made h2 upstreams get the cut body as whole (the cases without a Content-Length; with
 * one, node:http2 at the upstream refused the short body itself): the proxy cancelled its upstream
 * stream with node:http2's `close(CANCEL)`, which sends END_STREAM before RST_STREAM; and node:http2's
 * compat request emits 'end' after 'aborted' and 'close' when it is cut, which pipe(), the retry
 * replay buffer and the ext_authz replay took for a whole body. End to end the first shows (the
 * exchange resets the upstream as soon as the client's stream closes, before that 'end'); the
 * second is shown on each layer below, on real cut requests. HTTP/1.1 upstreams held: the pool fails
 * a body that closes before it ends, and the exchange's abort comes first.
 *
 * The client frames by hand, so no client library sends END_STREAM before its RST_STREAM (node:http2's
 * `close()` does: that cut is a whole body). Waits are for events (the upstream has the first part,
 * the upstream request is over); deadlines only bound a hang, itself a failure (a cut request neither
 * ended nor aborted upstream).
 */
import t, { type Test } from 'tap';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import pino from 'pino';
import { ALIAS, records, startH2Server, startHttpServer, startPlane, waitFor, type StartedPlane } from '../helpers/harness.js';
import { FRAME, H2_ERROR, connectH2, frame, headersFrame, rstFrame, type RawH2 } from '../security/fixtures.js';
import { allow, startGrpcAuth } from '../fixtures/extauth/servers.js';
import { bodyCut } from '../../src/filter/index.js';
import { sendBody } from '../../src/proxy/forward.js';
import { ReplayableBody } from '../../src/retry/replay.js';
import { readBodyPrefix } from '../../src/extauth/body.js';

const H = `api-${ALIAS}.app.localhost`;
/** Past ext_authz's 8 KiB body limit, so the check goes out (partial) with a known length too. */
const FIRST = Buffer.alloc(9000, 'a');
/** The length announced with `content-length`: far more than is ever sent. */
const DECLARED = 100_000;
/** Bounds a hang (a cut request neither ended nor aborted upstream); never what a pass waits for. */
const SETTLE_MS = 10_000;

type UpstreamProtocol = 'http' | 'http2';
type Retries = 'default' | 'off';
type Framing = 'length' | 'unknown';

/** One request as an upstream saw it. */
interface Upload {
  body: number;
  /** The body ended as a whole: 'end' on an HTTP/1.1 request, END_STREAM on an h2 stream. */
  complete: boolean;
  /** The request is over (ended, aborted or reset). */
  settled: boolean;
}

interface Upstream {
  port: number;
  uploads: Upload[];
}

/** An HTTP/1.1 upstream: a request is complete when node:http emits 'end'; cut when it closes first. */
async function http1Upstream(t: Test): Promise<Upstream> {
  const uploads: Upload[] = [];
  const { port } = await startHttpServer(t, (req, res) => {
    const u: Upload = { body: 0, complete: false, settled: false };
    uploads.push(u);
    req.on('data', (c: Buffer) => (u.body += c.length));
    req.on('end', () => {
      u.complete = true;
      u.settled = true;
      res.end('ok');
    });
    req.on('close', () => (u.settled = true));
    req.on('error', () => undefined);
  });
  return { port, uploads };
}

/**
 * An h2 upstream: a stream is complete when it ends (END_STREAM) before it was aborted. node:http2
 * also emits 'end' on a stream reset mid-body, after 'aborted', hence the check of `aborted`.
 */
async function h2Upstream(t: Test): Promise<Upstream> {
  const uploads: Upload[] = [];
  const { port } = await startH2Server(t, (stream: http2.ServerHttp2Stream) => {
    const u: Upload = { body: 0, complete: false, settled: false };
    uploads.push(u);
    stream.on('data', (c: Buffer) => (u.body += c.length));
    stream.on('end', () => {
      if (stream.aborted) return;
      u.complete = true;
      stream.respond({ ':status': 200 });
      stream.end('ok');
    });
    stream.on('close', () => (u.settled = true));
    stream.on('error', () => undefined);
  });
  return { port, uploads };
}

interface Setup {
  plane: StartedPlane;
  up: Upstream;
  access: () => Record<string, unknown>[];
  checks: () => number;
}

/**
 * The upstream, the authorization server when asked, and the plane clients talk to: an ingress in
 * front of the upstream, or (`sidecar`) an ingress in front of a sidecar in front of it (the
 * harness's startSidecarBehindIngress, with the ingress's access log kept). `planes`: all of them.
 */
async function setup(t: Test, protocol: UpstreamProtocol, retries: Retries, extauth: boolean, via: 'ingress' | 'sidecar' = 'ingress'): Promise<Setup & { planes: StartedPlane[] }> {
  const up = protocol === 'http' ? await http1Upstream(t) : await h2Upstream(t);
  const auth = extauth ? await startGrpcAuth(t, () => allow()) : undefined;
  const lines: Record<string, unknown>[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  const location = 'aws-us-east-2';
  const recs = records({
    ports: [{ number: 8080, protocol }],
    replicas: { [location]: [`127.0.0.1:${up.port}`] },
    workloadSpec: retries === 'off' ? { requestRetryPolicy: { attempts: 0 } } : {},
    ...(auth
      ? {
          tags: {
            'svc/externalAuthAddress': '127.0.0.1',
            'svc/externalAuthPort': auth.port,
            'svc/externalAuthScheme': 'http',
            'svc/externalAuthFailureAllow': false,
          },
        }
      : {}),
  });
  const planes: StartedPlane[] = [];
  let front = recs;
  if (via === 'sidecar') {
    const sidecar = await startPlane(t, recs, { role: 'sidecar', sidecar: { workload: 'shop/api', location, replica: 'api-0', app: `127.0.0.1:${up.port}` } });
    await sidecar.ready();
    planes.push(sidecar);
    const replicas = [{ name: 'api-0', address: `127.0.0.1:${up.port}`, sidecar: `127.0.0.1:${sidecar.port}` }];
    front = recs.map((r) => (r.kind === 'deployment' ? { ...r, status: { locations: [{ name: location, replicas }] } } : r));
  }
  const plane = await startPlane(t, front, { logger, location });
  await plane.ready();
  planes.push(plane);
  return { plane, planes, up, access: () => lines.filter((l) => l.component === 'access'), checks: () => auth?.calls.length ?? 0 };
}

function uploadHeaders(framing: Framing): [string, string][] {
  const headers: [string, string][] = [[':method', 'POST'], [':scheme', 'http'], [':path', '/upload'], [':authority', H]];
  if (framing === 'length') headers.push(['content-length', String(DECLARED)]);
  return headers;
}

/** HEADERS without END_STREAM and the first part of the body, on stream 1. */
async function startUpload(t: Test, s: Setup, framing: Framing): Promise<RawH2> {
  const client = await connectH2(t, s.plane.port);
  client.write(Buffer.concat([headersFrame(1, uploadHeaders(framing), false), frame(FRAME.DATA, 0, 1, FIRST)]));
  return client;
}

/** The only upload the upstream saw, once it holds the first part. */
async function firstPartArrived(s: Setup): Promise<Upload> {
  await waitFor(() => s.up.uploads.length > 0 && s.up.uploads[0]!.body >= FIRST.length, SETTLE_MS, 'the first part at the upstream');
  return s.up.uploads[0]!;
}

type Cut = 'RST_STREAM' | 'connection closed' | 'END_STREAM' | 'END_STREAM, then RST_STREAM';

/** After the first part: how the client stops. Only the first two cut the body. */
function stop(client: RawH2, how: Cut): void {
  if (how === 'RST_STREAM') client.write(rstFrame(1, H2_ERROR.CANCEL));
  else if (how === 'connection closed') client.close();
  else if (how === 'END_STREAM') client.write(frame(FRAME.DATA, 0x1, 1));
  else client.write(Buffer.concat([frame(FRAME.DATA, 0x1, 1), rstFrame(1, H2_ERROR.CANCEL)]));
}

const CASES: [UpstreamProtocol, Retries, Framing, boolean][] = [];
for (const extauth of [false, true])
  for (const protocol of ['http', 'http2'] as const)
    for (const retries of ['default', 'off'] as const)
      for (const framing of ['unknown', 'length'] as const) CASES.push([protocol, retries, framing, extauth]);

for (const [protocol, retries, framing, extauth] of CASES) {
  const name = `${protocol} upstream, retries ${retries}, ${framing === 'length' ? 'with a content-length' : 'no content-length'}${extauth ? ', behind ext_authz' : ''}`;

  const cuts: Cut[] = framing === 'unknown' ? ['RST_STREAM', 'connection closed'] : ['RST_STREAM'];
  for (const how of cuts) t.test(`an h2 upload cut by ${how} reaches the upstream cut: ${name}`, async (t) => {
    const s = await setup(t, protocol, retries, extauth);
    const client = await startUpload(t, s, framing);
    const upload = await firstPartArrived(s);
    stop(client, how);
    await waitFor(() => upload.settled, SETTLE_MS, 'the upstream request to be over');
    t.equal(upload.complete, false, 'the upstream did not get the cut body as a whole one');
    t.equal(upload.body, FIRST.length, 'it got the part that was sent');
    t.equal(s.up.uploads.length, 1, 'one upstream request, no retry of a cut body');
    if (extauth) t.equal(s.checks(), 1, 'one check');
    await waitFor(() => s.plane.runtime.dataplane.requestsInFlight === 0, SETTLE_MS, 'the exchange to be over');
    const logged = s.access().filter((l) => l.path === '/upload');
    t.same(logged.map((l) => l.status), [0], 'logged once, as a client abort (no status)');
  });

  // Control: the same upload finished with END_STREAM is whole at the upstream.
  t.test(`control, the same upload ended with END_STREAM is whole: ${name}`, async (t) => {
    const s = await setup(t, protocol, retries, extauth);
    const rest = Buffer.alloc(framing === 'length' ? DECLARED - FIRST.length : 100, 'b');
    const client = await startUpload(t, s, framing);
    const upload = await firstPartArrived(s);
    // The proxy's stream window is well above the body; the rest goes in frames of 16 KiB at most.
    const frames: Buffer[] = [];
    for (let i = 0; i < rest.length; i += 16_384) {
      const part = rest.subarray(i, i + 16_384);
      frames.push(frame(FRAME.DATA, i + 16_384 >= rest.length ? 0x1 : 0, 1, part));
    }
    client.write(Buffer.concat(frames));
    await waitFor(() => upload.settled, SETTLE_MS, 'the upstream request to be over');
    t.equal(upload.complete, true, 'the upstream got the body whole');
    t.equal(upload.body, FIRST.length + rest.length, 'every byte');
    await waitFor(() => s.plane.runtime.dataplane.requestsInFlight === 0, SETTLE_MS, 'the exchange to be over');
    t.same(s.access().filter((l) => l.path === '/upload').map((l) => l.status), [200], 'logged once, 200');
  });
}

// Two hops: the ingress forwards the cut to the sidecar, whose own request is then cut the same way.
for (const protocol of ['http', 'http2'] as const) {
  t.test(`an h2 upload cut by RST_STREAM reaches the upstream cut through an ingress and a sidecar: ${protocol} upstream`, async (t) => {
    const s = await setup(t, protocol, 'default', false, 'sidecar');
    const client = await startUpload(t, s, 'unknown');
    const upload = await firstPartArrived(s);
    stop(client, 'RST_STREAM');
    await waitFor(() => upload.settled, SETTLE_MS, 'the upstream request to be over');
    t.equal(upload.complete, false, 'the upstream did not get the cut body as a whole one');
    t.equal(s.up.uploads.length, 1, 'one upstream request');
    await waitFor(() => s.planes.every((p) => p.runtime.dataplane.requestsInFlight === 0), SETTLE_MS, 'the exchanges to be over');
    t.same(s.access().filter((l) => l.path === '/upload').map((l) => l.status), [0], 'the ingress logged a client abort');
    // Metrics count a client abort as a 499.
    const sidecarMetrics = await (await fetch(`${s.planes[0]!.adminUrl}/metrics`)).text();
    t.match(sidecarMetrics, /svcproxy_requests_total\{[^}]*status_class="4xx"[^}]*\} 1\b/, 'the sidecar carried it, and counted a client abort');
  });
}

// ---- each layer on a real cut request -------------------------------------------------------------
// The same cuts, on a node:http2 compat server of the test's own: what Node does at 'end', then each
// piece of the proxy that reads a request body, with no exchange around it to abort the upstream
// first. The 'after the read' cases held before (that replay failed on 'aborted'); they stay as guards.

/** A node:http2 compat server handing out its requests, and a raw client on it. */
async function compatServer(t: Test): Promise<{ client: RawH2; next: () => Promise<http2.Http2ServerRequest> }> {
  const waiting: ((req: http2.Http2ServerRequest) => void)[] = [];
  const server = http2.createServer((req) => waiting.shift()?.(req));
  t.teardown(() => server.close());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const client = await connectH2(t, (server.address() as AddressInfo).port);
  return { client, next: () => new Promise((resolve) => waiting.push(resolve)) };
}

/**
 * What a reader of `body` saw: bytes, and how it stopped ('end', or 'error'/'close' without one),
 * also when it stopped before this reader came (a replay failed at once).
 */
function watch(body: Readable): { bytes: () => number; over: Promise<'end' | 'error' | 'close'> } {
  let bytes = 0;
  const over = new Promise<'end' | 'error' | 'close'>((resolve) => {
    if (body.readableEnded) return resolve('end');
    if (body.destroyed) return resolve(body.errored ? 'error' : 'close');
    body.once('end', () => resolve('end'));
    body.once('error', () => resolve('error'));
    body.once('close', () => resolve('close'));
  });
  body.on('data', (c: Buffer) => (bytes += c.length));
  return { bytes: () => bytes, over };
}

for (const how of ['RST_STREAM', 'connection closed', 'END_STREAM', 'END_STREAM, then RST_STREAM'] as const) {
  t.test(`node:http2's compat request at 'end', client stops with ${how}: bodyCut() tells`, async (t) => {
    const { client, next } = await compatServer(t);
    client.write(Buffer.concat([headersFrame(1, uploadHeaders('unknown'), false), frame(FRAME.DATA, 0, 1, FIRST)]));
    const req = await next();
    const events: string[] = [];
    for (const e of ['aborted', 'close'] as const) req.on(e, () => events.push(e));
    const seen = watch(req);
    let cutAtEnd: boolean | undefined;
    req.on('end', () => {
      events.push('end');
      cutAtEnd = bodyCut(req);
    });
    await waitFor(() => seen.bytes() >= FIRST.length, SETTLE_MS, 'the first part');
    stop(client, how);
    await seen.over;
    if (how === 'END_STREAM') {
      t.same(events, ['end'], 'a whole body ends, nothing else');
      t.equal(cutAtEnd, false, 'and is not cut');
    } else if (how === 'END_STREAM, then RST_STREAM') {
      await waitFor(() => events.includes('close'), SETTLE_MS, 'the reset');
      t.same(events, ['end', 'aborted', 'close'], "a whole body's 'end' comes before the reset");
      t.equal(cutAtEnd, false, 'and is not cut');
    } else {
      // The reason for body-cut.ts: the body still ends, after 'aborted' and 'close'.
      await waitFor(() => events.includes('end'), SETTLE_MS, "the cut request's 'end'");
      t.same(events, ['aborted', 'close', 'end'], "a cut body still emits 'end', last");
      t.equal(cutAtEnd, true, 'bodyCut() is true there');
    }
  });
}

const CUTS: Cut[] = ['RST_STREAM', 'connection closed'];
for (const how of CUTS) {
  t.test(`sendBody (h2 upstream): a request cut by ${how} resets the upstream stream, no END_STREAM`, async (t) => {
    const up = await h2Upstream(t);
    const session = http2.connect(`http://127.0.0.1:${up.port}`);
    t.teardown(() => session.destroy());
    const { client, next } = await compatServer(t);
    client.write(Buffer.concat([headersFrame(1, uploadHeaders('unknown'), false), frame(FRAME.DATA, 0, 1, FIRST)]));
    const req = await next();
    const stream = session.request({ ':method': 'POST', ':path': '/upload' }, { endStream: false });
    stream.on('error', () => undefined);
    sendBody(req, stream, req);
    await waitFor(() => up.uploads.length > 0 && up.uploads[0]!.body >= FIRST.length, SETTLE_MS, 'the first part upstream');
    stop(client, how);
    await waitFor(() => up.uploads[0]!.settled, SETTLE_MS, 'the upstream stream to be over');
    t.equal(up.uploads[0]!.complete, false, 'the upstream stream was reset, not ended');
  });

  t.test(`ReplayableBody (retries): a request cut by ${how} fails the attempt's stream, never ends it`, async (t) => {
    const { client, next } = await compatServer(t);
    client.write(Buffer.concat([headersFrame(1, uploadHeaders('unknown'), false), frame(FRAME.DATA, 0, 1, FIRST)]));
    const body = new ReplayableBody(await next());
    const attempt = watch(body.attempt()!);
    await waitFor(() => attempt.bytes() >= FIRST.length, SETTLE_MS, 'the first part');
    stop(client, how);
    t.equal(await attempt.over, 'error', "the attempt's stream failed");
    t.equal(body.attempt(), undefined, 'and the body is not replayed');
  });

  t.test(`readBodyPrefix (ext_authz): a request cut by ${how} during the read fails the replay`, async (t) => {
    const { client, next } = await compatServer(t);
    client.write(Buffer.concat([headersFrame(1, uploadHeaders('unknown'), false), frame(FRAME.DATA, 0, 1, FIRST)]));
    const req = await next();
    let received = 0;
    // No idle limit and a limit above the body: the read waits for the end, or the cut.
    const prefix = readBodyPrefix(req, 1 << 20);
    req.on('data', (c: Buffer) => (received += c.length));
    await waitFor(() => received >= FIRST.length, SETTLE_MS, 'the first part');
    stop(client, how);
    const { bytes, partial, replay } = await prefix;
    t.equal(bytes.length, FIRST.length, 'the check would see what arrived');
    t.equal(partial, true, 'as a partial body');
    t.equal(await watch(replay).over, 'error', 'the replay fails instead of ending');
  });

  t.test(`readBodyPrefix (ext_authz): a request cut by ${how} after the read fails the replay`, async (t) => {
    const { client, next } = await compatServer(t);
    client.write(Buffer.concat([headersFrame(1, uploadHeaders('unknown'), false), frame(FRAME.DATA, 0, 1, FIRST)]));
    const req = await next();
    const { partial, replay } = await readBodyPrefix(req, 1024);
    t.equal(partial, true, 'the limit was passed: more to come');
    const seen = watch(replay);
    await waitFor(() => seen.bytes() >= FIRST.length, SETTLE_MS, 'the first part replayed');
    stop(client, how);
    t.equal(await seen.over, 'error', 'the replay fails instead of ending');
  });
}
