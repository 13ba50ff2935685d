/**
 * The egress firewall (`spec.firewallConfig.external.outbound*`): whether a workload's call to a
 * destination outside the mesh, made through its sidecar's outbound listener (a proxied request or
 * a `CONNECT` tunnel), may leave, and which address to dial. Deny by default, as on the platform:
 * with neither `outboundAllowCIDR` nor `outboundAllowHostname` nothing leaves, without a lookup.
 * Never throws: a failed lookup, an unusable answer or a malformed destination is a denial with a
 * reason (fail closed); the lookup's bound is the resolver's own (resolv.conf timeout × attempts)
 * under the caller's request deadline. Compiled once per workload model; an `outboundBlockedCIDR`
 * entry that cannot be read denies everything, as the ingress firewall does with its block list.
 *
 * Semantics, from the platform's firewall reference (docs.controlplane.com/reference/workload/firewall,
 * "Outbound Requests"), its Terraform provider's schema (controlplane-com/terraform-provider-cpln,
 * `outbound_allow_hostname`, `outbound_allow_port`) and its own assistant notes
 * (controlplane-com/ai-plugin, skills/firewall-networking), with what svcproxy decided where they
 * are silent:
 * - Two paths. The CIDR path: a resolved address in an `outboundAllowCIDR` range, on every port.
 *   The hostname path: a name in `outboundAllowHostname`, on ports 80, 443 and 445 only (the
 *   reference's list; the Terraform text says 80/443). "The IP/CIDR addresses take precedence
 *   over hostnames": an address the CIDR path admits is chosen before any other answer.
 * - `outboundAllowPort` (`{protocol: http | https | tcp, number}`), when it lists anything, replaces
 *   both port sets: the CIDR path and the hostname path open only the listed numbers (an empty
 *   list is "no outbound ports": unset). Decided: an entry matches by its number; its protocol does
 *   not narrow the match. On the platform the protocol tells a transparent sidecar how to read
 *   the destination's name from the traffic (Host header, TLS SNI, none); svcproxy's outbound
 *   listener is an explicit proxy told the name by the client on every protocol, so the protocol
 *   has nothing left to decide (and a `CONNECT` to 8443 could not be told to be https or tcp).
 * - `outboundBlockedCIDR` wins over both paths: an allowed name that resolves into a blocked range
 *   is still refused ("blocking an address has the same effect as not including it in the allow
 *   list"). A name with several answers is admitted through the first answer the CIDR path admits,
 *   else (hostname path) the first answer that is not blocked; a blocked answer is never chosen.
 *   The chosen address is the one dialled, so a second lookup cannot rebind the name.
 * - Host names: compared case-insensitively, one trailing dot ignored, ASCII only (clients send
 *   IDNs as punycode, `xn--` labels, compared as written); a name with an empty label or a
 *   character outside letters, digits, `-` and `_` is refused before any lookup. `*.example.com`
 *   (a wildcard "on the prefix of the hostname only") matches names under example.com at any
 *   depth (`a.example.com`, `a.b.example.com`), as the suffix wildcards of Envoy, the platform's
 *   sidecar, do; it does not match `example.com` itself. A `*` anywhere else makes the entry
 *   match nothing. Hostname rules name names: an IP literal is judged by the CIDR rules only.
 * - CIDRs: src/firewall/cidr.ts, so `::ffff:10.0.0.1` is checked as 10.0.0.1 and IPv4 and IPv6
 *   stay apart otherwise (`0.0.0.0/0` opens IPv4 only; add `::/0` for IPv6).
 * - Loopback, link-local and private ranges are not special: the rules decide. The platform drops
 *   private ranges from `outboundAllowCIDR` on its managed locations; svcproxy keeps them, since
 *   reaching a service on the developer's machine or network is what a local run is for.
 */
import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import type { WorkloadModel } from '../config/model.js';
import { cidrContains, parseAddress, parseCidr, type Address, type Cidr } from './cidr.js';

export interface EgressDestination {
  /** Host name or IP literal as the client named it (no brackets, no port). */
  readonly host: string;
  readonly port: number;
  /** `http` for proxied plain requests, `https`/`tcp` for CONNECT tunnels (CONNECT to port 443 counts as https). */
  readonly protocol: 'http' | 'https' | 'tcp';
}

export type EgressVerdict =
  | {
      readonly allowed: true;
      /** The IP address to dial: the one that was checked (no second DNS lookup: no rebinding). */
      readonly address: string;
      readonly rule: string;
    }
  | { readonly allowed: false; readonly reason: string };

/** All A/AAAA answers for a name. */
export type Lookup = (host: string) => Promise<readonly string[]>;

export interface EgressPolicy {
  /** True when no outbound rule is set at all: everything is denied without a lookup. */
  readonly denyAll: boolean;
  /** Entries that were ignored (or, for a blocked CIDR, that deny everything), for the config report. */
  readonly problems: readonly string[];
  check(dest: EgressDestination, lookup: Lookup): Promise<EgressVerdict>;
}

/** Ports a hostname rule opens while `outboundAllowPort` lists nothing. */
export const HOSTNAME_DEFAULT_PORTS: readonly number[] = [80, 443, 445];

interface Range {
  readonly text: string;
  readonly cidr: Cidr;
}

interface Wildcard {
  readonly text: string;
  /** `.example.com` for `*.example.com`. */
  readonly suffix: string;
}

const NAME_CHARS = /^[A-Za-z0-9_.-]+$/;
const LABEL = /^[a-z0-9_-]{1,63}$/;

/**
 * The comparable form of a host name: lower case, without one trailing dot; `undefined` for what
 * is not a name (empty labels, other characters, over 253 characters).
 */
export function normalizeHostname(host: string): string | undefined {
  const s = host.endsWith('.') ? host.slice(0, -1) : host;
  if (s.length === 0 || s.length > 253 || !NAME_CHARS.test(s)) return undefined;
  const lower = s.toLowerCase(); // ASCII only here, so no locale or Unicode folding surprises
  for (const label of lower.split('.')) if (!LABEL.test(label)) return undefined;
  return lower;
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function ranges(list: readonly string[], member: string, problems: string[]): { ranges: Range[]; invalid: string[] } {
  const out: Range[] = [];
  const invalid: string[] = [];
  for (const text of list) {
    const cidr = parseCidr(text);
    if (cidr) out.push({ text: text.trim(), cidr });
    else {
      invalid.push(text);
      problems.push(`${member} ${JSON.stringify(text)} is not a CIDR range or address (ignored)`);
    }
  }
  return { ranges: out, invalid };
}

function find(list: readonly Range[], address: Address): Range | undefined {
  for (const r of list) if (cidrContains(r.cidr, address)) return r;
  return undefined;
}

function portNumbers(v: unknown): Set<number> | undefined {
  if (!Array.isArray(v) || v.length === 0) return undefined;
  // Entries that cannot be read open nothing: a list of only those restricts to no port (fail closed).
  const out = new Set<number>();
  for (const e of v) {
    const n = isRecord(e) ? e.number : undefined;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= 65535) out.add(n);
  }
  return out;
}

function errorText(err: unknown): string {
  if (isRecord(err) && typeof err.code === 'string') return err.code;
  return err instanceof Error ? err.message : String(err);
}

const deny = (reason: string): EgressVerdict => ({ allowed: false, reason });

function compile(workload: WorkloadModel): EgressPolicy {
  const external = isRecord(workload.firewallConfig?.external) ? workload.firewallConfig.external : {};
  const problems: string[] = [];
  const allow = ranges(strings(external.outboundAllowCIDR), 'outboundAllowCIDR', problems).ranges;
  const blockedList = ranges(strings(external.outboundBlockedCIDR), 'outboundBlockedCIDR', problems);
  const blocked = blockedList.ranges;
  const exact = new Map<string, string>();
  const wildcards: Wildcard[] = [];
  for (const text of strings(external.outboundAllowHostname)) {
    const wild = text.startsWith('*.');
    const name = normalizeHostname(wild ? text.slice(2) : text);
    if (!wild && isIP(text) !== 0) problems.push(`outboundAllowHostname ${JSON.stringify(text)} is an address: list it in outboundAllowCIDR (ignored)`);
    else if (name === undefined) problems.push(`outboundAllowHostname ${JSON.stringify(text)} is not a host name or *.name (ignored)`);
    else if (wild) wildcards.push({ text, suffix: `.${name}` });
    else if (!exact.has(name)) exact.set(name, text);
  }
  const ports = portNumbers(external.outboundAllowPort);
  const namePorts = ports ?? new Set(HOSTNAME_DEFAULT_PORTS);
  const namePortList = [...namePorts].sort((a, b) => a - b).join(', ');

  let denyReason: string | undefined;
  if (blockedList.invalid.length > 0) {
    denyReason = `outboundBlockedCIDR ${blockedList.invalid.map((b) => JSON.stringify(b)).join(', ')} cannot be read: all egress is denied`;
    problems.push(denyReason);
  } else if (allow.length === 0 && exact.size === 0 && wildcards.length === 0) {
    denyReason = 'no outboundAllowCIDR or outboundAllowHostname is set: egress is denied by default';
  }

  const nameRule = (name: string): string | undefined => {
    const hit = exact.get(name);
    if (hit !== undefined) return hit;
    for (const w of wildcards) if (name.length > w.suffix.length && name.endsWith(w.suffix)) return w.text;
    return undefined;
  };

  const check = async (dest: EgressDestination, lookup: Lookup): Promise<EgressVerdict> => {
    if (denyReason !== undefined) return deny(denyReason);
    const { host, port } = dest;
    if (!Number.isInteger(port) || port < 1 || port > 65535) return deny(`${String(port)} is not a port number`);
    const literal = isIP(host) !== 0;
    const name = literal ? undefined : normalizeHostname(host);
    if (!literal && name === undefined) return deny(`${JSON.stringify(host)} is not a host name or an IP address`);
    const rule = name === undefined ? undefined : nameRule(name);
    const byName = rule !== undefined && namePorts.has(port);
    const byCidr = allow.length > 0 && (ports === undefined || ports.has(port));
    const shown = name ?? host;

    if (!byName && !byCidr) {
      // Neither path can admit it whatever the name resolves to: refuse without asking DNS.
      const why: string[] = [];
      if (rule !== undefined) why.push(`outboundAllowHostname ${rule} opens ports ${namePortList} only`);
      else if (name !== undefined) why.push(`${name} matches no outboundAllowHostname`);
      if (allow.length > 0) why.push(`port ${port} is not in outboundAllowPort`);
      else why.push('outboundAllowCIDR is empty');
      return deny(`${shown}:${port}: ${why.join('; ')}`);
    }

    let answers: readonly string[];
    if (literal) answers = [host];
    else {
      try {
        answers = await lookup(host);
      } catch (err) {
        return deny(`looking up ${shown} failed: ${errorText(err)}`);
      }
      if (!Array.isArray(answers)) return deny(`looking up ${shown} gave no list of addresses`);
    }

    let open: string | undefined;
    let firstBlocked: { readonly address: string; readonly range: Range } | undefined;
    let usable = 0;
    for (const text of answers) {
      // A lookup answers bare addresses; anything else (a port, brackets) is not one to dial.
      if (typeof text !== 'string' || isIP(text) === 0) continue;
      const address = parseAddress(text);
      if (!address) continue;
      usable++;
      const b = find(blocked, address);
      if (b) {
        firstBlocked ??= { address: text, range: b };
        continue;
      }
      if (byCidr) {
        const r = find(allow, address);
        if (r) return { allowed: true, address: text, rule: `outboundAllowCIDR ${r.text}` };
      }
      open ??= text;
    }
    if (byName && open !== undefined) return { allowed: true, address: open, rule: `outboundAllowHostname ${rule}` };

    if (usable === 0) return deny(answers.length === 0 ? `${shown} has no address` : `looking up ${shown} gave no usable address`);
    if (open === undefined && firstBlocked) {
      const every = usable > 1 ? ' (as is every other address)' : '';
      return deny(`${shown}:${port}: ${firstBlocked.address} is in outboundBlockedCIDR ${firstBlocked.range.text}${every}`);
    }
    const why = [`${literal ? host : `${shown} (${answers.join(', ')})`} is in no outboundAllowCIDR range`];
    if (rule !== undefined && !byName) why.push(`outboundAllowHostname ${rule} opens ports ${namePortList} only`);
    else if (rule === undefined && name !== undefined) why.push(`${name} matches no outboundAllowHostname`);
    return deny(`${shown}:${port}: ${why.join('; ')}`);
  };

  return { denyAll: denyReason !== undefined, problems, check };
}

const cache = new WeakMap<WorkloadModel, EgressPolicy>();

/** Compiled once per workload model (models are immutable and replaced on reload). */
export function egressPolicy(workload: WorkloadModel): EgressPolicy {
  let policy = cache.get(workload);
  if (!policy) {
    policy = compile(workload);
    cache.set(workload, policy);
  }
  return policy;
}

/** The system resolver (getaddrinfo, as `curl` and the app itself would see it), every answer in its order. */
export const systemLookup: Lookup = async (host) => {
  if (isIP(host) !== 0) return [host];
  const answers = await dns.lookup(host, { all: true, verbatim: true });
  return answers.map((a) => a.address);
};
