/**
 * The external firewall (`spec.firewallConfig.external`), an ingress filter: which requests from
 * outside reach a workload. Deny by default, as on the platform: without `inboundAllowCIDR` nothing
 * external gets in. The client address is the one after the GVC's `trustedProxies`
 * (Exchange.clientAddress). A request is blocked when its address is in `inboundBlockedCIDR`
 * (blocked wins), when it is in no `inboundAllowCIDR` range, or when `http.inboundHeaderFilter`
 * rejects a header: for each `{key, allowedValues, blockedValues}` (regexes matched against the
 * whole value, as Envoy's `safe_regex`), a value of header `key` matching any blocked regex blocks,
 * and with `allowedValues` given the header must be present and every value must match one of them.
 * Mesh requests are not its business (the internal firewall decides those). Compiled once per
 * workload model; a setting that cannot compile blocks (fails closed).
 */
import type { WorkloadModel } from '../config/model.js';
import type { ExchangeView, Filter, FilterContext, FilterFactory } from '../filter/index.js';
import type { Counter, Registry } from 'prom-client';
import { sharedCounter } from '../admin/registered.js';
import { compileCidrs, parseAddress, type CidrSet } from './cidr.js';

export type BlockReason = 'blocked_cidr' | 'not_allowed' | 'header_filter' | 'invalid_config';

/** `undefined`: admitted. `rawHeaders` is Node's flat name/value list. */
export type ExternalFirewallCheck = (clientAddress: string, rawHeaders: readonly string[]) => BlockReason | undefined;

export interface CompiledFirewall {
  /** `undefined` when the configuration admits every request (no filter needed). */
  readonly check: ExternalFirewallCheck | undefined;
  readonly problems: readonly string[];
}

interface HeaderRule {
  readonly key: string;
  readonly allowed: readonly RegExp[] | undefined;
  readonly blocked: readonly RegExp[];
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function strings(v: unknown): string[] {
  return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
}

function fullMatch(source: string): RegExp {
  return new RegExp(`^(?:${source})$`);
}

const BLOCK_ALL: ExternalFirewallCheck = () => 'invalid_config';

/** Compile a workload's external firewall (pure). */
export function compileExternalFirewall(workload: Pick<WorkloadModel, 'firewallConfig'>): CompiledFirewall {
  const external = isRecord(workload.firewallConfig?.external) ? workload.firewallConfig.external : {};
  const problems: string[] = [];
  const allow = compileCidrs(strings(external.inboundAllowCIDR));
  for (const bad of allow.invalid) problems.push(`inboundAllowCIDR ${JSON.stringify(bad)} is not a CIDR range or address (ignored)`);
  const blocked = compileCidrs(strings(external.inboundBlockedCIDR));
  if (blocked.invalid.length > 0) {
    problems.push(`inboundBlockedCIDR ${blocked.invalid.map((b) => JSON.stringify(b)).join(', ')} cannot be read: every request is blocked`);
    return { check: BLOCK_ALL, problems };
  }
  const rules: HeaderRule[] = [];
  const filters = isRecord(external.http) ? external.http.inboundHeaderFilter : undefined;
  for (const [i, f] of (Array.isArray(filters) ? filters : []).entries()) {
    try {
      if (!isRecord(f) || typeof f.key !== 'string' || f.key === '') throw new Error('needs a key');
      const allowedValues = f.allowedValues === undefined || f.allowedValues === null ? undefined : strings(f.allowedValues).map(fullMatch);
      rules.push({ key: f.key.toLowerCase(), allowed: allowedValues, blocked: strings(f.blockedValues).map(fullMatch) });
    } catch (err) {
      problems.push(`http.inboundHeaderFilter[${i}]: ${(err as Error).message}: every request is blocked`);
      return { check: BLOCK_ALL, problems };
    }
  }
  return { check: buildCheck(allow.set, blocked.set, rules), problems };
}

function buildCheck(allow: CidrSet, blocked: CidrSet, rules: readonly HeaderRule[]): ExternalFirewallCheck | undefined {
  const allowAll = allow.everything;
  if (allowAll && blocked.ranges.length === 0 && rules.length === 0) return undefined;
  return (clientAddress, rawHeaders) => {
    const address = parseAddress(clientAddress);
    if (address && blocked.contains(address)) return 'blocked_cidr';
    if (!allowAll && !(address && allow.contains(address))) return 'not_allowed';
    for (const rule of rules) if (!headerAdmits(rule, rawHeaders)) return 'header_filter';
    return undefined;
  };
}

function headerAdmits(rule: HeaderRule, raw: readonly string[]): boolean {
  let seen = false;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.toLowerCase() !== rule.key) continue;
    seen = true;
    const value = raw[i + 1]!;
    for (const re of rule.blocked) if (re.test(value)) return false;
    if (rule.allowed && !rule.allowed.some((re) => re.test(value))) return false;
  }
  // With an allow list the header must be there: a request without it carries no allowed value.
  return seen || rule.allowed === undefined;
}

const cache = new WeakMap<object, CompiledFirewall>();
/**
 * Compiled firewalls by their configuration's text: most workloads of a configuration share one
 * (ten thousand workloads allowing `0.0.0.0/0` and `::/0` parse four ranges, not forty thousand).
 * A compiled firewall is immutable, so sharing is safe; emptied when it holds `SHARED_MAX` texts.
 */
const shared = new Map<string, CompiledFirewall>();
const SHARED_MAX = 4096;

/** The compiled firewall of a workload model (models are immutable and replaced on reload). */
export function externalFirewall(workload: WorkloadModel): CompiledFirewall {
  let compiled = cache.get(workload);
  if (!compiled) {
    const text = JSON.stringify(workload.firewallConfig?.external ?? null);
    compiled = shared.get(text);
    if (!compiled) {
      compiled = compileExternalFirewall(workload);
      if (shared.size >= SHARED_MAX) shared.clear();
      shared.set(text, compiled);
    }
    cache.set(workload, compiled);
  }
  return compiled;
}

const BLOCKED = 'svcproxy_firewall_blocked_total';

function blockedCounter(registry: Registry): Counter<'workload' | 'reason'> {
  return sharedCounter(registry, BLOCKED, 'Requests blocked by the external firewall, by workload and reason (blocked_cidr, not_allowed, header_filter, invalid_config)', ['workload', 'reason']);
}

/** The ingress filter factory; no filter for a workload whose firewall admits everything. */
export function externalFirewallFactory(): FilterFactory {
  return (ctx: FilterContext): Filter | undefined => {
    const { check, problems } = externalFirewall(ctx.workload);
    if (problems.length > 0) {
      const logger = ctx.deps.logger.child({ component: 'firewall', workload: ctx.workload.key });
      for (const p of problems) logger.warn(p);
    }
    if (!check) return undefined;
    const counter = blockedCounter(ctx.metrics.registry);
    const workload = ctx.workload.key;
    const children = new Map<BlockReason, Counter.Internal>();
    return {
      name: 'external_firewall',
      run(ex: ExchangeView) {
        // Callers inside the mesh are the internal firewall's to judge.
        if (ex.listenerKind === 'mesh') return undefined;
        const reason = check(ex.clientAddress, ex.req.rawHeaders);
        if (reason === undefined) return undefined;
        let child = children.get(reason);
        if (!child) children.set(reason, (child = counter.labels(workload, reason)));
        child.inc();
        return { code: 'FIREWALL_BLOCKED' };
      },
    };
  };
}
