/**
 * `host:port` parsing for flags and records (`127.0.0.1:8080`, `[::1]:8080`, `:8080`, `localhost:0`).
 * Throws a plain Error naming the bad value; callers report it as a usage or config error.
 */
import type { HostPort } from './routing/replicas.js';

export function parseHostPort(value: string, defaultHost = '127.0.0.1'): HostPort {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(value.trim());
  if (!m) throw new Error(`not a host:port address: ${JSON.stringify(value)}`);
  const port = Number(m[3]);
  if (port > 65535) throw new Error(`port out of range in ${JSON.stringify(value)}`);
  const host = m[1] ?? (m[2] || defaultHost);
  return { host, port };
}

export function formatHostPort(address: HostPort): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}
