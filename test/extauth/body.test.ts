/** Reading a body prefix for the check and replaying the whole body upstream. */
import t, { type Test } from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { PassThrough, Readable } from 'node:stream';
import { readBodyPrefix, type BodyPrefix } from '../../src/extauth/body.js';
import type { Clock, Timer } from '../../src/deps.js';
import { testSeed } from '../helpers/seed.js';

async function all(r: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of r) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

t.test('short body: whole, not partial', async (t) => {
  const p = await readBodyPrefix(Readable.from([Buffer.from('ab'), Buffer.from('cd')]), 10);
  t.equal(p.bytes.toString(), 'abcd');
  t.equal(p.partial, false);
  t.equal((await all(p.replay)).toString(), 'abcd');
});

t.test('exactly the limit is not partial; one byte more is', async (t) => {
  const exact = await readBodyPrefix(Readable.from([Buffer.alloc(10, 'a')]), 10);
  t.equal(exact.partial, false);
  const more = await readBodyPrefix(Readable.from([Buffer.alloc(11, 'a')]), 10);
  t.equal(more.partial, true);
  t.equal(more.bytes.length, 10);
  t.equal((await all(more.replay)).length, 11);
});

t.test('a slow stream: stops after the limit, the rest follows in order', async (t) => {
  const s = new PassThrough();
  const reading = readBodyPrefix(s, 4);
  s.write('ab');
  s.write('cdef');
  const p = await reading;
  t.equal(p.bytes.toString(), 'abcd');
  t.equal(p.partial, true);
  const replayed = all(p.replay);
  s.write('gh');
  s.end('ij');
  t.equal((await replayed).toString(), 'abcdefghij');
});

t.test('an ended stream', async (t) => {
  const s = Readable.from([]);
  await all(s);
  const p = await readBodyPrefix(s, 4);
  t.equal(p.bytes.length, 0);
  t.equal(p.partial, false);
});

t.test('unknown length: a quiet stream is checked with what arrived', async (t) => {
  const timers: (() => void)[] = [];
  const clock = {
    now: () => 0,
    wallNow: () => 0,
    setTimeout: (fn: () => void) => {
      timers.push(fn);
      return { id: timers.length - 1 };
    },
    clearTimeout: (timer: unknown) => {
      if (timer) timers[(timer as { id: number }).id] = () => undefined;
    },
  };
  const s = new PassThrough();
  const reading = readBodyPrefix(s, 100, { ms: 100, clock: clock as unknown as Clock });
  s.write('hello');
  await new Promise((r) => setImmediate(r));
  t.equal(timers.length, 1, 'an idle timer after the first chunk');
  timers.at(-1)!();
  const p = await reading;
  t.equal(p.bytes.toString(), 'hello');
  t.equal(p.partial, true, 'the rest may follow');
  const replayed = all(p.replay);
  s.end(' world');
  t.equal((await replayed).toString(), 'hello world');
});

/** A clock whose timers run only when the test says so. */
function manualClock(): { clock: Clock; fire(): void; pending(): number } {
  const timers = new Map<number, () => void>();
  let next = 0;
  return {
    clock: {
      now: () => 0,
      wallNow: () => 0,
      setTimeout: (fn: () => void) => {
        const id = next++;
        timers.set(id, fn);
        return { id } as Timer;
      },
      clearTimeout: (timer: Timer | undefined) => {
        if (timer) timers.delete((timer as unknown as { id: number }).id);
      },
    },
    fire() {
      const due = [...timers.values()];
      timers.clear();
      for (const fn of due) fn();
    },
    pending: () => timers.size,
  };
}

/**
 * A real request body stream (node:http's IncomingMessage for a chunked HTTP/1.1 request, or
 * node:http2's compat Http2ServerRequest for an h2c stream without content-length), its first chunk
 * arrived, and a way to send more of it from the client.
 */
interface LiveBody {
  req: Readable;
  write(chunk: string): void;
  end(chunk?: string): void;
}

async function liveBody(t: Test, protocol: 'http1' | 'h2c', first: string): Promise<LiveBody> {
  if (protocol === 'h2c') {
    const server = http2.createServer();
    const got = new Promise<Readable>((resolve) => server.once('request', (req: http2.Http2ServerRequest) => resolve(req)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const session = http2.connect(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    t.teardown(() => {
      session.destroy();
      server.close();
    });
    const stream = session.request({ ':method': 'POST', ':path': '/' });
    stream.on('error', () => undefined);
    stream.resume();
    stream.write(first);
    return { req: await got, write: (c) => stream.write(c), end: (c) => stream.end(c) };
  }
  const server = http.createServer();
  const got = new Promise<Readable>((resolve) => server.once('request', (req: http.IncomingMessage) => resolve(req)));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = http.request({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', method: 'POST', agent: false });
  client.on('error', () => undefined);
  t.teardown(() => {
    client.destroy();
    server.closeAllConnections();
    server.close();
  });
  client.write(first);
  return { req: await got, write: (c) => client.write(c), end: (c) => client.end(c) };
}

/** Resolves once the stream emitted the first chunk the reader buffered (its idle timer is armed). */
/**
 * Read the prefix of `source` (100 bytes at most, 100 ms idle on a manual clock) after `first` was
 * written, if given, and return it once the idle timer fired: the first chunk armed it.
 */
async function prefixAfterIdle(source: Readable, first?: string): Promise<BodyPrefix> {
  const timers = manualClock();
  const reading = readBodyPrefix(source, 100, { ms: 100, clock: timers.clock });
  if (first !== undefined) (source as PassThrough).write(first);
  while (timers.pending() === 0) await new Promise((r) => setImmediate(r));
  timers.fire();
  return reading;
}

for (const protocol of ['http1', 'h2c'] as const) {
  t.test(`${protocol}: after the idle timer, the rest of a live body flows through the replay`, async (t) => {
    const body = await liveBody(t, protocol, 'first');
    const p = await prefixAfterIdle(body.req);
    t.equal(p.bytes.toString(), 'first');
    t.equal(p.partial, true);
    // A conversation: the next piece is sent only once the replay delivered the first one.
    const replay = p.replay[Symbol.asyncIterator]();
    const got: string[] = [];
    let received = '';
    while (received.length < 'first'.length) {
      const { value } = (await replay.next()) as IteratorResult<Buffer>;
      received += value.toString();
    }
    got.push(received);
    for (const piece of ['second', 'third']) {
      body.write(piece);
      const { value, done } = (await replay.next()) as IteratorResult<Buffer>;
      t.notOk(done);
      got.push(value.toString());
    }
    body.end('last');
    const rest: string[] = [];
    for (let r = await replay.next(); !r.done; r = await replay.next()) rest.push((r.value as Buffer).toString());
    t.same([...got, rest.join('')], ['first', 'second', 'third', 'last']);
  });
}

t.test('the replay pulls the rest only as fast as it is read (backpressure, nothing buffered whole)', async (t) => {
  const s = new PassThrough({ highWaterMark: 4 * 1024 * 1024 });
  const p = await prefixAfterIdle(s, 'head');
  // 2 MiB more arrive while nobody reads the replay: they must stay in the source, not move over.
  const chunk = Buffer.alloc(16 * 1024, 'b');
  for (let i = 0; i < 128; i++) s.write(chunk);
  for (let i = 0; i < 20; i++) await new Promise((r) => setImmediate(r));
  t.ok(p.replay.readableLength <= p.replay.readableHighWaterMark + chunk.length, `the replay holds ${p.replay.readableLength} bytes, about one high-water mark`);
  // (One high-water mark: 16 KiB on Node 20, 64 KiB on Node 22.)
  t.ok(s.readableLength >= 2 * 1024 * 1024 - p.replay.readableHighWaterMark - 2 * chunk.length, 'the rest waits in the source');
  s.end();
  t.equal((await all(p.replay)).length, 4 + 128 * chunk.length);
});

t.test('a body aborted after the prefix fails the replay (not a clean, truncated end), with or without a reader', async (t) => {
  for (const reader of [true, false]) {
    const s = new PassThrough();
    const p = await prefixAfterIdle(s, 'part');
    const failed = new Promise<Error>((resolve) => p.replay.on('error', resolve));
    if (reader) p.replay.resume();
    s.emit('aborted');
    t.match((await failed).message, /aborted/, reader ? 'while read' : 'before anyone read');
    t.ok(p.replay.destroyed);
  }
  // And with nobody listening at all, the process goes on (no uncaught 'error').
  const s = new PassThrough();
  const p = await prefixAfterIdle(s, 'part');
  s.destroy(new Error('client reset'));
  await new Promise((r) => setImmediate(r));
  t.ok(p.replay.destroyed);
});

/** mulberry32: a small seeded PRNG, so a failing case can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), a | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

t.test('generated: any chunking, limit and idle moment gives a prefix of the body and the whole body back', async (t) => {
  const seed = testSeed('BODY_SEED', 20261127);
  t.comment(`seed ${seed} (BODY_SEED=${seed} to replay)`);
  const rand = prng(seed);
  const int = (n: number): number => Math.floor(rand() * n);
  for (let round = 0; round < 300; round++) {
    const body = Buffer.from(Array.from({ length: int(3000) }, () => int(256)));
    const limit = 1 + int(1200);
    const cuts = [...new Set(Array.from({ length: int(8) }, () => int(body.length + 1)))].sort((a, b) => a - b);
    const pieces = [0, ...cuts, body.length].flatMap((c, i, all) => (i === 0 ? [] : [body.subarray(all[i - 1], c)])).filter((b) => b.length > 0);
    const idleAfter = int(pieces.length + 1);
    const timers = manualClock();
    const s = new PassThrough();
    const reading = readBodyPrefix(s, limit, { ms: 100, clock: timers.clock });
    let settled = false;
    void reading.then(() => (settled = true));
    for (let i = 0; i < pieces.length; i++) {
      if (i === idleAfter && timers.pending() > 0) timers.fire();
      s.write(pieces[i]);
      await new Promise((r) => setImmediate(r));
    }
    if (int(2) === 0 && timers.pending() > 0 && !settled) timers.fire();
    s.end();
    const p = await reading;
    const replayed = await all(p.replay);
    const where = `seed ${seed} round ${round}`;
    if (!replayed.equals(body)) return t.fail(`replay differs from the body (${where})`);
    if (!body.subarray(0, p.bytes.length).equals(p.bytes)) return t.fail(`prefix is not the body's start (${where})`);
    if (p.bytes.length > limit) return t.fail(`prefix over the limit (${where})`);
    const whole = p.bytes.length === body.length;
    if (!p.partial && !whole) return t.fail(`a short prefix claimed whole (${where})`);
    if (body.length > limit && !p.partial) return t.fail(`a body over the limit not marked partial (${where})`);
  }
  t.pass('300 generated bodies');
});
