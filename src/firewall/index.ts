/**
 * Firewalls: the external one (an ingress filter over `firewallConfig.external`: CIDR allow and
 * block lists and HTTP header filters, deny by default) and the internal one (mesh callers,
 * `firewallConfig.internal`).
 */
export { externalFirewallFactory, externalFirewall, type BlockReason, type ExternalFirewallCheck } from './external.js';
export { internalFirewall, type MeshCaller } from './internal.js';
export { egressPolicy, systemLookup, HOSTNAME_DEFAULT_PORTS, type EgressDestination, type EgressPolicy, type EgressVerdict, type Lookup } from './egress.js';
