/**
 * The HTTP/1.1 upstream pool (src/http1/pool.ts) against real upstreams on port 0: raw `net` servers
 * that write exact bytes and record what they read, and a `node:http` server. Connection reuse and
 * its limits (close, HTTP/1.0, stray bytes, early answers, keep-alive hints, idle timeout), the
 * request's framing on the wire (length, chunked, none, `content-length: 0`), failures (refused,
 * reset mid-answer, malformed, a body that fails or runs long), aborts, backpressure, the queue, and
 * closing the pool.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { once } from 'node:events';
import { Http1Pool, type UpstreamController, type UpstreamHandler, type UpstreamRequest } from '../../src/http1/index.js';
import type { HeaderMap } from '../../src/http1/response-parser.js';

interface Result {
  status?: number;
  headers?: HeaderMap;
  body: Buffer;
  trailers?: HeaderMap | undefined;
  error?: Error & { code?: string };
  controller?: UpstreamController;
}

/** Dispatch a request and collect what its handler sees; resolves at its end or error. */
function send(pool: Http1Pool, req: Partial<UpstreamRequest>, hooks: Partial<UpstreamHandler> = {}): Promise<Result> & { result: Result } {
  const result: Result = { body: Buffer.alloc(0) };
  const chunks: Buffer[] = [];
  let done!: (r: Result) => void;
  const promise = new Promise<Result>((resolve) => (done = resolve)) as Promise<Result> & { result: Result };
  promise.result = result;
  pool.dispatch(
    { method: 'GET', path: '/', headers: { host: 'upstream.test' }, body: null, ...req },
    {
      onRequestStart(c) {
        result.controller = c;
        hooks.onRequestStart?.(c);
      },
      onResponseStart(c, status, headers) {
        result.status = status;
        result.headers = headers;
        hooks.onResponseStart?.(c, status, headers);
      },
      onResponseData(c, chunk, last) {
        chunks.push(Buffer.from(chunk));
        hooks.onResponseData?.(c, chunk, last);
      },
      onResponseEnd(_c, trailers) {
        result.body = Buffer.concat(chunks);
        result.trailers = trailers;
        done(result);
      },
      onResponseError(_c, err) {
        result.body = Buffer.concat(chunks);
        result.error = err;
        done(result);
      },
    },
  );
  return promise;
}

interface RawServer {
  port: number;
  /** Connections accepted so far. */
  connections: net.Socket[];
  /** Everything read, per connection. */
  received: string[];
}

/**
 * A raw upstream: `onRequest(socket, text, index)` is called each time a full request head (and any
 * body given by `bodyDone`) has arrived on a connection.
 */
async function rawServer(
  t: Test,
  answer: (socket: net.Socket, request: string, connection: number) => void,
  complete: (text: string) => boolean = (text) => text.includes('\r\n\r\n'),
): Promise<RawServer> {
  const state: RawServer = { port: 0, connections: [], received: [] };
  const server = net.createServer((socket) => {
    const index = state.connections.push(socket) - 1;
    state.received[index] = '';
    let pending = '';
    socket.on('data', (d) => {
      state.received[index] += d.toString('latin1');
      pending += d.toString('latin1');
      if (complete(pending)) {
        const text = pending;
        pending = '';
        answer(socket, text, index);
      }
    });
    socket.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  state.port = (server.address() as net.AddressInfo).port;
  t.teardown(() => {
    for (const s of state.connections) s.destroy();
    server.close();
  });
  return state;
}

function newPool(t: Test, port: number, opts: Partial<ConstructorParameters<typeof Http1Pool>[2]> = {}): Http1Pool {
  const pool = new Http1Pool('127.0.0.1', port, { connections: 8, idleTimeoutMs: 60_000, maxHeaderSize: 64 * 1024, connectTimeoutMs: 2000, ...opts });
  t.teardown(() => pool.destroy());
  return pool;
}

const OK = 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls until `check()` holds; the 30 s bound is a hang guard (a busy machine is slow, not wrong). */
async function eventually(check: () => boolean, ms = 30_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) return false;
    await sleep(10);
  }
  return true;
}

t.test('sequential requests share one kept-alive connection; the head is written as given', async (t) => {
  const up = await rawServer(t, (s) => s.write(OK));
  const pool = newPool(t, up.port);
  for (let i = 0; i < 5; i++) {
    const r = await send(pool, { path: `/n/${i}?q=1`, headers: { host: 'app.test', 'x-list': ['a', 'b'], 'x-num': 7 as unknown as string } });
    t.equal(r.status, 200);
    t.equal(r.body.toString(), 'ok');
  }
  t.equal(up.connections.length, 1, 'one connection for five requests');
  const first = up.received[0]!.split('GET ')[1]!;
  t.equal(first, '/n/0?q=1 HTTP/1.1\r\nhost: app.test\r\nx-list: a\r\nx-list: b\r\nx-num: 7\r\n\r\n', 'request line and fields, a list as repeated lines');
  t.same(pool.stats, { connected: 1, free: 1, running: 0, pending: 0 }, 'idle in the pool afterwards');
});

t.test('a connection is not reused after close, HTTP/1.0, a body to the close, or stray bytes', async (t) => {
  const answers = [
    'HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na',
    'HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nb',
    'HTTP/1.1 200 OK\r\n\r\nc',
    'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ndSTRAY',
    OK,
    OK,
  ];
  let n = 0;
  const up = await rawServer(t, (s) => {
    const a = answers[n++]!;
    s.write(a);
    if (a.startsWith('HTTP/1.1 200 OK\r\n\r\n')) s.end();
  });
  const pool = newPool(t, up.port);
  const bodies = [];
  for (let i = 0; i < answers.length; i++) bodies.push((await send(pool, {})).body.toString());
  t.same(bodies, ['a', 'b', 'c', 'd', 'ok', 'ok'], 'every answer delivered (the stray bytes are not)');
  t.equal(up.connections.length, 5, 'a new connection after each of the four, then one kept');
});

t.test('framing of request bodies on the wire', async (t) => {
  const up = await rawServer(
    t,
    (s) => s.write(OK),
    (text) => {
      const head = text.indexOf('\r\n\r\n');
      if (head < 0) return false;
      if (/transfer-encoding: chunked/.test(text)) return text.endsWith('0\r\n\r\n');
      const cl = /content-length: (\d+)/.exec(text);
      return text.length - head - 4 >= Number(cl?.[1] ?? 0);
    },
  );
  const pool = newPool(t, up.port, { connections: 1 });
  await send(pool, { method: 'POST', body: Readable.from([Buffer.from('hello '), Buffer.from('world')]) });
  t.match(up.received[0], /^POST \/ HTTP\/1\.1\r\nhost: upstream\.test\r\ntransfer-encoding: chunked\r\n\r\n6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n$/, 'no length: chunked');
  await send(pool, { method: 'PUT', headers: { host: 'h', 'content-length': '11' }, body: Readable.from([Buffer.from('hello '), Buffer.from('world')]) });
  t.match(up.received[0], /PUT \/ HTTP\/1\.1\r\nhost: h\r\ncontent-length: 11\r\n\r\nhello world$/, 'a length: sent as is');
  await send(pool, { method: 'POST', headers: { host: 'h' }, body: null });
  t.match(up.received[0], /POST \/ HTTP\/1\.1\r\nhost: h\r\ncontent-length: 0\r\n\r\n$/, 'POST without a body: content-length: 0');
  await send(pool, { method: 'GET', headers: { host: 'h', 'content-length': '0' }, body: null });
  t.match(up.received[0], /GET \/ HTTP\/1\.1\r\nhost: h\r\ncontent-length: 0\r\n\r\n$/, 'GET with content-length: 0 keeps it');
  await send(pool, { method: 'DELETE', headers: { 'transfer-encoding': 'chunked', connection: 'close', 'keep-alive': '1' }, body: null });
  t.match(up.received[0], /DELETE \/ HTTP\/1\.1\r\nhost: 127\.0\.0\.1:\d+\r\n\r\n$/, 'framing fields never copied; the pool\'s authority as the default host');
  t.equal(up.connections.length, 1, 'all on one connection');
});

t.test('requests that cannot be written are refused before a byte is sent', async (t) => {
  const up = await rawServer(t, (s) => s.write(OK));
  const pool = newPool(t, up.port, { connections: 1 });
  const bad: [string, Partial<UpstreamRequest>, RegExp][] = [
    ['a CRLF in a value', { headers: { 'x-a': 'a\r\nx-injected: 1' } }, /invalid value in field x-a/],
    ['a space in a name', { headers: { 'bad name': 'x' } }, /invalid field name/],
    ['a space in the target', { path: '/a b' }, /invalid request target/],
    ['a bad method', { method: 'GE T' }, /invalid method/],
    ['a length without a body', { headers: { 'content-length': '5' } }, /content-length 5 for a request without a body/],
    ['differing lengths', { method: 'POST', headers: { 'content-length': ['5', '6'] as unknown as string }, body: Readable.from(['x']) }, /differing content-length/],
  ];
  for (const [name, req, reason] of bad) {
    const r = await send(pool, req);
    t.match(r.error?.message, reason, name);
    t.equal(r.error?.code, 'UPSTREAM_REQUEST_INVALID', `${name}: its code`);
  }
  t.equal(up.connections.length, 1, 'one connection was opened');
  t.equal(up.received[0], '', 'and nothing was written on it');
  t.equal((await send(pool, {})).status, 200, 'the same connection serves the next request');
  t.equal(up.connections.length, 1);
});

t.test('a body that runs past its length, or ends short, fails the request and the connection', async (t) => {
  const up = await rawServer(t, () => undefined);
  const pool = newPool(t, up.port);
  const long = await send(pool, { method: 'POST', headers: { 'content-length': '3' }, body: Readable.from([Buffer.from('abcdef')]) });
  t.match(long.error?.message, /longer than its content-length/, 'longer');
  const short = await send(pool, { method: 'POST', headers: { 'content-length': '10' }, body: Readable.from([Buffer.from('abc')]) });
  t.match(short.error?.message, /ended after 3 of 10 bytes/, 'shorter');
  const failing = new PassThrough();
  const p = send(pool, { method: 'POST', body: failing });
  failing.write('part');
  await sleep(20);
  failing.destroy(new Error('client went away'));
  t.match((await p).error?.message, /request body failed: client went away/, 'a body stream that errors');
  t.ok(await eventually(() => up.connections.every((s) => s.destroyed || s.readableEnded)), 'each connection closed');
});

t.test('upstream failures: refused, reset mid-answer, closed before an answer, malformed', async (t) => {
  const closed = net.createServer();
  closed.listen(0, '127.0.0.1');
  await once(closed, 'listening');
  const deadPort = (closed.address() as net.AddressInfo).port;
  closed.close();
  await once(closed, 'close');
  const refused = await send(newPool(t, deadPort), {});
  t.equal(refused.error?.code, 'ECONNREFUSED', 'refused: the socket\'s code');

  const reset = await rawServer(t, (s) => {
    s.write('HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial');
    setTimeout(() => s.resetAndDestroy(), 20);
  });
  const r1 = await send(newPool(t, reset.port), {});
  t.equal(r1.status, 200, 'the head arrived');
  t.equal(r1.body.toString(), 'partial', 'then part of the body');
  t.ok(r1.error, `then the error (${r1.error?.code ?? r1.error?.message})`);

  const hangup = await rawServer(t, (s) => s.end());
  const r2 = await send(newPool(t, hangup.port), {});
  // A disconnect (503 UPSTREAM_RESET through the proxy), not a protocol error (502).
  t.equal(r2.error?.code, 'UPSTREAM_CLOSED', 'closed before any answer');
  t.match(r2.error?.message, /closed the connection/);

  const garbage = await rawServer(t, (s) => s.write('HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n'));
  const r3 = await send(newPool(t, garbage.port), {});
  t.equal(r3.error?.code, 'UPSTREAM_PROTOCOL_ERROR', 'ambiguous framing');
  t.equal(r3.status, undefined, 'no head was delivered');
  t.ok(await eventually(() => garbage.connections[0]!.destroyed || garbage.connections[0]!.readableEnded), 'its connection closed');
});

t.test('connect timeout: CONNECT_TIMEOUT', async (t) => {
  // A socket whose connect never completes (no peer answers its handshake).
  const pool = new Http1Pool('127.0.0.1', 9, { connections: 1, idleTimeoutMs: 1000, maxHeaderSize: 1024, connectTimeoutMs: 200, connect: () => new net.Socket() });
  t.teardown(() => pool.destroy());
  // That socket has no handle to keep the process alive (a connecting TCP socket has).
  const alive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(alive));
  const started = Date.now();
  const r = await send(pool, {});
  t.equal(r.error?.code, 'CONNECT_TIMEOUT', 'the request fails with CONNECT_TIMEOUT');
  const elapsed = Date.now() - started;
  // Not before the timeout; the upper bound only says it did not hang (a loaded machine fires late).
  t.ok(elapsed >= 150 && elapsed < 20_000, `at the connect timeout (${elapsed} ms)`);
  t.equal(pool.stats.connected, 0, 'and the connection is gone');
});

t.test('a kept-alive connection closed under a request: a safe request without a body is sent once more', async (t) => {
  // Each connection answers its first request and closes on the second without a byte, as an app
  // does whose idle timeout fires just as the request arrives.
  const perConnection: number[] = [];
  const up = await rawServer(t, (s, text, index) => {
    perConnection[index] = (perConnection[index] ?? 0) + 1;
    if (text.includes('/close-always') || perConnection[index]! >= 2) s.destroy();
    else s.write(text.startsWith('HEAD') ? 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n' : OK);
  });
  const pool = newPool(t, up.port, { connections: 1 });
  t.equal((await send(pool, {})).status, 200, 'the first request');
  const second = await send(pool, { path: '/again' });
  t.equal(second.status, 200, 'a GET on the closing connection is answered');
  t.equal(up.connections.length, 2, 'from a new connection');
  let starts = 0;
  t.equal((await send(pool, { method: 'HEAD' }, { onRequestStart: () => starts++ })).status, 200, 'HEAD likewise');
  t.equal(starts, 2, 'its handler saw the request start on each connection');

  const post = await send(pool, { method: 'POST' });
  t.ok(post.error, `a POST is not sent again: its error (${post.error?.code ?? post.error?.message})`);
  await send(pool, {});
  const withBody = await send(pool, { method: 'GET', body: Readable.from([Buffer.from('x')]) });
  t.ok(withBody.error, 'nor a GET with a body');
  await send(pool, {});
  const always = await send(pool, { path: '/close-always' });
  t.ok(always.error, 'sent once more at most: a connection that closes again is the error');
});

t.test('interim answers, trailers, HEAD and a 204 keep the connection', async (t) => {
  const answers = [
    'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi',
    'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: grpc-status\r\n\r\n3\r\nabc\r\n0\r\ngrpc-status: 0\r\ngrpc-message: fine\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n',
    'HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n',
    OK,
  ];
  let n = 0;
  const up = await rawServer(t, (s) => s.write(answers[n++]!));
  const pool = newPool(t, up.port);
  const interim = await send(pool, {});
  t.same([interim.status, interim.body.toString()], [200, 'hi'], 'the final answer after two interim ones');
  const chunked = await send(pool, {});
  t.equal(chunked.body.toString(), 'abc');
  t.same(chunked.trailers, { 'grpc-status': '0', 'grpc-message': 'fine' }, 'trailers handed on');
  const head = await send(pool, { method: 'HEAD' });
  t.same([head.status, head.headers?.['content-length'], head.body.length], [200, '50', 0], 'HEAD: a length, no body read');
  const empty = await send(pool, {});
  t.same([empty.status, empty.body.length], [204, 0], '204');
  t.equal((await send(pool, {})).status, 200);
  t.equal(up.connections.length, 1, 'all five on one connection');
});

t.test('an answer before the whole body was sent: delivered, and the connection is not reused', async (t) => {
  const up = await rawServer(t, (s) => s.write('HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\n\r\nbig'), (text) => text.includes('\r\n\r\n'));
  const pool = newPool(t, up.port);
  const body = new PassThrough();
  const p = send(pool, { method: 'POST', body });
  body.write('first part');
  const r = await p;
  t.same([r.status, r.body.toString()], [413, 'big'], 'the early answer');
  t.equal(body.listenerCount('data'), 0, 'the body is no longer read for this request');
  t.doesNotThrow(() => body.destroy(new Error('client reset afterwards')), 'a body failing afterwards throws nothing');
  t.equal((await send(pool, {})).status, 413);
  t.equal(up.connections.length, 2, 'the second request went on a new connection');
});

t.test('abort: before the answer, mid-body, while waiting in the queue', async (t) => {
  let answerLater: net.Socket | undefined;
  const up = await rawServer(t, (s, text) => {
    if (text.startsWith('GET /slow')) answerLater = s;
    else if (text.startsWith('GET /stream')) s.write('HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nfirst');
    else s.write(OK);
  });
  const pool = newPool(t, up.port, { connections: 1 });
  let events = 0;
  const slow = send(pool, { path: '/slow' }, { onResponseStart: () => events++ });
  const queued = send(pool, { path: '/queued' });
  await eventually(() => answerLater !== undefined);
  t.same(pool.stats, { connected: 1, free: 0, running: 1, pending: 1 }, 'one running, one waiting');
  t.equal(queued.result.controller, undefined, 'the waiting one has not started');
  slow.result.controller!.abort(new Error('timeout'));
  t.ok(await eventually(() => up.connections[0]!.destroyed || up.connections[0]!.readableEnded), 'the aborted request\'s connection is closed');
  t.equal((await queued).status, 200, 'the waiting request is served on a new connection');
  t.equal(events, 0, 'nothing reached the aborted handler');

  const stream = send(pool, { path: '/stream' }, { onResponseData: (c) => c.abort(new Error('client gone')) });
  await sleep(50);
  t.equal(stream.result.body.length, 0, 'no end reported after an abort mid-body');
  t.equal(stream.result.error, undefined, 'nor an error');
  t.equal((await send(pool, {})).status, 200, 'the pool serves on');

  // Abort while waiting in the queue: never written at all.
  answerLater = undefined;
  const blocker = send(pool, { path: '/slow' });
  const waiting = send(pool, { path: '/never' });
  await eventually(() => answerLater !== undefined);
  // A third waits behind both and is over by the time its turn comes: it aborts at its start.
  const started: string[] = [];
  const aborted = send(pool, { path: '/aborted-at-start' }, { onRequestStart: (c) => (started.push('x'), c.abort(new Error('over'))) });
  answerLater!.write(OK);
  t.equal((await blocker).status, 200);
  t.equal((await waiting).status, 200);
  await eventually(() => started.length > 0);
  t.same(started, ['x'], 'the third started and aborted itself');
  t.equal(aborted.result.status, undefined, 'and got nothing');
  t.notMatch(up.received.join(''), /aborted-at-start/, 'it was never written');
});

t.test('backpressure: a paused answer stops reading the upstream', async (t) => {
  const big = Buffer.alloc(8 * 1024 * 1024, 'x');
  let writer: net.Socket | undefined;
  const up = await rawServer(t, (s) => {
    writer = s;
    s.write(`HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n`);
    s.write(big);
  });
  const pool = newPool(t, up.port);
  let received = 0;
  let paused: UpstreamController | undefined;
  const p = send(pool, {}, {
    onResponseData: (c, chunk) => {
      received += chunk.length;
      if (received > 256 * 1024 && !paused) {
        paused = c;
        c.pause();
      }
    },
  });
  // The answer is paused once its first 256 KiB arrived; then time for reading to go on if it would.
  t.ok(await eventually(() => paused !== undefined), 'the answer arrived and was paused');
  await sleep(300);
  const atPause = received;
  t.ok(atPause < 2 * 1024 * 1024, `reading stopped (${atPause} bytes read)`);
  t.ok(writer!.writableLength > 0, 'the upstream is held back by the socket');
  paused!.resume();
  const r = await p;
  t.equal(r.body.length, big.length, 'every byte after the resume');
  t.equal((await send(pool, {})).error, undefined, 'and the connection serves the next request');
});

t.test('backpressure: a slow upstream reader makes the body wait', async (t) => {
  let upstream: net.Socket | undefined;
  const up = await rawServer(t, () => undefined, () => false);
  const pool = newPool(t, up.port);
  const body = new PassThrough({ highWaterMark: 16 * 1024 });
  void send(pool, { method: 'POST', body });
  await eventually(() => up.connections.length === 1);
  upstream = up.connections[0]!;
  upstream.pause();
  let written = 0;
  const chunk = Buffer.alloc(64 * 1024, 'y');
  while (body.write(chunk)) {
    written += chunk.length;
    if (written > 512 * 1024 * 1024) break;
    await new Promise((r) => setImmediate(r));
  }
  t.ok(written < 64 * 1024 * 1024, `the body stopped being taken (${written} bytes)`);
});

t.test('the keep-alive hint and the idle timeout close idle connections', async (t) => {
  const up = await rawServer(t, (s) => s.write('HTTP/1.1 200 OK\r\nKeep-Alive: timeout=2\r\nContent-Length: 2\r\n\r\nok'));
  const pool = newPool(t, up.port, { idleTimeoutMs: 60_000 });
  t.equal((await send(pool, {})).status, 200);
  const started = Date.now();
  // The raw upstream never closes a connection itself: whoever closed it was the pool.
  t.ok(await eventually(() => up.connections[0]!.readableEnded || up.connections[0]!.destroyed, 20_000), 'closed by the pool');
  const elapsed = Date.now() - started;
  t.ok(elapsed >= 800, `after the hint less its one-second margin, not at once (${elapsed} ms)`);
  t.equal(pool.stats.connected, 0, 'gone from the pool');
  t.equal((await send(pool, {})).status, 200, 'the next request opens a new one');
  t.equal(up.connections.length, 2);

  const plain = await rawServer(t, (s) => s.write(OK));
  const short = newPool(t, plain.port, { idleTimeoutMs: 300 });
  await send(short, {});
  t.ok(await eventually(() => plain.connections[0]!.readableEnded || plain.connections[0]!.destroyed, 20_000), 'the pool\'s own idle timeout');
});

t.test('a busy connection is never closed by the idle timeout', async (t) => {
  const up = await rawServer(t, (s) => setTimeout(() => s.write(OK), 600));
  const pool = newPool(t, up.port, { idleTimeoutMs: 200 });
  const r = await send(pool, {});
  t.equal(r.status, 200, 'an answer after three idle timeouts still arrives');
});

t.test('the queue: requests past the limit wait in order', async (t) => {
  const order: string[] = [];
  const up = await rawServer(t, (s, text) => {
    order.push(/GET (\S+)/.exec(text)![1]!);
    setTimeout(() => s.write(OK), 5);
  });
  const pool = newPool(t, up.port, { connections: 2 });
  const results = await Promise.all(Array.from({ length: 10 }, (_, i) => send(pool, { path: `/${i}` })));
  t.ok(results.every((r) => r.status === 200), 'all ten served');
  t.equal(up.connections.length, 2, 'on two connections');
  t.same(order, Array.from({ length: 10 }, (_, i) => `/${i}`), 'in order');
});

t.test('an idle pool does not hold the process open; close and destroy', async (t) => {
  const server = http.createServer((_req, res) => res.end('node'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const pool = newPool(t, port);
  const r = await send(pool, { headers: { host: 'x' } });
  t.same([r.status, r.body.toString()], [200, 'node'], 'a node:http upstream');
  t.match(r.headers?.['keep-alive'], /timeout=5/, 'which sends a keep-alive hint');
  const script = `
    const { Http1Pool } = await import(${JSON.stringify(new URL('../../src/http1/pool.ts', import.meta.url).href)});
    const pool = new Http1Pool('127.0.0.1', ${port}, { connections: 1, idleTimeoutMs: 60000, maxHeaderSize: 1024, connectTimeoutMs: 1000 });
    pool.dispatch({ method: 'GET', path: '/', headers: {}, body: null }, {
      onRequestStart() {}, onResponseStart() {}, onResponseData() {},
      onResponseEnd() { console.log('answered'); }, onResponseError(_c, e) { console.log('error', e.message); },
    });`;
  // Asynchronously: this process's server answers the child.
  const { execFile } = await import('node:child_process');
  const started = Date.now();
  const child = await new Promise<{ stdout: string; code: number | null }>((resolve) => {
    const proc = execFile(process.execPath, [...process.execArgv, '--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 }, (_err, stdout) =>
      resolve({ stdout, code: proc.exitCode }),
    );
  });
  t.equal(child.stdout.trim(), 'answered', 'a child process answered');
  t.equal(child.code, 0, 'and exited by itself');
  t.ok(Date.now() - started < 15_000, 'without waiting for the idle timeout');

  const slow = await rawServer(t, (s) => setTimeout(() => s.write(OK), 200));
  const closing = new Http1Pool('127.0.0.1', slow.port, { connections: 1, idleTimeoutMs: 60_000, maxHeaderSize: 1024, connectTimeoutMs: 1000 });
  const inFlight = send(closing, {});
  const waiting = send(closing, {});
  await eventually(() => slow.connections.length === 1);
  const closed = closing.close();
  t.match((await waiting).error?.message, /pool is closed/, 'close: a waiting request fails');
  t.equal((await inFlight).status, 200, 'the one in flight finishes');
  await closed;
  t.equal(closing.stats.connected, 0, 'then every connection is closed');
  t.match((await send(closing, {})).error?.message, /pool is closed/, 'a closed pool takes no request');

  const hang = await rawServer(t, () => undefined);
  const destroyed = new Http1Pool('127.0.0.1', hang.port, { connections: 1, idleTimeoutMs: 60_000, maxHeaderSize: 1024, connectTimeoutMs: 1000 });
  const cut = send(destroyed, {});
  await eventually(() => hang.connections.length === 1);
  await destroyed.destroy();
  t.ok((await cut).error, 'destroy: the request in flight fails');
});

t.test('connections reading at the same time never see each other\'s bytes in what they hand on', async (t) => {
  // Each connection's answer trickles in small writes, interleaved with the other's, so every read of
  // one lands in the read buffer between reads of the other: heads split over reads (kept by the
  // parser), body chunks the handler keeps without copying, and small last chunks it only decodes.
  const pattern = (n: number, seed: number): Buffer => Buffer.from(Array.from({ length: n }, (_, i) => (i * 31 + seed) & 0xff));
  // '/e' is written in one piece: it arrives in large reads, into buffers of its connection's own.
  const sizes: Record<string, number> = { '/a': 200_000, '/b': 700, '/c': 5, '/d': 3_000, '/e': 1_000_000 };
  const server = net.createServer((socket) => {
    let buffered = '';
    socket.on('data', async (d) => {
      buffered += d.toString('latin1');
      const end = buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const path = buffered.split(' ')[1]!;
      buffered = '';
      const body = pattern(sizes[path]!, path.charCodeAt(1));
      const wire = Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nX-Path: ${path}\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
      if (path === '/e') {
        socket.write(wire);
        return;
      }
      // Pieces of 7 to 1,500 bytes, a pause after each so the other connection's pieces come between.
      for (let at = 0, i = 0; at < wire.length; i++) {
        const n = [7, 1500, 40, 900, 13][i % 5]!;
        socket.write(wire.subarray(at, at + n));
        at += n;
        await new Promise((r) => setTimeout(r, 1));
      }
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const pool = new Http1Pool('127.0.0.1', port, { connections: 5, idleTimeoutMs: 5000, maxHeaderSize: 64 * 1024, connectTimeoutMs: 2000 });
  t.teardown(() => pool.destroy());
  const fetch = (path: string): Promise<{ head: string; body: Buffer }> =>
    new Promise((resolve, reject) => {
      const kept: Buffer[] = [];
      let head = '';
      pool.dispatch({ method: 'GET', path, headers: { host: 'upstream.test' }, body: null }, {
        onRequestStart() {},
        onResponseStart(_c, status, headers) {
          head = `${status} ${String(headers['x-path'])}`;
        },
        // Kept as given: the pool promises these are the handler's own.
        onResponseData(_c, chunk) {
          kept.push(chunk);
        },
        // A lent last chunk is still good here; copy everything now.
        onResponseEnd() {
          resolve({ head, body: Buffer.concat(kept) });
        },
        onResponseError(_c, err) {
          reject(err);
        },
      });
    });
  const paths = Object.keys(sizes);
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all(paths.map((p) => fetch(p)));
    results.forEach((r, i) => {
      const path = paths[i]!;
      t.equal(r.head, `200 ${path}`, `round ${round} ${path}: its own head`);
      t.ok(r.body.equals(pattern(sizes[path]!, path.charCodeAt(1))), `round ${round} ${path}: its own ${sizes[path]} bytes, intact`);
    });
  }
});
