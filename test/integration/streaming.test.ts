/**
 * Bodies stream through the ingress, they are never buffered whole: a 50 MB upload and a 50 MB
 * download keep the process's RSS growth well under the body size, and a client that stops reading
 * stops the upstream's writes (backpressure reaches the upstream socket) on every forwarding path:
 * HTTP/1.1 → HTTP/1.1 (undici), h2c → HTTP/1.1, HTTP/1.1 → HTTP/2 (node:http2 client stream).
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import v8 from 'node:v8';
import vm from 'node:vm';
import { ALIAS, records, startH2Server, startHttpServer, startPlane, type TapLike } from '../helpers/harness.js';

const HOST = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-west-2';
const MB = 1024 * 1024;
const SIZE = 50 * MB;
const CHUNK = Buffer.alloc(64 * 1024, 0x61);
/** The default 5 s request timeout covers the whole exchange; paused transfers need longer. */
const WORKLOAD_SPEC = { defaultOptions: { timeoutSeconds: 60 } };

// Client, proxy and upstream share this process, and each socket read allocates a fresh buffer: one
// 50 MB transfer leaves ~150 MB of garbage that V8 collects only under external-memory pressure, which
// alone can move RSS by 30-40 MB. Collecting before each sample makes the number what is *held*
// (what buffering a body would show), not what is waiting to be collected.
v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Peak RSS growth over `fn`, sampled (after a GC) every 100 ms. */
async function rssGrowth<T>(fn: () => Promise<T>): Promise<{ result: T; growth: number }> {
  await new Promise((r) => setTimeout(r, 50));
  gc();
  const before = process.memoryUsage().rss;
  let peak = before;
  const timer = setInterval(() => {
    gc();
    peak = Math.max(peak, process.memoryUsage().rss);
  }, 100);
  try {
    const result = await fn();
    peak = Math.max(peak, process.memoryUsage().rss);
    return { result, growth: peak - before };
  } finally {
    clearInterval(timer);
  }
}

/** Write `total` bytes of a reused chunk to a writable, honouring backpressure; `onWrite` counts. */
function writeBody(w: NodeJS.WritableStream, total: number, onWrite?: (n: number) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let left = total;
    const more = (): void => {
      while (left > 0) {
        const n = Math.min(left, CHUNK.length);
        left -= n;
        onWrite?.(n);
        const ok = w.write(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n));
        if (left === 0) {
          w.end();
          return resolve();
        }
        if (!ok) return void w.once('drain', more);
      }
    };
    w.on('error', reject);
    more();
  });
}

interface UpstreamState {
  /** Response bytes the upstream handed to its socket. */
  written: number;
  finished: boolean;
  /** Set while a `/hold` upload waits: call it to start reading the body. */
  release?: () => void;
}

/**
 * An upstream that counts request bytes (answers the count; `/hold` reads nothing until released),
 * or sends `?size=` bytes.
 */
function countingUpstream(state: UpstreamState): http.RequestListener {
  return (req, res) => {
    if (req.method === 'POST') {
      let n = 0;
      const read = (): void => {
        req.on('data', (c: Buffer) => (n += c.length));
        req.on('end', () => res.end(String(n)));
        req.resume();
      };
      if (req.url === '/hold') {
        req.pause();
        state.release = read;
      } else {
        read();
      }
      return;
    }
    const size = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('size') ?? '0');
    state.written = 0;
    state.finished = false;
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': size });
    void writeBody(res, size, (n) => (state.written += n)).then(() => (state.finished = true), () => undefined);
  };
}

async function startCountingPlane(t: TapLike): Promise<{ port: number; url: string; state: UpstreamState }> {
  const state: UpstreamState = { written: 0, finished: false };
  const upstream = await startHttpServer(t, countingUpstream(state));
  const plane = await startPlane(t, records({ workloadSpec: WORKLOAD_SPEC, replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
  await plane.ready();
  return { port: plane.port, url: plane.url, state };
}

function upload(port: number, size: number, pathname = '/upload', onWrite?: (n: number) => void): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: pathname, headers: { host: HOST, 'content-length': size }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve(`${res.statusCode} ${body}`));
    });
    req.on('error', reject);
    writeBody(req, size, onWrite).catch(reject);
  });
}

function download(port: number, size: number, onResponse?: (res: http.IncomingMessage) => void): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, path: `/download?size=${size}`, headers: { host: HOST }, agent: false }, (res) => {
      let bytes = 0;
      res.on('data', (c: Buffer) => (bytes += c.length));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
      res.on('error', reject);
      onResponse?.(res);
    });
    req.on('error', reject);
    req.end();
  });
}

/** Polls until `check()` holds; `maxMs` is a hang guard. */
async function waitUntil(check: () => boolean, maxMs = 30_000): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves once `value()` has not changed for `quietMs`. */
async function settled(value: () => number, quietMs = 400, maxMs = 8000): Promise<number> {
  const deadline = Date.now() + maxMs;
  let last = value();
  let since = Date.now();
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    const now = value();
    if (now !== last) {
      last = now;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) {
      return now;
    }
  }
  return value();
}

t.test('a 50 MB upload streams through', { timeout: 60_000 }, async (t) => {
  const plane = await startCountingPlane(t);
  // Warm-up pays one-time costs (JIT and undici's WASM parser tiering up, ~30 MB of RSS once).
  t.equal(await upload(plane.port, 8 * MB), `200 ${8 * MB}`, 'warm-up');
  t.equal(await upload(plane.port, 8 * MB), `200 ${8 * MB}`, 'warm-up');
  const { result, growth } = await rssGrowth(() => upload(plane.port, SIZE));
  t.equal(result, `200 ${SIZE}`, 'the upstream received every byte');
  t.ok(growth < 30 * MB, `RSS grew ${(growth / MB).toFixed(1)} MB (< 30 MB)`);
});

t.test('a 50 MB download streams through', { timeout: 60_000 }, async (t) => {
  const plane = await startCountingPlane(t);
  t.same(await download(plane.port, 8 * MB), { status: 200, bytes: 8 * MB }, 'warm-up');
  t.same(await download(plane.port, 8 * MB), { status: 200, bytes: 8 * MB }, 'warm-up');
  const { result, growth } = await rssGrowth(() => download(plane.port, SIZE));
  t.same(result, { status: 200, bytes: SIZE }, 'the client received every byte');
  t.ok(growth < 30 * MB, `RSS grew ${(growth / MB).toFixed(1)} MB (< 30 MB)`);
});

t.test('an upstream that does not read makes the uploading client wait', { timeout: 60_000 }, async (t) => {
  const plane = await startCountingPlane(t);
  let sent = 0;
  const done = upload(plane.port, SIZE, '/hold', (n) => (sent += n));
  await waitUntil(() => plane.state.release !== undefined);
  const stalled = await settled(() => sent);
  t.ok(stalled < 20 * MB, `the client got ${(stalled / MB).toFixed(1)} MB out while the upstream was not reading (< 20 MB of 50)`);
  plane.state.release!();
  t.equal(await done, `200 ${SIZE}`, 'everything arrives once the upstream reads');
});

t.test('a slow reader makes the upstream wait (HTTP/1.1 → HTTP/1.1)', { timeout: 60_000 }, async (t) => {
  const plane = await startCountingPlane(t);
  let response: http.IncomingMessage | undefined;
  const done = download(plane.port, SIZE, (res) => {
    response = res;
    res.pause();
  });
  // The quiet period is measured from the answer's head on: before it, a busy machine's slow start
  // would look like a stall.
  await waitUntil(() => response !== undefined);
  const stalled = await settled(() => plane.state.written);
  t.ok(response, 'headers arrived');
  t.notOk(plane.state.finished, 'the upstream could not finish while the client was not reading');
  t.ok(stalled < 20 * MB, `the upstream wrote ${(stalled / MB).toFixed(1)} MB while the client was paused (< 20 MB of 50)`);
  response!.resume();
  t.same(await done, { status: 200, bytes: SIZE }, 'everything arrives once the client reads');
});

t.test('a slow reader makes the upstream wait (h2c → HTTP/1.1)', { timeout: 60_000 }, async (t) => {
  const plane = await startCountingPlane(t);
  const session = http2.connect(plane.url);
  t.teardown(() => {
    session.destroy();
  });
  const stream = session.request({ ':path': `/download?size=${SIZE}`, ':authority': HOST });
  let bytes = 0;
  const done = new Promise<number>((resolve, reject) => {
    stream.on('end', () => resolve(bytes));
    stream.on('error', reject);
  });
  const status = await new Promise<number>((resolve) => stream.once('response', (h) => resolve(Number(h[':status']))));
  t.equal(status, 200);
  stream.pause();
  const stalled = await settled(() => plane.state.written);
  t.notOk(plane.state.finished, 'the upstream could not finish while the client was not reading');
  t.ok(stalled < 20 * MB, `the upstream wrote ${(stalled / MB).toFixed(1)} MB while the client was paused (< 20 MB of 50)`);
  stream.on('data', (c: Buffer) => (bytes += c.length));
  stream.resume();
  t.equal(await done, SIZE, 'everything arrives once the client reads');
});

// 166 MB through HTTP/2 flow control: a minute and more on a busy 2-core machine (a hang guard only).
t.test('HTTP/2 upstream: 50 MB both ways, and a slow reader makes it wait', { timeout: 240_000 }, async (t) => {
  const state = { written: 0, finished: false };
  const { port } = await startH2Server(t, (stream, headers) => {
    if (headers[':method'] === 'POST') {
      let n = 0;
      stream.on('data', (c: Buffer) => (n += c.length));
      stream.on('end', () => {
        if (stream.destroyed) return;
        stream.respond({ ':status': 200 });
        stream.end(String(n));
      });
      return;
    }
    const size = Number(new URL(String(headers[':path']), 'http://x').searchParams.get('size') ?? '0');
    state.written = 0;
    state.finished = false;
    stream.respond({ ':status': 200, 'content-length': size });
    void writeBody(stream, size, (n) => (state.written += n)).then(() => (state.finished = true), () => undefined);
  });
  const plane = await startPlane(t, records({ workloadSpec: WORKLOAD_SPEC, ports: [{ number: 8080, protocol: 'http2' }], replicas: { [LOCATION]: [`127.0.0.1:${port}`] } }));
  await plane.ready();
  t.equal(await upload(plane.port, 8 * MB), `200 ${8 * MB}`, 'warm-up');
  t.same(await download(plane.port, 8 * MB), { status: 200, bytes: 8 * MB }, 'warm-up');

  const up = await rssGrowth(() => upload(plane.port, SIZE));
  t.equal(up.result, `200 ${SIZE}`, 'upload: the upstream received every byte');
  t.ok(up.growth < 30 * MB, `upload: RSS grew ${(up.growth / MB).toFixed(1)} MB (< 30 MB)`);

  const down = await rssGrowth(() => download(plane.port, SIZE));
  t.same(down.result, { status: 200, bytes: SIZE }, 'download: the client received every byte');
  t.ok(down.growth < 30 * MB, `download: RSS grew ${(down.growth / MB).toFixed(1)} MB (< 30 MB)`);

  let response: http.IncomingMessage | undefined;
  const done = download(plane.port, SIZE, (res) => {
    response = res;
    res.pause();
  });
  await waitUntil(() => response !== undefined);
  const stalled = await settled(() => state.written);
  t.ok(response, 'headers arrived');
  t.notOk(state.finished, 'the upstream could not finish while the client was not reading');
  t.ok(stalled < 20 * MB, `the upstream wrote ${(stalled / MB).toFixed(1)} MB while the client was paused (< 20 MB of 50)`);
  response!.resume();
  t.same(await done, { status: 200, bytes: SIZE }, 'everything arrives once the client reads');
});
