/**
 * The egress firewall (src/firewall/egress.ts) against an oracle written here, on generated
 * configurations and destinations: ipaddr.js decides what an address or range is and whether one
 * holds the other (an IPv4-mapped address or range is its IPv4 form), and host names are compared
 * label by label (lower-cased ASCII labels of letters, digits, `-` and `_`; `*.tail` holds names
 * with more labels ending in `tail`). The oracle states the policy in its plainest form: no allow
 * rule denies; a name is looked up only when some path could admit it; the first answer in an
 * allowed range and in no blocked one wins, else (a named host on its ports) the first answer in no
 * blocked range. Destinations are IP literals (IPv4, IPv6, mapped in both spellings) drawn near the
 * configured ranges, and host names near the configured rules, mutated: case, trailing dot, extra
 * or removed labels, punycode-looking labels, a suffix, characters deleted, doubled or replaced
 * (dots, `*`, spaces, non-ASCII look-alikes). Lookups are injected: each case's answers (or its
 * failure) are drawn with it. The seed is printed; rerun with EGRESS_ORACLE_SEED.
 */
import t from 'tap';
import ipaddr from 'ipaddr.js';
import type { WorkloadModel } from '../../src/config/model.js';
import { egressPolicy, type EgressDestination, type EgressVerdict } from '../../src/firewall/egress.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('EGRESS_ORACLE_SEED', 20261127);
t.comment(`EGRESS_ORACLE_SEED=${SEED}`);
const rnd = prng(SEED);
const int = (n: number): number => Math.floor(rnd() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
const chance = (p: number): boolean => rnd() < p;

// ---- the oracle ------------------------------------------------------------------------------

type Ip = ipaddr.IPv4 | ipaddr.IPv6;

/** A bare address as a lookup or a client gives it, mapped IPv6 as IPv4; else undefined. */
function oracleAddress(text: string): Ip | undefined {
  if (!ipaddr.IPv4.isValidFourPartDecimal(text) && !ipaddr.IPv6.isValid(text)) return undefined;
  const a = ipaddr.parse(text);
  return a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress() ? (a as ipaddr.IPv6).toIPv4Address() : a;
}

function oracleRange(text: string): [Ip, number] {
  const [a, bits] = ipaddr.parseCIDR(text.includes('/') ? text : `${text}/${text.includes(':') ? 128 : 32}`);
  if (a.kind() === 'ipv6' && (a as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96) return [(a as ipaddr.IPv6).toIPv4Address(), bits - 96];
  return [a, bits];
}

function holds(range: string, address: Ip): boolean {
  const [net, bits] = oracleRange(range);
  return net.kind() === address.kind() && address.match(net as never, bits);
}

function labelsOf(host: string): string[] | undefined {
  const h = host.endsWith('.') ? host.slice(0, -1) : host;
  if (h.length === 0 || h.length > 253) return undefined;
  const labels = h.split('.').map((l) => l.replace(/[A-Z]/g, (c) => c.toLowerCase()));
  return labels.every((l) => l.length >= 1 && l.length <= 63 && /^[a-z0-9_-]+$/.test(l)) ? labels : undefined;
}

function ruleHolds(rule: string, name: readonly string[]): boolean {
  const wild = rule.startsWith('*.');
  const want = labelsOf(wild ? rule.slice(2) : rule);
  if (!want) return false;
  if (!wild) return want.length === name.length && want.every((l, i) => l === name[i]);
  const offset = name.length - want.length;
  return offset >= 1 && want.every((l, i) => l === name[offset + i]);
}

interface Config {
  readonly allow: readonly string[];
  readonly blocked: readonly string[];
  readonly hostnames: readonly string[];
  readonly ports?: readonly number[];
}

type Answers = { readonly fail: true } | { readonly fail: false; readonly addresses: readonly string[] };

interface Expected {
  readonly verdict: { allowed: true; address: string; rule: string } | { allowed: false };
  readonly lookedUp: boolean;
}

function oracle(c: Config, dest: EgressDestination, answers: Answers): Expected {
  const denied = (lookedUp: boolean): Expected => ({ verdict: { allowed: false }, lookedUp });
  if (c.allow.length === 0 && c.hostnames.length === 0) return denied(false);
  const literal = oracleAddress(dest.host) !== undefined;
  const name = literal ? undefined : labelsOf(dest.host);
  if (!literal && !name) return denied(false);
  // Exact entries before wildcards, each in list order.
  const rule = name && (c.hostnames.find((r) => !r.startsWith('*.') && ruleHolds(r, name)) ?? c.hostnames.find((r) => r.startsWith('*.') && ruleHolds(r, name)));
  const byName = rule !== undefined && (c.ports ?? [80, 443, 445]).includes(dest.port);
  const byCidr = c.allow.length > 0 && (c.ports === undefined || c.ports.includes(dest.port));
  if (!byName && !byCidr) return denied(false);
  const lookedUp = !literal;
  if (!literal && answers.fail) return denied(true);
  const list = literal ? [dest.host] : answers.fail ? [] : answers.addresses;
  const candidates = list.filter((text) => {
    const a = oracleAddress(text);
    return a !== undefined && !c.blocked.some((r) => holds(r, a));
  });
  if (byCidr) {
    for (const text of candidates) {
      const range = c.allow.find((r) => holds(r, oracleAddress(text)!));
      if (range) return { verdict: { allowed: true, address: text, rule: `outboundAllowCIDR ${range}` }, lookedUp };
    }
  }
  if (byName && candidates.length > 0) return { verdict: { allowed: true, address: candidates[0]!, rule: `outboundAllowHostname ${rule}` }, lookedUp };
  return denied(lookedUp);
}

// ---- generators ------------------------------------------------------------------------------

const V4_ANCHORS = [0x0a000000, 0x0a000105, 0xc0000200, 0xcb007100, 0x7f000001, 0xa9fea9fe, 0x08080808];
const V6_ANCHORS = ['2001:db8::', '2001:db8:0:1::1', 'fe80::1', '::1', 'fd00::5'];
const v4Text = (v: number): string => [v >>> 24, (v >>> 16) & 255, (v >>> 8) & 255, v & 255].join('.');
const flip = (v: number): number => (v ^ (1 << int(32))) >>> 0;

function v4Near(): number {
  const a = pick(V4_ANCHORS);
  return chance(0.5) ? a : chance(0.7) ? flip(a) : int(2 ** 32);
}

function v6Near(): string {
  const bytes = ipaddr.parse(pick(V6_ANCHORS)).toByteArray();
  if (chance(0.6)) {
    const bit = int(128);
    bytes[bit >> 3] = bytes[bit >> 3]! ^ (1 << (bit & 7));
  }
  return ipaddr.fromByteArray(bytes).toString();
}

function mappedText(v: number): string {
  return chance(0.5) ? `::ffff:${v4Text(v)}` : `::${chance(0.3) ? 'FFFF' : 'ffff'}:${(v >>> 16).toString(16)}:${(v & 0xffff).toString(16)}`;
}

function addressText(): string {
  const r = rnd();
  if (r < 0.55) return v4Text(v4Near());
  if (r < 0.8) return v6Near();
  return mappedText(v4Near());
}

function rangeText(): string {
  if (chance(0.1)) return pick(['0.0.0.0/0', '::/0']);
  if (chance(0.65)) {
    const bits = pick([8, 16, 24, 31, 32, int(33)]);
    const text = v4Text(v4Near());
    return chance(0.1) ? `::ffff:${text}/${96 + bits}` : chance(0.15) && bits === 32 ? text : `${text}/${bits}`;
  }
  return `${v6Near()}/${pick([16, 32, 64, 127, 128, int(129)])}`;
}

const BASES = ['example.com', 'api.example.com', 'example.org', 'xn--bcher-kva.example', 'svc.test', 'localhost', 'a-b_c.example.net', 'co.uk'];
const EXTRA = ['www', 'a', 'b-c', '_srv', '0', 'xn--p1ai', 'xn--80ak6aa92e', 'EXAMPLE', 'com'];

function ruleText(): string {
  let r = pick(BASES);
  if (chance(0.45)) r = `*.${r}`;
  if (chance(0.15)) r = r.toUpperCase();
  if (chance(0.1)) r = `${r}.`;
  return r;
}

/** A host name near the rules (most often one a rule names), mutated. */
function hostText(rules: readonly string[]): string {
  const rule = rules.length > 0 && chance(0.7) ? pick(rules) : undefined;
  const base = rule === undefined ? pick(BASES) : rule.startsWith('*.') ? `${pick(EXTRA)}.${rule.slice(2)}` : rule;
  let labels = base.split('.');
  const steps = chance(0.4) ? 0 : int(4);
  for (let i = 0; i < steps; i++) {
    const m = int(7);
    if (m === 0) labels = [pick(EXTRA), ...labels];
    else if (m === 1 && labels.length > 1) labels = labels.slice(1);
    else if (m === 2) labels = [...labels, pick(['evil', 'com', 'test'])];
    else if (m === 3) labels[int(labels.length)] = `xn--${Math.floor(rnd() * 36 ** 6).toString(36)}`;
    else if (m === 4) labels = labels.map((l) => [...l].map((ch) => (chance(0.3) ? ch.toUpperCase() : ch)).join(''));
    else labels = [...labels];
  }
  let s = labels.join('.');
  if (chance(0.15)) s = `${s}.`;
  if (chance(0.2)) {
    const at = int(s.length + 1);
    const c = pick(['.', '', '*', ' ', '\u212A', '\u0430', 'ü', '-', '_', ':']);
    s = chance(0.5) ? s.slice(0, at) + c + s.slice(at) : s.slice(0, at) + c + s.slice(at + 1);
  }
  return s;
}

const PORTS = [22, 80, 443, 445, 5432, 8080, 8443, 9000];

function config(): Config {
  const ports = chance(0.4) ? Array.from({ length: 1 + int(3) }, () => pick(PORTS)) : undefined;
  return {
    allow: chance(0.75) ? Array.from({ length: int(4) }, rangeText) : [],
    blocked: chance(0.5) ? Array.from({ length: 1 + int(2) }, rangeText) : [],
    hostnames: chance(0.75) ? Array.from({ length: int(4) }, ruleText) : [],
    ...(ports ? { ports } : {}),
  };
}

function answers(): Answers {
  if (chance(0.1)) return { fail: true };
  const list = Array.from({ length: int(5) }, addressText);
  if (chance(0.05)) list.splice(int(list.length + 1), 0, pick(['', 'garbage', '10.0.0.1:80', '[::1]']));
  return { fail: false, addresses: list };
}

// ---- the comparison --------------------------------------------------------------------------

const CASES = 6000;

t.test(`${CASES} generated destinations agree with the oracle`, async (t) => {
  const tally = { allowedCidr: 0, allowedName: 0, denied: 0, lookups: 0 };
  let failures = 0;
  for (let i = 0; i < CASES && failures < 10; i++) {
    const c = config();
    const host = chance(0.35) ? addressText() : hostText(c.hostnames);
    const dest: EgressDestination = { host, port: chance(0.4) ? pick([80, 443]) : pick(PORTS), protocol: pick(['http', 'https', 'tcp'] as const) };
    const given = answers();
    const asked: string[] = [];
    const workload = {
      firewallConfig: {
        external: { outboundAllowCIDR: c.allow, outboundBlockedCIDR: c.blocked, outboundAllowHostname: c.hostnames, ...(c.ports ? { outboundAllowPort: c.ports.map((number) => ({ protocol: 'tcp', number })) } : {}) },
      },
    } as unknown as WorkloadModel;
    const got: EgressVerdict = await egressPolicy(workload).check(dest, async (name) => {
      asked.push(name);
      if (given.fail) throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
      return given.addresses;
    });
    const want = oracle(c, dest, given);
    const gotShape = got.allowed ? { allowed: true, address: got.address, rule: got.rule } : { allowed: false };
    const ok = JSON.stringify(gotShape) === JSON.stringify(want.verdict) && (asked.length > 0) === want.lookedUp && asked.every((n) => n === host);
    if (!ok) {
      failures++;
      t.fail(`case ${i} (EGRESS_ORACLE_SEED=${SEED})`, { config: c, dest, answers: given, got, want, asked });
    }
    if (got.allowed) tally[got.rule.startsWith('outboundAllowCIDR') ? 'allowedCidr' : 'allowedName']++;
    else tally.denied++;
    if (asked.length > 0) tally.lookups++;
  }
  t.equal(failures, 0, 'every case agrees');
  t.comment(`outcomes: ${JSON.stringify(tally)}`);
  // The draw must reach every outcome, or the comparison proves little.
  t.ok(tally.allowedCidr > CASES / 50 && tally.allowedName > CASES / 50 && tally.denied > CASES / 5 && tally.lookups > CASES / 10, 'every outcome is common', tally);
});
