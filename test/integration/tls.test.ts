/**
 * The TLS listener (`listenTls` + `tls: {certFile, keyFile}`): ALPN picks h2 when the client offers
 * it and HTTP/1.1 otherwise; HTTPS HTTP/1.1 requests, h2 requests, gRPC over TLS and a WebSocket
 * upgrade all answer through it, and upstreams see `x-forwarded-proto: https`.
 */
import t from 'tap';
import https from 'node:https';
import http2 from 'node:http2';
import tls from 'node:tls';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import type http from 'node:http';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ALIAS, echoHandler, records, startHttpServer, startPlane, type TapLike } from '../helpers/harness.js';
import type { Listener } from '../../src/listener/index.js';
import { testCert } from '../fixtures/tls.js';
import { acceptKey, readBytes, readHead, wsUpgradeHandler } from '../fixtures/ws.js';

const HOST = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-west-2';
const here = path.dirname(fileURLToPath(import.meta.url));

const cert = testCert();
t.teardown(() => cert.cleanup());

async function tlsPlane(t: TapLike, recs: Record<string, unknown>[]): Promise<{ tlsPort: number; listener: Listener }> {
  const plane = await startPlane(t, recs, { listenTls: ['127.0.0.1:0'], tls: { certFile: cert.certFile, keyFile: cert.keyFile } });
  await plane.ready();
  const listener = plane.runtime.listeners.find((l) => l.tls);
  if (!listener) throw new Error('no TLS listener');
  return { tlsPort: listener.address.port, listener };
}

function alpn(port: number, protocols: string[] | undefined): Promise<string | false> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: cert.cert, servername: 'localhost', ...(protocols ? { ALPNProtocols: protocols } : {}) }, () => {
      const chosen = socket.alpnProtocol;
      socket.destroy();
      resolve(chosen ?? false);
    });
    socket.setTimeout(5000, () => socket.destroy(new Error('TLS handshake timed out')));
    socket.on('error', reject);
  });
}

function httpsGet(port: number, pathname: string): Promise<{ status: number; body: string; alpn: string | false | null }> {
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: '127.0.0.1', port, path: pathname, headers: { host: HOST }, ca: cert.cert, servername: 'localhost', agent: false, timeout: 5000 },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, alpn: (res.socket as tls.TLSSocket).alpnProtocol ?? null }));
      },
    );
    req.on('timeout', () => req.destroy(new Error('https request timed out')));
    req.on('error', reject);
    req.end();
  });
}

t.test('HTTPS: ALPN, HTTP/1.1 and h2 through the TLS listener', { timeout: 30_000 }, async (t) => {
  const upstream = await startHttpServer(t, echoHandler('app'));
  const { tlsPort } = await tlsPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));

  t.equal(await alpn(tlsPort, ['h2', 'http/1.1']), 'h2', 'h2 is chosen when offered');
  t.equal(await alpn(tlsPort, ['http/1.1', 'h2']), 'h2', 'the server prefers h2');
  t.equal(await alpn(tlsPort, ['http/1.1']), 'http/1.1');

  const h1 = await httpsGet(tlsPort, '/over-tls?q=1');
  t.equal(h1.status, 200);
  const seen1 = JSON.parse(h1.body);
  t.equal(seen1.url, '/over-tls?q=1');
  t.equal(seen1.headers.host, HOST);
  t.equal(seen1.headers['x-forwarded-proto'], 'https');

  const session = http2.connect(`https://127.0.0.1:${tlsPort}`, { ca: cert.cert, servername: 'localhost' });
  t.teardown(() => {
    session.destroy();
  });
  const answer = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const stream = session.request({ ':path': '/over-h2', ':authority': HOST });
    let body = '';
    let status = 0;
    stream.setEncoding('utf8');
    stream.setTimeout(5000, () => stream.close(http2.constants.NGHTTP2_CANCEL));
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (c: string) => (body += c));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
  });
  t.equal(session.alpnProtocol, 'h2');
  t.equal(answer.status, 200);
  const seen2 = JSON.parse(answer.body);
  t.equal(seen2.url, '/over-h2');
  t.equal(seen2.headers.host, HOST);
  t.equal(seen2.headers['x-forwarded-proto'], 'https');

  // A client's last request over TLS (Connection: close, as a client making one request per
  // connection sends it): answered saying so, then the proxy ends the connection.
  const raw = await new Promise<string>((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port: tlsPort, ca: cert.cert, servername: 'localhost', ALPNProtocols: ['http/1.1'] }, () => {
      socket.write(`GET /first HTTP/1.1\r\nHost: ${HOST}\r\n\r\n`);
      socket.once('data', () => socket.write(`GET /last HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`));
    });
    let out = '';
    socket.setEncoding('latin1');
    socket.on('data', (d: string) => (out += d));
    socket.setTimeout(5000, () => socket.destroy(new Error('the proxy did not end the connection')));
    socket.on('end', () => resolve(out));
    socket.on('error', reject);
  });
  const answers = raw.split(/(?=HTTP\/1\.1 )/);
  t.equal(answers.length, 2, 'two answers on the connection');
  t.match(answers[0], /^HTTP\/1\.1 200 OK\r\n[^]*\r\nConnection: keep-alive\r\n/, 'the first kept alive');
  t.match(answers[1], /^HTTP\/1\.1 200 OK\r\n[^]*\r\nConnection: close\r\n[^]*"url":"\/last"/, 'the last says Connection: close, and the server ended the connection');
  t.notMatch(answers[1], /"connection":"close"/, 'the client\'s Connection field is not forwarded');

  // An unknown host over TLS is still the JSON 404.
  const unknown = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port: tlsPort, path: '/', headers: { host: 'nope.app.localhost' }, ca: cert.cert, servername: 'localhost', agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
  t.equal(unknown.status, 404);
  t.match(JSON.parse(unknown.body), { status: 404, code: 'NO_ROUTE' });
});

t.test('gRPC over TLS', { timeout: 30_000 }, async (t) => {
  const definition = protoLoader.loadSync(path.join(here, '../fixtures/proto/echo.proto'), { keepCase: true, defaults: true });
  const Echo = (grpc.loadPackageDefinition(definition) as unknown as { svcproxy: { test: { Echo: grpc.ServiceClientConstructor } } }).svcproxy.test.Echo;
  const server = new grpc.Server();
  server.addService(Echo.service, {
    Unary: (call: grpc.ServerUnaryCall<{ message: string; fail_code: number; fail_details: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      if (call.request.fail_code) return cb({ code: call.request.fail_code, details: call.request.fail_details });
      cb(null, { message: `tls echo: ${call.request.message}`, index: 0 });
    },
    ServerStream: () => undefined,
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  t.teardown(() => server.forceShutdown());
  const { tlsPort } = await tlsPlane(t, records({ ports: [{ number: 50051, protocol: 'grpc' }], replicas: { [LOCATION]: [`127.0.0.1:${port}`] } }));
  const client = new Echo(`127.0.0.1:${tlsPort}`, grpc.credentials.createSsl(cert.cert), {
    'grpc.default_authority': HOST,
    'grpc.ssl_target_name_override': 'localhost',
  }) as grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  t.teardown(() => client.close());
  const call = (req: object): Promise<{ err: grpc.ServiceError | null; reply?: { message: string } }> =>
    new Promise((resolve) => {
      client.Unary!(req, new grpc.Metadata(), { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null, reply?: { message: string }) => resolve({ err, ...(reply ? { reply } : {}) }));
    });
  const ok = await call({ message: 'secure' });
  t.equal(ok.err, null);
  t.equal(ok.reply?.message, 'tls echo: secure');
  const failed = await call({ message: 'x', fail_code: grpc.status.ALREADY_EXISTS, fail_details: 'already there' });
  t.equal(failed.err?.code, grpc.status.ALREADY_EXISTS);
  t.equal(failed.err?.details, 'already there');
});

t.test('WebSocket upgrade over TLS (HTTP/1.1 by ALPN)', { timeout: 30_000 }, async (t) => {
  const upgrades: http.IncomingMessage[] = [];
  const upstream = await startHttpServer(t, (_req, res) => res.writeHead(426).end());
  upstream.server.on('upgrade', wsUpgradeHandler(upgrades));
  const { tlsPort } = await tlsPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  const socket = tls.connect({ host: '127.0.0.1', port: tlsPort, ca: cert.cert, servername: 'localhost', ALPNProtocols: ['http/1.1'] });
  t.teardown(() => {
    socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  const key = randomBytes(16).toString('base64');
  socket.write(`GET /raw HTTP/1.1\r\nHost: ${HOST}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  const head = await readHead(socket);
  t.equal(head.status, 101);
  t.equal(head.headers['sec-websocket-accept'], acceptKey(key));
  socket.write('secure bytes');
  t.equal((await readBytes(socket, 12, head.rest)).toString(), 'secure bytes');
  t.equal(upgrades.at(-1)?.headers.host, HOST);
});
