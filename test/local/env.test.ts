import t from 'tap';
import { buildReplicaEnv, envPrefix, localToken, workloadNamespace, workloadVersion, type ReplicaEnvInput } from '../../src/local/env.js';
import { container } from './fixtures.js';

function input(overrides: Partial<ReplicaEnvInput> = {}): ReplicaEnvInput {
  return {
    vendor: 'svc',
    org: 'acme',
    gvc: { name: 'demo', alias: 'abcdefghijklm' },
    location: { name: 'aws-us-east-2', provider: 'aws' },
    workload: { name: 'api', canonicalHost: 'api-abcdefghijklm.app.localhost' },
    container: container({ image: 'nginx:1.27', ports: [{ number: 8080, protocol: 'http' }, { number: 9090, protocol: 'grpc' }] }),
    replica: 'api-0',
    ports: new Map([[8080, 40001], [9090, 40002]]),
    namespace: 'nsabc',
    workloadVersion: 7,
    token: 'local.tok',
    baseEnv: { PATH: '/usr/bin', HOME: '/home/me', PORT: '1', SVC_WORKLOAD: 'stale', CPLN_X: 'kept', UNSET: undefined },
    ...overrides,
  };
}

t.test('envPrefix', async (t) => {
  for (const [vendor, prefix] of [['svc', 'SVC_'], ['cpln', 'CPLN_'], ['my-co', 'MY_CO_']] as const) {
    t.equal(envPrefix(vendor), prefix, vendor);
  }
});

t.test('vendor svc: built-ins, ports, inherited environment', async (t) => {
  t.same(buildReplicaEnv(input()), {
    PATH: '/usr/bin',
    HOME: '/home/me',
    CPLN_X: 'kept',
    PORT: '40001',
    SVC_PORT_8080: '40001',
    SVC_PORT_9090: '40002',
    SVC_GLOBAL_ENDPOINT: 'api-abcdefghijklm.app.localhost',
    SVC_GVC: 'demo',
    SVC_GVC_ALIAS: 'abcdefghijklm',
    SVC_LOCATION: 'aws-us-east-2',
    SVC_NAMESPACE: 'nsabc',
    SVC_PROVIDER: 'aws',
    SVC_ORG: 'acme',
    SVC_WORKLOAD: 'api',
    SVC_WORKLOAD_VERSION: '7',
    SVC_TOKEN: 'local.tok',
    SVC_IMAGE: 'nginx:1.27',
    SVC_REPLICA: 'api-0',
  });
});

t.test('vendor cpln', async (t) => {
  const env = buildReplicaEnv(input({ vendor: 'cpln', baseEnv: { CPLN_ORG: 'parent', SVC_ORG: 'other' } }));
  t.equal(env.CPLN_ORG, 'acme', 'parent value replaced');
  t.equal(env.SVC_ORG, 'other', 'a foreign prefix is just inherited');
  t.equal(env.CPLN_PORT_9090, '40002');
  t.equal(env.CPLN_REPLICA, 'api-0');
  t.equal(env.CPLN_GLOBAL_ENDPOINT, 'api-abcdefghijklm.app.localhost');
  t.notOk('SVC_GVC' in env);
});

t.test('table: PORT and container env', async (t) => {
  const cases: { name: string; in: Partial<ReplicaEnvInput>; want: Record<string, string | undefined> }[] = [
    {
      name: 'PORT is the container first port, not the replica first',
      in: {
        container: container({ ports: [{ number: 9090, protocol: 'grpc' }] }),
      },
      want: { PORT: '40002', SVC_PORT_8080: '40001', SVC_PORT_9090: '40002' },
    },
    {
      name: 'no ports: no PORT, inherited PORT dropped',
      in: { container: container({ ports: [] }), ports: new Map() },
      want: { PORT: undefined, SVC_PORT_8080: undefined },
    },
    {
      name: 'container env wins over built-ins and PORT',
      in: {
        container: container({
          env: [
            { name: 'PORT', value: '3000' },
            { name: 'SVC_LOCATION', value: 'mine' },
            { name: 'PATH', value: '/opt/bin' },
            { name: 'GREETING', value: 'hi' },
          ],
        }),
      },
      want: { PORT: '3000', SVC_LOCATION: 'mine', PATH: '/opt/bin', GREETING: 'hi', SVC_PORT_8080: '40001' },
    },
    {
      name: 'no org, no image: empty strings',
      in: { org: undefined, container: container({ image: undefined }) },
      want: { SVC_ORG: '', SVC_IMAGE: '' },
    },
  ];
  for (const c of cases) {
    const env = buildReplicaEnv(input(c.in));
    for (const [k, v] of Object.entries(c.want)) t.equal(env[k], v, `${c.name}: ${k}`);
  }
});

t.test('namespace: stable, looks random, differs per workload', async (t) => {
  const a = workloadNamespace('demo/api');
  t.equal(a, workloadNamespace('demo/api'));
  t.match(a, /^[a-z][a-z2-7]{15}$/);
  t.not(a, workloadNamespace('demo/web'));
});

t.test('workload version: content-derived, ignores scaling and bookkeeping', async (t) => {
  const record = {
    kind: 'workload',
    name: 'api',
    gvc: 'demo',
    version: 3,
    tags: { suspend: 'x' },
    spec: {
      containers: [{ name: 'app', image: 'a:1' }],
      defaultOptions: { autoscaling: { minScale: 1 }, timeoutSeconds: 5 },
      localOptions: [{ location: 'aws-us-east-2', autoscaling: { minScale: 2 } }],
    },
  };
  const v = workloadVersion(record);
  t.ok(Number.isInteger(v) && v > 0 && v < 2 ** 31);
  t.equal(workloadVersion({ ...record, version: 4, status: { x: 1 } }), v, 'bookkeeping ignored');
  t.equal(
    workloadVersion({
      spec: { ...record.spec, localOptions: [{ location: 'aws-us-east-2', autoscaling: { minScale: 9 }, suspend: true }], defaultOptions: { timeoutSeconds: 5, autoscaling: { maxScale: 3 } } },
      tags: record.tags,
      gvc: 'demo',
      name: 'api',
      kind: 'workload',
    }),
    v,
    'scaling and key order ignored',
  );
  t.not(workloadVersion({ ...record, spec: { ...record.spec, containers: [{ name: 'app', image: 'a:2' }] } }), v, 'image change');
  t.not(workloadVersion({ ...record, tags: {} }), v, 'a tag named suspend is content');
  t.not(workloadVersion({ ...record, spec: { ...record.spec, defaultOptions: { timeoutSeconds: 6 } } }), v, 'timeout change');
});

t.test('token: opaque, per workload and secret', async (t) => {
  const a = localToken('s1', 'demo/api');
  t.match(a, /^local\.[A-Za-z0-9_-]{43}$/);
  t.equal(a, localToken('s1', 'demo/api'));
  t.not(a, localToken('s2', 'demo/api'));
  t.not(a, localToken('s1', 'demo/web'));
});
