/**
 * What each filter of a workload's chains would do with the explained request, read from the
 * filters the RouteTable built (the data plane's own objects, so their compiled configuration) and
 * decided by the same matchers they run: `excludedExternalAuth` and `excludedRateLimit` through
 * src/extauth/exclusions.ts's compiled predicates, rate-limit descriptors through
 * src/ratelimit/descriptors.ts's `buildEntries`, the external firewall through its compiled check.
 * Nothing here calls a service: the answer of an authorization or rate-limit service is the one
 * thing explain cannot know, and it says so.
 */
import type { Filter } from '../filter/index.js';
import { ExtAuthFilter } from '../extauth/filter.js';
import { authority } from '../extauth/tags.js';
import { rawHeaderLookup, type MatchInput } from '../extauth/exclusions.js';
import { RateLimitFilter } from '../ratelimit/filter.js';
import { buildEntries } from '../ratelimit/descriptors.js';
import { targetKey } from '../ratelimit/client.js';

/** The request as the sidecar filters read it (the data plane's ExchangeView, reduced to what they match on). */
export interface FilterInput {
  readonly method: string;
  readonly host: string;
  readonly path: string;
  readonly query: string;
  readonly rawHeaders: readonly string[];
  readonly headers: Readonly<Record<string, string>>;
  readonly clientAddress: string;
  /** The port the request arrived on where the chain runs (the router's, or the replica sidecar's). */
  readonly listenerPort: number;
  /** The container port the request is for. */
  readonly targetPort: number | undefined;
}

export type FilterExplanation =
  | {
      readonly name: 'ext_authz';
      /** `checked`: the service is asked and its answer decides; `skipped`: not checked, see `why`. */
      readonly action: 'checked' | 'skipped';
      readonly why?: string;
      readonly target: string;
      readonly protocol: 'grpc' | 'http';
      readonly timeoutMs: number;
      readonly failureAllow: boolean;
      readonly excludedByRule: boolean;
    }
  | {
      readonly name: 'ratelimit';
      readonly action: 'checked' | 'skipped';
      readonly why?: string;
      readonly target: string;
      readonly domain: string;
      /** The one descriptor's entries sent with `hits_addend` 1; absent when not checked. */
      readonly descriptors?: readonly { readonly key: string; readonly value: string }[];
      readonly failureAllow: boolean;
      readonly timeoutMs: number;
      readonly excludedByRule: boolean;
    }
  | { readonly name: string; readonly action: 'runs'; readonly why?: string };

/** One sidecar filter, as it would treat `input`. */
export function explainFilter(filter: Filter, input: FilterInput): FilterExplanation {
  if (filter instanceof ExtAuthFilter) return explainExtAuth(filter, input);
  if (filter instanceof RateLimitFilter) return explainRateLimit(filter, input);
  return { name: filter.name, action: 'runs' };
}

function explainExtAuth(filter: ExtAuthFilter, input: FilterInput): FilterExplanation {
  const config = filter.config;
  // The filter's own compiled predicate (never re-compiled, so the rule matched here is the one the filter runs).
  const excluded = filter.excluded;
  const base = {
    name: 'ext_authz' as const,
    target: `${config.protocol === 'grpc' ? 'grpc' : 'http'}${config.scheme === 'https' ? 's' : ''}://${authority(config)}${config.protocol === 'http' ? config.pathPrefix : ''}`,
    protocol: config.protocol,
    timeoutMs: config.timeoutMs,
    failureAllow: config.failureAllow,
  };
  // Order as ExtAuthFilter.run: the listen port first, then the exclusions.
  if (config.listenPort !== undefined && input.targetPort !== undefined && input.targetPort !== config.listenPort) {
    return { ...base, action: 'skipped', why: `only port ${config.listenPort} is checked (svc/externalAuthListenPort); this request is for ${input.targetPort}`, excludedByRule: false };
  }
  const header = rawHeaderLookup(input.rawHeaders, input.host, { ':method': input.method, ':path': input.path + input.query });
  if (excluded && excluded(matchInput(input, header))) return { ...base, action: 'skipped', why: 'an excludedExternalAuth rule matches', excludedByRule: true };
  return { ...base, action: 'checked', excludedByRule: false };
}

function explainRateLimit(filter: RateLimitFilter, input: FilterInput): FilterExplanation {
  const config = filter.config;
  const base = {
    name: 'ratelimit' as const,
    target: targetKey(config.target).slice('ratelimit:'.length),
    domain: config.domain,
    failureAllow: config.failureAllow,
    timeoutMs: config.timeoutMs,
  };
  // Order as RateLimitFilter.run: exclusions, then the descriptor.
  if (config.excluded && config.excluded(matchInput(input, rawHeaderLookup(input.rawHeaders, input.host)))) {
    return { ...base, action: 'skipped', why: 'an excludedRateLimit rule matches', excludedByRule: true };
  }
  const entries = buildEntries(config.descriptors, { host: input.host, path: input.path, method: input.method, clientAddress: input.clientAddress, headers: input.headers });
  if (!entries) {
    const names = config.descriptors.map((d) => d.key).join(', ');
    return { ...base, action: 'skipped', why: `a descriptor value is missing or empty (${names}): the request is not checked`, excludedByRule: false };
  }
  return { ...base, action: 'checked', descriptors: entries, excludedByRule: false };
}

function matchInput(input: FilterInput, header: (name: string) => string | undefined): MatchInput {
  return { path: input.path, query: input.query, header, listenerPort: input.listenerPort, targetPort: input.targetPort };
}
