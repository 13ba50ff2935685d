import t from 'tap';
import { ContainerProcess, DEFAULT_BACKOFF } from '../../src/local/process.js';
import { captureLogger, FakeClock, waitFor } from './fixtures.js';

t.test('restart backoff runs on the injected clock: 1 s, 2 s, reset after a 10 s run', async (t) => {
  const clock = new FakeClock();
  const { logger, lines } = captureLogger();
  let downs = 0;
  let runs = 0;
  // Read at every start: the test swaps it to hold the third run open.
  let script = 'process.exit(2)';
  const proc = new ContainerProcess({
    command: process.execPath,
    get args() {
      return ['-e', script];
    },
    env: { PATH: process.env.PATH ?? '' },
    logger,
    clock,
    backoff: DEFAULT_BACKOFF,
    onRunning: () => runs++,
    onDown: () => downs++,
  });
  t.teardown(() => {
    // Fake timers never fire on their own: stop without waiting on them.
    void proc.stop(0);
    clock.advance(1);
  });
  proc.start();
  await waitFor(() => downs === 1, 30_000, 'first exit');
  t.same(clock.pending(), [1000], 'first restart in 1 s');
  clock.advance(999);
  t.equal(proc.restarts, 0);
  clock.advance(1);
  t.equal(proc.restarts, 1, 'restarted at 1 s');
  await waitFor(() => downs === 2, 30_000, 'second exit');
  t.same(clock.pending(), [2000], 'then 2 s');
  script = 'setTimeout(() => process.exit(3), 300)';
  clock.advance(2000);
  await waitFor(() => runs === 3, 30_000, 'third run');
  clock.advance(10_000);
  await waitFor(() => downs === 3, 30_000, 'third exit');
  t.same(clock.pending(), [1000], 'a 10 s run resets the backoff');
  t.ok(lines.some((l) => l.msg === 'process exited' && l.code === 3 && l.ranMs === 10_000));
});

t.test('SIGKILL after the grace period, on the injected clock', async (t) => {
  const clock = new FakeClock();
  const { logger, lines } = captureLogger();
  let running = false;
  const proc = new ContainerProcess({
    command: process.execPath,
    args: ['-e', "process.on('SIGTERM', () => console.log('nope')); setInterval(() => {}, 1000); console.log('ready')"],
    env: { PATH: process.env.PATH ?? '' },
    logger,
    clock,
    backoff: DEFAULT_BACKOFF,
    onRunning: () => (running = true),
  });
  t.teardown(() => void proc.stop(0));
  proc.start();
  await waitFor(() => running && lines.some((l) => l.msg === 'ready'), 30_000, 'running');
  let stopped = false;
  const stopping = proc.stop(30_000).then(() => (stopped = true));
  await waitFor(() => lines.some((l) => l.msg === 'nope'), 30_000, 'SIGTERM seen');
  t.same(clock.pending(), [30_000], 'kill scheduled at the grace');
  t.equal(stopped, false, 'still running');
  clock.advance(30_000);
  await stopping;
  t.ok(lines.some((l) => l.msg === 'process ignored SIGTERM; killing'));
  t.same(clock.pending(), [], 'no restart after a stop');
});
