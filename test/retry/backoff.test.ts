/**
 * Backoff bounds over the whole random range, Retry-After parsing and capping, and the budget's
 * arithmetic.
 */
import t from 'tap';
import { backoffMs, retryAfterMs, BACKOFF_CAP_MS } from '../../src/retry/backoff.js';
import { RetryBudget } from '../../src/retry/budget.js';

t.test('fully jittered, exponential, capped', async (t) => {
  const ceilings = [25, 75, 175, 250, 250, 250];
  ceilings.forEach((ceiling, i) => {
    const retry = i + 1;
    t.equal(backoffMs(retry, () => 0), 0, `retry ${retry}: lower bound 0`);
    t.equal(backoffMs(retry, () => 0.999999), ceiling - 1, `retry ${retry}: upper bound below ${ceiling}`);
    for (let k = 0; k < 200; k++) {
      const ms = backoffMs(retry, Math.random);
      if (ms < 0 || ms >= ceiling) t.fail(`retry ${retry}: ${ms} outside [0, ${ceiling})`);
    }
  });
  t.ok(backoffMs(40, () => 0.99) < BACKOFF_CAP_MS, 'never past the cap');
});

t.test('Retry-After', async (t) => {
  const now = Date.parse('2026-11-25T12:00:00Z');
  t.equal(retryAfterMs('0', now), 0);
  t.equal(retryAfterMs('1', now), 250, 'seconds, capped');
  t.equal(retryAfterMs(new Date(now + 100).toUTCString(), now), 0, 'an HTTP date rounds to whole seconds');
  t.equal(retryAfterMs(new Date(now + 60_000).toUTCString(), now), 250);
  t.equal(retryAfterMs('soon', now), undefined);
  t.equal(retryAfterMs(undefined, now), undefined);
  t.equal(retryAfterMs('1', now, 5000), 1000);
});

t.test('retry budget: 20% of active requests, at least 3', async (t) => {
  const cases: [active: number, retrying: number, allowed: boolean][] = [
    [0, 0, true],
    [1, 2, true],
    [1, 3, false],
    [10, 2, true],
    [10, 3, false],
    [100, 19, true],
    [100, 20, false],
    [1000, 199, true],
  ];
  for (const [active, retrying, allowed] of cases) {
    const b = new RetryBudget();
    b.active = active;
    b.retrying = retrying;
    t.equal(b.allows(), allowed, `${retrying} retrying of ${active} active`);
  }
});
