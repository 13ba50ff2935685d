import t from 'tap';
import {
  buildHostIndex,
  canonicalHostFor,
  parseHostHeader,
  resolveHost,
  type HostTarget,
  type Listener,
} from '../../src/routing/hosts.js';
import { buildSnapshot } from '../helpers/snapshot.js';

const LONG = 'a-very-long-workload-name-that-goes-well-beyond-the-dns-label-limit';

const snapshot = buildSnapshot({
  org: { name: 'acme', endpointPrefix: 'acme-x1' },
  gvcs: [
    {
      name: 'shop',
      alias: 'abcdefghijklm',
      locations: ['aws-us-west-2', 'gcp-us-east1'],
      aliasWorkload: 'my-api-v2',
    },
    { name: 'legacy-gvc', alias: 'zyxwvutsrqpon', endpointNamingFormat: 'legacy' },
    { name: 'orgy', alias: 'orgalias12345', endpointNamingFormat: 'org' },
    { name: 'sleepy', alias: 'sleepy1234567', aliasWorkload: 'zzz' },
    { name: 'noalias', alias: 'noalias123456' },
  ],
  workloads: [
    {
      name: 'my-api-v2',
      containers: [{ ports: [8080, { number: 9090, protocol: 'grpc' }] }, { name: 'side', ports: [7000] }],
    },
    { name: 'my-api' },
    { name: 'stateful-db', replicaDirect: true, ports: [5432] },
    { name: 'noports', containers: [{ ports: [] }] },
    { name: LONG },
    { name: 'abc', gvc: 'legacy-gvc' },
    { name: 'svc', gvc: 'orgy' },
    { name: 'zzz', gvc: 'sleepy', defaultOptions: { suspend: true } },
    { name: 'api', gvc: 'noalias', localOptions: {} },
  ],
  domains: [
    {
      host: 'API.Example.com',
      ports: [
        { number: 443, routes: [{ prefix: '/', workload: 'my-api' }] },
        { number: 8443, routes: [{ prefix: '/', workload: 'my-api-v2' }] },
      ],
    },
  ],
});
const index = buildHostIndex(snapshot);

/** A target as a short string, so the table reads at a glance. */
function show(target: HostTarget | undefined): string | undefined {
  if (!target) return undefined;
  switch (target.kind) {
    case 'canonical':
    case 'alias':
      return `${target.kind} ${target.workload.key}`;
    case 'location':
      return `location ${target.workload.key} ${target.location}`;
    case 'replica':
      return `replica ${target.workload.key} ${target.location} ${target.index}`;
    case 'internal':
      return `internal ${target.workload.key} :${target.port}`;
    case 'internal-replica':
      return `internal-replica ${target.workload.key} ${target.location} ${target.index} :${target.port}`;
    case 'domain':
      return `domain ${target.domain.host} :${target.port.number}`;
  }
}

const cases: [string, string, Listener, number | undefined, string | undefined][] = [
  // canonical, default format; hyphenated names never split on the first hyphen
  ['canonical', 'my-api-v2-abcdefghijklm.app.localhost', 'external', undefined, 'canonical shop/my-api-v2'],
  ['shorter name sharing a prefix', 'my-api-abcdefghijklm.app.localhost', 'external', undefined, 'canonical shop/my-api'],
  ['case-insensitive', 'My-API-v2-ABCDEFGHIJKLM.App.LocalHost', 'external', undefined, 'canonical shop/my-api-v2'],
  ['trailing dot', 'my-api-v2-abcdefghijklm.app.localhost.', 'external', undefined, 'canonical shop/my-api-v2'],
  ['port ignored', 'my-api-v2-abcdefghijklm.app.localhost:8080', 'external', undefined, 'canonical shop/my-api-v2'],
  ['trailing dot and port', 'my-api-v2-abcdefghijklm.app.localhost.:443', 'external', undefined, 'canonical shop/my-api-v2'],
  ['label over 63 chars', `${LONG}-abcdefghijklm.app.localhost`, 'external', undefined, `canonical shop/${LONG}`],
  ['canonical on the mesh listener', 'my-api-abcdefghijklm.app.localhost', 'mesh', undefined, 'canonical shop/my-api'],
  ['unknown alias', 'my-api-v2-zzzzzzzzzzzzz.app.localhost', 'external', undefined, undefined],
  ['unknown workload', 'nope-abcdefghijklm.app.localhost', 'external', undefined, undefined],
  ['alias alone is not canonical', 'my-abcdefghijklm.app.localhost', 'external', undefined, undefined],
  ['wrong domain', 'my-api-v2-abcdefghijklm.example.com', 'external', undefined, undefined],
  ['legacy form for a default-format gvc', 'my-api-v2-shop.app.localhost', 'external', undefined, undefined],
  ['org form for a default-format gvc', 'my-api-v2-abcdefghijklm.acme-x1.app.localhost', 'external', undefined, undefined],
  // legacy format
  ['legacy', 'abc-legacy-gvc.app.localhost', 'external', undefined, 'canonical legacy-gvc/abc'],
  ['default form for a legacy gvc', 'abc-zyxwvutsrqpon.app.localhost', 'external', undefined, undefined],
  // org format
  ['org prefix', 'svc-orgalias12345.acme-x1.app.localhost', 'external', undefined, 'canonical orgy/svc'],
  ['default form for an org gvc', 'svc-orgalias12345.app.localhost', 'external', undefined, undefined],
  ['wrong org prefix', 'svc-orgalias12345.other.app.localhost', 'external', undefined, undefined],
  // GVC alias host
  ['gvc alias', 'abcdefghijklm.app.localhost', 'external', undefined, 'alias shop/my-api-v2'],
  ['gvc alias, upper case', 'ABCDEFGHIJKLM.APP.LOCALHOST', 'external', undefined, 'alias shop/my-api-v2'],
  ['alias to a suspended workload', 'sleepy1234567.app.localhost', 'external', undefined, undefined],
  ['gvc without alias workload', 'noalias123456.app.localhost', 'external', undefined, undefined],
  ['unknown gvc alias', 'qqqqqqqqqqqqq.app.localhost', 'external', undefined, undefined],
  // location hosts
  ['location', 'my-api-v2-abcdefghijklm.gcp-us-east1.direct.localhost', 'external', undefined, 'location shop/my-api-v2 gcp-us-east1'],
  ['location, legacy gvc uses the alias', 'abc-zyxwvutsrqpon.aws-us-west-2.direct.localhost', 'external', undefined, 'location legacy-gvc/abc aws-us-west-2'],
  ['location not in the gvc', 'my-api-v2-abcdefghijklm.azure-eastus.direct.localhost', 'external', undefined, undefined],
  ['location host under the app domain', 'my-api-v2-abcdefghijklm.gcp-us-east1.app.localhost', 'external', undefined, undefined],
  // replica-direct
  ['replica', 'stateful-db-abcdefghijklm-3.aws-us-west-2.direct.localhost', 'external', undefined, 'replica shop/stateful-db aws-us-west-2 3'],
  ['replica 0 with port', 'stateful-db-abcdefghijklm-0.gcp-us-east1.direct.localhost:443', 'external', undefined, 'replica shop/stateful-db gcp-us-east1 0'],
  ['replica, leading zero', 'stateful-db-abcdefghijklm-03.aws-us-west-2.direct.localhost', 'external', undefined, undefined],
  ['replica, not a number', 'stateful-db-abcdefghijklm-x.aws-us-west-2.direct.localhost', 'external', undefined, undefined],
  ['replica, location not in the gvc', 'stateful-db-abcdefghijklm-1.azure-eastus.direct.localhost', 'external', undefined, undefined],
  ['replica-direct disabled', 'my-api-v2-abcdefghijklm-0.aws-us-west-2.direct.localhost', 'external', undefined, undefined],
  // internal
  ['internal, default port', 'my-api-v2.shop.internal.localhost', 'mesh', undefined, 'internal shop/my-api-v2 :8080'],
  ['internal, declared port', 'my-api-v2.shop.internal.localhost:9090', 'mesh', undefined, 'internal shop/my-api-v2 :9090'],
  ['internal, port of a second container', 'my-api-v2.shop.internal.localhost:7000', 'mesh', undefined, 'internal shop/my-api-v2 :7000'],
  ['internal, undeclared port', 'my-api-v2.shop.internal.localhost:1234', 'mesh', undefined, undefined],
  ['internal, no declared port', 'noports.shop.internal.localhost', 'mesh', undefined, undefined],
  ['internal, case and trailing dot', 'MY-API.Shop.Internal.Localhost.:8080', 'mesh', undefined, 'internal shop/my-api :8080'],
  ['internal on the external listener', 'my-api-v2.shop.internal.localhost', 'external', undefined, undefined],
  ['internal, wrong gvc', 'my-api-v2.orgy.internal.localhost', 'mesh', undefined, undefined],
  ['internal replica', 'replica-2.my-api-v2.gcp-us-east1.shop.internal.localhost:9090', 'mesh', undefined, 'internal-replica shop/my-api-v2 gcp-us-east1 2 :9090'],
  ['internal replica, default port', 'replica-0.stateful-db.aws-us-west-2.shop.internal.localhost', 'mesh', undefined, 'internal-replica shop/stateful-db aws-us-west-2 0 :5432'],
  ['internal replica, undeclared port', 'replica-0.stateful-db.aws-us-west-2.shop.internal.localhost:80', 'mesh', undefined, undefined],
  ['internal replica, location not in the gvc', 'replica-0.my-api.azure-eastus.shop.internal.localhost', 'mesh', undefined, undefined],
  ['internal replica, bad index', 'replica-x.my-api.aws-us-west-2.shop.internal.localhost', 'mesh', undefined, undefined],
  ['internal replica on the external listener', 'replica-0.my-api.aws-us-west-2.shop.internal.localhost', 'external', undefined, undefined],
  // custom domains: the listener's port picks the domain port, else the first one
  ['domain, no listener port', 'api.example.com', 'external', undefined, 'domain api.example.com :443'],
  ['domain, matching listener port', 'api.example.com:8443', 'external', 8443, 'domain api.example.com :8443'],
  ['domain, other listener port', 'API.example.com.', 'external', 8080, 'domain api.example.com :443'],
  ['domain on the mesh listener', 'api.example.com', 'mesh', 443, 'domain api.example.com :443'],
  ['unknown domain', 'www.example.com', 'external', 443, undefined],
  // malformed hosts never throw
  ['ipv6 literal', '[::1]:8080', 'external', undefined, undefined],
  ['ipv6 literal without port', '[::1]', 'mesh', undefined, undefined],
  ['unclosed ipv6 literal', '[::1', 'external', undefined, undefined],
  ['bare ipv6', '::1', 'external', undefined, undefined],
  ['empty', '', 'external', undefined, undefined],
  ['bad port', 'my-api-v2-abcdefghijklm.app.localhost:99999', 'external', undefined, undefined],
  ['only a dot', '.', 'external', undefined, undefined],
  ['ip address', '127.0.0.1:8080', 'external', undefined, undefined],
];

t.test('resolveHost', async (t) => {
  for (const [name, host, listener, listenerPort, want] of cases) {
    t.equal(show(resolveHost(index, host, listener, listenerPort)), want, `${name}: ${host} (${listener})`);
  }
});

t.test('fixed targets are prebuilt (no allocation per request)', async (t) => {
  const a = resolveHost(index, 'my-api-v2-abcdefghijklm.app.localhost', 'external');
  const b = resolveHost(index, 'MY-API-V2-ABCDEFGHIJKLM.app.localhost:443', 'external');
  t.equal(a, b);
});

t.test('parseHostHeader', async (t) => {
  const table: [string, ReturnType<typeof parseHostHeader>][] = [
    ['example.com', { host: 'example.com' }],
    ['Example.COM:8080', { host: 'example.com', port: 8080 }],
    ['example.com.', { host: 'example.com' }],
    ['example.com.:80', { host: 'example.com', port: 80 }],
    ['example.com:', { host: 'example.com' }],
    ['[::1]:8080', { host: '[::1]', port: 8080 }],
    ['[2001:DB8::1]', { host: '[2001:db8::1]' }],
    ['[::1]x', undefined],
    ['[::1', undefined],
    ['::1', undefined],
    ['', undefined],
    [':80', undefined],
    ['example.com:65536', undefined],
    ['example.com:0', { host: 'example.com', port: 0 }],
    ['example.com:-1', undefined],
    ['example.com:8o', undefined],
    ['example.com:123456', undefined],
  ];
  for (const [raw, want] of table) t.same(parseHostHeader(raw), want, JSON.stringify(raw));
});

t.test('canonicalHostFor agrees with each naming format', async (t) => {
  const s = snapshot.settings;
  t.equal(canonicalHostFor(s, snapshot.org, snapshot.gvcs.get('shop')!, 'W'), 'w-abcdefghijklm.app.localhost');
  t.equal(canonicalHostFor(s, snapshot.org, snapshot.gvcs.get('legacy-gvc')!, 'w'), 'w-legacy-gvc.app.localhost');
  t.equal(canonicalHostFor(s, snapshot.org, snapshot.gvcs.get('orgy')!, 'w'), 'w-orgalias12345.acme-x1.app.localhost');
  t.equal(
    canonicalHostFor(s, { name: 'acme' }, snapshot.gvcs.get('orgy')!, 'w'),
    'w-orgalias12345.app.localhost',
    'org format without an endpoint prefix falls back to default (as the config compiler)',
  );
  t.equal(
    canonicalHostFor(s, undefined, snapshot.gvcs.get('orgy')!, 'w'),
    'w-orgalias12345.app.localhost',
    'org format without an org record falls back to default',
  );
});

t.test('custom settings domains', async (t) => {
  const snap = buildSnapshot({
    settings: { appDomain: 'cpln.app', directDomain: 'cpln.direct', internalDomain: 'cpln.local' },
    gvcs: [{ name: 'g', alias: 'aaaaaaaaaaaaa' }],
    workloads: [{ name: 'w' }],
  });
  const idx = buildHostIndex(snap);
  t.equal(show(resolveHost(idx, 'w-aaaaaaaaaaaaa.cpln.app', 'external')), 'canonical g/w');
  t.equal(show(resolveHost(idx, 'w-aaaaaaaaaaaaa.aws-us-west-2.cpln.direct', 'external')), 'location g/w aws-us-west-2');
  t.equal(show(resolveHost(idx, 'w.g.cpln.local:8080', 'mesh')), 'internal g/w :8080');
  t.equal(resolveHost(idx, 'w-aaaaaaaaaaaaa.app.localhost', 'external'), undefined);
});

t.test('colliding legacy names: first claim wins and is reported', async (t) => {
  const snap = buildSnapshot({
    gvcs: [
      { name: 'c', endpointNamingFormat: 'legacy' },
      { name: 'b-c', endpointNamingFormat: 'legacy' },
    ],
    workloads: [
      { name: 'a-b', gvc: 'c' },
      { name: 'a', gvc: 'b-c' },
    ],
  });
  const idx = buildHostIndex(snap);
  t.equal(show(resolveHost(idx, 'a-b-c.app.localhost', 'external')), 'canonical c/a-b');
  t.same(idx.conflicts, ['a-b-c.app.localhost']);
});

t.test('a domain record cannot shadow a built-in name', async (t) => {
  const snap = buildSnapshot({
    gvcs: [{ name: 'g', alias: 'aaaaaaaaaaaaa' }],
    workloads: [{ name: 'w' }, { name: 'x' }],
    domains: [{ host: 'w-aaaaaaaaaaaaa.app.localhost', routes: [{ workload: 'x' }] }],
  });
  const idx = buildHostIndex(snap);
  t.equal(show(resolveHost(idx, 'w-aaaaaaaaaaaaa.app.localhost', 'external')), 'canonical g/w');
  t.same(idx.conflicts, ['w-aaaaaaaaaaaaa.app.localhost']);
});

t.test('a domain without ports routes nowhere', async (t) => {
  const snap = buildSnapshot({ workloads: [{ name: 'w' }], domains: [{ host: 'x.example.com', ports: [] }] });
  t.equal(resolveHost(buildHostIndex(snap), 'x.example.com', 'external', 443), undefined);
});
