import t from 'tap';
import { createServer } from 'node:net';
import { LineSplitter } from '../../src/local/output.js';
import { restartDelay, DEFAULT_BACKOFF } from '../../src/local/process.js';
import { allocatePort, allocatePorts } from '../../src/local/ports.js';

t.test('LineSplitter: table', async (t) => {
  const cases: { name: string; chunks: (string | Buffer)[]; max?: number; want: string[] }[] = [
    { name: 'one line', chunks: ['hello\n'], want: ['hello'] },
    { name: 'split across chunks', chunks: ['hel', 'lo\nwor', 'ld\n'], want: ['hello', 'world'] },
    { name: 'CRLF', chunks: ['a\r\nb\r\n'], want: ['a', 'b'] },
    { name: 'tail without newline flushed at end', chunks: ['a\nb'], want: ['a', 'b'] },
    { name: 'empty lines kept', chunks: ['\n\n'], want: ['', ''] },
    { name: 'long line cut', chunks: ['abcdefgh'], max: 3, want: ['abc', 'def', 'gh'] },
    { name: 'long line with newline cut', chunks: ['abcdefg\nx\n'], max: 3, want: ['abc', 'def', 'g', 'x'] },
    { name: 'UTF-8 split inside a character', chunks: [Buffer.from([0xe2, 0x82]), Buffer.from([0xac, 0x0a])], want: ['€'] },
  ];
  for (const c of cases) {
    const got: string[] = [];
    const s = new LineSplitter((l) => got.push(l), c.max);
    for (const chunk of c.chunks) s.write(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
    s.end();
    t.same(got, c.want, c.name);
  }
});

t.test('restartDelay: doubling, cap, reset after a long run', async (t) => {
  const b = DEFAULT_BACKOFF;
  let next = b.initialMs;
  const delays: number[] = [];
  for (let i = 0; i < 7; i++) {
    const step = restartDelay(next, 50, b);
    delays.push(step.delayMs);
    next = step.nextMs;
  }
  t.same(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000]);
  const reset = restartDelay(30000, 10_000, b);
  t.same(reset, { delayMs: 1000, nextMs: 2000 }, 'a 10 s run resets');
  t.same(restartDelay(30000, 9_999, b).delayMs, 30000, 'a 9.999 s run does not');
  t.same(restartDelay(10, 0, { initialMs: 10, maxMs: 25, resetAfterMs: 100 }), { delayMs: 10, nextMs: 20 });
  t.same(restartDelay(20, 0, { initialMs: 10, maxMs: 25, resetAfterMs: 100 }), { delayMs: 20, nextMs: 25 });
});

t.test('allocatePorts: distinct, bindable', async (t) => {
  const ports = await allocatePorts(8);
  t.equal(new Set(ports).size, 8);
  const port = await allocatePort();
  t.ok(port > 0 && port < 65536);
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolve);
  });
  t.pass('the port can be bound');
  await new Promise((resolve) => server.close(resolve));
});
