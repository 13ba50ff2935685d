/**
 * The scaling decision of one workload in one location (src/local/autoscale.ts): a table per rule
 * (given state and inputs, the replicas wanted), sequences over a fake clock (a burst, load gone, idle,
 * a request at zero), and a seeded property check over random inputs: always a whole count within
 * [minScale, maxScale] (0 only with minScale 0), never a throw, and never fewer replicas for more load.
 */
import t from 'tap';
import {
  decideScale,
  DEFAULT_CONCURRENCY_TARGET,
  DEFAULT_MAX_SCALE,
  INITIAL_SCALE_STATE,
  nextDecisionAt,
  SCALE_DOWN_WINDOW_MS,
  type ScaleInputs,
  type ScaleState,
} from '../../src/local/autoscale.js';
import { prng, testSeed } from '../helpers/seed.js';

const NOW = 10_000_000;
const DELAY = 300_000;
const WINDOW = SCALE_DOWN_WINDOW_MS;

function inputs(over: Partial<ScaleInputs> = {}): ScaleInputs {
  return {
    minScale: 0,
    maxScale: 10,
    metric: 'concurrency',
    target: 10,
    maxConcurrency: undefined,
    scaleToZeroDelayMs: DELAY,
    now: NOW,
    inFlight: 0,
    waiting: 0,
    lastRequestAt: undefined,
    ...over,
  };
}

function state(desired: number, lowSince?: number, lowPeak = 0): ScaleState {
  return { desired, lowSince, lowPeak };
}

type Row = [name: string, given: ScaleState, inputs: ScaleInputs, desired: number];

function table(name: string, rows: Row[]): void {
  t.test(name, async (t) => {
    for (const [row, given, at, want] of rows) t.equal(decideScale(given, at).desired, want, row);
  });
}

table('minScale 0: nothing until a request, then at least 1', [
  ['never a request', state(0), inputs(), 0],
  ['never a request, started at 1 (initial state of an older plan)', state(1), inputs(), 0],
  ['a request waiting for a replica', state(0), inputs({ waiting: 1, lastRequestAt: NOW }), 1],
  ['a request waiting, lastRequestAt not fed', state(0), inputs({ waiting: 1 }), 1],
  ['a request in flight', state(0), inputs({ inFlight: 1, lastRequestAt: NOW }), 1],
  ['no load now, a request a moment ago', state(0), inputs({ lastRequestAt: NOW - 1 }), 1],
  ['maxScale 0 (suspended, the caller\'s case) still 0', state(0), inputs({ maxScale: 0, waiting: 3 }), 0],
]);

table('idle past scaleToZeroDelay: to zero at once, to minScale after the window', [
  ['minScale 0, delay just passed', state(2), inputs({ lastRequestAt: NOW - DELAY }), 0],
  ['minScale 0, 1 ms before the delay: the window starts, 2 kept', state(2), inputs({ lastRequestAt: NOW - DELAY + 1 }), 2],
  ['minScale 0, delay passed but one still in flight', state(2), inputs({ lastRequestAt: NOW - DELAY, inFlight: 1 }), 2],
  ['minScale 0, delay passed, 1 running', state(1), inputs({ lastRequestAt: NOW - 10 * DELAY }), 0],
  ['delay 0: zero once nothing is in flight', state(1), inputs({ scaleToZeroDelayMs: 0, lastRequestAt: NOW }), 0],
  ['delay absent: the platform\'s 300 s', state(1), inputs({ scaleToZeroDelayMs: undefined, lastRequestAt: NOW - 299_999 }), 1],
  ['delay NaN: the platform\'s 300 s', state(1), inputs({ scaleToZeroDelayMs: Number.NaN, lastRequestAt: NOW - 300_000 }), 0],
  ['minScale 1 never goes to zero', state(1), inputs({ minScale: 1, lastRequestAt: NOW - 10 * DELAY }), 1],
  ['minScale 2 idle with 4: held until the window ends', state(4), inputs({ minScale: 2, lastRequestAt: NOW - DELAY }), 4],
  ['minScale 2 idle with 4, window over', state(4, NOW - WINDOW, 2), inputs({ minScale: 2, lastRequestAt: NOW - DELAY }), 2],
]);

table('concurrency: ceil(load / per replica), per replica the lower of target and maxConcurrency', [
  ['25 in flight, target 10', state(1), inputs({ inFlight: 25, lastRequestAt: NOW }), 3],
  ['20 in flight + 5 waiting, target 10', state(1), inputs({ inFlight: 20, waiting: 5, lastRequestAt: NOW }), 3],
  ['exactly 20, target 10', state(1), inputs({ inFlight: 20, lastRequestAt: NOW }), 2],
  ['maxConcurrency 5 below target 10: the cap rules', state(1), inputs({ inFlight: 25, maxConcurrency: 5 }), 5],
  ['maxConcurrency 20 above target 10: the target rules', state(1), inputs({ inFlight: 25, maxConcurrency: 20 }), 3],
  ['maxConcurrency 0: no cap', state(1), inputs({ inFlight: 25, maxConcurrency: 0 }), 3],
  ['fractional target 2.5', state(1), inputs({ inFlight: 6, target: 2.5 }), 3],
  [`target absent: ${DEFAULT_CONCURRENCY_TARGET}`, state(1), inputs({ inFlight: 2 * DEFAULT_CONCURRENCY_TARGET + 1, target: undefined }), 3],
  ['target 0: the default', state(1), inputs({ inFlight: 2 * DEFAULT_CONCURRENCY_TARGET + 1, target: 0 }), 3],
  ['target absent, maxConcurrency 1', state(1), inputs({ inFlight: 4, target: undefined, maxConcurrency: 1 }), 4],
  ['metric absent: concurrency', state(1), inputs({ inFlight: 25, metric: undefined }), 3],
  ['clamped to maxScale', state(1), inputs({ inFlight: 1000, maxScale: 4 }), 4],
  ['never below minScale', state(3), inputs({ inFlight: 1, minScale: 3, lastRequestAt: NOW }), 3],
  ['at maxScale already, more load: stays', state(4), inputs({ inFlight: 1000, maxScale: 4 }), 4],
  ['maxScale lowered by a reload: down at once', state(8), inputs({ inFlight: 1000, maxScale: 4 }), 4],
]);

table('scale down only after the load stayed lower for the window, to the window\'s peak', [
  ['load drops: the window starts, count kept', state(5), inputs({ inFlight: 10, lastRequestAt: NOW }), 5],
  ['1 ms before the window ends', state(5, NOW - WINDOW + 1, 3), inputs({ inFlight: 10, lastRequestAt: NOW }), 5],
  ['window over: to the peak wanted in it', state(5, NOW - WINDOW, 3), inputs({ inFlight: 10, lastRequestAt: NOW }), 3],
  ['window over, peak lower than now: to now', state(5, NOW - WINDOW, 1), inputs({ inFlight: 20, lastRequestAt: NOW }), 2],
  ['window given 0: down at once', state(5), inputs({ inFlight: 10, lastRequestAt: NOW, scaleDownWindowMs: 0 }), 1],
  ['load back up within the window: up, window dropped', state(5, NOW - 1000, 2), inputs({ inFlight: 60, lastRequestAt: NOW }), 6],
  ['lowSince in the future (clock went back): the window restarts now', state(5, NOW + 5000, 1), inputs({ inFlight: 10, lastRequestAt: NOW }), 5],
]);

table('other metrics: max(minScale, 1 while traffic is recent), never more on load', [
  ['cpu, minScale 0, heavy load', state(0), inputs({ metric: 'cpu', inFlight: 1000, lastRequestAt: NOW }), 1],
  ['rps, minScale 0, a waiting request', state(0), inputs({ metric: 'rps', waiting: 1 }), 1],
  ['memory, minScale 3, heavy load', state(3), inputs({ metric: 'memory', minScale: 3, inFlight: 1000 }), 3],
  ['latency, idle past the delay', state(1), inputs({ metric: 'latency', lastRequestAt: NOW - DELAY }), 0],
  ['disabled, minScale 2', state(2), inputs({ metric: 'disabled', minScale: 2, inFlight: 50 }), 2],
  ['unknown metric', state(0), inputs({ metric: 'keda', inFlight: 50 }), 1],
  ['cpu at 3 from an earlier concurrency config: down after the window', state(3, NOW - WINDOW, 1), inputs({ metric: 'cpu', inFlight: 9 }), 1],
]);

table('odd inputs are read sanely', [
  ['inFlight NaN: 0', state(0), inputs({ inFlight: Number.NaN }), 0],
  ['waiting negative: 0', state(0), inputs({ waiting: -4 }), 0],
  ['inFlight NaN, 1 waiting', state(0), inputs({ inFlight: Number.NaN, waiting: 1 }), 1],
  ['inFlight Infinity: maxScale', state(0), inputs({ inFlight: Number.POSITIVE_INFINITY }), 10],
  ['minScale NaN: 0', state(0), inputs({ minScale: Number.NaN }), 0],
  ['minScale 1.7: 1', state(0), inputs({ minScale: 1.7 }), 1],
  ['minScale negative: 0', state(0), inputs({ minScale: -3 }), 0],
  [`maxScale NaN: ${DEFAULT_MAX_SCALE}`, state(0), inputs({ maxScale: Number.NaN, inFlight: 1000 }), DEFAULT_MAX_SCALE],
  [`maxScale negative: ${DEFAULT_MAX_SCALE}`, state(0), inputs({ maxScale: -1, inFlight: 1000 }), DEFAULT_MAX_SCALE],
  ['maxScale below minScale: minScale', state(0), inputs({ minScale: 3, maxScale: 1 }), 3],
  ['state desired NaN: read as 0', state(Number.NaN), inputs({ inFlight: 15 }), 2],
  ['state desired negative, idle: 0', state(-2), inputs(), 0],
  ['state desired Infinity: read as 0', state(Number.POSITIVE_INFINITY), inputs({ inFlight: 15 }), 2],
  ['now NaN: up still works', state(1), inputs({ now: Number.NaN, inFlight: 35 }), 4],
  ['now NaN: nothing scales down', state(5, NOW - 10 * WINDOW, 1), inputs({ now: Number.NaN, inFlight: 1, lastRequestAt: NOW }), 5],
  ['now NaN, lastRequestAt set, no load: recent, 1 kept', state(1), inputs({ now: Number.NaN, lastRequestAt: NOW }), 1],
  ['lastRequestAt NaN: counted recent', state(1), inputs({ lastRequestAt: Number.NaN }), 1],
  ['lowSince NaN: the window restarts now', state(5, Number.NaN, 1), inputs({ inFlight: 1, lastRequestAt: NOW }), 5],
]);

t.test('INITIAL_SCALE_STATE: minScale replicas, no window; the states are frozen', async (t) => {
  t.same(INITIAL_SCALE_STATE(0), { desired: 0, lowSince: undefined, lowPeak: 0 });
  t.same(INITIAL_SCALE_STATE(3), { desired: 3, lowSince: undefined, lowPeak: 0 });
  t.same(INITIAL_SCALE_STATE(Number.NaN), { desired: 0, lowSince: undefined, lowPeak: 0 });
  t.ok(Object.isFrozen(INITIAL_SCALE_STATE(1)));
  t.ok(Object.isFrozen(decideScale(state(5), inputs({ inFlight: 1, lastRequestAt: NOW }))));
});

/** One step of a sequence: at `at` ms after the start, this load; the replicas wanted after it. */
interface Step {
  readonly at: number;
  readonly inFlight?: number;
  readonly waiting?: number;
  /** A request arrived at this step (sets lastRequestAt). */
  readonly request?: boolean;
  readonly desired: number;
}

function run(name: string, base: Partial<ScaleInputs>, steps: Step[]): void {
  t.test(name, async (t) => {
    let s = INITIAL_SCALE_STATE(base.minScale ?? 0);
    let last: number | undefined;
    for (const step of steps) {
      const now = NOW + step.at;
      if (step.request) last = now;
      const before = s;
      s = decideScale(s, inputs({ ...base, now, inFlight: step.inFlight ?? 0, waiting: step.waiting ?? 0, lastRequestAt: last }));
      t.equal(s.desired, step.desired, `at ${step.at} ms (in flight ${step.inFlight ?? 0}, waiting ${step.waiting ?? 0})`);
      t.not(s, before, 'a new state each time');
    }
  });
}

run('a request at zero: 1 at once, then back to zero after the delay', {}, [
  { at: 0, desired: 0 },
  { at: 100_000, desired: 0 },
  { at: 200_000, waiting: 1, request: true, desired: 1 },
  { at: 200_050, inFlight: 1, desired: 1 },
  { at: 200_100, desired: 1 },
  { at: 200_000 + DELAY - 1, desired: 1 },
  { at: 200_000 + DELAY, desired: 0 },
  { at: 200_000 + DELAY + 1, desired: 0 },
]);

run('a burst: up at once, load gone: down after the window, idle: zero after the delay', { maxConcurrency: 2, target: 2, maxScale: 8 }, [
  { at: 0, desired: 0 },
  { at: 1000, waiting: 1, request: true, desired: 1 },
  { at: 1100, inFlight: 1, waiting: 9, request: true, desired: 5 },
  { at: 1200, inFlight: 2, waiting: 30, request: true, desired: 8 },
  { at: 2000, inFlight: 16, waiting: 4, request: true, desired: 8 },
  { at: 3000, inFlight: 6, request: true, desired: 8 }, // wants 3: the window starts
  { at: 3000 + WINDOW / 2, inFlight: 8, request: true, desired: 8 }, // wants 4, still in the window
  { at: 3000 + WINDOW - 1, inFlight: 2, desired: 8 },
  { at: 3000 + WINDOW, inFlight: 2, desired: 4 }, // the window's peak, not the 1 wanted now
  { at: 3000 + WINDOW + 1, desired: 4 }, // wants 1 (recent traffic): a new window
  { at: 3000 + 2 * WINDOW + 1, desired: 1 },
  { at: 3000 + WINDOW / 2 + DELAY - 1, desired: 1 },
  { at: 3000 + WINDOW / 2 + DELAY, desired: 0 },
]);

run('a saw-tooth load inside the window never stops a replica', { target: 1, maxScale: 5 }, [
  { at: 0, inFlight: 4, request: true, desired: 4 },
  { at: 10_000, inFlight: 1, request: true, desired: 4 },
  { at: 20_000, inFlight: 4, request: true, desired: 4 },
  { at: 30_000, inFlight: 1, request: true, desired: 4 },
  { at: 30_000 + WINDOW - 1, inFlight: 1, request: true, desired: 4 },
  { at: 30_000 + WINDOW, inFlight: 1, request: true, desired: 1 },
]);

run('minScale 2: never below it, whatever the idle time', { minScale: 2, target: 1 }, [
  { at: 0, desired: 2 },
  { at: 1, inFlight: 3, request: true, desired: 3 },
  { at: 2, desired: 3 },
  { at: 2 + WINDOW, desired: 2 },
  { at: 10 * DELAY, desired: 2 },
]);

t.test('nextDecisionAt: the window end or the idle deadline, whichever is first', async (t) => {
  t.equal(nextDecisionAt(state(0), inputs()), undefined, 'at zero only a request changes it');
  t.equal(nextDecisionAt(state(1), inputs({ inFlight: 1, lastRequestAt: NOW })), undefined, 'busy: the end of a request changes it');
  t.equal(nextDecisionAt(state(1), inputs({ lastRequestAt: NOW - 1000 })), NOW - 1000 + DELAY, 'idle: the delay');
  t.equal(nextDecisionAt(state(3, NOW - 1000, 1), inputs({ inFlight: 1, lastRequestAt: NOW })), NOW - 1000 + WINDOW, 'the window end');
  t.equal(nextDecisionAt(state(3, NOW - 1000, 1), inputs({ lastRequestAt: NOW - DELAY + 10 })), NOW + 10, 'the idle deadline first');
  t.equal(nextDecisionAt(state(1), inputs({ minScale: 1, lastRequestAt: NOW - 2 * DELAY })), undefined, 'deadlines past: none');
  // Following it, a caller that decides again at the instant given sees the change.
  const s = decideScale(state(1), inputs({ lastRequestAt: NOW - 1000 }));
  const at = nextDecisionAt(s, inputs({ lastRequestAt: NOW - 1000 }));
  t.equal(decideScale(s, inputs({ now: at ?? Number.NaN, lastRequestAt: NOW - 1000 })).desired, 0, 'zero at that instant');
});

/** A number from a few shapes, odd ones (NaN, negative, infinite, fractions) included on purpose. */
function draw(rand: () => number, max: number): number {
  const r = rand();
  if (r < 0.03) return Number.NaN;
  if (r < 0.06) return -1 - Math.floor(rand() * 5);
  if (r < 0.08) return Number.POSITIVE_INFINITY;
  if (r < 0.15) return rand() * max;
  return Math.floor(rand() * max);
}

function maybe<T>(rand: () => number, value: T): T | undefined {
  return rand() < 0.15 ? undefined : value;
}

t.test('property: always within bounds, never throws, monotone in load', async (t) => {
  const seed = testSeed('AUTOSCALE_SEED', 27);
  t.comment(`seed ${seed} (replay: AUTOSCALE_SEED=${seed})`);
  const rand = prng(seed);
  const metrics = ['concurrency', 'concurrency', 'concurrency', 'cpu', 'rps', 'memory', 'latency', 'disabled', 'nonsense'];
  let failures = 0;
  for (let i = 0; i < 5000 && failures < 5; i++) {
    const minScale = draw(rand, 4);
    const at: ScaleInputs = {
      minScale,
      maxScale: rand() < 0.7 ? Math.max(0, minScale) + Math.floor(rand() * 8) : draw(rand, 12),
      metric: maybe(rand, metrics[Math.floor(rand() * metrics.length)]),
      target: maybe(rand, draw(rand, 20)),
      maxConcurrency: maybe(rand, draw(rand, 20)),
      scaleToZeroDelayMs: maybe(rand, draw(rand, 2 * DELAY)),
      scaleDownWindowMs: maybe(rand, draw(rand, 2 * WINDOW)),
      now: rand() < 0.03 ? Number.NaN : NOW + Math.floor(rand() * DELAY),
      inFlight: draw(rand, 100),
      waiting: draw(rand, 100),
      lastRequestAt: maybe(rand, NOW - DELAY + draw(rand, 2 * DELAY)),
    };
    const given = state(draw(rand, 12), maybe(rand, NOW - draw(rand, 2 * WINDOW)), draw(rand, 12));
    const frozen = JSON.stringify(given);
    const where = `seed ${seed} case ${i}: ${JSON.stringify({ at, given }, (_k, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v))}`;
    let next: ScaleState;
    try {
      next = decideScale(given, at);
    } catch (err) {
      failures++;
      t.fail(`threw ${String(err)}; ${where}`);
      continue;
    }
    const low = Number.isFinite(minScale) && minScale > 0 ? Math.floor(minScale) : 0;
    const high = Math.max(low, Number.isFinite(at.maxScale) && at.maxScale >= 0 ? Math.floor(at.maxScale) : DEFAULT_MAX_SCALE);
    const ok =
      Number.isInteger(next.desired) &&
      next.desired >= low &&
      next.desired <= high &&
      Number.isInteger(next.lowPeak) &&
      (next.lowSince === undefined || Number.isFinite(next.lowSince)) &&
      JSON.stringify(given) === frozen;
    if (!ok) {
      failures++;
      t.fail(`out of bounds [${low}, ${high}]: ${JSON.stringify(next)}; ${where}`);
      continue;
    }
    // A request waiting means a replica, unless maxScale forbids any.
    if (at.waiting > 0 && high >= 1 && next.desired < 1) {
      failures++;
      t.fail(`a waiting request got no replica; ${where}`);
      continue;
    }
    const more = { ...at, inFlight: (at.inFlight > 0 ? at.inFlight : 0) + 1 + Math.floor(rand() * 50) };
    const busier = decideScale(given, more);
    if (busier.desired < next.desired) {
      failures++;
      t.fail(`more load, fewer replicas: ${busier.desired} < ${next.desired} with in flight ${more.inFlight}; ${where}`);
    }
  }
  t.equal(failures, 0, `no failing case (seed ${seed})`);
});
