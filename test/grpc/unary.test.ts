/**
 * The lean unary gRPC client (src/grpc/unary.ts) against real peers on port 0: a @grpc/grpc-js server
 * (the wire format as grpc-js speaks it: OK, error status with a percent-encoded message, trailers-only,
 * many calls on one connection, TLS with a private CA), raw node:http2 servers for what a grpc-js
 * server never sends (HTTP 503/404, an oversized or compressed answer, no grpc-status), a server that
 * never answers (timeout, RST_STREAM CANCEL, grpc-timeout sent), a refused port (fail fast within the
 * reconnect backoff, then recover), GOAWAY, and a peer that stops answering at the TCP level (the
 * timeout's PING finds it dead and the next call reconnects).
 */
import t from 'tap';
import http2 from 'node:http2';
import net from 'node:net';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { systemClock } from '../../src/deps.js';
import { Status, UnaryChannel, type UnaryResult } from '../../src/grpc/unary.js';
import { startH2Server, type TapLike } from '../helpers/harness.js';

type TapT = TapLike;
const PATH = '/test.Echo/Call';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A grpc-js server with one raw (Buffer in, Buffer out) unary method whose behaviour the test picks. */
async function grpcServer(t: TapT, handle: (req: Buffer) => { reply?: Buffer; error?: { code: number; details: string }; trailersOnly?: boolean }, creds = grpc.ServerCredentials.createInsecure()) {
  const server = new grpc.Server();
  const calls: { req: Buffer; deadlineIn: number }[] = [];
  server.addService(
    {
      Call: {
        path: PATH, requestStream: false, responseStream: false,
        requestSerialize: (b: Buffer) => b, requestDeserialize: (b: Buffer) => b,
        responseSerialize: (b: Buffer) => b, responseDeserialize: (b: Buffer) => b,
      },
    },
    {
      Call: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        calls.push({ req: call.request, deadlineIn: Number(call.getDeadline()) - Date.now() });
        const out = handle(call.request);
        if (out.error) cb({ code: out.error.code, details: out.error.details } as grpc.ServiceError);
        else cb(null, out.reply ?? Buffer.alloc(0));
      },
    },
  );
  const port = await new Promise<number>((res, rej) => server.bindAsync('127.0.0.1:0', creds, (e, p) => (e ? rej(e) : res(p))));
  t.teardown(() => server.forceShutdown());
  return { port, calls };
}

/** A raw HTTP/2 server: the stream handler answers however the test wants. */
function rawServer(t: TapT, onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void) {
  return startH2Server(t, (stream, headers) => {
    stream.on('error', () => undefined);
    onStream(stream, headers);
  });
}

/** A TCP relay in front of a server: counts connections, and can freeze one (bytes stop, no FIN). */
async function relay(t: TapT, port: number) {
  const frozen = new Set<net.Socket>();
  const accepted: net.Socket[] = [];
  const server = net.createServer((down) => {
    accepted.push(down);
    const up = net.connect(port, '127.0.0.1');
    const pass = (from: net.Socket, to: net.Socket) => from.on('data', (d) => { if (!frozen.has(down)) to.write(d); });
    pass(down, up);
    pass(up, down);
    down.on('error', () => up.destroy());
    up.on('error', () => down.destroy());
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => {
    for (const s of accepted) s.destroy();
    server.close();
  });
  return { port: (server.address() as net.AddressInfo).port, connections: () => accepted.length, freeze: (i: number) => frozen.add(accepted[i]!) };
}

function channel(t: TapT, port: number, extra: Partial<ConstructorParameters<typeof UnaryChannel>[0]> = {}): UnaryChannel {
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes: 1024, clock: systemClock, ...extra });
  t.teardown(() => ch.close());
  return ch;
}

function failed(r: UnaryResult): { code: number; message: string; timeout: boolean } {
  if (r.ok) throw new Error('expected a failure, got OK');
  return r;
}

const grpcFrame = (payload: Buffer, compressed = 0): Buffer => {
  const b = Buffer.alloc(5 + payload.length);
  b[0] = compressed;
  b.writeUInt32BE(payload.length, 1);
  payload.copy(b, 5);
  return b;
};

t.test('OK: the message arrives as sent, the answer comes back, grpc-timeout travels', async (t) => {
  const srv = await grpcServer(t, (req) => ({ reply: Buffer.concat([Buffer.from('echo:'), req]) }));
  const ch = channel(t, srv.port);
  const r = await ch.call(PATH, Buffer.from('hello'), 1000);
  t.ok(r.ok);
  if (r.ok) t.equal(r.message.toString(), 'echo:hello');
  t.equal(srv.calls[0]?.req.toString(), 'hello');
  const left = srv.calls[0]?.deadlineIn ?? 0;
  t.ok(left > 900 && left <= 1000, `the server saw the deadline (${left} ms left)`);
  const empty = await ch.call(PATH, Buffer.alloc(0), 1000);
  t.ok(empty.ok, 'an empty message both ways is a valid call');
  if (empty.ok) t.equal(empty.message.toString(), 'echo:');
});

t.test('a non-OK status: the code and the percent-decoded message', async (t) => {
  const srv = await grpcServer(t, () => ({ error: { code: Status.PERMISSION_DENIED, details: 'nope: 100% — ünïcode' } }));
  const r = failed(await channel(t, srv.port).call(PATH, Buffer.from('x'), 1000));
  t.same(r, { ok: false, code: Status.PERMISSION_DENIED, message: 'nope: 100% — ünïcode', timeout: false });
});

t.test('many calls at once share one connection', async (t) => {
  const srv = await grpcServer(t, (req) => ({ reply: req }));
  const front = await relay(t, srv.port);
  const ch = channel(t, front.port);
  const results = await Promise.all(Array.from({ length: 200 }, (_, i) => ch.call(PATH, Buffer.from(String(i)), 2000)));
  t.ok(results.every((r, i) => r.ok && r.message.toString() === String(i)), 'every answer matches its call');
  t.equal(front.connections(), 1, 'one HTTP/2 connection');
});

t.test('answers that span many reads on two connections at once arrive intact', async (t) => {
  // Both connections read into one shared buffer: every answer (20-60 KiB, many DATA frames) must
  // still be its own bytes, and so must header blocks split into CONTINUATION frames.
  const answer = (seed: number): Buffer => Buffer.from(Array.from({ length: 20_000 + (seed % 5) * 10_000 }, (_, i) => (i * 13 + seed) & 0xff));
  const srv = await grpcServer(t, (req) => ({ reply: answer(Number(req.toString())) }));
  const channels = [channel(t, srv.port, { maxResponseBytes: 1 << 20 }), channel(t, srv.port, { maxResponseBytes: 1 << 20 })];
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => channels[i % 2]!.call(PATH, Buffer.from(String(i)), 5000)));
    const bad = results.map((r, i) => (r.ok && r.message.equals(answer(i)) ? -1 : i)).filter((i) => i >= 0);
    t.same(bad, [], `round ${round}: all 40 answers intact`);
  }

  // Varied characters, so bytes of another read in its place cannot decode to the same block.
  // Two large fields: the first ends, and the second's name and length begin, early in the second
  // CONTINUATION frame, where the next read would land if that frame's bytes were not copied.
  const value = (n: number, seed: number): string => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7919 + seed) % 251)).toString('base64');
  const [BIG_A, BIG_B] = [value(17_300, 17), value(17_000, 29)];
  const raw = await rawServer(t, (stream) => {
    // A header block far above one frame: the server splits it into HEADERS + CONTINUATION.
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'x-a': BIG_A, 'x-b': BIG_B }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    stream.end(grpcFrame(Buffer.from('fine')));
  });
  // The answer comes through one HTTP/2 frame at a time, a pause after each: each CONTINUATION
  // frame is read whole, on its own, and the block ends reads later.
  const trickle = net.createServer((down) => {
    const up = net.connect(raw.port, '127.0.0.1');
    down.on('data', (d) => up.write(d));
    let held = Buffer.alloc(0);
    up.on('data', async (d: Buffer) => {
      up.pause();
      held = Buffer.concat([held, d]);
      while (held.length >= 9) {
        const size = 9 + ((held[0]! << 16) | (held[1]! << 8) | held[2]!);
        if (held.length < size) break;
        down.write(held.subarray(0, size));
        held = held.subarray(size);
        await sleep(2);
      }
      up.resume();
    });
    for (const s of [down, up]) s.on('error', () => undefined);
    down.on('close', () => up.destroy());
    up.on('close', () => down.destroy());
  });
  await new Promise<void>((r) => trickle.listen(0, '127.0.0.1', r));
  t.teardown(() => trickle.close());
  const big = channel(t, (trickle.address() as net.AddressInfo).port, { maxResponseBytes: 1 << 20 });
  const busy = channel(t, srv.port, { maxResponseBytes: 1 << 20 });
  const calls = big.call(PATH, Buffer.from('x'), 10_000);
  // The other connection keeps reading answers while the header block trickles in.
  for (let i = 0; i < 20; i++) await busy.call(PATH, Buffer.from(String(i)), 5000);
  const r = await calls;
  t.ok(r.ok && r.message.toString() === 'fine', 'a header block in CONTINUATION frames over many reads, next to another connection\'s answers');
});

t.test('answers the gRPC spec maps from HTTP, and malformed ones', async (t) => {
  const cases: [string, (s: http2.ServerHttp2Stream) => void, number, RegExp][] = [
    ['HTTP 503', (s) => { s.respond({ ':status': 503 }); s.end(); }, Status.UNAVAILABLE, /503/],
    ['HTTP 404', (s) => { s.respond({ ':status': 404 }); s.end(); }, Status.UNIMPLEMENTED, /404/],
    ['HTTP 401', (s) => { s.respond({ ':status': 401 }); s.end(); }, Status.UNAUTHENTICATED, /401/],
    ['trailers-only error', (s) => { s.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '8', 'grpc-message': 'slow%20down' }, { endStream: true }); }, Status.RESOURCE_EXHAUSTED, /^slow down$/],
    ['no grpc-status', (s) => { s.respond({ ':status': 200, 'content-type': 'application/grpc' }); s.end(grpcFrame(Buffer.from('x'))); }, Status.INTERNAL, /without grpc-status/],
    ['OK without a message', (s) => { s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }); s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })); s.end(); }, Status.INTERNAL, /without a message/],
    ['compressed answer', (s) => { s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }); s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })); s.end(grpcFrame(Buffer.from('x'), 1)); }, Status.INTERNAL, /compressed/],
    ['two messages', (s) => { s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }); s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })); s.end(Buffer.concat([grpcFrame(Buffer.from('a')), grpcFrame(Buffer.from('b'))])); }, Status.INTERNAL, /exactly one message/],
    ['answer over the limit', (s) => { s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true }); s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' })); s.end(grpcFrame(Buffer.alloc(5000))); }, Status.RESOURCE_EXHAUSTED, /larger than 1024/],
    ['stream reset by the server', (s) => { s.close(http2.constants.NGHTTP2_INTERNAL_ERROR); }, Status.UNAVAILABLE, /./],
  ];
  for (const [name, answer, code, message] of cases) {
    const srv = await rawServer(t, (s) => answer(s));
    const r = failed(await channel(t, srv.port).call(PATH, Buffer.from('x'), 1000));
    t.equal(r.code, code, `${name}: code ${code}`);
    t.match(r.message, message, `${name}: ${r.message}`);
    t.equal(r.timeout, false);
  }
  const ok = await rawServer(t, (s) => {
    s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
    // The answer in pieces: the client puts them back together.
    const f = grpcFrame(Buffer.from('abcdefghij'));
    s.write(f.subarray(0, 3));
    setTimeout(() => s.end(f.subarray(3)), 10);
  });
  const r = await channel(t, ok.port).call(PATH, Buffer.from('x'), 1000);
  t.ok(r.ok && r.message.toString() === 'abcdefghij', 'an answer split across DATA frames');
});

t.test('REFUSED_STREAM: sent once more (the server never saw it), not twice', async (t) => {
  let seen = 0;
  const refuseFirst = await rawServer(t, (s) => {
    if (++seen === 1) return s.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
    s.end(grpcFrame(Buffer.from('second')));
  });
  const r = await channel(t, refuseFirst.port).call(PATH, Buffer.from('x'), 1000);
  t.ok(r.ok && r.message.toString() === 'second', 'answered by the second attempt');
  t.equal(seen, 2);
  let refused = 0;
  const refuseAll = await rawServer(t, (s) => {
    refused++;
    s.close(http2.constants.NGHTTP2_REFUSED_STREAM);
  });
  const f = failed(await channel(t, refuseAll.port).call(PATH, Buffer.from('x'), 1000));
  t.equal(f.code, Status.UNAVAILABLE);
  t.equal(refused, 2, 'one transparent retry, no more');
});

t.test('a server that never answers: DEADLINE_EXCEEDED at the timeout, the stream cancelled', async (t) => {
  let rst: number | undefined;
  const closed = new Promise<void>((resolve) => {
    void rawServer(t, (s, h) => {
      t.equal(h['grpc-timeout'], '150m');
      t.equal(h['content-type'], 'application/grpc');
      t.equal(h.te, 'trailers');
      s.on('close', () => {
        rst = s.rstCode;
        resolve();
      });
    }).then((srv) => {
      const started = Date.now();
      void channel(t, srv.port).call(PATH, Buffer.from('x'), 150).then((r) => {
        const f = failed(r);
        t.same(f, { ok: false, code: Status.DEADLINE_EXCEEDED, message: 'timed out after 150 ms', timeout: true });
        t.ok(Date.now() - started >= 140, 'not before the timeout');
      });
    });
  });
  await closed;
  t.equal(rst, http2.constants.NGHTTP2_CANCEL, 'RST_STREAM(CANCEL) reached the server');
});

t.test('refused: UNAVAILABLE at once, fail fast during the backoff, then reconnect', async (t) => {
  // A port nobody listens on (bound and closed).
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  const ch = channel(t, port);
  const first = failed(await ch.call(PATH, Buffer.from('x'), 1000));
  t.equal(first.code, Status.UNAVAILABLE);
  t.match(first.message, /ECONNREFUSED/);
  const started = process.hrtime.bigint();
  const second = failed(await ch.call(PATH, Buffer.from('x'), 1000));
  t.match(second.message, /not connected: .*ECONNREFUSED/, 'within the backoff: no new attempt, the last error');
  t.ok(Number(process.hrtime.bigint() - started) / 1e6 < 50, 'answered at once');
  // The service comes up on that port; after the backoff the next call connects.
  const server = http2.createServer();
  server.on('stream', (s) => {
    s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
    s.end(grpcFrame(Buffer.from('up')));
  });
  await new Promise<void>((r) => server.listen(port, '127.0.0.1', r));
  t.teardown(() => server.close());
  await sleep(250);
  const third = await ch.call(PATH, Buffer.from('x'), 1000);
  t.ok(third.ok && third.message.toString() === 'up', 'recovered by itself');
});

t.test('GOAWAY: the next call goes on a new connection', async (t) => {
  let n = 0;
  const srv = await rawServer(t, (s) => {
    n++;
    s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
    s.end(grpcFrame(Buffer.from(String(n))));
  });
  const ch = channel(t, srv.port);
  t.ok((await ch.call(PATH, Buffer.from('x'), 1000)).ok);
  const [session] = [...srv.sessions];
  const gone = new Promise((r) => session!.once('close', r));
  session!.close(); // sends GOAWAY, closes once idle
  await gone;
  const r = await ch.call(PATH, Buffer.from('x'), 1000);
  t.ok(r.ok, `answered after GOAWAY (${r.ok ? '' : (r as { message: string }).message})`);
  t.equal(srv.sessions.size, 1, 'on a new session');
});

t.test('a peer that stops answering: the timeout pings, the dead session is dropped, the next call reconnects', async (t) => {
  const srv = await rawServer(t, (s) => {
    s.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
    s.on('wantTrailers', () => s.sendTrailers({ 'grpc-status': '0' }));
    s.end(grpcFrame(Buffer.from('ok')));
  });
  const front = await relay(t, srv.port);
  const ch = channel(t, front.port);
  t.ok((await ch.call(PATH, Buffer.from('x'), 500)).ok);
  front.freeze(0);
  const late = failed(await ch.call(PATH, Buffer.from('x'), 100));
  t.equal(late.code, Status.DEADLINE_EXCEEDED);
  await sleep(1200); // the PING's second runs out
  const r = await ch.call(PATH, Buffer.from('x'), 500);
  t.ok(r.ok, 'answered on a new connection');
  t.equal(front.connections(), 2);
});

t.test('TLS with a private CA added to the roots; SNI is the host name', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'unary-tls-'));
  const run = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=test ca');
  run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'srv.key', '-out', 'srv.csr', '-subj', '/CN=localhost');
  const ext = path.join(dir, 'ext.cnf');
  writeFileSync(ext, 'subjectAltName=DNS:localhost\n');
  run('x509', '-req', '-in', 'srv.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'srv.pem', '-days', '1', '-extfile', ext);
  const read = (f: string) => readFileSync(path.join(dir, f));
  const srv = await grpcServer(t, (req) => ({ reply: req }), grpc.ServerCredentials.createSsl(null, [{ private_key: read('srv.key'), cert_chain: read('srv.pem') }]));
  const trusted = channel(t, srv.port, { host: 'localhost', tls: true, ca: read('ca.pem') });
  const ok = await trusted.call(PATH, Buffer.from('secure'), 2000);
  t.ok(ok.ok && ok.message.toString() === 'secure', 'TLS call with the private CA');
  const untrusted = failed(await channel(t, srv.port, { host: 'localhost', tls: true }).call(PATH, Buffer.from('x'), 2000));
  t.equal(untrusted.code, Status.UNAVAILABLE, 'without the CA: UNAVAILABLE');
  t.match(untrusted.message, /certificate/);
});

t.test('close: later calls fail at once', async (t) => {
  const srv = await grpcServer(t, (req) => ({ reply: req }));
  const ch = channel(t, srv.port);
  t.ok((await ch.call(PATH, Buffer.from('x'), 1000)).ok);
  ch.close();
  const r = failed(await ch.call(PATH, Buffer.from('x'), 1000));
  t.same([r.code, r.message], [Status.UNAVAILABLE, 'client closed']);
});
