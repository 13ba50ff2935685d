/**
 * FastHistogram against prom-client's Histogram: the same observations (values on and between the
 * bounds, above the last, non-finite ones refused) give the same exposition text, the same values
 * for cluster aggregation (`--workers` sums them), and reset empties it.
 */
import t from 'tap';
import { AggregatorRegistry, Histogram, Registry } from 'prom-client';
import { fastHistogram } from '../../src/admin/histogram.js';

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
