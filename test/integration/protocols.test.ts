/**
 * Forwarding protocols through a real ingress on one cleartext port: h2c with prior knowledge (to
 * HTTP/1.1 and HTTP/2 upstreams), gRPC with real @grpc/grpc-js on both ends (unary, server streaming,
 * error status, metadata and trailers, the proxy's own trailers-only answers), WebSocket upgrades
 * (http-proxy-3) and HTTP CONNECT tunnels to `tcp` ports.
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { WebSocket, Agent } from 'undici';
import { ALIAS, echoHandler, records, request, startH2Server, startHttpServer, startPlane, waitFor, type TapLike } from '../helpers/harness.js';
import { acceptKey, readAll, readBytes, readHead, wsUpgradeHandler } from '../fixtures/ws.js';
import { rawConnect } from '../fixtures/tunnels.js';

const HOST = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-west-2';
const here = path.dirname(fileURLToPath(import.meta.url));

/** A loopback port with nothing listening on it. */
async function deadPort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

interface H2Answer {
  status: number;
  headers: http2.IncomingHttpHeaders;
  body: Buffer;
  trailers: http2.IncomingHttpHeaders | undefined;
}

function h2connect(t: TapLike, url: string, opts: http2.SecureClientSessionOptions = {}): Promise<http2.ClientHttp2Session> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url, opts);
    t.teardown(() => {
      session.destroy();
    });
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

function h2request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: Buffer | string): Promise<H2Answer> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let status = 0;
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    stream.setTimeout(5000, () => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(new Error('h2 request timed out'));
    });
    stream.on('response', (h) => {
      responseHeaders = h;
      status = Number(h[':status']);
    });
    stream.on('trailers', (h) => (trailers = h));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => resolve({ status, headers: responseHeaders, body: Buffer.concat(chunks), trailers }));
    stream.on('error', reject);
    if (body !== undefined) stream.end(body);
  });
}

// ---- h2c with prior knowledge --------------------------------------------------------------------

t.test('h2c prior knowledge reaches an HTTP/1.1 upstream', { timeout: 20_000 }, async (t) => {
  const upstream = await startHttpServer(t, echoHandler('h1'));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  await plane.ready();
  const session = await h2connect(t, plane.url);

  const get = await h2request(session, { ':method': 'GET', ':path': '/hello?x=1', ':authority': HOST, 'x-svc-debug': 'nope', 'x-custom': 'kept' });
  t.equal(get.status, 200);
  const seen = JSON.parse(get.body.toString());
  t.equal(seen.name, 'h1');
  t.equal(seen.url, '/hello?x=1');
  t.equal(seen.headers.host, HOST, 'the upstream gets the :authority as Host');
  t.equal(seen.headers['x-custom'], 'kept');
  t.notOk(seen.headers['x-svc-debug'], 'client-supplied vendor headers are stripped');
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  t.ok(seen.headers['x-request-id'], 'a request id is sent upstream');

  // A body without content-length (HTTP/2 DATA frames) becomes a chunked upstream body.
  const post = await h2request(session, { ':method': 'POST', ':path': '/upload', ':authority': HOST }, 'payload over h2');
  t.equal(post.status, 200);
  t.equal(JSON.parse(post.body.toString()).body, 'payload over h2');

  // Many concurrent streams on one session.
  const many = await Promise.all(Array.from({ length: 20 }, (_, i) => h2request(session, { ':path': `/n/${i}`, ':authority': HOST })));
  t.same(many.map((a) => JSON.parse(a.body.toString()).url), Array.from({ length: 20 }, (_, i) => `/n/${i}`));

  const unknown = await h2request(session, { ':path': '/', ':authority': 'nope.app.localhost' });
  t.equal(unknown.status, 404);
  t.match(JSON.parse(unknown.body.toString()), { status: 404, message: 'no route', code: 'NO_ROUTE' });

  // The same port still speaks HTTP/1.1.
  const h1 = await request(plane.port, HOST, '/plain');
  t.equal(h1.status, 200);
  t.equal(JSON.parse(h1.body).url, '/plain');
});

t.test('an http2 upstream receives HTTP/2, and its trailers reach the client', { timeout: 20_000 }, async (t) => {
  const seen: { httpVersion: string; path: string; authority: string | undefined; body: string }[] = [];
  const { port } = await startH2Server(t, (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      seen.push({ httpVersion: '2.0', path: String(headers[':path']), authority: headers[':authority'] as string | undefined, body: Buffer.concat(chunks).toString() });
      stream.respond({ ':status': 200, 'content-type': 'text/plain', 'x-upstream': 'h2' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'x-checksum': 'abc123' }));
      stream.end(`h2 says ${headers[':path']}`);
    });
  });

  const plane = await startPlane(t, records({ ports: [{ number: 8080, protocol: 'http2' }], replicas: { [LOCATION]: [`127.0.0.1:${port}`] } }));
  await plane.ready();

  const session = await h2connect(t, plane.url);
  const a = await h2request(session, { ':method': 'POST', ':path': '/via-h2c', ':authority': HOST, te: 'trailers' }, 'hi');
  t.equal(a.status, 200);
  t.equal(a.body.toString(), 'h2 says /via-h2c');
  t.equal(a.headers['x-upstream'], 'h2');
  t.equal(a.trailers?.['x-checksum'], 'abc123', 'upstream trailers are passed on');

  // An HTTP/1.1 client is forwarded over HTTP/2 too.
  const b = await request(plane.port, HOST, '/via-h1');
  t.equal(b.status, 200);
  t.equal(b.body, 'h2 says /via-h1');

  t.equal(seen.length, 2);
  t.same(seen.map((s) => s.path), ['/via-h2c', '/via-h1']);
  t.same(seen.map((s) => s.authority), [HOST, HOST], 'the upstream sees the canonical host as :authority');
  t.equal(seen[0]!.body, 'hi');
});

// ---- gRPC ----------------------------------------------------------------------------------------

const definition = protoLoader.loadSync(path.join(here, '../fixtures/proto/echo.proto'), { keepCase: true, defaults: true });
const proto = grpc.loadPackageDefinition(definition) as unknown as { svcproxy: { test: { Echo: grpc.ServiceClientConstructor } } };
const Echo = proto.svcproxy.test.Echo;

interface EchoRequest { message: string; fail_code: number; fail_details: string }
interface StreamRequest { count: number; size: number }
interface EchoReply { message: string; index: number }

interface GrpcUpstream {
  port: number;
  metadataSeen: grpc.Metadata[];
  /** Server-streaming calls the server saw cancelled. */
  cancelled: number;
}

async function startGrpcServer(t: TapLike): Promise<GrpcUpstream> {
  const metadataSeen: grpc.Metadata[] = [];
  const state = { cancelled: 0 };
  const server = new grpc.Server();
  server.addService(Echo.service, {
    Unary: (call: grpc.ServerUnaryCall<EchoRequest, EchoReply>, callback: grpc.sendUnaryData<EchoReply>) => {
      metadataSeen.push(call.metadata);
      if (call.request.message === 'hang') return; // never answers
      const initial = new grpc.Metadata();
      initial.set('x-server-initial', 'hello-client');
      call.sendMetadata(initial);
      if (call.request.message === 'hang-after-headers') return;
      const trailer = new grpc.Metadata();
      trailer.set('x-server-trailer', 'bye');
      if (call.request.fail_code) {
        callback({ code: call.request.fail_code, details: call.request.fail_details, metadata: trailer });
        return;
      }
      callback(null, { message: `echo: ${call.request.message}`, index: 0 }, trailer);
    },
    ServerStream: (call: grpc.ServerWritableStream<StreamRequest, EchoReply>) => {
      metadataSeen.push(call.metadata);
      call.on('cancelled', () => state.cancelled++);
      const filler = 'x'.repeat(call.request.size);
      let i = 0;
      const writeSome = (): void => {
        while (i < call.request.count) {
          if (call.cancelled) return;
          const ok = call.write({ message: filler, index: i++ });
          if (!ok) return void call.once('drain', writeSome);
        }
        const trailer = new grpc.Metadata();
        trailer.set('x-stream-count', String(call.request.count));
        call.end(trailer);
      };
      writeSome();
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  t.teardown(() => server.forceShutdown());
  return {
    port,
    metadataSeen,
    get cancelled() {
      return state.cancelled;
    },
  };
}

function echoClient(t: TapLike, port: number, authority: string): grpc.Client & Record<string, (...args: unknown[]) => unknown> {
  const client = new Echo(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': authority });
  t.teardown(() => client.close());
  return client as grpc.Client & Record<string, (...args: unknown[]) => unknown>;
}

interface UnaryResult {
  err: grpc.ServiceError | null;
  reply: EchoReply | undefined;
  metadata: grpc.Metadata | undefined;
  status: grpc.StatusObject | undefined;
}

function unary(client: ReturnType<typeof echoClient>, req: Partial<EchoRequest>, md = new grpc.Metadata()): Promise<UnaryResult> {
  return new Promise((resolve) => {
    let metadata: grpc.Metadata | undefined;
    let status: grpc.StatusObject | undefined;
    let result: { err: grpc.ServiceError | null; reply: EchoReply | undefined } | undefined;
    const settle = (): void => {
      if (result && status) resolve({ ...result, metadata, status });
    };
    const call = client.Unary!(req, md, { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null, reply?: EchoReply) => {
      result = { err, reply };
      settle();
    }) as grpc.ClientUnaryCall;
    call.on('metadata', (m: grpc.Metadata) => (metadata = m));
    call.on('status', (s: grpc.StatusObject) => {
      status = s;
      settle();
    });
  });
}

t.test('gRPC through the ingress', { timeout: 30_000 }, async (t) => {
  const upstream = await startGrpcServer(t);
  const plane = await startPlane(t, records({ ports: [{ number: 50051, protocol: 'grpc' }], replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  await plane.ready();
  const client = echoClient(t, plane.port, HOST);

  t.test('unary call with metadata both ways', async (t) => {
    const md = new grpc.Metadata();
    md.set('x-client-meta', 'from-client');
    md.set('x-bin-bin', Buffer.from([0, 1, 2, 255]));
    const r = await unary(client, { message: 'hello' }, md);
    t.equal(r.err, null);
    t.equal(r.reply?.message, 'echo: hello');
    t.equal(r.status?.code, grpc.status.OK);
    t.same(r.metadata?.get('x-server-initial'), ['hello-client'], 'initial metadata reaches the client');
    t.same(r.status?.metadata.get('x-server-trailer'), ['bye'], 'trailing metadata reaches the client');
    const seen = upstream.metadataSeen.at(-1)!;
    t.same(seen.get('x-client-meta'), ['from-client'], 'client metadata reaches the server');
    t.same(seen.get('x-bin-bin'), [Buffer.from([0, 1, 2, 255])], 'binary metadata survives');
    t.ok(seen.get('x-request-id')[0], 'the proxy adds a request id');
  });

  t.test('server streaming, many messages', async (t) => {
    const call = client.ServerStream!({ count: 500, size: 1024 }, new grpc.Metadata(), { deadline: Date.now() + 10_000 }) as grpc.ClientReadableStream<EchoReply>;
    const indexes: number[] = [];
    let bytes = 0;
    const status = await new Promise<grpc.StatusObject>((resolve, reject) => {
      call.on('data', (m: EchoReply) => {
        indexes.push(m.index);
        bytes += m.message.length;
      });
      call.on('status', resolve);
      call.on('error', (err: grpc.ServiceError) => (err.code === grpc.status.OK ? undefined : reject(err)));
    });
    t.equal(status.code, grpc.status.OK);
    t.equal(indexes.length, 500);
    t.same(indexes, Array.from({ length: 500 }, (_, i) => i), 'in order');
    t.equal(bytes, 500 * 1024);
    t.same(status.metadata.get('x-stream-count'), ['500'], 'trailers after a stream');
  });

  t.test('an error status from the server reaches the client', async (t) => {
    const r = await unary(client, { message: 'x', fail_code: grpc.status.NOT_FOUND, fail_details: 'no such thing: ünïcode & 100%' });
    t.equal(r.err?.code, grpc.status.NOT_FOUND);
    t.equal(r.err?.details, 'no such thing: ünïcode & 100%');
    t.same(r.status?.metadata.get('x-server-trailer'), ['bye'], 'trailers of an error answer');
    const r2 = await unary(client, { message: 'x', fail_code: grpc.status.PERMISSION_DENIED, fail_details: 'go away' });
    t.equal(r2.err?.code, grpc.status.PERMISSION_DENIED);
    t.equal(r2.err?.details, 'go away');
  });

  t.test('a client cancel reaches the server', async (t) => {
    const before = upstream.cancelled;
    const call = client.ServerStream!({ count: 10_000_000, size: 100 }, new grpc.Metadata(), { deadline: Date.now() + 10_000 }) as grpc.ClientReadableStream<EchoReply>;
    const status = await new Promise<grpc.StatusObject>((resolve) => {
      call.once('data', () => call.cancel());
      call.on('error', () => undefined);
      call.on('status', resolve);
    });
    t.equal(status.code, grpc.status.CANCELLED);
    await waitFor(() => upstream.cancelled > before, 5000, 'the server to see the cancel');
    t.pass('the upstream call was cancelled');
  });

  t.test('concurrent calls share the connection', async (t) => {
    const results = await Promise.all(Array.from({ length: 50 }, (_, i) => unary(client, { message: `m${i}` })));
    t.same(results.map((r) => r.reply?.message), Array.from({ length: 50 }, (_, i) => `echo: m${i}`));
  });

  t.test('unknown authority: trailers-only UNIMPLEMENTED', async (t) => {
    const stranger = echoClient(t, plane.port, 'nope.app.localhost');
    const r = await unary(stranger, { message: 'x' });
    t.equal(r.err?.code, grpc.status.UNIMPLEMENTED);
    t.equal(r.err?.details, 'no route');
    t.ok(r.status?.metadata.get('x-request-id')[0], 'the local answer carries the request id');
  });

  t.test('the same over a raw h2 stream is one HEADERS frame with END_STREAM', async (t) => {
    const session = await h2connect(t, plane.url);
    const stream = session.request({ ':method': 'POST', ':path': '/svcproxy.test.Echo/Unary', ':authority': 'nope.app.localhost', 'content-type': 'application/grpc', te: 'trailers' });
    stream.end(Buffer.from([0, 0, 0, 0, 0]));
    const [headers, flags] = await new Promise<[http2.IncomingHttpHeaders, number]>((resolve) => stream.once('response', (h, f) => resolve([h, f])));
    t.equal(headers[':status'], 200);
    t.equal(headers['grpc-status'], '12');
    t.equal(headers['content-type'], 'application/grpc');
    t.ok(flags & http2.constants.NGHTTP2_FLAG_END_STREAM, 'END_STREAM on the only HEADERS frame');
    stream.resume();
  });
});

t.test('gRPC past the workload timeout: DEADLINE_EXCEEDED', { timeout: 20_000 }, async (t) => {
  const upstream = await startGrpcServer(t);
  const plane = await startPlane(t, records({
    workloadSpec: { defaultOptions: { timeoutSeconds: 1 } },
    ports: [{ number: 50051, protocol: 'grpc' }],
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
  }));
  await plane.ready();
  const client = echoClient(t, plane.port, HOST);
  const started = Date.now();
  const r = await unary(client, { message: 'hang' });
  t.equal(r.err?.code, grpc.status.DEADLINE_EXCEEDED);
  t.equal(r.err?.details, 'upstream request timeout');
  t.ok(Date.now() - started < 4000, 'answered at the proxy timeout, not the client deadline');
  // Once response headers went out, a timeout can only reset the stream.
  const after = await unary(client, { message: 'hang-after-headers' });
  t.not(after.err?.code, grpc.status.OK);
  t.not(after.err?.code, undefined, 'the call fails');
});

t.test('gRPC to a workload with no ready replica: UNAVAILABLE', { timeout: 20_000 }, async (t) => {
  const plane = await startPlane(t, records({ ports: [{ number: 50051, protocol: 'grpc' }], replicas: { [LOCATION]: [`127.0.0.1:${await deadPort()}`] } }));
  const client = echoClient(t, plane.port, HOST);
  const r = await unary(client, { message: 'x' });
  t.equal(r.err?.code, grpc.status.UNAVAILABLE);
  t.equal(r.err?.details, 'no healthy upstream');
});

t.test('gRPC to an upstream that died after it was found ready: UNAVAILABLE', { timeout: 20_000 }, async (t) => {
  const server = new grpc.Server();
  server.addService(Echo.service, { Unary: () => undefined, ServerStream: () => undefined });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  const plane = await startPlane(t, records({ ports: [{ number: 50051, protocol: 'grpc' }], replicas: { [LOCATION]: [`127.0.0.1:${port}`] } }));
  await plane.ready();
  server.forceShutdown();
  const client = echoClient(t, plane.port, HOST);
  const r = await unary(client, { message: 'x' });
  t.equal(r.err?.code, grpc.status.UNAVAILABLE);
  // The gRPC spec percent-encodes only bytes outside 0x20-0x7E (and '%'); grpc-js decodes with
  // decodeURI, so an over-encoded '/' (%2F) would stay visible to the client.
  t.equal(r.err?.details, 'upstream connect error or disconnect/reset before headers', 'grpc-message is decodable by grpc-js');
});

// ---- WebSocket -----------------------------------------------------------------------------------

function upgradeRequest(host: string, pathname: string, key: string, extra = ''): string {
  return (
    `GET ${pathname} HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n${extra}\r\n`
  );
}


t.test('WebSocket upgrades', { timeout: 30_000 }, async (t) => {
  const upgrades: http.IncomingMessage[] = [];
  const upstream = await startHttpServer(t, (_req, res) => {
    res.writeHead(426).end();
  });
  upstream.server.on('upgrade', wsUpgradeHandler(upgrades));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  await plane.ready();

  t.test('handshake and raw bytes both ways', async (t) => {
    const socket = await rawConnect(t, plane.port);
    const key = randomBytes(16).toString('base64');
    socket.write(upgradeRequest(HOST, '/raw', key, 'x-svc-evil: 1\r\nx-request-id: ws-req-1\r\n'));
    const head = await readHead(socket);
    t.equal(head.status, 101);
    t.equal(head.headers['sec-websocket-accept'], acceptKey(key));
    t.equal(head.headers['upgrade']?.toLowerCase(), 'websocket');
    const seen = upgrades.at(-1)!;
    t.equal(seen.headers.host, HOST);
    t.equal(seen.headers['x-request-id'], 'ws-req-1', 'a valid client request id is kept');
    t.notOk(seen.headers['x-svc-evil'], 'vendor headers are stripped');
    t.ok(seen.headers['x-forwarded-for'], 'x-forwarded-for is set');

    socket.write('ping-bytes');
    const echo1 = await readBytes(socket, 10, head.rest);
    t.equal(echo1.toString(), 'ping-bytes');
    const big = randomBytes(256 * 1024);
    socket.write(big);
    const echo2 = await readBytes(socket, big.length);
    t.ok(echo2.equals(big), '256 KiB echo intact');

    socket.end();
    await waitFor(() => seen.socket.destroyed, 5000, 'the upstream side to close');
    t.pass('closing the client closes the upstream connection');
  });

  t.test('the upstream closing ends the client connection', async (t) => {
    const socket = await rawConnect(t, plane.port);
    socket.write(upgradeRequest(HOST, '/raw', randomBytes(16).toString('base64')));
    const head = await readHead(socket);
    t.equal(head.status, 101);
    const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
    socket.resume();
    upgrades.at(-1)!.socket.destroy();
    await closed;
    t.pass('client connection closed');
  });

  t.test('a real WebSocket client (undici) echoes a text message', async (t) => {
    // undici's WebSocket picks the Host from the URL; dial the ingress whatever the name says.
    const dispatcher = new Agent({
      connect: (_opts, cb) => {
        const socket = net.connect(plane.port, '127.0.0.1');
        socket.once('connect', () => cb(null, socket));
        socket.once('error', (err) => cb(err, null));
        return socket;
      },
    });
    t.teardown(() => dispatcher.close());
    const ws = new WebSocket(`ws://${HOST}:${plane.port}/chat`, { dispatcher });
    t.teardown(() => ws.close());
    const reply = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('no echo')), 5000);
      ws.onopen = () => ws.send('hello over websocket');
      ws.onmessage = (ev) => {
        clearTimeout(timer);
        resolve(String(ev.data));
      };
      ws.onerror = (ev) => {
        clearTimeout(timer);
        reject(new Error(`websocket error: ${(ev as { message?: string }).message ?? ev.type}`));
      };
    });
    t.equal(reply, 'hello over websocket');
    t.equal(upgrades.at(-1)!.url, '/chat');
  });

  t.test('unknown host: 404 with the JSON body', async (t) => {
    const socket = await rawConnect(t, plane.port);
    socket.write(upgradeRequest('nope.app.localhost', '/raw', randomBytes(16).toString('base64')));
    const head = await readHead(socket);
    t.equal(head.status, 404);
    t.equal(head.headers['content-type'], 'application/json');
    const rest = Buffer.concat([head.rest, await readAll(socket)]);
    t.match(JSON.parse(rest.toString()), { status: 404, message: 'no route', code: 'NO_ROUTE', details: {}, id: String });
  });

  t.test('a path the edge rejects: 400', async (t) => {
    const socket = await rawConnect(t, plane.port);
    socket.write(upgradeRequest(HOST, '/a/%2e%2e;x/b%2Fc', randomBytes(16).toString('base64')));
    const head = await readHead(socket);
    t.equal(head.status, 400);
  });
});

t.test('WebSocket to a dead upstream: 503', { timeout: 30_000 }, async (t) => {
  t.test('never ready: no healthy upstream', async (t) => {
    const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${await deadPort()}`] } }));
    const socket = await rawConnect(t, plane.port);
    socket.write(upgradeRequest(HOST, '/raw', randomBytes(16).toString('base64')));
    const head = await readHead(socket);
    t.equal(head.status, 503);
    const rest = Buffer.concat([head.rest, await readAll(socket)]);
    t.match(JSON.parse(rest.toString()), { status: 503, message: 'no healthy upstream', code: 'NO_HEALTHY_UPSTREAM' });
  });

  t.test('found ready, then gone: upstream connect error', async (t) => {
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${port}`] } }));
    await plane.ready();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    const socket = await rawConnect(t, plane.port);
    socket.write(upgradeRequest(HOST, '/raw', randomBytes(16).toString('base64')));
    const head = await readHead(socket);
    t.equal(head.status, 503);
    const rest = Buffer.concat([head.rest, await readAll(socket)]);
    t.match(JSON.parse(rest.toString()), { status: 503, message: 'upstream connect error or disconnect/reset before headers', id: String });
  });
});

// ---- TCP (CONNECT) -------------------------------------------------------------------------------

t.test('CONNECT tunnels to tcp ports only', { timeout: 30_000 }, async (t) => {
  const echo = net.createServer((s) => {
    s.on('error', () => s.destroy());
    s.pipe(s);
  });
  const echoSockets = new Set<net.Socket>();
  echo.on('connection', (s) => {
    echoSockets.add(s);
    s.on('close', () => echoSockets.delete(s));
  });
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const s of echoSockets) s.destroy();
    echo.close();
  });
  const echoPort = (echo.address() as net.AddressInfo).port;
  const web = await startHttpServer(t, echoHandler('web'));
  const recs = records({
    ports: [{ number: 5432, protocol: 'tcp' }],
    replicas: { [LOCATION]: [`127.0.0.1:${echoPort}`] },
    extra: [
      ...records({ workload: 'web', replicas: { [LOCATION]: [`127.0.0.1:${web.port}`] } }).filter((r) => r.kind === 'workload' || r.kind === 'deployment'),
    ],
  });
  const plane = await startPlane(t, recs);
  await plane.ready();

  t.test('CONNECT to the tcp workload: 200, then bytes echo', async (t) => {
    const socket = await rawConnect(t, plane.port);
    // Bytes sent with the CONNECT head (the `head` buffer) must reach the upstream too.
    socket.write(`CONNECT ${HOST}:5432 HTTP/1.1\r\nHost: ${HOST}:5432\r\n\r\nearly`);
    const head = await readHead(socket);
    t.equal(head.status, 200);
    const early = await readBytes(socket, 5, head.rest);
    t.equal(early.toString(), 'early');
    socket.write('hello tcp');
    t.equal((await readBytes(socket, 9)).toString(), 'hello tcp');
    const big = randomBytes(512 * 1024);
    socket.write(big);
    t.ok((await readBytes(socket, big.length)).equals(big), '512 KiB echo intact');
    // Closing the client closes the upstream side.
    const before = echoSockets.size;
    t.ok(before >= 1);
    socket.end();
    await waitFor(() => echoSockets.size < before, 30_000, 'the upstream side of the tunnel to close');
    t.equal(echoSockets.size, before - 1, 'the upstream connection is closed with the tunnel');
  });

  t.test('CONNECT to a foreign host: 404 (never an open proxy)', async (t) => {
    for (const target of ['example.com:443', `127.0.0.1:${echoPort}`, `localhost:${web.port}`]) {
      const socket = await rawConnect(t, plane.port);
      socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
      const head = await readHead(socket);
      t.equal(head.status, 404, target);
      const rest = Buffer.concat([head.rest, await readAll(socket)]);
      t.match(JSON.parse(rest.toString()), { status: 404, message: 'no route', code: 'NO_ROUTE' });
    }
  });

  t.test('CONNECT to an http workload: 404', async (t) => {
    const socket = await rawConnect(t, plane.port);
    const target = `web-${ALIAS}.app.localhost:443`;
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
    const head = await readHead(socket);
    t.equal(head.status, 404);
    // ... while plain HTTP to it works.
    const ok = await request(plane.port, `web-${ALIAS}.app.localhost`, '/');
    t.equal(ok.status, 200);
  });
});

// ---- Upgrades other than WebSocket, and long-quiet connections -----------------------------------

t.test('an h2c Upgrade (curl --http2, Java HttpClient) is ignored and answered in HTTP/1.1', { timeout: 20_000 }, async (t) => {
  const upstream = await startHttpServer(t, echoHandler('h1'));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  await plane.ready();
  const h2cUpgrade = 'Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n';

  const socket = await rawConnect(t, plane.port);
  // GET, then a chunked POST and a content-length POST on the same keep-alive connection.
  socket.write(`GET /first?a=1 HTTP/1.1\r\nHost: ${HOST}\r\n${h2cUpgrade}\r\n`);
  const first = await readHead(socket);
  t.equal(first.status, 200, 'answered, not dropped');
  const firstBody = await readBytes(socket, Number(first.headers['content-length']), first.rest);
  const seen1 = JSON.parse(firstBody.toString());
  t.equal(seen1.url, '/first?a=1');
  t.notOk(seen1.headers.upgrade, 'the Upgrade header is not forwarded');
  t.notOk(seen1.headers['http2-settings'], 'neither is HTTP2-Settings');

  socket.write(`POST /chunked HTTP/1.1\r\nHost: ${HOST}\r\n${h2cUpgrade}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n`);
  const second = await readHead(socket);
  t.equal(second.status, 200);
  const seen2 = JSON.parse((await readBytes(socket, Number(second.headers['content-length']), second.rest)).toString());
  t.equal(seen2.body, 'hello world', 'a chunked body after the ignored Upgrade arrives whole');

  socket.write(`POST /sized HTTP/1.1\r\nHost: ${HOST}\r\n${h2cUpgrade}Content-Length: 7\r\n\r\npayload`);
  const third = await readHead(socket);
  t.equal(third.status, 200);
  const seen3 = JSON.parse((await readBytes(socket, Number(third.headers['content-length']), third.rest)).toString());
  t.equal(seen3.body, 'payload');
  t.equal(seen3.url, '/sized');

  // An unknown host behind an h2c Upgrade gets the ordinary JSON 404.
  socket.write(`GET / HTTP/1.1\r\nHost: nope.app.localhost\r\n${h2cUpgrade}\r\n`);
  const fourth = await readHead(socket);
  t.equal(fourth.status, 404);
  t.match(JSON.parse((await readBytes(socket, Number(fourth.headers['content-length']), fourth.rest)).toString()), { code: 'NO_ROUTE' });
});

/** The proxy's end of a client connection (same process), found by its address pair. */
function proxySideOf(client: net.Socket): net.Socket | undefined {
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.find(
    (h): h is net.Socket => h instanceof net.Socket && h !== client && h.localPort === client.remotePort && h.remotePort === client.localPort,
  );
}

t.test('a connection quiet for long is not cut while a request or tunnel is in use', { timeout: 20_000 }, async (t) => {
  // Before the fix, the listener's 66 s "never sent a byte" timer stayed armed after the protocol
  // was chosen: an HTTP/1.1 request waiting 66 s on its upstream (timeouts go up to 3600 s) got a
  // reset, and so did an idle CONNECT tunnel. The timer is internal, so it is fired by hand or its
  // state read off the proxy's socket rather than by waiting a minute.
  let answerSlow: (() => void) | undefined;
  const upstream = await startHttpServer(t, (req, res) => {
    if (req.url === '/slow') answerSlow = () => res.end('late');
    else res.end('quick');
  });
  const echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  t.teardown(() => echo.close());
  const echoPort = (echo.address() as net.AddressInfo).port;
  const recs = records({
    workloadSpec: { defaultOptions: { timeoutSeconds: 600 } },
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    extra: records({ workload: 'db', ports: [{ number: 5432, protocol: 'tcp' }], replicas: { [LOCATION]: [`127.0.0.1:${echoPort}`] } })
      .filter((r) => r.kind === 'workload' || r.kind === 'deployment'),
  });
  const plane = await startPlane(t, recs);
  await plane.ready();

  const client = await rawConnect(t, plane.port);
  client.write(`GET /slow HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
  await waitFor(() => answerSlow !== undefined);
  const side = proxySideOf(client);
  t.ok(side, "found the proxy's socket");
  // An ordinary request is served on the quick HTTP/1.1 path, which keeps the socket's idle timer
  // armed (re-armed by reads and writes, not per request) and ignores it while an answer is pending:
  // firing it now must not cut the request.
  side!.emit('timeout');
  t.notOk(side?.destroyed, 'the idle timer firing while the request waits on its upstream does not cut it');
  answerSlow!();
  const head = await readHead(client);
  t.equal(head.status, 200);

  const tunnel = await rawConnect(t, plane.port);
  tunnel.write(`CONNECT db-${ALIAS}.app.localhost:5432 HTTP/1.1\r\nHost: db-${ALIAS}.app.localhost:5432\r\n\r\n`);
  const connected = await readHead(tunnel);
  t.equal(connected.status, 200);
  const tunnelSide = proxySideOf(tunnel);
  t.ok(tunnelSide, "found the proxy's tunnel socket");
  t.notOk((tunnelSide?.timeout ?? 0) > 0, `no idle timer on an open tunnel (timeout=${tunnelSide?.timeout})`);
  tunnel.write('still here');
  t.equal((await readBytes(tunnel, 10, connected.rest)).toString(), 'still here');
});

t.test('upgrades and CONNECT go through the external firewall (deny by default)', { timeout: 20_000 }, async (t) => {
  const upstream = await startHttpServer(t, echoHandler('closed'));
  upstream.server.on('upgrade', wsUpgradeHandler([]));
  const echo = net.createServer((s) => s.pipe(s));
  await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
  t.teardown(() => echo.close());
  const closed = { firewallConfig: { external: {} } };
  const recs = records({
    workloadSpec: closed,
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    extra: records({ workload: 'db', workloadSpec: closed, ports: [{ number: 5432, protocol: 'tcp' }], replicas: { [LOCATION]: [`127.0.0.1:${(echo.address() as net.AddressInfo).port}`] } })
      .filter((r) => r.kind === 'workload' || r.kind === 'deployment'),
  });
  const plane = await startPlane(t, recs);
  await plane.ready();

  const ws = await rawConnect(t, plane.port);
  ws.write(upgradeRequest(HOST, '/raw', randomBytes(16).toString('base64')));
  const wsHead = await readHead(ws);
  t.equal(wsHead.status, 403, 'WebSocket upgrade blocked');
  t.match(JSON.parse(Buffer.concat([wsHead.rest, await readAll(ws)]).toString()), { code: 'FIREWALL_BLOCKED' });

  const tunnel = await rawConnect(t, plane.port);
  tunnel.write(`CONNECT db-${ALIAS}.app.localhost:5432 HTTP/1.1\r\nHost: db-${ALIAS}.app.localhost:5432\r\n\r\n`);
  const tunnelHead = await readHead(tunnel);
  t.equal(tunnelHead.status, 403, 'CONNECT blocked');

  const plain = await request(plane.port, HOST, '/');
  t.equal(plain.status, 403, 'plain HTTP blocked alike');
});

t.test('one keep-alive connection: quick-path requests, then a body (Node\'s server from there on), all answered in order', { timeout: 20_000 }, async (t) => {
  const upstream = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  await plane.ready();
  const client = await rawConnect(t, plane.port);
  const get = (p: string): string => `GET ${p} HTTP/1.1\r\nHost: ${HOST}\r\nX-Svc-Debug: spoofed\r\n\r\n`;
  // Three ordinary requests pipelined in one write, then a POST with a body, then two more GETs,
  // the last asking to close: every answer in order, the body forwarded whole.
  client.write(
    get('/one') + get('/two?x=1') + get('/a/../three') +
    `POST /four HTTP/1.1\r\nHost: ${HOST}\r\nContent-Length: 5\r\n\r\nhello` +
    get('/five') + `GET /six HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`,
  );
  const raw = (await readAll(client)).toString('latin1');
  const answers = raw.split(/(?=HTTP\/1\.1 \d{3} )/);
  t.equal(answers.length, 6, 'six answers');
  const seen = answers.map((a) => JSON.parse(a.slice(a.indexOf('\r\n\r\n') + 4)) as { method: string; url: string; body: string; headers: Record<string, string> });
  t.same(seen.map((s) => `${s.method} ${s.url}`), ['GET /one', 'GET /two?x=1', 'GET /three', 'POST /four', 'GET /five', 'GET /six']);
  t.equal(seen[3]!.body, 'hello');
  for (const s of seen) {
    t.notOk(s.headers['x-svc-debug'], `${s.url}: the client's x-svc-* header is stripped`);
    t.match(s.headers['x-request-id'], /^[0-9a-f-]{36}$/, `${s.url}: a request id`);
  }
  for (const a of answers.slice(0, 5)) t.match(a, /\r\nConnection: keep-alive\r\nKeep-Alive: timeout=\d+\r\n/);
  t.match(answers[5]!, /\r\nConnection: close\r\n/);
});
