/**
 * FastHistogram and FastCounter against prom-client's Histogram and Counter: the same observations
 * (values on and between the bounds, above the last, non-finite ones refused) and increments (by
 * one, by more, by zero; a decrease refused) give the same exposition text, the same values for
 * cluster aggregation (`--workers` sums them), and reset empties them.
 */
import t from 'tap';
import { AggregatorRegistry, Counter, Histogram, Registry } from 'prom-client';
import { fastCounter, fastHistogram } from '../../src/admin/fast-metrics.js';

const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: [string, string, number][] = [
  ['shop/api', 'ok', 0.0005], ['shop/api', 'ok', 0.001], ['shop/api', 'ok', 0.0011], ['shop/api', 'over_limit', 0.5],
  ['shop/web', 'ok', 1], ['shop/web', 'ok', 7], ['shop/web', 'error', 0], ['shop/api', 'ok', 0.05],
];

function both(): { ours: Registry; theirs: Registry } {
  const ours = new Registry();
  const theirs = new Registry();
  const fast = fastHistogram(ours, 'svcproxy_test_seconds', 'A test histogram', ['workload', 'result'], [...BUCKETS].reverse());
  const slow = new Histogram({ name: 'svcproxy_test_seconds', help: 'A test histogram', labelNames: ['workload', 'result'], buckets: BUCKETS, registers: [theirs] });
  for (const [w, r, v] of OBSERVED) {
    fast.labels(w, r).observe(v);
    slow.labels(w, r).observe(v);
  }
  fast.labels('shop/api', 'ok').observe(Number.NaN);
  fast.labels('shop/api', 'ok').observe(Number.POSITIVE_INFINITY);
  return { ours, theirs };
}

t.test('the exposition text of prom-client\'s Histogram', async (t) => {
  const { ours, theirs } = both();
  t.equal(await ours.metrics(), await theirs.metrics());
  t.match(await ours.metrics(), /svcproxy_test_seconds_bucket\{le="\+Inf",workload="shop\/web",result="ok"\} 2/);
});

t.test('summed across workers like prom-client\'s', async (t) => {
  const a = both();
  const b = both();
  const ours = AggregatorRegistry.aggregate([await a.ours.getMetricsAsJSON(), await b.ours.getMetricsAsJSON()]);
  const theirs = AggregatorRegistry.aggregate([await a.theirs.getMetricsAsJSON(), await b.theirs.getMetricsAsJSON()]);
  t.equal(await ours.metrics(), await theirs.metrics());
});

t.test('registered once per registry; a label set appears when first observed; reset zeroes it', async (t) => {
  const registry = new Registry();
  const h = fastHistogram(registry, 'svcproxy_x_seconds', 'x', ['workload'], BUCKETS);
  t.equal(fastHistogram(registry, 'svcproxy_x_seconds', 'x', ['workload'], BUCKETS), h, 'looked up by name the second time');
  const bound = h.labels('w');
  h.labels('never-observed');
  t.notMatch(await registry.metrics(), /svcproxy_x_seconds_count/, "a bound label set appears with its first observation, as in prom-client");
  bound.observe(0.5);
  t.match(await registry.metrics(), /svcproxy_x_seconds_count\{workload="w"\} 1/);
  t.notMatch(await registry.metrics(), /never-observed/);
  registry.resetMetrics();
  t.notMatch(await registry.metrics(), /svcproxy_x_seconds_count/);
  bound.observe(0.25);
  t.match(await registry.metrics(), /svcproxy_x_seconds_count\{workload="w"\} 1/, 'a child bound before the reset counts after it');
});

const INCREMENTS: [string, string, number][] = [
  ['shop/api', 'ok', 1], ['shop/api', 'ok', 1], ['shop/api', 'over_limit', 3], ['shop/web', 'ok', 0], ['shop/web', 'error', 2.5], ['shop/api', 'ok', 1],
];

function counters(): { ours: Registry; theirs: Registry } {
  const ours = new Registry();
  const theirs = new Registry();
  const fast = fastCounter(ours, 'svcproxy_test_total', 'A test counter', ['workload', 'result']);
  const slow = new Counter({ name: 'svcproxy_test_total', help: 'A test counter', labelNames: ['workload', 'result'], registers: [theirs] });
  for (const [w, r, n] of INCREMENTS) {
    fast.labels(w, r).inc(n);
    slow.labels(w, r).inc(n);
  }
  fast.labels('shop/api', 'ok').inc();
  slow.labels('shop/api', 'ok').inc();
  return { ours, theirs };
}

t.test("counters: the exposition text and the workers' sum of prom-client's Counter", async (t) => {
  const a = counters();
  t.equal(await a.ours.metrics(), await a.theirs.metrics());
  t.match(await a.ours.metrics(), /svcproxy_test_total\{workload="shop\/api",result="ok"\} 4/);
  const b = counters();
  const ours = AggregatorRegistry.aggregate([await a.ours.getMetricsAsJSON(), await b.ours.getMetricsAsJSON()]);
  const theirs = AggregatorRegistry.aggregate([await a.theirs.getMetricsAsJSON(), await b.theirs.getMetricsAsJSON()]);
  t.equal(await ours.metrics(), await theirs.metrics());
});

t.test('counters: registered once, a label set appears when first increased, never decreases, reset zeroes it', async (t) => {
  const registry = new Registry();
  const c = fastCounter(registry, 'svcproxy_x_total', 'x', ['workload']);
  t.equal(fastCounter(registry, 'svcproxy_x_total', 'x', ['workload']), c, 'looked up by name the second time');
  const bound = c.labels('w');
  t.notMatch(await registry.metrics(), /svcproxy_x_total\{/, 'a bound label set appears with its first increment');
  bound.inc();
  t.match(await registry.metrics(), /svcproxy_x_total\{workload="w"\} 1/);
  t.throws(() => bound.inc(-1), /only goes up/);
  registry.resetMetrics();
  t.notMatch(await registry.metrics(), /svcproxy_x_total\{/);
  bound.inc(2);
  t.match(await registry.metrics(), /svcproxy_x_total\{workload="w"\} 2/, 'a child bound before the reset counts after it');
});
