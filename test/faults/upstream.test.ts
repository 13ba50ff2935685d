/**
 * Upstreams that break: one that resets mid-body (the client sees a clean error — a response cut
 * short, or a 503 when nothing was sent yet — and the proxy keeps serving), a black hole that
 * accepts and never answers (504 at the workload's timeout, also for requests that waited in the
 * connection pool's queue, and no upstream socket left behind), and a slow reader under a large
 * upload (backpressure: the proxy buffers a bounded amount, not the body).
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { systemClock, type Clock, type Timer } from '../../src/deps.js';
import { eventually, send, sleep, startSwitchableServer, tally, type SendResult } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

t.test('an upstream that resets mid-body: a clean error for that request, the proxy keeps serving', async (t) => {
  const up = await startSwitchableServer(t, (req, res) => {
    if (req.url === '/reset-mid-body') {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': '100000' });
      res.write('x'.repeat(2000), () => setTimeout(() => res.socket?.destroy(), 5));
      return;
    }
    if (req.url === '/reset-before-headers') return void req.socket.destroy();
    res.end('ok');
  });
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();

  const mid: SendResult[] = [];
  const before: SendResult[] = [];
  const ok: SendResult[] = [];
  const bodies: string[] = [];
  for (let i = 0; i < 15; i++) {
    mid.push(await send(plane.port, HOST, '/reset-mid-body'));
    before.push(await send(plane.port, HOST, '/reset-before-headers', { note: (_res, body) => (bodies.push(body), undefined) }));
    ok.push(await send(plane.port, HOST, '/ok'));
  }
  t.same(tally(mid.map((r) => ({ phase: '', outcome: r.outcome, ms: 0 }))).by, { truncated: 15 }, '15 sent, 15 cut short after their 200 (the client can tell: fewer bytes than Content-Length)');
  t.same(before.map((r) => r.outcome), Array(15).fill(503), 'reset before headers: 503 after the retries');
  t.ok(bodies.every((b) => JSON.parse(b).code === 'UPSTREAM_RESET'), 'in the error shape, code UPSTREAM_RESET');
  t.same(ok.map((r) => r.outcome), Array(15).fill(200), 'every request in between is served');
  t.equal(plane.runtime.dataplane.requestsInFlight, 0, 'nothing left in flight');
  t.same(plane.runtime.replicas.all().map((r) => r.outstanding), [0], 'no outstanding count leaked on the replica');

  // HTTP/2 client: the reset stream is reset downstream; the session goes on serving.
  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.destroy());
  const h2get = (path: string): Promise<{ status: number; bytes: number; error?: string }> =>
    new Promise((resolve) => {
      const stream = session.request({ ':path': path, ':authority': HOST });
      let status = 0;
      let bytes = 0;
      stream.on('response', (h) => (status = Number(h[':status'])));
      stream.on('data', (c: Buffer) => (bytes += c.length));
      stream.on('end', () => resolve({ status, bytes }));
      stream.on('error', (err: NodeJS.ErrnoException) => resolve({ status, bytes, error: err.code ?? err.message }));
      stream.end();
    });
  const cut = await h2get('/reset-mid-body');
  t.equal(cut.status, 200);
  t.ok(cut.bytes < 100_000 && cut.error !== undefined, `HTTP/2: the stream is reset after ${cut.bytes} bytes (${cut.error})`);
  t.same(await h2get('/ok'), { status: 200, bytes: 2 }, 'the same session serves the next request');
});

t.test('a black-hole upstream: 504 at the timeout, queued requests too, and no upstream socket left', async (t) => {
  // Accepts, reads and discards, never answers. `answer()` turns it into a working app, on the
  // connections it already holds too.
  const open = new Map<net.Socket, { bytes: number; onData: (c: Buffer) => void }>();
  let answering = false;
  const app = http.createServer((_req, res) => res.end('back'));
  const serve = (s: net.Socket): void => void app.emit('connection', s);
  const hole = net.createServer((s) => {
    s.on('error', () => undefined);
    if (answering) return serve(s);
    const entry = { bytes: 0, onData: (c: Buffer) => void (entry.bytes += c.length) };
    s.on('data', entry.onData);
    open.set(s, entry);
    s.once('close', () => open.delete(s));
  });
  const answer = (): void => {
    answering = true;
    for (const [s, entry] of open) {
      s.off('data', entry.onData);
      if (entry.bytes === 0) serve(s);
    }
  };
  t.teardown(() => {
    for (const s of open.keys()) s.destroy();
    app.closeAllConnections();
    hole.close();
  });
  await new Promise<void>((resolve) => hole.listen(0, '127.0.0.1', resolve));
  const port = (hole.address() as net.AddressInfo).port;
  // The workload's timeout (7 s, a length nothing else waits) is held by the clock until the test
  // lets it go: every request must have started it on arrival, queued or not, for all to be 504.
  const TIMEOUT_MS = 7000;
  const held: (() => void)[] = [];
  const clock: Clock = {
    ...systemClock,
    setTimeout: (fn, ms) => {
      if (ms !== TIMEOUT_MS) return systemClock.setTimeout(fn, ms);
      let cancelled = false;
      held.push(() => cancelled || fn());
      return { cancel: () => (cancelled = true) } as unknown as Timer;
    },
    clearTimeout: (timer) => {
      const cancel = (timer as { cancel?: () => void } | undefined)?.cancel;
      if (cancel) cancel();
      else systemClock.clearTimeout(timer);
    },
  };
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${port}`] },
    workloadSpec: { defaultOptions: { timeoutSeconds: TIMEOUT_MS / 1000 } },
  }), { deps: { clock } });
  await plane.ready();

  // More concurrent requests than the upstream pool has connections (256): the rest wait in its queue.
  const N = 300;
  const results = Promise.all(Array.from({ length: N }, () => send(plane.port, HOST, '/', { timeoutMs: 60_000 })));
  t.ok(await eventually(() => held.length === N && open.size >= 256, 30_000), `${N} timeouts started, queued requests' included (${held.length}), with ${open.size} upstream connections open`);
  for (const fire of held.splice(0)) fire();
  t.same(tally((await results).map((r) => ({ phase: '', ms: 0, ...r }))).by, { 504: N }, `${N} sent, ${N} answered 504 at their timeout, queued ones included`);

  // Every attempt was cancelled: the connections that carried one are closed. What may stay open
  // are idle pooled connections (no request on them), which the pool's keep-alive timeout closes.
  const carrying = (): number => [...open.values()].filter((e) => e.bytes > 0).length;
  t.ok(await eventually(() => carrying() === 0, 30_000), `no upstream connection left holding a request (${carrying()})`);
  await sleep(300);
  t.equal(carrying(), 0, 'and none started later by an attempt that timed out while queued');
  t.ok(open.size <= 256, `${open.size} idle pooled connections at most (the pool size)`);
  const stats = plane.runtime.dataplane.upstreams.pool({ host: '127.0.0.1', port }).stats;
  t.same({ running: stats.running, pending: stats.pending }, { running: 0, pending: 0 }, 'the pool holds no request');
  t.equal(plane.runtime.dataplane.requestsInFlight, 0, 'nothing in flight');
  t.same(plane.runtime.replicas.all().map((r) => r.outstanding), [0], 'no outstanding count leaked');

  answer();
  const after = await Promise.all(Array.from({ length: 20 }, () => send(plane.port, HOST, '/')));
  t.same(tally(after.map((r) => ({ phase: '', outcome: r.outcome, ms: 0 }))).by, { 200: 20 }, 'once the upstream answers, so does the proxy');
});

t.test('a slow reader under a big upload: bounded buffering, every byte delivered', async (t) => {
  const SIZE = 64 * 1024 * 1024;
  const CHUNK = 64 * 1024;
  let reading = false;
  const received: { bytes: number; hash: string }[] = [];
  const up = await startSwitchableServer(t, (req, res) => {
    const hash = createHash('sha256');
    let bytes = 0;
    // Reads nothing until told to, then drains at its own pace.
    req.pause();
    const start = (): void => {
      req.on('data', (c: Buffer) => {
        bytes += c.length;
        hash.update(c);
      });
      req.resume();
    };
    const wait = setInterval(() => {
      if (reading) {
        clearInterval(wait);
        start();
      }
    }, 20);
    req.on('end', () => {
      received.push({ bytes, hash: hash.digest('hex') });
      res.end(String(bytes));
    });
  });
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] },
    workloadSpec: { defaultOptions: { timeoutSeconds: 30 } },
  }));
  await plane.ready();

  const pattern = Buffer.alloc(CHUNK);
  for (let i = 0; i < CHUNK; i++) pattern[i] = (i * 31) & 0xff;
  const expected = createHash('sha256');
  for (let off = 0; off < SIZE; off += CHUNK) expected.update(pattern);
  let produced = 0;
  const body = new Readable({
    read() {
      if (produced >= SIZE) return void this.push(null);
      produced += CHUNK;
      this.push(pattern);
    },
  });
  const baseline = process.memoryUsage();
  let peak = 0;
  const sampler = setInterval(() => {
    const m = process.memoryUsage();
    peak = Math.max(peak, m.heapUsed + m.arrayBuffers - (baseline.heapUsed + baseline.arrayBuffers));
  }, 20);
  t.teardown(() => clearInterval(sampler));
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: plane.port, method: 'POST', path: '/upload', headers: { host: HOST, 'content-length': SIZE }, agent: false }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    body.pipe(req);
  });
  // The upstream reads nothing for 1.5 s: the client can only get as far as the buffers in between.
  await sleep(1500);
  const stalledAt = produced;
  t.ok(stalledAt < 24 * 1024 * 1024, `while the upstream reads nothing, the client got ${(stalledAt / 1048576).toFixed(1)} MiB of 64 MiB in`);
  reading = true;
  const res = await answer;
  clearInterval(sampler);
  t.equal(res.status, 200);
  t.equal(res.body, String(SIZE), 'every byte arrived');
  t.equal(received[0]?.hash, expected.digest('hex'), 'in order, unchanged');
  t.ok(peak < 48 * 1024 * 1024, `memory (heap + buffers) grew at most ${(peak / 1048576).toFixed(1)} MiB for a 64 MiB body`);
});
