/**
 * Which rule limits a descriptor, as the reference rate-limit server decides: walk the descriptor's
 * entries down the domain's rule tree; at each level an entry takes the rule with its exact value,
 * else a rule whose value ends in `*` and prefixes it, else the key-only rule (any value). The limit
 * applies only when the last entry lands on a rule with a `rate_limit`; a descriptor that runs out of
 * rules first, or is longer than the rules, has no limit. A descriptor's own `limit` (Envoy's
 * override) replaces the rules, for a known domain only. Pure functions.
 */
import type { Unit } from '../proto.js';
import { unitSeconds } from '../headers.js';
import type { DomainRules, Limit, RuleNode } from './rules.js';

export interface Entry {
  readonly key: string;
  readonly value: string;
}

function step(node: RuleNode, entry: Entry): RuleNode | undefined {
  const exact = node.exact.get(`${entry.key}\u0000${entry.value}`);
  if (exact) return exact;
  for (const p of node.prefixes) if (p.key === entry.key && entry.value.startsWith(p.prefix)) return p.node;
  return node.any.get(entry.key);
}

export function findLimit(domain: DomainRules, entries: readonly Entry[]): Limit | undefined {
  let node: RuleNode = domain.root;
  for (let i = 0; i < entries.length; i++) {
    const next = step(node, entries[i]!);
    if (!next) return undefined;
    if (i === entries.length - 1) return next.limit;
    node = next;
  }
  return undefined;
}

/** Envoy's per-descriptor limit override: applies with the domain's algorithm; an unknown unit is ignored. */
export function overrideLimit(domain: DomainRules, entries: readonly Entry[], override: { requests_per_unit: number; unit: Unit }): Limit | undefined {
  const windowSeconds = unitSeconds(override.unit);
  if (!windowSeconds) return undefined;
  return {
    fullKey: `${domain.name}.${entries.map((e) => (e.value ? `${e.key}_${e.value}` : e.key)).join('.')}`,
    requestsPerUnit: override.requests_per_unit,
    unit: override.unit,
    windowSeconds,
    unlimited: false,
    shadowMode: false,
    replaces: [],
    algorithm: domain.algorithm,
  };
}

/**
 * Drop the limits another matched limit `replaces` (by name), as the reference server: a request whose
 * descriptors match both a general and a specific limit can have the specific one stand in for the other.
 */
export function applyReplaces(limits: (Limit | undefined)[]): (Limit | undefined)[] {
  const replaced = new Set<string>();
  for (const l of limits) if (l) for (const name of l.replaces) replaced.add(name);
  if (replaced.size === 0) return limits;
  return limits.map((l) => (l?.name && replaced.has(l.name) ? undefined : l));
}
