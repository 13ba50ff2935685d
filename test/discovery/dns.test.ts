/**
 * DNS discovery's pieces (src/discovery): the address order (against ipaddr.js on generated
 * addresses), the TTL bounds, `--dns-server` values (against node:net and Node's own resolver), which
 * hosts are looked up, and the follower's schedule on a fake clock: re-asked at the TTL, a failure
 * keeps the last answer and is retried sooner, an answer with no address drains, a dropped name stops.
 */
import t from 'tap';
import ipaddr from 'ipaddr.js';
import { Resolver } from 'node:dns/promises';
import { DnsDiscovery, MAX_TTL_S, MIN_TTL_S, NO_TTL_S, checkDnsServer, clampTtl, sortAddresses, type DnsAnswer } from '../../src/discovery/dns.js';
import { discoveredNameOf, isDiscoveredHost } from '../../src/discovery/names.js';
import { FakeClock } from '../local/fixtures.js';
import { silentLogger } from '../../src/log.js';
import { prng, testSeed } from '../helpers/seed.js';

function randomAddress(rand: () => number): string {
  const int = (n: number): number => Math.floor(rand() * n);
  const kind = int(4);
  if (kind === 0) return [int(256), int(256), int(256), int(256)].join('.');
  if (kind === 1) return `10.0.${int(3)}.${int(3)}`; // many near-equal ones
  const groups = Array.from({ length: 8 }, () => (rand() < 0.4 ? 0 : int(0x10000)));
  if (kind === 2) return ipaddr.fromByteArray(groups.flatMap((g) => [g >> 8, g & 255])).toString(); // compressed
  return groups.map((g) => g.toString(16)).join(':');
}

/** The oracle's order: IPv4 (and IPv4-mapped IPv6, as an IPv4 address) before IPv6, bytewise. */
function oracleKey(a: string): number[] {
  let parsed = ipaddr.parse(a);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  return [parsed.kind() === 'ipv4' ? 4 : 6, ...parsed.toByteArray()];
}

t.test('addresses are sorted and deduplicated as ipaddr.js orders them', async (t) => {
  const seed = testSeed('DNS_SORT_SEED', 28);
  const rand = prng(seed);
  for (let round = 0; round < 300; round++) {
    const list = Array.from({ length: 1 + Math.floor(rand() * 12) }, () => randomAddress(rand));
    if (rand() < 0.3) list.push(list[0]!);
    const expected = [...new Set(list)].sort((x, y) => {
      const a = oracleKey(x);
      const b = oracleKey(y);
      for (let i = 0; i < Math.max(a.length, b.length); i++) if ((a[i] ?? -1) !== (b[i] ?? -1)) return (a[i] ?? -1) - (b[i] ?? -1);
      return 0;
    });
    const got = sortAddresses(list);
    if (JSON.stringify(got) !== JSON.stringify(expected)) {
      t.same(got, expected, `DNS_SORT_SEED=${seed}: ${JSON.stringify(list)}`);
      return;
    }
  }
  t.pass(`300 generated lists (seed ${seed})`);
});

t.test('a TTL is held between 1 s and 5 min', async (t) => {
  t.equal(clampTtl(0), MIN_TTL_S);
  t.equal(clampTtl(-5), MIN_TTL_S);
  t.equal(clampTtl(30), 30);
  t.equal(clampTtl(86_400), MAX_TTL_S);
  t.equal(clampTtl(Number.NaN), MIN_TTL_S);
});

t.test('--dns-server takes what Node\'s resolver takes, and only IP addresses', async (t) => {
  const good = ['127.0.0.1', '127.0.0.1:5353', '[::1]:53', '[2001:db8::1]:5353', '::1'];
  for (const s of good) {
    const normalized = checkDnsServer(s);
    t.doesNotThrow(() => new Resolver().setServers([normalized]), `${s} → ${normalized} is accepted by Resolver.setServers`);
  }
  t.equal(checkDnsServer('10.0.0.1'), '10.0.0.1:53');
  for (const bad of ['dns.example:53', '127.0.0.1:0', '127.0.0.1:70000', '[127.0.0.1]:53', '127.0.0.1:', '', 'localhost', '[::1']) {
    t.throws(() => checkDnsServer(bad), /--dns-server/, `${JSON.stringify(bad)} is refused`);
  }
});

t.test('which hosts are looked up, and one name per replica entry', async (t) => {
  t.equal(isDiscoveredHost('api.shop.svc.cluster.local'), true);
  t.equal(isDiscoveredHost('api'), true);
  for (const literal of ['10.0.0.1', '::1', 'localhost', 'LOCALHOST.', 'api.localhost', 'x.y.localhost']) t.equal(isDiscoveredHost(literal), false, literal);
  t.same(discoveredNameOf({ address: '127.0.0.1:8080', sidecar: 'localhost:15006' }), {});
  t.same(discoveredNameOf({ address: '127.0.0.1:8080', sidecar: 'not an address' }), {}, 'a malformed address is the records\' checks\' to report');
  t.equal(isDiscoveredHost(''), false);
  t.same(discoveredNameOf({ address: 'Api.Shop:8080', sidecar: 'api.shop.:15006', mesh: 'api.shop:15008' }), { name: 'api.shop' });
  t.match(discoveredNameOf({ address: 'api.shop:8080', sidecar: '10.0.0.1:15006' }).error, /must all name api\.shop/);
  t.match(discoveredNameOf({ address: 'api.shop:8080', sidecar: 'web.shop:15006' }).error, /must all name api\.shop/);
});

/** A lookup the test answers: each call waits for the test's next `answer` or `fail`. */
function scriptedLookup(): { lookup: (name: string) => Promise<DnsAnswer>; calls: string[]; answer(a: DnsAnswer): void; fail(message: string): void; pending(): number } {
  const waiting: { resolve: (a: DnsAnswer) => void; reject: (e: Error) => void }[] = [];
  const calls: string[] = [];
  return {
    calls,
    lookup: (name) => {
      calls.push(name);
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
    answer: (a) => waiting.shift()!.resolve(a),
    fail: (message) => waiting.shift()!.reject(Object.assign(new Error(message), { code: 'ETIMEOUT' })),
    pending: () => waiting.length,
  };
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

t.test('answers are followed at their TTL; failures keep the last answer and retry sooner', async (t) => {
  const clock = new FakeClock();
  const script = scriptedLookup();
  const outcomes: string[] = [];
  const dns = new DnsDiscovery({ lookup: script.lookup, clock, logger: silentLogger(), observe: (name, outcome, n) => outcomes.push(`${name} ${outcome} ${n}`) });
  const changes: string[] = [];
  dns.on('change', (name: string) => changes.push(name));
  dns.track(['api.test']);
  t.equal(dns.addresses('api.test'), undefined, 'nothing before the first answer');
  const first = dns.firstLookups();
  script.answer({ addresses: ['10.0.0.3', '10.0.0.2', '10.0.0.3'], ttlSeconds: 30 });
  await first;
  t.same(dns.addresses('api.test'), ['10.0.0.2', '10.0.0.3']);
  t.same(changes, ['api.test']);
  t.same(clock.pending(), [30_000], 'asked again at the TTL');

  clock.advance(30_000);
  t.equal(script.pending(), 1);
  script.answer({ addresses: ['10.0.0.2', '10.0.0.3'], ttlSeconds: 0 });
  await settle();
  t.same(changes, ['api.test'], 'the same set is no change');
  t.same(clock.pending(), [1000], 'a TTL of 0 is asked again after 1 s');

  const delays: number[] = [];
  for (let i = 0; i < 7; i++) {
    clock.advance(clock.pending()[0]!);
    script.fail('timeout');
    await settle();
    delays.push(clock.pending()[0]!);
  }
  t.same(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000], 'failures retry after 1 s, doubling to 30 s');
  t.same(dns.addresses('api.test'), ['10.0.0.2', '10.0.0.3'], 'the last answer is kept through failures');

  clock.advance(clock.pending()[0]!);
  script.answer({ addresses: ['10.0.0.4'], ttlSeconds: 100_000 });
  await settle();
  t.same(dns.addresses('api.test'), ['10.0.0.4']);
  t.same(clock.pending(), [MAX_TTL_S * 1000], 'a long TTL is asked again after 5 min');

  clock.advance(clock.pending()[0]!);
  script.answer({ addresses: [], ttlSeconds: 3600 });
  await settle();
  t.same(dns.addresses('api.test'), [], 'an answer with no address is an answer: no replicas');
  t.same(clock.pending(), [NO_TTL_S * 1000]);
  t.same(changes, ['api.test', 'api.test', 'api.test']);
  t.same(outcomes.slice(-2), ['api.test answer 1', 'api.test empty 0']);
  t.match(outcomes, ['api.test answer 2', 'api.test answer 2', 'api.test failure 2']);

  dns.track([]);
  t.same(clock.pending(), [], 'a name no longer named is not asked again');
  t.equal(dns.addresses('api.test'), undefined);
});

t.test('a name dropped while its lookup is out ignores the late answer', async (t) => {
  const clock = new FakeClock();
  const script = scriptedLookup();
  const dns = new DnsDiscovery({ lookup: script.lookup, clock, logger: silentLogger() });
  dns.track(['a.test', 'b.test']);
  t.same(script.calls, ['a.test', 'b.test']);
  const first = dns.firstLookups();
  dns.track(['b.test']);
  script.answer({ addresses: ['10.0.0.1'], ttlSeconds: 5 });
  script.answer({ addresses: ['10.0.0.2'], ttlSeconds: 5 });
  await first;
  t.equal(dns.addresses('a.test'), undefined);
  t.same(dns.addresses('b.test'), ['10.0.0.2']);
  t.same(clock.pending(), [5000], 'only b is asked again');
  dns.close();
  t.same(clock.pending(), []);
});
