/**
 * The route table's filter chains: every workload's, except in a standalone sidecar, which builds
 * the sidecar chain of its own workload only (it forwards to its own app; the other workloads'
 * sidecar filters run in their own sidecars), so their auth and rate-limit clients are never made.
 */
import t from 'tap';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { Metrics } from '../../src/admin/metrics.js';
import { SharedResources } from '../../src/filter/index.js';
import { buildRouteTable, type FilterFactories } from '../../src/proxy/routes.js';
import { testDeps } from '../local/fixtures.js';
import { records } from '../helpers/harness.js';

const other = { kind: 'workload', name: 'other', gvc: 'shop', tags: {}, spec: { type: 'standard', containers: [{ name: 'app', image: 'x', ports: [{ number: 80, protocol: 'http' }] }] } };

t.test('a standalone sidecar builds its own sidecar chain only', async (t) => {
  const snapshot = buildSnapshot(records({ replicas: { 'aws-us-east-2': ['127.0.0.1:1'] }, extra: [other] }), defaultSettings);
  const built: string[] = [];
  const factories: FilterFactories = {
    ingress: [(ctx) => void built.push(`ingress ${ctx.workload.key}`)],
    sidecar: [(ctx) => void built.push(`sidecar ${ctx.workload.key}`)],
  };
  const env = { deps: testDeps(), metrics: new Metrics({}), shared: new SharedResources() };
  buildRouteTable(snapshot, factories, env);
  t.same(built.sort(), ['ingress shop/api', 'ingress shop/other', 'sidecar shop/api', 'sidecar shop/other'], 'an ingress: every chain');
  built.length = 0;
  const table = buildRouteTable(snapshot, factories, { ...env, sidecarOf: 'shop/api' });
  t.same(built.sort(), ['ingress shop/api', 'ingress shop/other', 'sidecar shop/api'], "a sidecar of shop/api: the others' sidecar chains are not built");
  t.ok(table.sidecarChains.has('shop/api'));
  t.notOk(table.sidecarChains.has('shop/other'));
});
