/**
 * The replay buffer with real streams: small bodies replay intact (also when the failure comes
 * mid-upload), large ones stop being replayable, backpressure reaches the source, and destroying an
 * attempt's stream leaves the source alive.
 */
import t from 'tap';
import { PassThrough, type Readable } from 'node:stream';
import { ReplayableBody } from '../../src/retry/replay.js';

async function readAll(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

t.test('a small body replays intact', async (t) => {
  const source = new PassThrough();
  const body = new ReplayableBody(source);
  const first = body.attempt()!;
  first.on('error', () => undefined);
  source.write('hello ');
  await new Promise((r) => setImmediate(r));
  first.destroy(new Error('upstream reset'));
  const second = body.attempt()!;
  source.end('world');
  t.equal((await readAll(second)).toString(), 'hello world', 'kept bytes first, then the rest');
  t.equal(source.errored, null, 'the client stream survives a destroyed attempt');
  const third = body.attempt()!;
  t.equal((await readAll(third)).toString(), 'hello world', 'a finished body replays whole');
});

t.test('past the limit the body is no longer replayable', async (t) => {
  const source = new PassThrough();
  const body = new ReplayableBody(source, 1024);
  const first = body.attempt()!;
  const done = readAll(first);
  source.end(Buffer.alloc(4096, 1));
  t.equal((await done).length, 4096, 'the first attempt still gets everything');
  t.equal(body.replayable, false);
  t.equal(body.attempt(), undefined);
});

t.test('backpressure reaches the source', async (t) => {
  const source = new PassThrough({ highWaterMark: 1024 });
  const body = new ReplayableBody(source, 1 << 20);
  const first = body.attempt()!;
  let accepted = 0;
  for (let i = 0; i < 1000; i++) {
    if (!source.write(Buffer.alloc(1024))) break;
    accepted++;
  }
  await new Promise((r) => setImmediate(r));
  t.ok(accepted < 200, `the source stopped accepting after ${accepted} KiB while nobody read`);
  first.resume();
  source.end();
  await new Promise((r) => first.once('end', r));
});
