/**
 * The command line's vocabulary, apart from the entry point so that the roles it starts can take
 * their flags without importing src/cli.ts back: the option table (each option also an environment
 * variable `SVCPROXY_<NAME>`, read by cli.ts's parseFlags) and the `Flags` type derived from it, the
 * listener limits read from their flags, and the drain grace a stopping role allows. A bad value
 * throws `UsageError`, which the entry point reports with the usage text and exit code 2.
 */
import type { ParseArgsConfig } from 'node:util';
import type { Snapshot } from './config/model.js';
import { parseDuration } from './config/values.js';
import type { ListenerLimits } from './proxy/listener.js';

export const OPTIONS = {
  config: { type: 'string', short: 'c', multiple: true },
  listen: { type: 'string', multiple: true },
  'listen-tls': { type: 'string', multiple: true },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  'tls-client-ca': { type: 'string' },
  'extauth-ca': { type: 'string' },
  mesh: { type: 'string', multiple: true },
  'mesh-inbound': { type: 'string', multiple: true },
  'mesh-cert': { type: 'string' },
  'mesh-key': { type: 'string' },
  'mesh-ca': { type: 'string' },
  'mesh-cert-ttl': { type: 'string' },
  admin: { type: 'string' },
  location: { type: 'string' },
  app: { type: 'string' },
  org: { type: 'string' },
  gvc: { type: 'string' },
  workload: { type: 'string' },
  replica: { type: 'string' },
  redis: { type: 'string' },
  'app-domain': { type: 'string' },
  'direct-domain': { type: 'string' },
  'internal-domain': { type: 'string' },
  vendor: { type: 'string' },
  output: { type: 'string', short: 'o' },
  'log-level': { type: 'string' },
  'log-dir': { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  container: { type: 'string' },
  'tracing-collector': { type: 'string' },
  'dns-server': { type: 'string', multiple: true },
  'headers-timeout': { type: 'string' },
  'idle-timeout': { type: 'string' },
  'max-connections': { type: 'string' },
  'max-requests-per-connection': { type: 'string' },
  'max-concurrent-streams': { type: 'string' },
  'max-event-loop-delay': { type: 'string' },
  workers: { type: 'string' },
  verbose: { type: 'boolean', short: 'v' },
  debug: { type: 'boolean', short: 'd' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

export type Flags = {
  [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K] extends { multiple: true } ? string[] : (typeof OPTIONS)[K] extends { type: 'boolean' } ? boolean : string;
};

/** A flag or command the entry point cannot use: reported with the usage text, exit code 2. */
export class UsageError extends Error {}

/** The listener limits and the shedding threshold from their flags; absent flags keep the defaults. */
export function limitsFrom(flags: Flags): (ListenerLimits & { readonly maxEventLoopDelayMs?: number }) | undefined {
  const duration = (name: 'headers-timeout' | 'idle-timeout' | 'max-event-loop-delay', min: number): number | undefined => {
    const text = flags[name];
    if (text === undefined) return undefined;
    const ms = parseDuration(text);
    if (ms === undefined || !(ms >= min)) throw new UsageError(`--${name} must be a duration of at least ${min} ms (200ms, 1.5s, 2m), not ${JSON.stringify(text)}`);
    return ms;
  };
  const count = (name: 'max-connections' | 'max-requests-per-connection' | 'max-concurrent-streams', min: number): number | undefined => {
    const text = flags[name];
    if (text === undefined) return undefined;
    const n = Number(text);
    if (!/^\d+$/.test(text.trim()) || n < min) throw new UsageError(`--${name} must be a whole number of at least ${min}, not ${JSON.stringify(text)}`);
    return n;
  };
  const limits = {
    headersTimeoutMs: duration('headers-timeout', 1),
    idleTimeoutMs: duration('idle-timeout', 1),
    maxEventLoopDelayMs: duration('max-event-loop-delay', 0),
    maxConnections: count('max-connections', 0),
    maxRequestsPerConnection: count('max-requests-per-connection', 0),
    maxConcurrentStreams: count('max-concurrent-streams', 1),
  };
  const given = Object.fromEntries(Object.entries(limits).filter(([, v]) => v !== undefined));
  return Object.keys(given).length > 0 ? given : undefined;
}

/**
 * How long a stopping role lets requests in flight finish: the longest `terminationGracePeriodSeconds`
 * of the configuration's workloads, 90 s when none sets one.
 */
export function graceMs(snapshot: Snapshot): number {
  let seconds = 0;
  for (const w of snapshot.workloads.values()) seconds = Math.max(seconds, w.terminationGracePeriodSeconds);
  return (seconds || 90) * 1000;
}
