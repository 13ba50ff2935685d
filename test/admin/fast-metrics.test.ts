/**
 * FastHistogram and FastCounter against prom-client's Histogram and Counter: the same observations
 * (values on and between the bounds, above the last, non-finite ones refused) and increments (by
 * one, by more, by zero; a decrease refused) give the same exposition text, the same values for
 * cluster aggregation (`--workers` sums them), and reset empties them.
 */
import t from 'tap';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { fastCounter, fastHistogram, ScrapedMetric } from '../../src/admin/fast-metrics.js';
import { Metrics } from '../../src/admin/metrics.js';

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

/** Label values the exposition format escapes: a quote, a backslash, a line break. */
const AWKWARD = ['shop/"quoted"', 'back\\slash', 'two\nlines', 'plain'];

t.test('the text each fast metric writes itself is what the registry writes for it, escapes included', async (t) => {
  const registry = new Registry();
  const h = fastHistogram(registry, 'svcproxy_t_seconds', 'help with \\ and\nbreak', ['workload'], BUCKETS);
  const c = fastCounter(registry, 'svcproxy_t_total', 'counter', ['workload', 'result']);
  for (const [i, w] of AWKWARD.entries()) {
    h.labels(w).observe(i / 10);
    c.labels(w, AWKWARD[(i + 1) % AWKWARD.length]!).inc(i + 1);
  }
  h.labels('never').observe(Number.NaN);
  const bare = fastHistogram(registry, 'svcproxy_bare_seconds', 'no labels', [], BUCKETS);
  bare.labels().observe(0.05);
  const bareCount = fastCounter(registry, 'svcproxy_bare_total', 'no labels', []);
  bareCount.labels().inc(3);
  t.equal(await bare.promText(), await registry.getSingleMetricAsString('svcproxy_bare_seconds'), 'a histogram without labels');
  t.equal(await bareCount.promText(), await registry.getSingleMetricAsString('svcproxy_bare_total'), 'a counter without labels');
  t.equal(await h.promText(), await registry.getSingleMetricAsString('svcproxy_t_seconds'));
  t.equal(await c.promText(), await registry.getSingleMetricAsString('svcproxy_t_total'));
  t.match(await c.promText(), /svcproxy_t_total\{workload="shop\/\\"quoted\\"",result="back\\\\slash"\} 1/);
});

t.test('ScrapedMetric: the text, the values and the workers\' aggregate of a prom-client metric set at collect time', async (t) => {
  /** One worker's state: the same label sets, the first one's value differs. */
  const state = (first: number): [string, string, number][] => AWKWARD.map((w, i) => [w, `loc-${i % 2}`, i === 0 ? first : i]);
  for (const [type, aggregator] of [['gauge', 'min'], ['counter', 'sum']] as const) {
    const registries = [state(7), state(2)].map((rows) => {
      const ours = new Registry();
      const theirs = new Registry();
      const scraped = new ScrapedMetric('svcproxy_t', 'A scraped metric', type, ['workload', 'location'], (emit) => {
        for (const [w, l, n] of rows) emit([w, l], n);
      }, aggregator);
      ours.registerMetric(scraped as never);
      if (type === 'gauge') {
        new Gauge({ name: 'svcproxy_t', help: 'A scraped metric', labelNames: ['workload', 'location'], registers: [theirs], aggregator, collect() {
          this.reset();
          for (const [workload, location, n] of rows) this.set({ workload, location }, n);
        } });
      } else {
        new Counter({ name: 'svcproxy_t', help: 'A scraped metric', labelNames: ['workload', 'location'], registers: [theirs], aggregator, collect() {
          this.reset();
          for (const [workload, location, n] of rows) this.inc({ workload, location }, n);
        } });
      }
      return { ours, theirs, scraped };
    });
    const [a, b] = registries as [typeof registries[0], typeof registries[0]];
    t.equal(await a.scraped.promText(), await a.theirs.getSingleMetricAsString('svcproxy_t'), `${type}: the text`);
    t.equal(await a.ours.metrics(), await a.theirs.metrics(), `${type}: the registry's text`);
    const ours = AggregatorRegistry.aggregate([await a.ours.getMetricsAsJSON(), await b.ours.getMetricsAsJSON()]);
    const theirs = AggregatorRegistry.aggregate([await a.theirs.getMetricsAsJSON(), await b.theirs.getMetricsAsJSON()]);
    t.equal(await ours.metrics(), await theirs.metrics(), `${type}: combined across workers ('${aggregator}')`);
    const combined = `svcproxy_t{workload="shop/\\"quoted\\"",location="loc-0"} ${aggregator === 'min' ? 2 : 9}\n`;
    t.ok((await ours.metrics()).includes(combined), `${type}: ${combined.trim()}`);
  }
  const empty = new ScrapedMetric('svcproxy_none', 'nothing yet', 'counter', ['workload'], () => undefined);
  t.equal(await empty.promText(), '# HELP svcproxy_none nothing yet\n# TYPE svcproxy_none counter', 'no samples: the header alone, as prom-client writes it');
});

t.test("Metrics.text(): the registry's own text, written faster", async (t) => {
  const ready: [string, string, number][] = [['shop/api', 'aws-us-east-2', 2], ['shop/"web"', 'gcp-us-east1', 0]];
  const metrics = new Metrics({ readyReplicas: () => ready, connections: () => 3, defaultMetrics: true });
  metrics.countRequest('shop/api', 'aws-us-east-2', 200, 0.004);
  metrics.countRequest('shop/api', 'aws-us-east-2', 503, undefined);
  metrics.countRequest('shop/"web"', 'gcp-us-east1', 404, 0.2);
  metrics.ejections.inc({ workload: 'shop/api', location: 'aws-us-east-2' });
  const text = await metrics.text();
  // The default process metrics move between two reads; everything else must match byte for byte.
  const stable = (s: string): string => s.split('\n').filter((l) => !l.startsWith('svcproxy_process_')).join('\n');
  t.equal(stable(text), stable(await metrics.registry.metrics()));
  t.match(text, /^svcproxy_requests_total\{workload="shop\/api",location="aws-us-east-2",status_class="5xx"\} 1$/m);
  t.match(text, /^svcproxy_replicas_ready\{workload="shop\/\\"web\\"",location="gcp-us-east1"\} 0$/m);
  t.match(text, /^svcproxy_upstream_latency_seconds_count\{workload="shop\/api"\} 1$/m);
  t.match(text, /^svcproxy_open_connections 3$/m);
  t.match(text, /^# TYPE svcproxy_process_process_cpu_user_seconds_total counter$/m, "the default process metrics are there too");
  t.ok(text.endsWith('\n') && !text.endsWith('\n\n'), 'one line break at the end, as prom-client');
});
