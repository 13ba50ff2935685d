/**
 * The command-line entry (DESIGN §3): parses flags (each also an environment variable
 * `SVCPROXY_<NAME>`), then runs one role: `up`, `ingress`, `sidecar`, `ratelimit`, `validate` or
 * `endpoints`. Usage errors exit 2, invalid configuration exits 1 with every error on stderr as
 * `kind/name: json.path: what is wrong`, and a role stopped by SIGINT/SIGTERM drains and exits 0.
 */
import './v8-flags.js';
import './allocator.js';
import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { defaultSettings, loadSnapshot, ConfigError } from './config/index.js';
import type { Settings, Snapshot } from './config/model.js';
import { createLogger } from './log.js';
import { listEndpoints, formatEndpointsText } from './routing/index.js';
import { Runtime, type RuntimeOptions } from './roles/runtime.js';
import { runUp } from './roles/up.js';
import { formatHostPort } from './address.js';
import { waitForSignals } from './signals.js';
import { runRateLimitService } from './ratelimit/index.js';
import { runLogs } from './logs/index.js';
import { availableParallelism } from 'node:os';
import cluster from 'node:cluster';
import { parseWorkers, runClustered } from './cluster/index.js';
import { yamlLib } from './yaml-lib.js';
import { OPTIONS, UsageError, graceMs, limitsFrom, type Flags } from './flags.js';

const USAGE = `svcproxy — the platform's data plane

Usage:
  svcproxy up        [--config PATH]... [--listen HOST:PORT] [--admin HOST:PORT] [--mesh HOST:PORT]
                     local data plane; the built-in demo when no --config
  svcproxy ingress   --config PATH... --location NAME [--listen HOST:PORT]... [--admin HOST:PORT]
  svcproxy sidecar   --config PATH... --app HOST:PORT [--gvc G --workload W --location L --replica R]
                     (identity defaults from SVC_ORG, SVC_GVC, SVC_WORKLOAD, SVC_LOCATION)
  svcproxy ratelimit --config RULES.yaml [--redis URL] [--listen HOST:PORT] [--admin HOST:PORT]
                     rate-limit service (Envoy RLS v3; default --listen 127.0.0.1:8081)
  svcproxy validate  --config PATH...            exit 0, or 1 with every error
  svcproxy endpoints --config PATH... [-o text|json|yaml]
  svcproxy logs      --workload W [--gvc G] [--location L] [--replica R] [--container C]
                     [--since 10m] [--until TIME] [-o text|json] [--log-dir DIR]
                     what "up" wrote for one workload, every location and replica, in time order

Options (each also an environment variable SVCPROXY_<NAME>, e.g. SVCPROXY_APP_DOMAIN):
  --config, -c PATH       YAML/JSON file or folder of records (repeatable)
  --listen HOST:PORT      HTTP/1.1 + h2c listener (repeatable; default 127.0.0.1:8080)
  --listen-tls HOST:PORT  TLS listener, HTTP/1.1 and h2 by ALPN (needs --tls-cert, --tls-key)
  --tls-client-ca FILE    TLS listeners ask for client certificates verified against this CA
                          (the identity external authorization sees)
  --extauth-ca FILE       extra CA (PEM) trusted for https external authorization services
  --mesh HOST:PORT        mesh (outbound) listener: an explicit HTTP proxy for internal host names,
                          sibling containers and egress (up default 127.0.0.1:15001)
  --mesh-inbound HOST:PORT  sidecar: mTLS listener for calls from other sidecars
                          (default 127.0.0.1:15008 when --mesh-cert is given)
  --mesh-cert FILE, --mesh-key FILE, --mesh-ca FILE
                          sidecar, ingress: this process's mesh certificate (URI SAN
                          spiffe://ORG/gvc/GVC/workload/W), key and CA bundle (PEM; reloaded on change)
  --mesh-cert-ttl D       up: validity of the replicas' certificates (default 24h; renewed at 2/3)
  --admin HOST:PORT       /healthz /ready /metrics /config (default 127.0.0.1:9901)
  --app-domain D          default app.localhost
  --direct-domain D       default direct.localhost
  --internal-domain D     default internal.localhost
  --vendor NAME           tag/header/env prefix (default svc: svc/…, x-svc-…, SVC_…)
  --tracing-collector HOST:PORT  OTLP collector for spec.tracing.provider.controlplane
  --dns-server HOST:PORT  DNS servers for deployment replicas named by DNS (repeatable;
                          default: the system's resolvers)
  --log-dir DIR           where "up" writes and "logs" reads workload logs (default .svcproxy/logs)
  --headers-timeout D     time a client has to send a request head (default 66s; slowloris: 408)
  --idle-timeout D        a connection with no request in flight is closed after D (default 65s)
  --max-connections N     connections open at once per listener (default 16384; 0: unlimited)
  --max-requests-per-connection N  HTTP/1.1 requests per connection (default 0: unlimited)
  --max-concurrent-streams N       HTTP/2 streams per connection (default 1000)
  --max-event-loop-delay D         shed new requests (503 overloaded) while the event loop lags
                          more than this (default 250ms; 0: never)
  --workers N|auto        ingress, sidecar: N processes share the listeners (default 1;
                          auto: one per core); see README "Multiple cores"
  --output, -o FORMAT     text | json | yaml
  --verbose, -v           debug logs     --debug, -d   trace logs
  --help, -h
`;

function envName(flag: string): string {
  return `SVCPROXY_${flag.toUpperCase().replace(/-/g, '_')}`;
}

/** Flags given on the command line win; `SVCPROXY_<NAME>` fills the rest (lists split on commas). */
export function parseFlags(argv: string[], env: NodeJS.ProcessEnv = process.env): { command: string | undefined; flags: Flags; positionals: string[] } {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  const flags = values as Flags;
  for (const [name, spec] of Object.entries(OPTIONS)) {
    const key = name as keyof Flags;
    if (flags[key] !== undefined) continue;
    const fromEnv = env[envName(name)];
    if (fromEnv === undefined || fromEnv === '') continue;
    if (spec.type === 'boolean') (flags as Record<string, unknown>)[key] = fromEnv === 'true' || fromEnv === '1';
    else if ('multiple' in spec && spec.multiple) (flags as Record<string, unknown>)[key] = fromEnv.split(',').map((s) => s.trim()).filter(Boolean);
    else (flags as Record<string, unknown>)[key] = fromEnv;
  }
  return { command: positionals[0], flags, positionals: positionals.slice(1) };
}

export function settingsFrom(flags: Flags): Settings {
  return {
    vendor: flags.vendor ?? defaultSettings.vendor,
    appDomain: (flags['app-domain'] ?? defaultSettings.appDomain).toLowerCase(),
    directDomain: (flags['direct-domain'] ?? defaultSettings.directDomain).toLowerCase(),
    internalDomain: (flags['internal-domain'] ?? defaultSettings.internalDomain).toLowerCase(),
  };
}

/** `--workers`: 1 (one process, no cluster) unless asked; `auto` is one per core. */
export function workersFrom(flags: Flags): number {
  const n = parseWorkers(flags.workers, availableParallelism);
  if (typeof n !== 'number') throw new UsageError(n.error);
  return n;
}

/** `up` and `ratelimit` keep their state in one process (README, "Multiple cores"). */
function singleProcessOnly(command: string, flags: Flags): void {
  if (workersFrom(flags) > 1) throw new UsageError(`svcproxy ${command} runs in one process: --workers is for ingress and sidecar`);
}

function loggerFrom(flags: Flags, sync = false): Logger {
  const level = flags['log-level'] ?? (flags.debug ? 'trace' : flags.verbose ? 'debug' : 'info');
  return createLogger({ level, sync });
}

export async function main(argv: string[]): Promise<number> {
  let parsed: ReturnType<typeof parseFlags>;
  try {
    parsed = parseFlags(argv);
  } catch (err) {
    process.stderr.write(`svcproxy: ${(err as Error).message}\n\n${USAGE}`);
    return 2;
  }
  const { command, flags } = parsed;
  if (flags.help || command === undefined || command === 'help') {
    process.stdout.write(USAGE);
    return command === undefined && !flags.help ? 2 : 0;
  }
  try {
    switch (command) {
      case 'validate':
        return await validate(flags);
      case 'endpoints':
        return await endpoints(flags);
      case 'up':
        singleProcessOnly('up', flags);
        return await runUp(flags, settingsFrom(flags), loggerFrom(flags));
      case 'ingress':
        return await runRole('ingress', flags);
      case 'sidecar':
        return await runRole('sidecar', flags);
      case 'logs':
        return await runLogs(flags);
      case 'ratelimit':
        singleProcessOnly('ratelimit', flags);
        return await runRateLimitService(flags, loggerFrom(flags));
      default:
        throw new UsageError(`unknown command ${JSON.stringify(command)}`);
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const line of err.errors) process.stderr.write(`${line}\n`);
      process.stderr.write(`svcproxy: configuration invalid (${err.errors.length} error${err.errors.length === 1 ? '' : 's'})\n`);
      return 1;
    }
    if (err instanceof UsageError) {
      process.stderr.write(`svcproxy: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    process.stderr.write(`svcproxy: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

function requireConfig(flags: Flags): string[] {
  if (!flags.config || flags.config.length === 0) throw new UsageError('--config PATH is required');
  return flags.config;
}

async function loadOrExit(flags: Flags): Promise<Snapshot> {
  const result = await loadSnapshot(requireConfig(flags), settingsFrom(flags), 1);
  if (!result.ok) throw new ConfigError(result.errors);
  return result.snapshot;
}

async function validate(flags: Flags): Promise<number> {
  const snapshot = await loadOrExit(flags);
  for (const w of snapshot.warnings) process.stderr.write(`warning: ${w}\n`);
  process.stdout.write(
    `valid: ${snapshot.records.length} record${snapshot.records.length === 1 ? '' : 's'} (${snapshot.workloads.size} workload${snapshot.workloads.size === 1 ? '' : 's'}, ${snapshot.gvcs.size} gvc${snapshot.gvcs.size === 1 ? '' : 's'}, ${snapshot.domains.size} domain${snapshot.domains.size === 1 ? '' : 's'})\n`,
  );
  return 0;
}

async function endpoints(flags: Flags): Promise<number> {
  const snapshot = await loadOrExit(flags);
  const list = listEndpoints(snapshot);
  const format = flags.output ?? 'text';
  if (format === 'json') process.stdout.write(JSON.stringify(list, null, 2) + '\n');
  else if (format === 'yaml') process.stdout.write(yamlLib().stringify(list));
  else if (format === 'text') process.stdout.write(formatEndpointsText(list));
  else throw new UsageError(`--output must be text, json or yaml, not ${JSON.stringify(format)}`);
  return 0;
}


/** `--mesh-cert/--mesh-key/--mesh-ca` (all three or none) and a sidecar's `--mesh-inbound`. */
function meshFlags(role: 'ingress' | 'sidecar', flags: Flags): Pick<RuntimeOptions, 'meshFiles' | 'meshInbound'> {
  const given = [flags['mesh-cert'], flags['mesh-key'], flags['mesh-ca']].filter((f) => f !== undefined).length;
  if (given !== 0 && given !== 3) throw new UsageError('--mesh-cert, --mesh-key and --mesh-ca go together');
  if (flags['mesh-inbound'] && role !== 'sidecar') throw new UsageError('--mesh-inbound is a sidecar\'s listener');
  if (given === 0) {
    if (flags['mesh-inbound']) throw new UsageError('--mesh-inbound needs --mesh-cert, --mesh-key and --mesh-ca');
    return {};
  }
  return {
    meshFiles: { cert: flags['mesh-cert']!, key: flags['mesh-key']!, ca: flags['mesh-ca']! },
    ...(role === 'sidecar' ? { meshInbound: flags['mesh-inbound'] ?? ['127.0.0.1:15008'] } : {}),
  };
}

async function runRole(role: 'ingress' | 'sidecar', flags: Flags): Promise<number> {
  const logger = loggerFrom(flags);
  const settings = settingsFrom(flags);
  const prefix = `${settings.vendor.toUpperCase()}_`;
  const env = process.env;
  const options: RuntimeOptions = {
    role,
    settings,
    configPaths: requireConfig(flags),
    listen: flags.listen ?? (role === 'sidecar' ? ['127.0.0.1:15006'] : ['127.0.0.1:8080']),
    ...(flags['listen-tls'] ? { listenTls: flags['listen-tls'] } : {}),
    ...(flags['tls-cert'] && flags['tls-key'] ? { tls: { certFile: flags['tls-cert'], keyFile: flags['tls-key'], ...(flags['tls-client-ca'] ? { clientCaFile: flags['tls-client-ca'] } : {}) } } : {}),
    ...(flags['extauth-ca'] ? { extAuthCaFile: flags['extauth-ca'] } : {}),
    ...(flags.mesh ? { mesh: flags.mesh } : {}),
    ...meshFlags(role, flags),
    admin: flags.admin ?? '127.0.0.1:9901',
    logger,
    ...(flags['tracing-collector'] ? { tracingCollector: flags['tracing-collector'] } : {}),
    ...(flags['dns-server'] ? { dnsServers: flags['dns-server'] } : {}),
    ...(limitsFrom(flags) ? { limits: limitsFrom(flags)! } : {}),
    ...(flags.location ?? env[`${prefix}LOCATION`] ? { location: flags.location ?? env[`${prefix}LOCATION`]! } : {}),
  };
  if (role === 'ingress' && !options.location) throw new UsageError('svcproxy ingress needs --location NAME');
  if (flags['listen-tls'] && !(flags['tls-cert'] && flags['tls-key'])) throw new UsageError('--listen-tls needs --tls-cert FILE and --tls-key FILE');
  if (role === 'sidecar') {
    const gvc = flags.gvc ?? env[`${prefix}GVC`];
    const workload = flags.workload ?? env[`${prefix}WORKLOAD`];
    const location = options.location;
    if (!flags.app) throw new UsageError('svcproxy sidecar needs --app HOST:PORT');
    if (!gvc || !workload || !location) {
      throw new UsageError(`svcproxy sidecar needs its identity: --gvc, --workload, --location (or ${prefix}GVC, ${prefix}WORKLOAD, ${prefix}LOCATION)`);
    }
    (options as { sidecar?: RuntimeOptions['sidecar'] }).sidecar = {
      workload: `${gvc}/${workload}`,
      location,
      replica: flags.replica ?? env[`${prefix}REPLICA`] ?? env.HOSTNAME ?? `${workload}-0`,
      app: flags.app,
    };
  }
  const workers = workersFrom(flags);
  if (workers > 1 || cluster.isWorker) return runClustered(options, workers, graceMs);
  const runtime = await Runtime.start(options);
  const locations = runtime.store.current.locations;
  if (options.location !== undefined && locations.size > 0 && !locations.has(options.location)) {
    // A mistyped location would route nothing local and probe every replica as remote: say so, and stop.
    await runtime.stop(0);
    throw new UsageError(`--location ${options.location} is not a location of the configuration (known: ${[...locations.keys()].sort().join(', ')})`);
  }
  if (role === 'sidecar' && !runtime.store.current.workloads.has(options.sidecar!.workload)) {
    logger.warn({ workload: options.sidecar!.workload }, 'the sidecar workload is not in the configuration; requests get 404 until it is');
  }
  for (const l of runtime.listeners) logger.info({ address: formatHostPort(l.address), tls: l.tls }, `${role} listening`);
  for (const l of runtime.meshListeners) logger.info({ address: formatHostPort(l.address), identity: runtime.meshTls?.uri }, 'mesh (outbound) listening');
  for (const l of runtime.meshInboundListeners) logger.info({ address: formatHostPort(l.address), identity: runtime.meshTls?.uri }, 'mesh mTLS listening');
  if (runtime.admin) logger.info({ address: formatHostPort(runtime.admin.address) }, 'admin listening');
  const signal = await waitForSignals(() => void runtime.store.reload());
  logger.info({ signal }, 'draining');
  await runtime.stop(graceMs(runtime.store.current));
  logger.info('stopped');
  return 0;
}

