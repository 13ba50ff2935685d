/**
 * The lean unary gRPC server (src/grpc/server.ts) against real clients on port 0: a @grpc/grpc-js
 * client (OK, a failure with a percent-encoded message, an unknown method, an oversized request),
 * our own unary client (many calls, a request past the stream window, TLS), node:http2 requests for
 * what a gRPC client never sends (GET, another content type, a compressed message, two messages) and
 * for a client window smaller than the answer, and raw frames on a socket for the HTTP/2 a client
 * gets wrong (no preface, frames before SETTINGS, stream ids, DATA on an idle stream, an oversized
 * header list), cancellation, the stream limit and a client's GOAWAY. Closing lets a call in flight
 * finish; grpc-timeout is enforced.
 */
import t from 'tap';
import http2 from 'node:http2';
import net from 'node:net';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { systemClock } from '../../src/deps.js';
import { encodeFields, HpackDecoder } from '../../src/grpc/hpack.js';
import { MAX_HELD_BYTES, parseGrpcTimeout, RpcError, startUnaryServer, type UnaryMethod } from '../../src/grpc/server.js';
import { Status, UnaryChannel } from '../../src/grpc/unary.js';
import type { TapLike } from '../helpers/harness.js';
import { testCert } from '../fixtures/tls.js';

const PATH = '/test.Echo/Call';

async function serve(t: TapLike, method: UnaryMethod, maxMessageBytes = 1024) {
  const errors: string[] = [];
  const server = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, method]]), maxMessageBytes, onError: (_p, e) => errors.push(e.message) });
  t.teardown(() => server.close(100));
  return { server, port: server.address.port, errors };
}

/** A server whose calls (those `waits` picks) are answered only after `release()`, or at teardown. */
async function gated(t: TapLike, waits: (req: Buffer) => boolean = () => true, maxMessageBytes?: number) {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  let entered!: () => void;
  /** Resolved when the first call that waits has reached the method. */
  const arrived = new Promise<void>((r) => (entered = r));
  t.teardown(() => release());
  const served = await serve(t, async (req) => {
    if (waits(req)) {
      entered();
      await gate;
    }
    return req;
  }, maxMessageBytes);
  return { ...served, release, arrived };
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
  const { server, port, release, arrived } = await gated(t);
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const pending = ch.call(PATH, Buffer.from('late'), 5000);
  await arrived;
  const closed = server.close(5000);
  release();
  const r = await pending;
  t.ok(r.ok && r.message.toString() === 'late', 'answered');
  await closed;
  const after = await ch.call(PATH, Buffer.from('x'), 1000);
  t.equal(after.ok, false, 'nothing listens any more');
});

t.test('grpc-timeout: a call not answered in time is answered DEADLINE_EXCEEDED', async (t) => {
  const { port, release } = await gated(t);
  const grpcHeaders = { ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers' };
  const started = Date.now();
  const late = await raw(t, port, { ...grpcHeaders, 'grpc-timeout': '150m' }, frame(Buffer.from('x')));
  t.equal(late.headers['grpc-status'], String(Status.DEADLINE_EXCEEDED));
  t.ok(Date.now() - started >= 140, 'not before the deadline');
  const cases: [string | undefined, number | undefined][] = [['1H', 3_600_000], ['2M', 120_000], ['3S', 3000], ['250m', 250], ['1500u', 1.5], ['2000000n', 2], ['123456789m', undefined], ['5x', undefined], ['-1m', undefined], [undefined, undefined]];
  for (const [value, ms] of cases) t.equal(parseGrpcTimeout(value), ms, `grpc-timeout ${value}`);
});

t.test('flow control: an answer beyond the client window waits for WINDOW_UPDATE, a request beyond ours gets them', async (t) => {
  const { port } = await serve(t, async (req) => (req.toString() === 'big' ? Buffer.alloc(200_000, 7) : Buffer.from(String(req.length))), 4 << 20);
  const session = http2.connect(`http://127.0.0.1:${port}`, { settings: { initialWindowSize: 1000 } });
  t.teardown(() => session.close());
  const req = session.request({ ':method': 'POST', ':path': PATH, 'content-type': 'application/grpc', te: 'trailers' });
  const chunks: Buffer[] = [];
  let trailers: http2.IncomingHttpHeaders = {};
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('trailers', (h) => (trailers = h));
  req.end(frame(Buffer.from('big')));
  await new Promise((r) => req.on('close', r));
  const body = Buffer.concat(chunks);
  t.equal(body.length, 200_005, 'the whole message, 1000 bytes a window at first');
  t.equal(body.readUInt32BE(1), 200_000);
  t.equal(trailers['grpc-status'], '0', 'trailers after the last DATA');
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const big = await ch.call(PATH, Buffer.alloc(3 << 20, 1), 5000);
  t.equal(big.ok && big.message.toString(), String(3 << 20), 'a 3 MiB request past the 1 MiB stream window');
});

t.test('TLS with ALPN h2', async (t) => {
  const cert = testCert();
  t.teardown(() => cert.cleanup());
  const server = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, async (req: Buffer) => req]]), maxMessageBytes: 1024, tls: { cert: cert.cert, key: cert.key } });
  t.teardown(() => server.close(100));
  const ch = new UnaryChannel({ host: 'localhost', port: server.address.port, tls: true, ca: cert.cert, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const r = await ch.call(PATH, Buffer.from('secure'), 5000);
  t.equal(r.ok && r.message.toString(), 'secure');
  const h1 = tls.connect({ host: '127.0.0.1', port: server.address.port, ca: cert.cert, servername: 'localhost', ALPNProtocols: ['http/1.1'] });
  h1.on('error', () => undefined);
  await new Promise((r) => h1.on('close', r));
  t.pass('a client that does not offer h2 is closed');
});

/** A raw HTTP/2 client: frames written as given, the server's frames collected. */
async function rawClient(t: TapLike, port: number, preface = true) {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  await new Promise((r) => socket.once('connect', r));
  const frames: { type: number; flags: number; id: number; payload: Buffer }[] = [];
  let inbox = Buffer.alloc(0);
  let closed = false;
  socket.on('data', (c: Buffer) => {
    inbox = Buffer.concat([inbox, c]);
    while (inbox.length >= 9 && inbox.length >= 9 + inbox.readUIntBE(0, 3)) {
      const length = inbox.readUIntBE(0, 3);
      frames.push({ type: inbox[3]!, flags: inbox[4]!, id: inbox.readUInt32BE(5) & 0x7fffffff, payload: inbox.subarray(9, 9 + length) });
      inbox = inbox.subarray(9 + length);
    }
  });
  socket.on('error', () => undefined);
  socket.on('close', () => (closed = true));
  const send = (type: number, flags: number, id: number, payload: Buffer = Buffer.alloc(0)): void => {
    const head = Buffer.alloc(9);
    head.writeUIntBE(payload.length, 0, 3);
    head[3] = type;
    head[4] = flags;
    head.writeUInt32BE(id, 5);
    socket.write(Buffer.concat([head, payload]));
  };
  if (preface) {
    socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    send(0x4, 0, 0);
  }
  /** Resolves once `ok()` holds, checked as frames arrive (no timer: a load-bearing machine only makes it later); fails if the connection closes first. */
  const until = (what: string, ok: () => boolean): Promise<void> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (!ok() && !closed) return;
        socket.off('data', check);
        socket.off('close', check);
        if (ok()) resolve();
        else reject(new Error(`the connection closed before ${what}`));
      };
      // Registered after the frame reader's own listeners: the frames of a read are collected first.
      socket.on('data', check);
      socket.on('close', check);
      check();
    });
  const goAwayCode = (): number | undefined => frames.find((f) => f.type === 0x7)?.payload.readUInt32BE(4);
  return { socket, frames, send, until, closed: () => closed, goAwayCode };
}

const CALL_HEADERS = encodeFields([[':method', 'POST'], [':scheme', 'http'], [':path', PATH], [':authority', 'x'], ['content-type', 'application/grpc'], ['te', 'trailers']]);

t.test('a cancelled call is not answered, and the connection carries on', async (t) => {
  const { port, release } = await gated(t, (req) => req.toString() === 'wait');
  const c = await rawClient(t, port);
  c.send(0x1, 0x4, 1, CALL_HEADERS);
  c.send(0x0, 0x1, 1, frame(Buffer.from('wait')));
  c.send(0x3, 0, 1, Buffer.from([0, 0, 0, 8])); // RST_STREAM CANCEL
  c.send(0x1, 0x4, 3, CALL_HEADERS); // cancelled while its body is still to come
  c.send(0x3, 0, 3, Buffer.from([0, 0, 0, 8]));
  c.send(0x1, 0x4, 5, CALL_HEADERS);
  c.send(0x0, 0x1, 5, frame(Buffer.from('next')));
  const unknown = encodeFields([[':method', 'POST'], [':scheme', 'http'], [':path', '/test.Echo/Nope'], ['content-type', 'application/grpc']]);
  c.send(0x1, 0x5, 7, unknown); // HEADERS with END_STREAM: the client's side is over at once
  await c.until('the third call\'s trailers', () => c.frames.some((f) => f.id === 5 && f.type === 0x1 && (f.flags & 0x1) !== 0));
  await c.until('the unknown method\'s answer', () => c.frames.some((f) => f.id === 7));
  release();
  await new Promise((r) => setTimeout(r, 50));
  t.notOk(c.frames.some((f) => f.id === 1 || f.id === 3), 'nothing for the cancelled calls (no RST_STREAM answers a RST_STREAM)');
  t.same(c.frames.filter((f) => f.id === 7).map((f) => [f.type, f.flags]), [[0x1, 0x5]], 'a trailers-only answer to a finished request, and no RST_STREAM after it');
  t.notOk(c.closed(), 'the connection stays');
});

t.test('more than 1000 calls at once: the rest refused with REFUSED_STREAM', async (t) => {
  const { port, release } = await gated(t);
  const c = await rawClient(t, port);
  for (let i = 0; i < 1001; i++) c.send(0x1, 0x4, 1 + 2 * i, CALL_HEADERS);
  await c.until('REFUSED_STREAM', () => c.frames.some((f) => f.type === 0x3));
  const resets = c.frames.filter((f) => f.type === 0x3);
  t.same(resets.map((f) => [f.id, f.payload.readUInt32BE(0)]), [[2001, 7]], 'only the 1001st, with REFUSED_STREAM');
});

t.test('HTTP/2 errors end the connection with GOAWAY', async (t) => {
  const { port } = await serve(t, async (req) => req);
  const bad = await rawClient(t, port, false);
  bad.socket.write('GET / HTTP/1.1\r\nhost: x\r\n\r\n');
  await bad.until('close', bad.closed);
  t.equal(bad.goAwayCode(), 1, 'not a preface: PROTOCOL_ERROR');

  const early = await rawClient(t, port, false);
  early.socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  early.send(0x6, 0, 0, Buffer.alloc(8)); // PING before SETTINGS
  await early.until('close', early.closed);
  t.equal(early.goAwayCode(), 1, 'a frame before SETTINGS: PROTOCOL_ERROR');

  const even = await rawClient(t, port);
  even.send(0x1, 0x4, 2, CALL_HEADERS);
  await even.until('close', even.closed);
  t.equal(even.goAwayCode(), 1, 'a client stream with an even id: PROTOCOL_ERROR');

  const backwards = await rawClient(t, port);
  backwards.send(0x1, 0x5, 5, CALL_HEADERS);
  backwards.send(0x1, 0x5, 3, CALL_HEADERS);
  await backwards.until('close', backwards.closed);
  t.equal(backwards.goAwayCode(), 1, 'a stream id below the last: PROTOCOL_ERROR');

  const idle = await rawClient(t, port);
  idle.send(0x0, 0x1, 9, frame(Buffer.from('x')));
  await idle.until('close', idle.closed);
  t.equal(idle.goAwayCode(), 1, 'DATA on a stream never opened: PROTOCOL_ERROR');

  const huge = await rawClient(t, port);
  const many = encodeFields([...Array.from({ length: 20 }, (_, i) => [`x-big-${i}`, 'v'.repeat(4000)] as const)]);
  for (let at = 0; at < many.length; at += 16_384) {
    const first = at === 0;
    const last = at + 16_384 >= many.length;
    huge.send(first ? 0x1 : 0x9, last ? 0x4 : 0, 1, many.subarray(at, at + 16_384));
  }
  await huge.until('close', huge.closed);
  t.equal(huge.goAwayCode(), 11, 'a header block above 64 KiB: ENHANCE_YOUR_CALM');

  // A 4 KB field put in the dynamic table once, then named by index 20 times: a small block that
  // decodes to more than 64 KiB.
  const bomb = await rawClient(t, port);
  const name = Buffer.from('x-bomb');
  const block = Buffer.concat([
    Buffer.from([0x40, name.length]), name, Buffer.from([0x7f, 0xa1, 0x1e]), Buffer.alloc(4000, 0x61),
    Buffer.alloc(20, 0xbe),
  ]);
  bomb.send(0x1, 0x4, 1, block);
  await bomb.until('close', bomb.closed);
  t.equal(bomb.goAwayCode(), 9, `a ${block.length}-byte block decoding above 64 KiB: COMPRESSION_ERROR`);

  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const after = await ch.call(PATH, Buffer.from('still'), 2000);
  t.equal(after.ok && after.message.toString(), 'still', 'other connections are not affected');
});

t.test('a client GOAWAY: its calls are answered, then the connection ends', async (t) => {
  const { port, release } = await gated(t);
  const c = await rawClient(t, port);
  c.send(0x1, 0x4, 1, CALL_HEADERS);
  c.send(0x0, 0x1, 1, frame(Buffer.from('last')));
  c.send(0x7, 0, 0, Buffer.alloc(8));
  await new Promise((r) => setTimeout(r, 50));
  t.notOk(c.closed(), 'open while the call is in flight');
  release();
  await c.until('close', c.closed);
  const data = c.frames.find((f) => f.id === 1 && f.type === 0x0);
  t.equal(data?.payload.subarray(5).toString(), 'last', 'the call was answered first');
});

t.test('requests held at once on a connection are bounded', async (t) => {
  const { port, release } = await gated(t, () => true, 8 << 20);
  const c = await rawClient(t, port);
  const chunk = Buffer.alloc(16_384, 1);
  const sendBody = (id: number, bytes: number): void => {
    for (let sent = 0; sent < bytes; sent += chunk.length) c.send(0x0, 0, id, chunk);
  };
  // Sent without waiting for WINDOW_UPDATEs, which the server gives as the bytes arrive. The third
  // call is answered (and reset) after 4 MiB of its body; what follows the reset must stay within the
  // window that stream had left (1 MiB less its last 16 KiB), or it is FLOW_CONTROL_ERROR.
  for (const id of [1, 3, 5]) {
    c.send(0x1, 0x4, id, CALL_HEADERS);
    sendBody(id, id === 5 ? (4 << 20) + (512 << 10) : 6 << 20);
  }
  await c.until('the third call\'s answer', () => c.frames.some((f) => f.id === 5 && f.type === 0x1));
  const third = c.frames.find((f) => f.id === 5 && f.type === 0x1)!;
  const fields = new Map<string, string>();
  new HpackDecoder().decode(third.payload, (n, v) => fields.set(n, v));
  t.equal(fields.get('grpc-status'), String(Status.RESOURCE_EXHAUSTED), `past ${MAX_HELD_BYTES} bytes held: RESOURCE_EXHAUSTED`);
  t.notOk(c.frames.some((f) => (f.id === 1 || f.id === 3) && f.type === 0x1), 'the first two, within the bound, still wait for their ends');
  t.notOk(c.closed(), 'the connection stays');
  release();
});

t.test('close while a large answer waits in the socket for a slow reader: all of it arrives before the end', async (t) => {
  const server = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, async () => Buffer.alloc(6 << 20, 9)]]), maxMessageBytes: 1024 });
  t.teardown(() => server.close(100));
  const c = await rawClient(t, server.address.port, false);
  c.socket.write('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  const settings = Buffer.alloc(6);
  settings.writeUInt16BE(0x4, 0); // SETTINGS_INITIAL_WINDOW_SIZE
  settings.writeUInt32BE(16 << 20, 2);
  c.send(0x4, 0, 0, settings);
  const more = Buffer.alloc(4);
  more.writeUInt32BE(16 << 20, 0);
  c.send(0x8, 0, 0, more); // the connection window too
  c.send(0x1, 0x4, 1, CALL_HEADERS);
  c.send(0x0, 0x1, 1, frame(Buffer.from('big')));
  c.socket.pause(); // a client that reads slowly: the answer backs up in the server's socket
  await new Promise((r) => setTimeout(r, 300));
  const closed = server.close(5000);
  await new Promise((r) => setTimeout(r, 100));
  c.socket.resume();
  await c.until('close', c.closed);
  await closed;
  const body = c.frames.filter((f) => f.id === 1 && f.type === 0x0).reduce((n, f) => n + f.payload.length, 0);
  t.equal(body, (6 << 20) + 5, 'all 6 MiB and the message prefix');
  t.ok(c.frames.some((f) => f.id === 1 && f.type === 0x1 && (f.flags & 0x1) !== 0), 'and the trailers');
});

t.test('idle connections are let go: a client stopped mid-frame, and a quiet one (GOAWAY)', async (t) => {
  const server = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, async (req: Buffer) => req]]), maxMessageBytes: 1024, idleTimeoutMs: 300 });
  t.teardown(() => server.close(100));
  const open = (bytes: Buffer): Promise<{ frames: number[]; closed: true }> =>
    new Promise((resolve) => {
      const socket = net.connect(server.address.port, '127.0.0.1');
      let got = Buffer.alloc(0);
      socket.on('data', (c: Buffer) => (got = Buffer.concat([got, c])));
      socket.on('error', () => undefined);
      socket.once('connect', () => socket.write(bytes));
      socket.once('close', () => {
        const types: number[] = [];
        for (let at = 0; at + 9 <= got.length; at += 9 + got.readUIntBE(at, 3)) types.push(got[at + 3]!);
        resolve({ frames: types, closed: true });
      });
      t.teardown(() => socket.destroy());
    });
  const preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
  const settings = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
  // A frame header announcing 100 bytes, and only 3 of them.
  const partial = Buffer.concat([preface, settings, Buffer.from([0, 0, 100, 0, 0, 0, 0, 0, 1, 1, 2, 3])]);
  const stopped = await open(partial);
  t.ok(stopped.closed, 'a client stopped mid-frame is closed');
  const quiet = await open(Buffer.concat([preface, settings]));
  t.ok(quiet.frames.includes(7), 'a quiet client gets GOAWAY before the close');
});
