/**
 * The lean unary gRPC server (src/grpc/server.ts) against real clients on port 0: a @grpc/grpc-js
 * client (OK, a failure with a percent-encoded message, an unknown method, an oversized request),
 * our own unary client, and raw node:http2 requests for what a gRPC client never sends (GET, another
 * content type, a compressed message, two messages). Closing lets a call in flight finish.
 */
import t from 'tap';
import http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { systemClock } from '../../src/deps.js';
import { RpcError, startUnaryServer, type UnaryMethod } from '../../src/grpc/server.js';
import { Status, UnaryChannel } from '../../src/grpc/unary.js';
import type { TapLike } from '../helpers/harness.js';

const PATH = '/test.Echo/Call';

async function serve(t: TapLike, method: UnaryMethod, maxMessageBytes = 1024) {
  const errors: string[] = [];
  const server = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, method]]), maxMessageBytes, onError: (_p, e) => errors.push(e.message) });
  t.teardown(() => server.close(100));
  return { server, port: server.address.port, errors };
}

function grpcClient(t: TapLike, port: number) {
  const raw = { requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b, responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b };
  const Client = grpc.makeGenericClientConstructor(
    { Call: { path: PATH, requestStream: false, responseStream: false, ...raw }, Other: { path: '/test.Echo/Other', requestStream: false, responseStream: false, ...raw } },
    'Echo',
  );
  const client = new Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  t.teardown(() => client.close());
  const call = (name: 'Call' | 'Other', req: Buffer) =>
    new Promise<{ reply?: Buffer; error?: grpc.ServiceError }>((resolve) =>
      (client[name] as (r: Buffer, cb: (e: grpc.ServiceError | null, r?: Buffer) => void) => void)(req, (error, reply) => resolve(error ? { error } : { reply: reply! })),
    );
  return call;
}

t.test('a grpc-js client: OK, a failure, an unknown method, a request above the bound', async (t) => {
  const { port, errors } = await serve(t, async (req) => {
    if (req.toString() === 'fail') throw new RpcError(Status.INVALID_ARGUMENT, 'bad value: ünïcode 100%');
    if (req.toString() === 'crash') throw new Error('boom');
    return Buffer.concat([Buffer.from('echo:'), req]);
  });
  const call = grpcClient(t, port);
  t.equal((await call('Call', Buffer.from('hi'))).reply?.toString(), 'echo:hi');
  const failed = await call('Call', Buffer.from('fail'));
  t.equal(failed.error?.code, grpc.status.INVALID_ARGUMENT);
  t.equal(failed.error?.details, 'bad value: ünïcode 100%', 'the message survives percent-encoding');
  const crashed = await call('Call', Buffer.from('crash'));
  t.equal(crashed.error?.code, grpc.status.INTERNAL);
  t.same(errors, ['boom'], 'an unexpected error is reported');
  t.equal((await call('Other', Buffer.from('x'))).error?.code, grpc.status.UNIMPLEMENTED);
  t.equal((await call('Call', Buffer.alloc(2000))).error?.code, grpc.status.RESOURCE_EXHAUSTED);
  t.equal((await call('Call', Buffer.alloc(0))).reply?.toString(), 'echo:', 'an empty message is a message');
});

t.test('our unary client, many calls at once', async (t) => {
  const { port } = await serve(t, async (req) => req);
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => ch.call(PATH, Buffer.from(String(i)), 5000)));
  t.same(results.map((r) => (r.ok ? r.message.toString() : r.message)), Array.from({ length: 200 }, (_, i) => String(i)));
});

/** One raw HTTP/2 request: status, headers and trailers as the server sent them. */
async function raw(t: TapLike, port: number, headers: http2.OutgoingHttpHeaders, body: Buffer) {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  t.teardown(() => session.close());
  const req = session.request(headers, { endStream: false });
  const out: { headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders } = { headers: {}, trailers: {} };
  req.on('response', (h) => (out.headers = h));
  req.on('trailers', (h) => (out.trailers = h));
  req.resume();
  req.end(body);
  await new Promise((r) => req.on('close', r));
  return out;
}

const frame = (payload: Buffer, flag = 0) => Buffer.concat([Buffer.from([flag]), Buffer.from([0, 0, 0, payload.length]), payload]);

t.test('what a gRPC client never sends', async (t) => {
  const { port } = await serve(t, async (req) => req);
  const grpcHeaders = { ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers' };
  t.equal((await raw(t, port, { ...grpcHeaders, ':method': 'GET' }, Buffer.alloc(0))).headers[':status'], 405);
  t.equal((await raw(t, port, { ...grpcHeaders, 'content-type': 'text/plain' }, frame(Buffer.from('x')))).headers[':status'], 415);
  t.equal((await raw(t, port, { ...grpcHeaders, 'content-type': 'application/grpc+proto' }, frame(Buffer.from('x')))).trailers['grpc-status'], '0', '+proto is gRPC');
  const compressed = await raw(t, port, grpcHeaders, frame(Buffer.from('x'), 1));
  t.equal(compressed.headers['grpc-status'], String(Status.INTERNAL));
  t.match(compressed.headers['grpc-message'], /compressed/);
  const two = await raw(t, port, grpcHeaders, Buffer.concat([frame(Buffer.from('a')), frame(Buffer.from('b'))]));
  t.equal(two.headers['grpc-status'], String(Status.INTERNAL));
  const none = await raw(t, port, grpcHeaders, Buffer.alloc(0));
  t.equal(none.headers['grpc-status'], String(Status.INTERNAL));
});

t.test('close: a call in flight is answered, then the server stops', async (t) => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const { server, port } = await serve(t, async (req) => {
    await gate;
    return req;
  });
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const pending = ch.call(PATH, Buffer.from('late'), 5000);
  await new Promise((r) => setTimeout(r, 50));
  const closed = server.close(5000);
  release();
  const r = await pending;
  t.ok(r.ok && r.message.toString() === 'late', 'answered');
  await closed;
  const after = await ch.call(PATH, Buffer.from('x'), 1000);
  t.equal(after.ok, false, 'nothing listens any more');
});
