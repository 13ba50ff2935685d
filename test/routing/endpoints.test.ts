import t from 'tap';
import { MESH_NOTE, formatEndpointsText, listEndpoints, type Endpoint } from '../../src/routing/endpoints.js';
import { buildHostIndex, resolveHost } from '../../src/routing/hosts.js';
import { ReplicaRegistry } from '../../src/routing/replicas.js';
import { buildReplica, buildSnapshot } from '../helpers/snapshot.js';

const snapshot = buildSnapshot({
  gvcs: [
    { name: 'shop', alias: 'abcdefghijklm', locations: ['aws-us-west-2', 'gcp-us-east1'], aliasWorkload: 'web' },
    { name: 'ops', alias: 'opsopsopsopso', endpointNamingFormat: 'legacy', aliasWorkload: 'off' },
  ],
  workloads: [
    { name: 'web', containers: [{ ports: [8080, 9090] }, { name: 'metrics', ports: [9090, 9100] }] },
    {
      name: 'db',
      replicaDirect: true,
      ports: [5432],
      defaultOptions: { minScale: 2 },
      localOptions: { 'gcp-us-east1': { minScale: 1 } },
    },
    { name: 'off', gvc: 'ops', defaultOptions: { suspend: true } },
  ],
  domains: [
    {
      host: 'shop.example.com',
      ports: [
        { number: 443, routes: [{ prefix: '/', workload: 'web' }, { prefix: '/db', workload: 'db' }] },
        { number: 8443, routes: [{ prefix: '/', workload: 'web' }] },
      ],
    },
    { host: 'ops.example.com', routes: [{ workload: 'ops/off' }] },
  ],
});

const line = (e: Endpoint): string =>
  [e.gvc, e.workload, e.kind, e.host, e.location ?? '-', e.replica ?? '-'].join(' ');

t.test('listEndpoints from minScale', async (t) => {
  t.same(listEndpoints(snapshot).map(line), [
    'shop web canonical web-abcdefghijklm.app.localhost - -',
    'shop web alias abcdefghijklm.app.localhost - -',
    'shop web location web-abcdefghijklm.aws-us-west-2.direct.localhost aws-us-west-2 -',
    'shop web location web-abcdefghijklm.gcp-us-east1.direct.localhost gcp-us-east1 -',
    'shop web internal web.shop.internal.localhost:8080 - -',
    'shop web internal web.shop.internal.localhost:9090 - -',
    'shop web internal web.shop.internal.localhost:9100 - -',
    'shop web internal-replica replica-0.web.aws-us-west-2.shop.internal.localhost:8080 aws-us-west-2 0',
    'shop web internal-replica replica-0.web.aws-us-west-2.shop.internal.localhost:9090 aws-us-west-2 0',
    'shop web internal-replica replica-0.web.aws-us-west-2.shop.internal.localhost:9100 aws-us-west-2 0',
    'shop web internal-replica replica-0.web.gcp-us-east1.shop.internal.localhost:8080 gcp-us-east1 0',
    'shop web internal-replica replica-0.web.gcp-us-east1.shop.internal.localhost:9090 gcp-us-east1 0',
    'shop web internal-replica replica-0.web.gcp-us-east1.shop.internal.localhost:9100 gcp-us-east1 0',
    'shop web domain shop.example.com - -',
    'shop db canonical db-abcdefghijklm.app.localhost - -',
    'shop db location db-abcdefghijklm.aws-us-west-2.direct.localhost aws-us-west-2 -',
    'shop db location db-abcdefghijklm.gcp-us-east1.direct.localhost gcp-us-east1 -',
    'shop db replica db-abcdefghijklm-0.aws-us-west-2.direct.localhost aws-us-west-2 0',
    'shop db replica db-abcdefghijklm-1.aws-us-west-2.direct.localhost aws-us-west-2 1',
    'shop db replica db-abcdefghijklm-0.gcp-us-east1.direct.localhost gcp-us-east1 0',
    'shop db internal db.shop.internal.localhost:5432 - -',
    'shop db internal-replica replica-0.db.aws-us-west-2.shop.internal.localhost:5432 aws-us-west-2 0',
    'shop db internal-replica replica-1.db.aws-us-west-2.shop.internal.localhost:5432 aws-us-west-2 1',
    'shop db internal-replica replica-0.db.gcp-us-east1.shop.internal.localhost:5432 gcp-us-east1 0',
    'shop db domain shop.example.com - -',
    // suspended: no alias endpoint (it routes nowhere), no replicas; canonical still answers (503)
    'ops off canonical off-ops.app.localhost - -',
    'ops off location off-opsopsopsopso.aws-us-west-2.direct.localhost aws-us-west-2 -',
    'ops off internal off.ops.internal.localhost:8080 - -',
    'ops off domain ops.example.com - -',
  ]);
});

t.test('json shape: optional members only when set', async (t) => {
  const [canonical] = listEndpoints(snapshot);
  t.same(Object.keys(canonical!).sort(), ['gvc', 'host', 'kind', 'workload']);
  const replica = listEndpoints(snapshot).find((e) => e.kind === 'replica')!;
  t.same(JSON.parse(JSON.stringify(replica)), {
    workload: 'db',
    gvc: 'shop',
    kind: 'replica',
    host: 'db-abcdefghijklm-0.aws-us-west-2.direct.localhost',
    location: 'aws-us-west-2',
    replica: 0,
  });
});

t.test('replica indexes from the registry, then deployment records', async (t) => {
  const registry = new ReplicaRegistry();
  registry.replace('up', [
    buildReplica({ workload: 'shop/db', location: 'gcp-us-east1', index: 0 }),
    buildReplica({ workload: 'shop/db', location: 'gcp-us-east1', index: 4, ready: false }),
  ]);
  const replicas = listEndpoints(snapshot, registry).filter((e) => e.kind === 'replica' && e.workload === 'db');
  t.same(replicas.map((e) => `${e.location} ${e.replica}`), ['gcp-us-east1 0', 'gcp-us-east1 4']);

  const deployed = buildSnapshot({
    gvcs: [{ name: 'g', locations: ['aws-us-west-2', 'gcp-us-east1'] }],
    workloads: [{ name: 'db', replicaDirect: true }],
    deployments: { db: [{ location: 'gcp-us-east1' }, { location: 'gcp-us-east1' }, { location: 'aws-us-west-2' }] },
  });
  t.same(
    listEndpoints(deployed)
      .filter((e) => e.kind === 'replica')
      .map((e) => `${e.location} ${e.replica}`),
    ['aws-us-west-2 0', 'gcp-us-east1 0', 'gcp-us-east1 1'],
  );
});

t.test('every listed host resolves to its workload on the mesh listener', async (t) => {
  const index = buildHostIndex(snapshot);
  for (const e of listEndpoints(snapshot)) {
    const target = resolveHost(index, e.host, 'mesh', 443);
    t.ok(target, e.host);
    if (!target) continue;
    if (target.kind === 'domain') {
      t.ok(target.port.routes.some((r) => r.workload === `${e.gvc}/${e.workload}`), e.host);
      continue;
    }
    t.equal(target.kind, e.kind, e.host);
    t.equal(target.workload.key, `${e.gvc}/${e.workload}`, e.host);
    if ('location' in target) t.equal(target.location, e.location, e.host);
    if ('index' in target) t.equal(target.index, e.replica, e.host);
  }
});

t.test('formatEndpointsText', async (t) => {
  const text = formatEndpointsText(listEndpoints(snapshot));
  const lines = text.split('\n');
  t.equal(lines[0], 'shop/web');
  t.match(lines[1]!, /^ {2}KIND +HOST +LOCATION +REPLICA$/);
  t.match(lines[2]!, /^ {2}canonical +web-abcdefghijklm\.app\.localhost$/);
  t.ok(lines.includes('shop/db') && lines.includes('ops/off'), 'one block per workload');
  t.match(text, /\n {2}replica +db-abcdefghijklm-1\.aws-us-west-2\.direct\.localhost +aws-us-west-2 +1\n/);
  t.ok(text.endsWith('\n'));
  t.notOk(lines.some((l) => l.endsWith(' ')), 'no trailing spaces');
  t.equal(formatEndpointsText([]), 'no endpoints\n');
  t.ok(text.endsWith(`${MESH_NOTE}\n`), 'says which names need the mesh');
  const external = listEndpoints(snapshot).filter((e) => !e.kind.startsWith('internal'));
  t.notOk(formatEndpointsText(external).includes(MESH_NOTE), 'only when there are internal names');
});

t.test('an ignored workload (svc/ignore) has no endpoint', async (t) => {
  const ignored = buildSnapshot({
    gvcs: [{ name: 'shop', alias: 'abcdefghijklm', locations: ['aws-us-west-2'] }],
    workloads: [{ name: 'web' }, { name: 'old', tags: { 'svc/ignore': 'true' } }],
  });
  const list = listEndpoints(ignored);
  t.ok(list.some((e) => e.workload === 'web'));
  t.notOk(list.some((e) => e.workload === 'old'), 'none of its names is listed');
});
