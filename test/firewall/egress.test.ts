/**
 * The egress firewall (src/firewall/egress.ts) as tables, one per rule: the default deny, host-name
 * rules (exact, `*.` at any depth, case and trailing dot), CIDR rules (IPv4-mapped IPv6 as IPv4),
 * `outboundAllowPort` replacing both port sets, the blocked list winning over both paths, the
 * choice among several answers, lookup failures, malformed destinations, and the system resolver
 * on `localhost`. Lookups are injected functions that record what they were asked; the generated
 * and mutated cases against an independent oracle are in egress-oracle.test.ts.
 */
import t, { type Test } from 'tap';
import type { WorkloadModel } from '../../src/config/model.js';
import { egressPolicy, normalizeHostname, systemLookup, type EgressDestination, type Lookup } from '../../src/firewall/egress.js';
import { buildSnapshot, workloadOf } from '../helpers/snapshot.js';

/** Only `firewallConfig` is read; each call makes a new model, so nothing is shared through the cache. */
function workload(external: Record<string, unknown> | undefined): WorkloadModel {
  return { firewallConfig: external === undefined ? undefined : { external } } as unknown as WorkloadModel;
}

/** A lookup from a table; names not in it fail as getaddrinfo does. Records every name asked. */
function table(answers: Record<string, readonly string[]>): Lookup & { asked: string[] } {
  const asked: string[] = [];
  const lookup = async (host: string): Promise<readonly string[]> => {
    asked.push(host);
    const a = answers[host];
    if (a === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
    return a;
  };
  return Object.assign(lookup, { asked });
}

const http = (host: string, port = 80): EgressDestination => ({ host, port, protocol: 'http' });
const tunnel = (host: string, port: number): EgressDestination => ({ host, port, protocol: port === 443 ? 'https' : 'tcp' });

type Expect = { address: string; rule: string } | { reason: RegExp };

async function expectVerdict(t: Test, external: Record<string, unknown> | undefined, cases: [EgressDestination, Expect, string?][], answers: Record<string, readonly string[]> = {}) {
  const policy = egressPolicy(workload(external));
  for (const [dest, want, note] of cases) {
    const v = await policy.check(dest, table(answers));
    const name = `${dest.protocol} ${dest.host}:${dest.port}${note ? ` (${note})` : ''}`;
    if ('reason' in want) {
      t.equal(v.allowed, false, `${name}: denied`);
      if (!v.allowed) t.match(v.reason, want.reason, `${name}: reason`);
    } else t.same(v, { allowed: true, ...want }, `${name}: allowed`);
  }
}

t.test('no allow rule: everything is denied without a lookup', async (t) => {
  const configs: [string, Record<string, unknown> | undefined][] = [
    ['no firewallConfig', undefined],
    ['empty external', {}],
    ['empty lists', { outboundAllowCIDR: [], outboundAllowHostname: [], outboundBlockedCIDR: [], outboundAllowPort: [] }],
    ['only a blocked list', { outboundBlockedCIDR: ['10.0.0.0/8'] }],
    ['only ports', { outboundAllowPort: [{ protocol: 'tcp', number: 443 }] }],
    ['only unreadable entries', { outboundAllowCIDR: ['nope'], outboundAllowHostname: ['*'] }],
  ];
  for (const [name, external] of configs) {
    const policy = egressPolicy(workload(external));
    t.equal(policy.denyAll, true, `${name}: denyAll`);
    const lookup = table({ 'example.com': ['93.184.216.34'] });
    for (const dest of [http('example.com'), tunnel('example.com', 443), http('127.0.0.1'), tunnel('::1', 22)]) {
      const v = await policy.check(dest, lookup);
      t.same(v.allowed, false, `${name}: ${dest.host} denied`);
    }
    t.same(lookup.asked, [], `${name}: no lookup`);
  }
  const v = await egressPolicy(workload(undefined)).check(http('example.com'), table({}));
  t.match(v, { allowed: false, reason: /denied by default/ });
  t.equal(egressPolicy(workload({ outboundAllowCIDR: ['0.0.0.0/0'] })).denyAll, false);
  t.equal(egressPolicy(workload({ outboundAllowHostname: ['example.com'] })).denyAll, false);
});

t.test('host names: exact, and *. under the name at any depth', async (t) => {
  const external = { outboundAllowHostname: ['api.example.com', '*.Example.ORG', 'trailing.example.net.'] };
  const answers = Object.fromEntries(
    ['api.example.com', 'API.Example.COM', 'api.example.com.', 'a.example.org', 'a.b.c.example.org', 'xn--bcher-kva.example.org', 'trailing.example.net', 'example.org', 'www.example.com', 'api.example.com.evil.test', 'xexample.org', 'example.org.evil.test', 'other.example.com']
      .map((h) => [h, ['203.0.113.7']]),
  );
  const ok = (rule: string): Expect => ({ address: '203.0.113.7', rule: `outboundAllowHostname ${rule}` });
  const no = { reason: /matches no outboundAllowHostname/ };
  await expectVerdict(t, external, [
    [http('api.example.com'), ok('api.example.com')],
    [http('API.Example.COM'), ok('api.example.com'), 'case'],
    [http('api.example.com.'), ok('api.example.com'), 'trailing dot'],
    [tunnel('api.example.com', 443), ok('api.example.com')],
    [tunnel('a.example.org', 443), ok('*.Example.ORG')],
    [http('a.b.c.example.org'), ok('*.Example.ORG'), 'three labels deep'],
    [http('xn--bcher-kva.example.org'), ok('*.Example.ORG'), 'punycode label'],
    [http('trailing.example.net'), ok('trailing.example.net.'), 'rule with a trailing dot'],
    [http('example.org'), no, 'the wildcard is not its apex'],
    [http('www.example.com'), no, 'exact is exact'],
    [http('other.example.com'), no],
    [http('api.example.com.evil.test'), no, 'suffix added'],
    [http('xexample.org'), no, 'not at a label boundary'],
    [http('example.org.evil.test'), no],
  ], answers);
});

t.test('host names open 80, 443 and 445 unless outboundAllowPort lists ports', async (t) => {
  const answers = { 'api.example.com': ['203.0.113.7'] };
  const ok: Expect = { address: '203.0.113.7', rule: 'outboundAllowHostname api.example.com' };
  await expectVerdict(t, { outboundAllowHostname: ['api.example.com'] }, [
    [http('api.example.com', 80), ok],
    [tunnel('api.example.com', 443), ok],
    [tunnel('api.example.com', 445), ok],
    [http('api.example.com', 8080), { reason: /opens ports 80, 443, 445 only/ }],
    [tunnel('api.example.com', 22), { reason: /opens ports 80, 443, 445 only/ }],
  ], answers);
  const ports = [{ protocol: 'https', number: 8443 }, { protocol: 'tcp', number: 5432 }];
  await expectVerdict(t, { outboundAllowHostname: ['api.example.com'], outboundAllowPort: ports }, [
    [tunnel('api.example.com', 8443), ok, 'listed (a CONNECT to 8443 is tcp: the protocol does not narrow)'],
    [http('api.example.com', 8443), ok, 'listed, as plain http'],
    [tunnel('api.example.com', 5432), ok],
    [tunnel('api.example.com', 443), { reason: /opens ports 5432, 8443 only/ }, 'the list replaces the defaults'],
    [http('api.example.com', 80), { reason: /opens ports 5432, 8443 only/ }],
  ], answers);
  const lookup = table(answers);
  await egressPolicy(workload({ outboundAllowHostname: ['api.example.com'] })).check(http('api.example.com', 8080), lookup);
  t.same(lookup.asked, [], 'a port no path opens is refused without a lookup');
});

t.test('CIDRs: every port unless outboundAllowPort lists ports; mapped IPv6 is its IPv4 address', async (t) => {
  const external = { outboundAllowCIDR: ['10.0.0.0/8', '2001:db8::/32', '192.0.2.1'] };
  await expectVerdict(t, external, [
    [http('10.1.2.3', 80), { address: '10.1.2.3', rule: 'outboundAllowCIDR 10.0.0.0/8' }],
    [tunnel('10.1.2.3', 22), { address: '10.1.2.3', rule: 'outboundAllowCIDR 10.0.0.0/8' }, 'any port'],
    [tunnel('::ffff:10.0.0.1', 5432), { address: '::ffff:10.0.0.1', rule: 'outboundAllowCIDR 10.0.0.0/8' }, 'mapped'],
    [tunnel('::FFFF:a00:1', 443), { address: '::FFFF:a00:1', rule: 'outboundAllowCIDR 10.0.0.0/8' }, 'mapped, hex'],
    [http('2001:db8::1', 8080), { address: '2001:db8::1', rule: 'outboundAllowCIDR 2001:db8::/32' }],
    [http('192.0.2.1'), { address: '192.0.2.1', rule: 'outboundAllowCIDR 192.0.2.1' }, 'a bare address is one host'],
    [http('192.0.2.2'), { reason: /192\.0\.2\.2:80: 192\.0\.2\.2 is in no outboundAllowCIDR range/ }],
    [http('11.0.0.1'), { reason: /in no outboundAllowCIDR range/ }],
    [http('::a00:1'), { reason: /in no outboundAllowCIDR range/ }, 'IPv4-compatible is not mapped'],
    [http('2001:db9::1'), { reason: /in no outboundAllowCIDR range/ }],
  ]);
  await expectVerdict(t, { outboundAllowCIDR: ['0.0.0.0/0'] }, [
    [http('203.0.113.9'), { address: '203.0.113.9', rule: 'outboundAllowCIDR 0.0.0.0/0' }],
    [http('2001:db8::1'), { reason: /in no outboundAllowCIDR range/ }, '0.0.0.0/0 is IPv4 only'],
  ]);
  await expectVerdict(t, { ...external, outboundAllowPort: [{ protocol: 'tcp', number: 5432 }] }, [
    [tunnel('10.1.2.3', 5432), { address: '10.1.2.3', rule: 'outboundAllowCIDR 10.0.0.0/8' }],
    [http('10.1.2.3', 80), { reason: /port 80 is not in outboundAllowPort/ }],
    [tunnel('10.1.2.3', 443), { reason: /port 443 is not in outboundAllowPort/ }],
  ]);
  await expectVerdict(t, external, [[http('db.internal.test', 5432), { address: '10.9.9.9', rule: 'outboundAllowCIDR 10.0.0.0/8' }, 'a name through the CIDR path']], {
    'db.internal.test': ['10.9.9.9'],
  });
});

t.test('loopback and link-local are not special: the rules decide', async (t) => {
  await expectVerdict(t, { outboundAllowCIDR: ['0.0.0.0/0', '::/0'] }, [
    [http('127.0.0.1', 9000), { address: '127.0.0.1', rule: 'outboundAllowCIDR 0.0.0.0/0' }],
    [http('::1', 9000), { address: '::1', rule: 'outboundAllowCIDR ::/0' }],
    [http('169.254.169.254'), { address: '169.254.169.254', rule: 'outboundAllowCIDR 0.0.0.0/0' }],
    [http('fe80::1%lo'), { address: 'fe80::1%lo', rule: 'outboundAllowCIDR ::/0' }, 'zone kept for dialling'],
  ]);
  await expectVerdict(t, { outboundAllowCIDR: ['203.0.113.0/24'] }, [
    [http('127.0.0.1', 9000), { reason: /in no outboundAllowCIDR range/ }],
    [http('169.254.169.254'), { reason: /in no outboundAllowCIDR range/ }],
  ]);
});

t.test('outboundBlockedCIDR wins over both paths', async (t) => {
  const external = {
    outboundAllowCIDR: ['10.0.0.0/8', '::/0'],
    outboundBlockedCIDR: ['10.0.0.0/24', '::ffff:10.1.0.0/112', '2001:db8::/32'],
    outboundAllowHostname: ['*.example.com'],
  };
  const answers = {
    'bad.example.com': ['10.0.0.5'],
    'worse.example.com': ['10.0.0.5', '10.1.0.9', '2001:db8::5'],
    'mixed.example.com': ['10.0.0.5', '203.0.113.7'],
    'cidr-first.example.com': ['203.0.113.7', '10.0.0.5', '10.2.0.1'],
    'db.test': ['10.0.0.9', '10.3.0.1'],
  };
  await expectVerdict(t, external, [
    [http('10.0.0.5'), { reason: /10\.0\.0\.5 is in outboundBlockedCIDR 10\.0\.0\.0\/24/ }],
    [http('::ffff:10.0.0.5'), { reason: /is in outboundBlockedCIDR 10\.0\.0\.0\/24/ }, 'mapped'],
    [http('10.1.0.200'), { reason: /is in outboundBlockedCIDR ::ffff:10\.1\.0\.0\/112/ }, 'a mapped range blocks the IPv4 address'],
    [http('10.0.1.5'), { address: '10.0.1.5', rule: 'outboundAllowCIDR 10.0.0.0/8' }],
    [http('2001:db8::1'), { reason: /in outboundBlockedCIDR 2001:db8::\/32/ }, 'over ::/0'],
    [http('bad.example.com'), { reason: /bad\.example\.com:80: 10\.0\.0\.5 is in outboundBlockedCIDR 10\.0\.0\.0\/24$/ }, 'an allowed name into a blocked range'],
    [http('worse.example.com'), { reason: /as is every other address/ }],
    [http('mixed.example.com'), { address: '203.0.113.7', rule: 'outboundAllowHostname *.example.com' }, 'the blocked answer is passed over'],
    [http('cidr-first.example.com'), { address: '10.2.0.1', rule: 'outboundAllowCIDR 10.0.0.0/8' }, 'the CIDR path takes precedence'],
    [tunnel('db.test', 5432), { address: '10.3.0.1', rule: 'outboundAllowCIDR 10.0.0.0/8' }],
  ], answers);
});

t.test('a name with several answers: the first the CIDR path admits, else the first not blocked', async (t) => {
  const external = { outboundAllowCIDR: ['198.51.100.0/24', '2001:db8::/32'], outboundAllowHostname: ['api.example.com', 'v6.example.com'] };
  const answers = {
    'api.example.com': ['2001:db9::1', '203.0.113.1', '198.51.100.4', '198.51.100.5'],
    'v6.example.com': ['2001:db9::1', '203.0.113.1'],
    'other.test': ['203.0.113.1', '2001:db8::7', '198.51.100.4'],
    'nowhere.test': ['203.0.113.1', '203.0.113.2'],
  };
  await expectVerdict(t, external, [
    [http('api.example.com'), { address: '198.51.100.4', rule: 'outboundAllowCIDR 198.51.100.0/24' }],
    [tunnel('api.example.com', 8080), { address: '198.51.100.4', rule: 'outboundAllowCIDR 198.51.100.0/24' }, 'CIDR path on a port names cannot use'],
    [http('v6.example.com'), { address: '2001:db9::1', rule: 'outboundAllowHostname v6.example.com' }, 'hostname path: first answer'],
    [tunnel('v6.example.com', 8080), { reason: /v6\.example\.com \(2001:db9::1, 203\.0\.113\.1\) is in no outboundAllowCIDR range; outboundAllowHostname v6\.example\.com opens ports 80, 443, 445 only/ }],
    [http('other.test'), { address: '2001:db8::7', rule: 'outboundAllowCIDR 2001:db8::/32' }],
    [http('nowhere.test'), { reason: /is in no outboundAllowCIDR range; nowhere\.test matches no outboundAllowHostname/ }],
  ], answers);
});

t.test('lookup failures and odd answers are denials, never throws', async (t) => {
  const policy = egressPolicy(workload({ outboundAllowHostname: ['*.example.com'] }));
  const cases: [string, Lookup, RegExp][] = [
    ['ENOTFOUND', table({}), /looking up a\.example\.com failed: ENOTFOUND/],
    ['rejects with a plain error', async () => Promise.reject(new Error('resolver gone')), /failed: resolver gone/],
    ['rejects with a non-error', async () => Promise.reject('EAI_AGAIN'), /failed: EAI_AGAIN/],
    ['throws before its promise', (() => { throw new Error('sync'); }) as Lookup, /failed: sync/],
    ['no answers', async () => [], /a\.example\.com has no address/],
    ['garbage answers', async () => ['', 'example.com', '10.0.0.1:80', '[::1]', '300.1.1.1'], /gave no usable address/],
    ['not a list', (async () => '10.0.0.1') as unknown as Lookup, /gave no list of addresses/],
  ];
  for (const [name, lookup, reason] of cases) {
    const v = await policy.check(http('a.example.com'), lookup);
    t.match(v, { allowed: false, reason }, name);
  }
  const v = await policy.check(http('a.example.com'), async () => ['nonsense', '203.0.113.5']);
  t.same(v, { allowed: true, address: '203.0.113.5', rule: 'outboundAllowHostname *.example.com' }, 'an unusable answer is skipped');
});

t.test('malformed destinations are refused before any lookup', async (t) => {
  const policy = egressPolicy(workload({ outboundAllowHostname: ['*.example.com', 'kafka.example.com'], outboundAllowCIDR: ['0.0.0.0/0', '::/0'] }));
  const hosts = ['', '.', 'a..example.com', '.a.example.com', '*.example.com', 'a b.example.com', 'a.example.com:80', '[::1]', '\u212Aafka.example.com', 'k\u0430fka.example.com', 'a.example.com..', `${'a'.repeat(64)}.example.com`, `${'a.'.repeat(127)}com`];
  for (const host of hosts) {
    const lookup = table({});
    const v = await policy.check(http(host), lookup);
    t.match(v, { allowed: false, reason: /is not a host name or an IP address/ }, JSON.stringify(host));
    t.same(lookup.asked, [], `${JSON.stringify(host)}: no lookup`);
  }
  for (const port of [0, -1, 65536, 80.5, Number.NaN]) {
    const v = await policy.check({ host: '10.0.0.1', port, protocol: 'tcp' }, table({}));
    t.match(v, { allowed: false, reason: /is not a port number/ }, `port ${port}`);
  }
});

t.test('normalizeHostname', async (t) => {
  const cases: [string, string | undefined][] = [
    ['Example.COM', 'example.com'],
    ['example.com.', 'example.com'],
    ['_dmarc.example.com', '_dmarc.example.com'],
    ['xn--bcher-kva.example', 'xn--bcher-kva.example'],
    ['localhost', 'localhost'],
    ['example.com..', undefined],
    ['ex ample.com', undefined],
    ['b\u00fccher.example', undefined],
    ['', undefined],
  ];
  for (const [input, want] of cases) t.equal(normalizeHostname(input), want, JSON.stringify(input));
});

t.test('entries that cannot be read', async (t) => {
  const policy = egressPolicy(workload({ outboundAllowHostname: ['foo.*.com', '*', '1.2.3.4', '::1', 'ok.example.com'], outboundAllowCIDR: ['10.0.0.0/33'] }));
  t.equal(policy.denyAll, false);
  t.same(policy.problems, [
    'outboundAllowCIDR "10.0.0.0/33" is not a CIDR range or address (ignored)',
    'outboundAllowHostname "foo.*.com" is not a host name or *.name (ignored)',
    'outboundAllowHostname "*" is not a host name or *.name (ignored)',
    'outboundAllowHostname "1.2.3.4" is an address: list it in outboundAllowCIDR (ignored)',
    'outboundAllowHostname "::1" is an address: list it in outboundAllowCIDR (ignored)',
  ]);
  t.match(await policy.check(http('1.2.3.4'), table({})), { allowed: false }, 'an address in the hostname list opens nothing');
  const closed = egressPolicy(workload({ outboundAllowCIDR: ['0.0.0.0/0'], outboundBlockedCIDR: ['10.0.0.0/8', 'evil.com'] }));
  t.equal(closed.denyAll, true, 'an unreadable blocked entry denies everything');
  t.match(await closed.check(http('203.0.113.1'), table({})), { allowed: false, reason: /outboundBlockedCIDR "evil\.com" cannot be read/ });
  const noPorts = egressPolicy(workload({ outboundAllowCIDR: ['0.0.0.0/0'], outboundAllowPort: [{ protocol: 'tcp' }, 'x'] }));
  t.match(await noPorts.check(http('203.0.113.1'), table({})), { allowed: false, reason: /port 80 is not in outboundAllowPort/ }, 'ports that cannot be read open none');
});

t.test('compiled once per workload model', async (t) => {
  const snapshot = buildSnapshot({ workloads: [{ name: 'api', firewallConfig: { external: { outboundAllowHostname: ['api.example.com'] } } }] } as never);
  const model = workloadOf(snapshot, 'api');
  t.equal(egressPolicy(model), egressPolicy(model));
  t.same(await egressPolicy(model).check(http('api.example.com'), table({ 'api.example.com': ['203.0.113.7'] })), {
    allowed: true, address: '203.0.113.7', rule: 'outboundAllowHostname api.example.com',
  });
});

t.test('systemLookup: localhost through the system resolver; IP literals are not looked up', async (t) => {
  const addresses = await systemLookup('localhost');
  t.ok(addresses.length > 0 && addresses.every((a) => a === '::1' || a.startsWith('127.')), 'loopback answers', { addresses });
  t.same(await systemLookup('203.0.113.9'), ['203.0.113.9']);
  t.same(await systemLookup('2001:db8::1'), ['2001:db8::1']);
  const policy = egressPolicy(workload({ outboundAllowHostname: ['LocalHost'], outboundAllowPort: [{ protocol: 'http', number: 9000 }] }));
  const v = await policy.check(http('localhost', 9000), systemLookup);
  t.same(v, { allowed: true, address: addresses[0], rule: 'outboundAllowHostname LocalHost' });
  const blocked = egressPolicy(workload({ outboundAllowHostname: ['localhost'], outboundBlockedCIDR: ['127.0.0.0/8', '::1'] }));
  t.match(await blocked.check(http('localhost'), systemLookup), { allowed: false, reason: /is in outboundBlockedCIDR/ });
});
