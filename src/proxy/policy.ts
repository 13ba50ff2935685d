/**
 * Which filters exist and in what order (DESIGN §5). Ingress filters run after the host is resolved
 * and before a replica is chosen; sidecar filters run in front of the app, in this order: external
 * authorization, then rate limiting (a request the auth server denies never spends rate-limit quota).
 * Each factory returns no filter for a workload whose policy does not use it, so untagged workloads
 * run an empty chain.
 */
import type { FilterFactories } from './routes.js';
import { rateLimitFactory } from '../ratelimit/index.js';
import { extAuthFactory, type ExtAuthOptions } from '../extauth/index.js';
import { externalFirewallFactory } from '../firewall/index.js';

export function defaultFactories(options: { extAuth?: ExtAuthOptions } = {}): FilterFactories {
  return {
    ingress: [externalFirewallFactory()],
    sidecar: [extAuthFactory(options.extAuth), rateLimitFactory()],
  };
}
