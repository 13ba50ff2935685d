/** Reading a body prefix for the check and replaying the whole body upstream. */
import t from 'tap';
import { PassThrough, Readable } from 'node:stream';
import { readBodyPrefix } from '../../src/extauth/body.js';
import type { Clock } from '../../src/deps.js';

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
