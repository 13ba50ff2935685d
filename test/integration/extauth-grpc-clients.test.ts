/**
 * gRPC clients of the proxy behind external authorization: an allowed call reaches the gRPC app
 * (the check sees HTTP/2, `application/grpc` and the framed message); a denial or a failed check
 * answers with the mapped grpc-status in a trailers-only response.
 */
import t from 'tap';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { allow, deadPort, startGrpcAuth, type GrpcAnswer } from '../fixtures/extauth/servers.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const here = path.dirname(fileURLToPath(import.meta.url));
const definition = protoLoader.loadSync(path.join(here, '../fixtures/proto/echo.proto'), { keepCase: true, defaults: true });
const Echo = (grpc.loadPackageDefinition(definition) as unknown as { svcproxy: { test: { Echo: grpc.ServiceClientConstructor } } }).svcproxy.test.Echo;

async function echoServer(t: Tap): Promise<number> {
  const server = new grpc.Server();
  server.addService(Echo.service, {
    Unary: (call: grpc.ServerUnaryCall<{ message: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => cb(null, { message: `echo ${call.request.message}`, index: 0 }),
    ServerStream: (call: grpc.ServerWritableStream<unknown, unknown>) => call.end(),
  });
  t.teardown(() => server.forceShutdown());
  return new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))));
}

type Tap = { teardown(fn: () => unknown): void };

function call(port: number, message: string): Promise<{ code: number; details: string; reply?: { message: string } }> {
  const client = new Echo(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.default_authority': CANONICAL });
  return new Promise((resolve) => {
    (client as unknown as Record<string, (...a: unknown[]) => void>).Unary!({ message }, { deadline: Date.now() + 5000 }, (err: grpc.ServiceError | null, reply?: { message: string }) => {
      client.close();
      resolve(err ? { code: err.code, details: err.details } : { code: 0, details: '', ...(reply ? { reply } : {}) });
    });
  });
}

t.test('allowed, denied and failed checks as a gRPC client sees them', async (t) => {
  const app = await echoServer(t);
  let answer: GrpcAnswer = allow();
  const auth = await startGrpcAuth(t, () => answer);
  const down = await deadPort();
  const recs = (authPort: number) =>
    records({
      ports: [{ number: 50051, protocol: 'grpc' }],
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app}`] },
      tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': authPort, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false },
    });
  const plane = await startPlane(t, recs(auth.port));
  await plane.ready();

  const ok = await call(plane.port, 'hi');
  t.equal(ok.code, grpc.status.OK);
  t.equal(ok.reply?.message, 'echo hi');
  const h = auth.calls[0]!.attributes.request.http;
  t.equal(h.protocol, 'HTTP/2');
  t.equal(h.method, 'POST');
  t.equal(h.path, '/svcproxy.test.Echo/Unary');
  t.match(h.headers['content-type'], /^application\/grpc/);
  t.equal(h.headers['x-envoy-auth-partial-body'], 'false');
  t.ok(h.body.length >= 5, 'the framed message is the body');

  answer = { status: { code: 7 } };
  const denied = await call(plane.port, 'hi');
  t.equal(denied.code, grpc.status.PERMISSION_DENIED, '403 → PERMISSION_DENIED');

  answer = { status: { code: 16 }, denied_response: { status: { code: 'Unauthorized' }, headers: [], body: '' } };
  const unauth = await call(plane.port, 'hi');
  t.equal(unauth.code, grpc.status.UNAUTHENTICATED, '401 → UNAUTHENTICATED');

  const failing = await startPlane(t, recs(down));
  await failing.ready();
  const failed = await call(failing.port, 'hi');
  t.equal(failed.code, grpc.status.PERMISSION_DENIED);
  t.equal(failed.details, 'external authorization failed');
});
