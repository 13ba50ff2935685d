/**
 * The command line's vocabulary, apart from the entry point so that the roles it starts can take
 * their flags without importing src/cli.ts back: the commands, the option table (each option also an
 * environment variable `SVCPROXY_<NAME>`, read by cli.ts's parseFlags) and the `Flags` type derived
 * from it, what each flag means and which commands take it (`FLAG_HELP`: the one source of both each
 * command's `--help` and the check that refuses a flag a command does not take), the listener limits
 * read from their flags, and the drain grace a stopping role allows. A bad value throws
 * `UsageError`, which the entry point reports with a one-line hint and exit code 2.
 */
import type { ParseArgsConfig } from 'node:util';
import type { Snapshot } from './config/model.js';
import { parseDuration } from './config/values.js';
import type { ListenerLimits } from './listener/index.js';

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
  status: { type: 'string' },
  metrics: { type: 'string' },
  api: { type: 'string' },
  location: { type: 'string' },
  org: { type: 'string' },
  app: { type: 'string' },
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
  header: { type: 'string', short: 'H', multiple: true },
  method: { type: 'string', short: 'X' },
  from: { type: 'string' },
  verbose: { type: 'boolean', short: 'v' },
  debug: { type: 'boolean', short: 'd' },
  help: { type: 'boolean', short: 'h' },
} as const satisfies ParseArgsConfig['options'];

export type Flags = {
  [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K] extends { multiple: true } ? string[] : (typeof OPTIONS)[K] extends { type: 'boolean' } ? boolean : string;
};

/** A flag or command the entry point cannot use: reported with a hint to the command's help, exit code 2. */
export class UsageError extends Error {}

/** The commands, in the order the global help lists them. */
export const COMMANDS = ['up', 'ingress', 'sidecar', 'ratelimit', 'validate', 'endpoints', 'explain', 'logs'] as const;
export type Command = (typeof COMMANDS)[number];
export type FlagName = keyof typeof OPTIONS;

export function isCommand(name: string | undefined): name is Command {
  return (COMMANDS as readonly string[]).includes(name ?? '');
}

/** What one flag means for `--help`, and which commands take it. */
export interface FlagHelp {
  /** The value's name (`PATH`, `HOST:PORT`); none for a switch. */
  readonly value?: string;
  readonly about: string;
  readonly default?: string;
  readonly commands: readonly Command[];
  /** Where a command reads the flag otherwise: its own value name, meaning or default. */
  readonly per?: { readonly [C in Command]?: { readonly value?: string; readonly about?: string; readonly default?: string } };
  /** Why the other commands refuse it, when that says more than "does not take". */
  readonly elsewhere?: string;
}

// Groups of commands that take the same flags (a new command joins the groups it belongs to).
const ALL = COMMANDS;
/** The HTTP data plane: listeners, TLS, limits, tracing. */
const PROXIES: readonly Command[] = ['up', 'ingress', 'sidecar'];
/** The roles started one per place (a router of a location, a replica's sidecar). */
const ROLES: readonly Command[] = ['ingress', 'sidecar'];
/** The commands that read configuration records (whose host names depend on the domains and vendor). */
const RECORD_READERS: readonly Command[] = ['up', 'ingress', 'sidecar', 'validate', 'endpoints', 'explain'];

/**
 * Every option of `OPTIONS` (the type makes a missing one a compile error); `test/cli/help.test.ts`
 * checks that each is in some command's help and that a command refuses the others.
 */
export const FLAG_HELP: { readonly [K in FlagName]: FlagHelp } = {
  config: {
    value: 'PATH', about: 'YAML/JSON file or folder of records (repeatable)', commands: [...RECORD_READERS, 'ratelimit'],
    per: {
      up: { about: 'YAML/JSON file or folder of records (repeatable; none: the built-in demo)' },
      ratelimit: { value: 'RULES.yaml', about: 'rules file or folder of them, the Envoy reference server\'s format (repeatable)' },
    },
  },
  listen: {
    value: 'HOST:PORT', about: 'HTTP/1.1 + h2c listener (repeatable; port 0: a free port)', default: '127.0.0.1:8080', commands: [...PROXIES, 'ratelimit'],
    per: { sidecar: { default: '127.0.0.1:15006' }, ratelimit: { about: 'gRPC listener (Envoy RLS v3)', default: '127.0.0.1:8081' } },
  },
  'listen-tls': { value: 'HOST:PORT', about: 'TLS listener, HTTP/1.1 and h2 by ALPN (repeatable; needs --tls-cert, --tls-key)', commands: PROXIES },
  'tls-cert': {
    value: 'FILE', about: 'certificate (PEM) of the --listen-tls listeners', commands: [...PROXIES, 'ratelimit'],
    per: { ratelimit: { about: 'certificate (PEM): the gRPC listener serves TLS (with --tls-key)' } },
  },
  'tls-key': {
    value: 'FILE', about: 'private key (PEM) of the --listen-tls listeners', commands: [...PROXIES, 'ratelimit'],
    per: { ratelimit: { about: 'private key (PEM) of the gRPC listener (with --tls-cert)' } },
  },
  'tls-client-ca': { value: 'FILE', about: 'TLS listeners ask for client certificates verified against this CA', commands: PROXIES },
  'extauth-ca': { value: 'FILE', about: 'extra CA (PEM) trusted for https external authorization services', commands: PROXIES },
  mesh: {
    value: 'HOST:PORT', about: 'mesh (outbound) listener: HTTP proxy for internal names, sibling containers, egress (repeatable)', commands: PROXIES,
    per: { up: { default: '127.0.0.1:15001' } },
  },
  'mesh-inbound': { value: 'HOST:PORT', about: 'mTLS listener for calls from other sidecars (repeatable; needs --mesh-cert)', default: '127.0.0.1:15008 with --mesh-cert', commands: ['sidecar'] },
  'mesh-cert': { value: 'FILE', about: 'this process\'s mesh certificate (URI SAN spiffe://ORG/gvc/G/workload/W; reloaded)', commands: ROLES },
  'mesh-key': { value: 'FILE', about: 'its private key (PEM; with --mesh-cert and --mesh-ca)', commands: ROLES },
  'mesh-ca': { value: 'FILE', about: 'CA bundle (PEM) the mesh peers are verified against', commands: ROLES },
  'mesh-cert-ttl': { value: 'D', about: 'validity of the replicas\' mesh certificates (renewed at 2/3)', default: '24h', commands: ['up'] },
  admin: {
    value: 'HOST:PORT', about: 'admin listener: /healthz /ready /metrics /config', default: '127.0.0.1:9901', commands: [...PROXIES, 'ratelimit'],
    per: { up: { about: 'admin listener: /healthz /ready /metrics /config /workloads' }, ratelimit: { default: 'none (no admin listener)' } },
  },
  status: {
    value: 'HOST:PORT', about: 'status listener: /healthz /ready only, for a cluster\'s probes while --admin stays on loopback (Istio: 15021)', default: 'none', commands: [...PROXIES, 'ratelimit'],
  },
  metrics: {
    value: 'HOST:PORT', about: 'metrics listener: /metrics only, for Prometheus while --admin stays on loopback (Istio: 15090)', default: 'none', commands: [...PROXIES, 'ratelimit'],
  },
  api: {
    value: 'HOST:PORT', about: 'the platform API for callers outside every workload (replicas reach it as SVC_ENDPOINT through their own proxy)', default: '127.0.0.1:15080', commands: ['up'],
  },
  location: {
    value: 'NAME', about: 'the location this router serves (required here or from a variable: see Environment)', commands: [...ROLES, 'logs', 'explain'],
    per: {
      sidecar: { about: 'this replica\'s location (required here or from a variable: see Environment)' }, logs: { about: 'only this location\'s lines' },
      explain: { about: 'explain as the router of this location sees it (0 ms away; other latencies are not probed)' },
    },
  },
  org: {
    value: 'ORG', about: 'the org of this process\'s identity (spiffe://ORG/...) when the records have no org record; another than theirs is refused', commands: ROLES,
  },
  app: { value: 'HOST:PORT', about: 'the app this sidecar forwards to', commands: ['sidecar'] },
  gvc: {
    value: 'G', about: 'the GVC of records that name none, as cpln apply --gvc (without it: the records\' only GVC)', commands: [...RECORD_READERS, 'logs'],
    per: {
      sidecar: { about: 'the GVC of this sidecar\'s workload (required here or from a variable), and of records that name none' },
      logs: { about: 'the workload\'s GVC (needed when it has logs in several)' },
    },
  },
  workload: { value: 'W', about: 'this sidecar\'s workload (required here or from a variable)', commands: ['sidecar', 'logs'], per: { logs: { about: 'the workload whose logs to show' } } },
  replica: { value: 'R', about: 'this replica\'s name (logs, metrics, the replica host name)', commands: ['sidecar', 'logs'], per: { logs: { about: 'only this replica\'s lines' } } },
  redis: { value: 'URL', about: 'share the counters through Redis (redis://[:PASSWORD@]HOST:PORT[/DB])', default: 'in-memory counters', commands: ['ratelimit'] },
  'app-domain': { value: 'D', about: 'domain of canonical and alias endpoints', default: 'app.localhost', commands: RECORD_READERS },
  'direct-domain': { value: 'D', about: 'domain of location and replica-direct endpoints', default: 'direct.localhost', commands: RECORD_READERS },
  'internal-domain': { value: 'D', about: 'domain of internal endpoints', default: 'internal.localhost', commands: RECORD_READERS },
  vendor: { value: 'NAME', about: 'prefix of tags, headers and variables (svc/…, x-svc-…, SVC_…)', default: 'svc', commands: RECORD_READERS },
  output: {
    value: 'FORMAT', about: 'text | json | yaml', default: 'text', commands: ['endpoints', 'logs', 'explain'],
    per: { logs: { about: 'text | json (JSON lines)' }, explain: { about: 'text | json (docs/debugging.md lists the fields)' } },
  },
  'log-level': { value: 'LEVEL', about: 'trace | debug | info | warn | error | fatal | silent', default: 'info', commands: ALL },
  'log-dir': { value: 'DIR', about: 'where up writes each workload\'s logs', default: '.svcproxy/logs', commands: ['up', 'logs'], per: { logs: { about: 'where up wrote the logs' } } },
  since: { value: 'T', about: 'from a duration ago (10m, 1h30m) or a timestamp (2026-01-02T15:04:05Z)', commands: ['logs'] },
  until: { value: 'T', about: 'up to a duration ago or a timestamp', commands: ['logs'] },
  container: { value: 'C', about: 'only this container\'s lines (svcproxy: the proxy\'s own)', commands: ['logs'] },
  'tracing-collector': { value: 'HOST:PORT', about: 'OTLP collector for spec.tracing.provider.controlplane', commands: PROXIES },
  'dns-server': { value: 'HOST:PORT', about: 'DNS servers for deployment replicas named by DNS (repeatable)', default: 'the system\'s resolvers', commands: PROXIES },
  'headers-timeout': { value: 'D', about: 'time a client has to send a request head (408 after)', default: '66s', commands: PROXIES },
  'idle-timeout': { value: 'D', about: 'a connection with no request in flight is closed after D', default: '65s', commands: PROXIES },
  'max-connections': { value: 'N', about: 'connections open at once per listener (0: unlimited)', default: '16384', commands: PROXIES },
  'max-requests-per-connection': { value: 'N', about: 'HTTP/1.1 requests per connection (0: unlimited)', default: '0', commands: PROXIES },
  'max-concurrent-streams': { value: 'N', about: 'HTTP/2 streams per connection', default: '1000', commands: PROXIES },
  'max-event-loop-delay': { value: 'D', about: 'shed new requests (503) while the event loop lags more (0: never)', default: '250ms', commands: PROXIES },
  workers: {
    value: 'N|auto', about: 'N processes share the listeners (auto: one per core)', default: '1', commands: ROLES,
    elsewhere: 'runs in one process: --workers is for ingress and sidecar',
  },
  header: { value: "'NAME: VALUE'", about: 'a header of the explained request (repeatable; Host overrides the URL\'s)', commands: ['explain'] },
  method: { value: 'METHOD', about: 'the explained request\'s method', default: 'GET', commands: ['explain'] },
  from: { value: 'IP', about: 'the client address the request comes from (the connection\'s peer)', default: '127.0.0.1', commands: ['explain'] },
  verbose: { about: 'debug logs (--log-level debug)', commands: ALL },
  debug: { about: 'trace logs (--log-level trace)', commands: ALL },
  help: { about: 'this help', commands: ALL },
};

/** The flags a command takes, in the option table's order. */
export function flagsOf(command: Command): FlagName[] {
  return (Object.keys(FLAG_HELP) as FlagName[]).filter((name) => FLAG_HELP[name].commands.includes(command));
}

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
