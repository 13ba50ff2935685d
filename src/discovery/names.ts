/**
 * Which addresses of a `deployment` replica are found by DNS (DESIGN §8b). A host that is an IP
 * address is dialled as written; so is `localhost` and every `*.localhost` name, which resolve to
 * the loopback address without asking DNS (RFC 6761, as curl and browsers treat them). Any other
 * host name is looked up, and every address it answers is a replica.
 */
import { isIP } from 'node:net';
import { parseHostPort } from '../config/values.js';

export function isDiscoveredHost(host: string): boolean {
  if (host === '' || isIP(host) !== 0) return false;
  const h = host.toLowerCase().replace(/\.$/, '');
  return h !== 'localhost' && !h.endsWith('.localhost');
}

/** The host of a `host:port` / `[v6]:port` the records accept, lower-cased without a trailing dot; '' for anything else. */
function hostOf(address: string): string {
  return (parseHostPort(address)?.host ?? '').toLowerCase().replace(/\.$/, '');
}

/**
 * A replica entry's DNS name, when it has one: its `address`, `sidecar` and `mesh` must then all name
 * that one host (each replica answered is one pod, and its app, sidecar and mTLS listener are ports
 * of that one address). Returns an error text when they do not agree.
 */
export function discoveredNameOf(entry: { readonly address: string; readonly sidecar?: string | undefined; readonly mesh?: string | undefined }): { name?: string; error?: string } {
  // An address that is no `host:port` the records accept is their checks' to report.
  const hosts = [entry.address, entry.sidecar, entry.mesh].filter((a): a is string => a !== undefined).map(hostOf).filter((h) => h !== '');
  const named = hosts.filter(isDiscoveredHost);
  if (named.length === 0) return {};
  const name = named[0]!;
  if (named.length !== hosts.length || named.some((h) => h !== name)) {
    return { error: `address, sidecar and mesh must all name ${name} when one is found by DNS (every address it answers is one replica, with each of them as a port)` };
  }
  return { name };
}
