/**
 * Tracing settings compiled per GVC: endpoint forms (gRPC `host:port`, HTTP URLs with the default
 * `/v1/traces`), provider precedence, credentials, controlplane with and without a collector, the
 * org's tracing as the GVC's default, custom tags in both shapes, `svc/tracingDisabled`, and one
 * exporter shared by GVCs that send to the same place at the same sampling.
 */
import t from 'tap';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { authorizationValue, compileTracingPlan, exporterTarget } from '../../src/tracing/config.js';
import { records } from '../helpers/harness.js';

t.test('endpoint forms', async (t) => {
  const cases: [string, ReturnType<typeof exporterTarget>][] = [
    ['collector:4317', { protocol: 'grpc', url: 'http://collector:4317' }],
    ['10.0.0.7:4317', { protocol: 'grpc', url: 'http://10.0.0.7:4317' }],
    ['[::1]:4317', { protocol: 'grpc', url: 'http://[::1]:4317' }],
    ['http://collector:4318', { protocol: 'http', url: 'http://collector:4318/v1/traces' }],
    ['https://collector:4318/', { protocol: 'http', url: 'https://collector:4318/v1/traces' }],
    ['https://ingest.example.com/otlp/v1/traces', { protocol: 'http', url: 'https://ingest.example.com/otlp/v1/traces' }],
    ['collector', undefined],
    ['ftp://collector:21', undefined],
  ];
  for (const [endpoint, expected] of cases) t.same(exporterTarget(endpoint), expected, endpoint);
});

t.test('credentials become an authorization value', async (t) => {
  t.same(authorizationValue('abc123'), { value: 'Bearer abc123' });
  t.same(authorizationValue('Basic dXNlcjpwdw=='), { value: 'Basic dXNlcjpwdw==' }, 'a value with its scheme is sent as written');
  t.same(authorizationValue(''), {});
  t.match(authorizationValue('//secret/otel-token'), { note: /secret link/ });
  t.notOk(authorizationValue('/org/acme/secret/otel-token').value);
});

function snapshot(gvcTracing: unknown, extra: { orgTracing?: unknown; tags?: Record<string, unknown>; more?: Record<string, unknown>[] } = {}) {
  const recs = records({
    replicas: { 'aws-us-east-2': ['127.0.0.1:1'] },
    ...(gvcTracing === undefined ? {} : { gvcSpec: { tracing: gvcTracing } }),
    ...(extra.tags ? { tags: extra.tags } : {}),
    ...(extra.more ? { extra: extra.more } : {}),
  });
  if (extra.orgTracing) recs.find((r) => r.kind === 'org')!.spec = { tracing: extra.orgTracing };
  return buildSnapshot(recs, defaultSettings);
}

t.test('provider precedence, sampling and custom tags', async (t) => {
  const plan = compileTracingPlan(snapshot({
    sampling: 25,
    customTags: { team: 'payments', tier: { literal: { value: 'gold' } }, n: 3 },
    provider: { otel: { endpoint: 'otel:4317' }, datadog: { endpoint: 'http://dd:4318', credentials: 'k' }, controlplane: {} },
  }));
  const w = plan.workloads.get('shop/api')!;
  const spec = plan.exporters.get(w.exporter)!;
  t.match(spec, { protocol: 'grpc', url: 'http://otel:4317', ratio: 0.25 }, 'otel wins over a vendor member and controlplane');
  t.notOk(spec.authorization);
  t.same(w.attributes, { team: 'payments', tier: 'gold', n: '3', 'svc.workload': 'api', 'svc.gvc': 'shop' }, 'both custom tag shapes, as strings');

  const vendor = compileTracingPlan(snapshot({ provider: { datadog: { endpoint: 'http://dd:4318', credentials: 'k' }, controlplane: {} } }));
  t.match([...vendor.exporters.values()][0], { protocol: 'http', url: 'http://dd:4318/v1/traces', authorization: 'Bearer k', ratio: 1 }, 'a provider vendor member; sampling defaults to 100');

  const legacy = compileTracingPlan(snapshot({ sampling: 5, lightstep: { endpoint: 'ls:4317', credentials: 'Bearer x' } }));
  t.match([...legacy.exporters.values()][0], { protocol: 'grpc', url: 'http://ls:4317', authorization: 'Bearer x', ratio: 0.05 }, 'the legacy spec.tracing.<vendor> member');
});

t.test('controlplane needs a collector', async (t) => {
  const without = compileTracingPlan(snapshot({ provider: { controlplane: {} } }));
  t.equal(without.workloads.size, 0, 'not traced without --tracing-collector');
  t.match(without.notes, [/gvc shop: .*--tracing-collector/]);
  const withCollector = compileTracingPlan(snapshot({ provider: { controlplane: {} } }), { collector: 'collector.internal:4317' });
  t.match([...withCollector.exporters.values()], [{ protocol: 'grpc', url: 'http://collector.internal:4317' }]);
  t.same(withCollector.notes, []);
});

t.test('the org default, tracingDisabled, and shared exporters', async (t) => {
  const fromOrg = compileTracingPlan(snapshot(undefined, { orgTracing: { sampling: 10, provider: { otel: { endpoint: 'org:4317' } } } }));
  t.match([...fromOrg.exporters.values()], [{ url: 'http://org:4317', ratio: 0.1 }], 'a GVC without tracing takes the org\'s');
  const own = compileTracingPlan(snapshot({ provider: { otel: { endpoint: 'gvc:4317' } } }, { orgTracing: { provider: { otel: { endpoint: 'org:4317' } } } }));
  t.match([...own.exporters.values()], [{ url: 'http://gvc:4317' }], 'the GVC\'s own wins');

  const disabled = compileTracingPlan(snapshot({ provider: { otel: { endpoint: 'x:1' } } }, { tags: { 'svc/tracingDisabled': true } }));
  t.equal(disabled.workloads.size, 0, 'svc/tracingDisabled');

  const other = { kind: 'workload', name: 'web', gvc: 'shop', spec: { type: 'standard', containers: [{ name: 'app', image: 'x', ports: [{ number: 80, protocol: 'http' }] }] } };
  const shared = compileTracingPlan(snapshot({ provider: { otel: { endpoint: 'x:1' } } }, { more: [other] }));
  t.equal(shared.workloads.size, 2);
  t.equal(shared.exporters.size, 1, 'workloads of one GVC share an exporter');
  t.equal(new Set([...shared.workloads.values()].map((w) => w.exporter)).size, 1);
});

t.test('no tracing anywhere: an empty plan', async (t) => {
  const plan = compileTracingPlan(snapshot(undefined));
  t.equal(plan.exporters.size + plan.workloads.size + plan.notes.length, 0);
});
