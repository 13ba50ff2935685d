/**
 * The CIDR matcher (src/firewall/cidr.ts) against two references, on generated and mutated input:
 * ipaddr.js for what is an address or a range and what it denotes, Node's `net.BlockList` for
 * containment. Addresses are random IPv4, IPv6 (every textual form: compressed, full, upper case,
 * leading zeros, embedded IPv4 tail) and IPv4-mapped IPv6 (`::ffff:1.2.3.4`, `::ffff:102:304`);
 * ranges are random prefixes /0-/32 and /0-/128, host bits set or not, bare addresses, mapped
 * ranges; mutations delete, insert, duplicate and swap characters. Addresses are drawn near the
 * range (one bit flipped inside or outside the prefix) so both answers are common.
 *
 * The one documented difference from BlockList: an IPv4 client (plain, or mapped as a dual-stack
 * socket reports it) is matched by IPv4 ranges and by ranges written in mapped form
 * (`::ffff:10.0.0.0/104`), never by a range written in plain IPv6 form (`::/0`, `::/8`,
 * `::/80`), which BlockList matches because it sees every IPv4 address as `::ffff:a.b.c.d`.
 * Stricter than ipaddr.js by choice: IPv4 in four decimal parts only (as Node's `isIP`), a prefix
 * of at most three digits, no zone in a range. The seed is printed; rerun with CIDR_ORACLE_SEED.
 */
import t from 'tap';
import { BlockList, createServer, connect, isIP, type AddressInfo, type Socket } from 'node:net';
import ipaddr from 'ipaddr.js';
import { compileCidrs, cidrContains, parseAddress, parseCidr, type Address, type Cidr } from '../../src/firewall/cidr.js';
import { compileExternalFirewall } from '../../src/firewall/external.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('CIDR_ORACLE_SEED', 20261127);
t.comment(`CIDR_ORACLE_SEED=${SEED}`);

const rnd = prng(SEED);
const int = (n: number): number => Math.floor(rnd() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;

// ---- generators -------------------------------------------------------------------------------

/** 128 bits as eight 16-bit groups; IPv4 as one 32-bit number. */
type Bits6 = number[];

function randomV4(): number {
  return pick([() => int(2 ** 32), () => 0, () => 0xffffffff, () => 0x0a000000 + int(2 ** 24), () => 0x7f000001])();
}
function randomV6(): Bits6 {
  const g = Array.from({ length: 8 }, () => (rnd() < 0.4 ? 0 : rnd() < 0.3 ? 0xffff : int(65536)));
  const shape = int(6);
  if (shape === 0) return [0, 0, 0, 0, 0, 0xffff, int(65536), int(65536)]; // IPv4-mapped
  if (shape === 1) return [0, 0, 0, 0, 0, 0, 0, int(3)]; // ::, ::1, ::2
  if (shape === 2) return [0x2001, 0xdb8, ...g.slice(2)];
  return g;
}

const v4Text = (v: number): string => [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');

function groupText(g: number): string {
  let s = g.toString(16);
  if (rnd() < 0.1) s = s.padStart(s.length + int(5 - s.length), '0'); // leading zeros, at most four digits
  return rnd() < 0.2 ? s.toUpperCase() : s;
}

/** Any valid text of the address: full or with one run of zero groups as `::`, maybe an IPv4 tail. */
function v6Text(groups: Bits6): string {
  const tail = rnd() < 0.3 ? v4Text((groups[6]! * 65536 + groups[7]!) >>> 0) : undefined;
  const heads = tail === undefined ? groups : groups.slice(0, 6);
  const parts = heads.map(groupText);
  const runs: [number, number][] = [];
  for (let i = 0; i < heads.length; i++) {
    if (heads[i] !== 0) continue;
    let j = i;
    while (j < heads.length && heads[j] === 0) j++;
    runs.push([i, j]);
    i = j;
  }
  let text: string;
  if (runs.length > 0 && rnd() < 0.8) {
    const [from, to] = pick(runs);
    const start = from + int(to - from); // compress any sub-run, not only the longest
    const end = start + 1 + int(to - start);
    text = `${parts.slice(0, start).join(':')}::${parts.slice(end).join(':')}`;
    if (tail !== undefined) text += end === heads.length ? tail : `:${tail}`;
  } else {
    text = parts.join(':') + (tail === undefined ? '' : `:${tail}`);
  }
  return text;
}

const MUTATION_CHARS = ':.0123456789abcdefABCDEFgx%/ []-';
function mutate(s: string): string {
  let out = s;
  for (let n = 1 + int(2); n > 0; n--) {
    const i = int(out.length + 1);
    switch (int(5)) {
      case 0: out = out.slice(0, i) + out.slice(i + 1); break;
      case 1: out = out.slice(0, i) + pick([...MUTATION_CHARS]) + out.slice(i); break;
      case 2: out = out.slice(0, i) + out.slice(i, i + 1 + int(4)) + out.slice(i); break;
      case 3: out = out.slice(0, i) + ':' + out.slice(i); break;
      default: out = out.slice(0, i) + out.slice(i + 1, i + 2) + out.slice(i, i + 1) + out.slice(i + 2);
    }
  }
  return out;
}

function addressText(): string {
  if (rnd() < 0.4) return v4Text(randomV4());
  return v6Text(randomV6());
}

// ---- references --------------------------------------------------------------------------------

/**
 * ipaddr.js's reading of an address text, mapped addresses as IPv4; `undefined` if invalid. Two
 * corrections to ipaddr.js: it reads the deprecated IPv4-compatible `::1.2.3.4` as the mapped
 * `::ffff:1.2.3.4`, where RFC 4291 §2.5.5.1, Node and BlockList read `::102:304` (so it is asked
 * about `::0:1.2.3.4`, the same address written so that it reads it right); its zones are letters
 * and digits, ours also `_ . -` (interface names such as `eth0.100`), so a zone is removed first.
 */
function refAddress(text: string, forms = false): Address | undefined {
  let s = text.trim();
  if (forms) {
    const bracketed = /^\[(.*)\](?::\d{1,5})?$/.exec(s);
    const v4port = /^([0-9.]+):\d{1,5}$/.exec(s);
    if (bracketed) s = bracketed[1]!;
    else if (v4port) s = v4port[1]!;
    s = s.replace(/%[0-9A-Za-z_.-]+$/, '');
  }
  // One zone, at the end, as interface names are written: ipaddr.js takes anything after the first
  // `%` as the zone (`::1%f%f`), which the proxy refuses (a divergence by design).
  if (s.includes('%')) return undefined;
  if (/^::[0-9.]+$/.test(s)) s = `::0:${s.slice(2)}`;
  let ip: ipaddr.IPv4 | ipaddr.IPv6;
  // An IPv4 tail of an IPv6 address must be four decimal parts too.
  const tail = s.slice(s.lastIndexOf(':') + 1);
  if (ipaddr.IPv4.isValidFourPartDecimal(s)) ip = ipaddr.IPv4.parse(s);
  else if (ipaddr.IPv6.isValid(s) && (!tail.includes('.') || ipaddr.IPv4.isValidFourPartDecimal(tail))) ip = ipaddr.IPv6.parse(s);
  else return undefined;
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  if (ip.kind() === 'ipv4') {
    const [a, b, c, d] = ip.toByteArray() as [number, number, number, number];
    return { family: 4, v4: ((a << 24) | (b << 16) | (c << 8) | d) >>> 0 };
  }
  return { family: 6, v6: (ip as ipaddr.IPv6).parts.slice() };
}

interface RefRange {
  /** The range as written, for BlockList. */
  readonly text: string;
  readonly family: 4 | 6;
  readonly bits: number;
  /** Written in mapped form with a prefix of 96 or more: an IPv4 range. */
  readonly mappedV4: boolean;
  readonly ip: ipaddr.IPv4 | ipaddr.IPv6;
}

function refRange(input: string): RefRange | undefined {
  const s = input.trim();
  const slash = s.indexOf('/');
  const addr = slash < 0 ? s : s.slice(0, slash);
  if (addr.includes('%')) return undefined;
  const a = refAddress(addr);
  if (!a) return undefined;
  const family: 4 | 6 = ipaddr.IPv4.isValidFourPartDecimal(addr) ? 4 : 6;
  const prefix = slash < 0 ? String(family === 4 ? 32 : 128) : s.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefix)) return undefined;
  const asked = /^::[0-9.]+$/.test(addr) ? `::0:${addr.slice(2)}` : addr; // see refAddress
  if (!ipaddr.isValidCIDR(`${asked}/${prefix}`)) return undefined;
  const [ip, bits] = ipaddr.parseCIDR(`${asked}/${prefix}`);
  const mappedV4 = family === 6 && (ip as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96;
  return { text: addr, family, bits, mappedV4, ip };
}

function addressIp(a: Address): ipaddr.IPv4 | ipaddr.IPv6 {
  if (a.family === 4) return ipaddr.IPv4.parse(v4Text(a.v4));
  return new ipaddr.IPv6(a.v6.slice());
}

/** ipaddr.js: does the range hold the address (mapped ranges as IPv4 ranges)? */
function refContainsIpaddr(r: RefRange, a: Address): boolean {
  if (r.mappedV4) return a.family === 4 && addressIp(a).match((r.ip as ipaddr.IPv6).toIPv4Address(), r.bits - 96);
  if (r.family !== a.family) return false;
  return addressIp(a).match(r.ip, r.bits);
}

/** BlockList's answer, less IPv4 clients in plain-IPv6 ranges (the documented difference). */
function refContainsBlockList(r: RefRange, a: Address): boolean {
  const list = new BlockList();
  list.addSubnet(r.text, r.bits, r.family === 4 ? 'ipv4' : 'ipv6');
  const inList = a.family === 4 ? list.check(v4Text(a.v4), 'ipv4') : list.check(addressIp(a).toNormalizedString(), 'ipv6');
  if (a.family === 4 && r.family === 6 && !r.mappedV4) return false;
  return inList;
}

/** An address near the range: one bit flipped inside or outside the prefix, or random. */
function addressNear(r: RefRange): Address {
  if (rnd() < 0.2) return refAddress(addressText()) ?? { family: 4, v4: 0 };
  if (r.family === 4 || r.mappedV4) {
    const base = r.family === 4 ? r.ip : (r.ip as ipaddr.IPv6).toIPv4Address();
    const [a, b, c, d] = base.toByteArray() as [number, number, number, number];
    let v = ((a << 24) | (b << 16) | (c << 8) | d) >>> 0;
    if (rnd() < 0.7) v = (v ^ (1 << (31 - int(32)))) >>> 0;
    return { family: 4, v4: v };
  }
  const g = (r.ip as ipaddr.IPv6).parts.slice();
  if (rnd() < 0.7) {
    const bit = int(128);
    g[bit >> 4] = g[bit >> 4]! ^ (1 << (15 - (bit & 15)));
  }
  if (g.slice(0, 5).every((x) => x === 0) && g[5] === 0xffff) return { family: 4, v4: (g[6]! * 65536 + g[7]!) >>> 0 };
  return { family: 6, v6: g };
}

function rangeText(): string {
  const v4 = rnd() < 0.45;
  const mapped = !v4 && rnd() < 0.25;
  const addr = v4 ? v4Text(randomV4()) : v6Text(mapped ? [0, 0, 0, 0, 0, 0xffff, int(65536), int(65536)] : randomV6());
  const max = v4 ? 32 : 128;
  const form = int(10);
  if (form === 0) return addr; // one host
  const bits = mapped && rnd() < 0.7 ? 96 + int(33) : int(max + 1);
  const prefix = form === 1 ? String(bits).padStart(3, '0') : form === 2 ? String(max + 1 + int(100)) : String(bits);
  return `${form === 3 ? ' ' : ''}${addr}/${prefix}`;
}

const show = (v: unknown): string => JSON.stringify(v);

// ---- tests -------------------------------------------------------------------------------------

t.test('addresses: accepted and read as ipaddr.js reads them (mapped as IPv4)', async (t) => {
  const bad: string[] = [];
  let valid = 0;
  for (let i = 0; i < 20_000; i++) {
    const text = i % 3 === 2 ? mutate(addressText()) : addressText();
    const ours = parseAddress(text);
    const ref = refAddress(text, true);
    if (ref) valid++;
    if (show(ours) !== show(ref)) bad.push(`${show(text)}: ours ${show(ours)}, ipaddr.js ${show(ref)}`);
  }
  t.ok(valid > 12_000 && valid < 19_000, `both valid and invalid texts were tried (${valid} valid)`);
  t.same(bad.slice(0, 8), [], `seed ${SEED}: ${bad.length} differences`);
});

t.test('client address forms: brackets, ports and zones do not change the address', async (t) => {
  const bad: string[] = [];
  for (let i = 0; i < 5_000; i++) {
    const text = addressText();
    const plain = parseAddress(text);
    const forms = [`[${text}]`, `[${text}]:${int(65536)}`];
    if (isIP(text) === 4) forms.push(`${text}:${int(65536)}`);
    else forms.push(`${text}%eth${int(3)}`, `[${text}%25eth0]:443`.replace('%25', '%'));
    for (const f of forms) if (show(parseAddress(f)) !== show(plain)) bad.push(`${f}: ${show(parseAddress(f))}, plain ${show(plain)}`);
  }
  t.same(bad.slice(0, 8), [], `seed ${SEED}: ${bad.length} differences`);
});

t.test('ranges: accepted as ipaddr.js accepts them, containment as ipaddr.js and BlockList answer', async (t) => {
  const badParse: string[] = [];
  const badMatch: string[] = [];
  let matched = 0;
  let checked = 0;
  for (let i = 0; i < 20_000; i++) {
    const text = i % 4 === 3 ? mutate(rangeText()) : rangeText();
    const ours = parseCidr(text);
    const ref = refRange(text);
    if (!ours !== !ref) {
      badParse.push(`${show(text)}: ours ${show(ours)}, reference ${ref ? `${ref.text}/${ref.bits}` : 'invalid'}`);
      continue;
    }
    if (!ours || !ref) continue;
    for (let k = 0; k < 8; k++) {
      const a = addressNear(ref);
      const got = cidrContains(ours, a);
      const byIpaddr = refContainsIpaddr(ref, a);
      const byBlockList = refContainsBlockList(ref, a);
      checked++;
      if (got) matched++;
      if (got !== byIpaddr || got !== byBlockList) badMatch.push(`${show(text)} ∋ ${show(a)}: ours ${got}, ipaddr.js ${byIpaddr}, BlockList ${byBlockList}`);
    }
  }
  t.ok(matched > checked * 0.2 && matched < checked * 0.8, `both answers were common (${matched} of ${checked} in range)`);
  t.same(badParse.slice(0, 8), [], `seed ${SEED}: ${badParse.length} parse differences`);
  t.same(badMatch.slice(0, 8), [], `seed ${SEED}: ${badMatch.length} containment differences`);
});

t.test('sets: a list holds an address when one of its valid entries does', async (t) => {
  const bad: string[] = [];
  for (let i = 0; i < 2_000; i++) {
    const list = Array.from({ length: 1 + int(6) }, () => (rnd() < 0.15 ? mutate(rangeText()) : rangeText()));
    const { set, invalid } = compileCidrs(list);
    const refs = list.map(refRange);
    const refInvalid = list.filter((_, j) => !refs[j]);
    if (show(invalid) !== show(refInvalid)) bad.push(`${show(list)}: invalid ${show(invalid)}, reference ${show(refInvalid)}`);
    const valid = refs.filter((r): r is RefRange => r !== undefined);
    for (let k = 0; k < 10; k++) {
      const a = valid.length > 0 && rnd() < 0.7 ? addressNear(pick(valid)) : refAddress(addressText())!;
      const want = valid.some((r) => refContainsIpaddr(r, a));
      if (set.contains(a) !== want) bad.push(`${show(list)} ∋ ${show(a)}: ours ${!want}, reference ${want}`);
      if (set.everything && !set.contains(a)) bad.push(`${show(list)} claims everything but not ${show(a)}`);
    }
  }
  t.same(bad.slice(0, 8), [], `seed ${SEED}: ${bad.length} differences`);
});

t.test('prefix lengths /0 to /32 and /0 to /128 on their boundaries', async (t) => {
  const bad: string[] = [];
  for (let bits = 0; bits <= 128; bits++) {
    for (const family of bits <= 32 ? [4, 6] : [6]) {
      const text = family === 4 ? `${v4Text(randomV4())}/${bits}` : `${v6Text(randomV6())}/${bits}`;
      const ours = parseCidr(text) as Cidr;
      const ref = refRange(text)!;
      for (let k = 0; k < 64; k++) {
        const a = addressNear(ref);
        if (cidrContains(ours, a) !== refContainsIpaddr(ref, a)) bad.push(`${text} ∋ ${show(a)}`);
      }
    }
  }
  t.same(bad.slice(0, 8), [], `seed ${SEED}: ${bad.length} differences`);
});

t.test('the address Node reports for an IPv4 client of a dual-stack socket is matched by IPv4 ranges', async (t) => {
  const server = createServer();
  const seen = new Promise<Socket>((resolve) => server.once('connection', resolve));
  const listened = await new Promise<boolean>((resolve) => {
    server.once('error', () => resolve(false));
    server.listen({ host: '::', port: 0, ipv6Only: false }, () => resolve(true));
  });
  if (!t.ok(listened, 'a dual-stack socket listens on [::]')) return;
  t.teardown(() => server.close());
  const client = connect({ host: '127.0.0.1', port: (server.address() as AddressInfo).port });
  t.teardown(() => client.destroy());
  const socket = await seen;
  t.teardown(() => socket.destroy());
  const remote = socket.remoteAddress!;
  t.equal(remote, '::ffff:127.0.0.1', 'Node reports the IPv4 client in mapped form');
  const check = (allow: string[], blocked: string[] = []): string | undefined =>
    compileExternalFirewall({ firewallConfig: { external: { inboundAllowCIDR: allow, inboundBlockedCIDR: blocked } } }).check?.(remote, []);
  t.equal(check(['127.0.0.0/8']), undefined, 'admitted by 127.0.0.0/8');
  t.equal(check(['::ffff:127.0.0.0/104']), undefined, 'admitted by the same range in mapped form');
  t.equal(check(['10.0.0.0/8']), 'not_allowed');
  t.equal(check(['::/0']), 'not_allowed', 'a plain IPv6 range does not hold IPv4 clients');
  t.equal(check(['0.0.0.0/0', '::/0'], ['127.0.0.1']), 'blocked_cidr', 'blocked by its IPv4 address');
  // BlockList, the reference, agrees on the mapped address against the IPv4 range.
  const list = new BlockList();
  list.addSubnet('127.0.0.0', 8, 'ipv4');
  t.equal(list.check(remote, 'ipv6'), true);
});
