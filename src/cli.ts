/**
 * The command-line entry (DESIGN §3): parses flags (each also an environment variable
 * `SVCPROXY_<NAME>`), then runs one role: `up`, `ingress`, `sidecar`, `ratelimit`, `validate` or
 * `endpoints` (`logs` reads what `up` wrote). Each command takes the flags src/flags.ts's FLAG_HELP
 * gives it, and `--help` prints its usage from there (src/help.ts). A usage error (an unknown or
 * refused flag, a missing or bad value, an unknown command) prints `svcproxy: MESSAGE` and one hint
 * line and exits 2; invalid configuration exits 1 with every error on stderr as
 * `kind/name: json.path: what is wrong`, and a role stopped by SIGINT/SIGTERM drains and exits 0.
 */
import { modulesLoaded } from './v8-flags.js';
import './allocator.js';
import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { defaultSettings, loadSnapshot, ConfigError } from './config/index.js';
import type { Settings, Snapshot } from './config/model.js';
import { createLogger } from './log.js';
import { listEndpoints, formatEndpointsText } from './routing/index.js';
import { Runtime, type RuntimeOptions } from './roles/runtime.js';
import { runtimeSummary } from './roles/summary.js';
import { announceStart, logAdminListeners } from './summary.js';
import { formatHostPort, parseHostPort } from './address.js';
import { waitForSignals } from './signals.js';
import { availableParallelism } from 'node:os';
import cluster from 'node:cluster';
import { parseWorkers } from './cluster/workers.js';
import { COMMANDS, FLAG_HELP, OPTIONS, UsageError, flagsOf, graceMs, isCommand, limitsFrom, type Command, type FlagName, type Flags } from './flags.js';
import { COMMAND_HELP, commandHelp, didYouMean, globalHelp, usageHint } from './help.js';
import { CLIENT_COMMANDS } from './client/words.js';

// Every module above is loaded and evaluated: TurboFan, off while they loaded, optimizes again (src/v8-flags.ts).
modulesLoaded();

function envName(flag: string): string {
  return `SVCPROXY_${flag.toUpperCase().replace(/-/g, '_')}`;
}

/** The positionals (the command first), found even when the flags around them would not parse. */
function wordsOf(argv: string[]): string[] {
  try {
    return parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: false }).positionals;
  } catch {
    return [];
  }
}

/** node:util's parse errors, said the way the rest of the command line speaks. */
function parseError(err: Error & { code?: string }, command: string | undefined): UsageError {
  const known = isCommand(command) ? flagsOf(command) : (Object.keys(OPTIONS) as FlagName[]);
  const unknown = /Unknown option '(-{1,2}[^']*)'/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown) {
    const guess = unknown.startsWith('--') ? didYouMean(unknown.slice(2), known) : undefined;
    return new UsageError(`unknown flag ${unknown}${guess ? ` (did you mean --${guess}?)` : ''}`);
  }
  const missing = /Option '(?:-\w, )?(--[^ ]+) [^']*' argument missing/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && missing) return new UsageError(`${missing} needs a value`);
  return new UsageError(err.message);
}

/**
 * Flags given on the command line win; `SVCPROXY_<NAME>` fills the rest (lists split on commas), for
 * the flags the command takes only: one environment may serve every command, so a variable of a flag
 * this command does not take is ignored, where the same flag on the command line is a usage error.
 */
export function parseFlags(argv: string[], env: NodeJS.ProcessEnv = process.env): { command: string | undefined; flags: Flags; positionals: string[] } {
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof OPTIONS; allowPositionals: true; strict: true }>>;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw parseError(err as Error, wordsOf(argv)[0]);
  }
  const { values, positionals } = parsed;
  const flags = values as Flags;
  const command = positionals[0];
  const takes = isCommand(command) ? new Set<string>(flagsOf(command)) : undefined;
  for (const [name, spec] of Object.entries(OPTIONS)) {
    const key = name as keyof Flags;
    if (takes && !takes.has(name)) continue;
    if (flags[key] !== undefined) continue;
    const fromEnv = env[envName(name)];
    if (fromEnv === undefined || fromEnv === '') continue;
    if (spec.type === 'boolean') (flags as Record<string, unknown>)[key] = fromEnv === 'true' || fromEnv === '1';
    else if ('multiple' in spec && spec.multiple) (flags as Record<string, unknown>)[key] = fromEnv.split(',').map((s) => s.trim()).filter(Boolean);
    else (flags as Record<string, unknown>)[key] = fromEnv;
  }
  return { command, flags, positionals: positionals.slice(1) };
}

/** A command line that names a command: each flag one it takes, each required one given, no stray words. */
function checkCommandLine(command: Command, flags: Flags, positionals: string[]): void {
  for (const name of Object.keys(flags) as FlagName[]) {
    if (flags[name] === undefined || FLAG_HELP[name].commands.includes(command)) continue;
    // A flag given here, not a variable (parseFlags fills only the command's own).
    const why = FLAG_HELP[name].elsewhere;
    throw new UsageError(why ? `${command} ${why}` : `${command} does not take --${name} (a flag of ${FLAG_HELP[name].commands.join(', ')})`);
  }
  for (const name of Object.keys(flags) as FlagName[]) {
    // Addresses are checked here so that a bad one is a usage error whichever module reads it
    // (--dns-server has its own rule, the discovery's).
    if (FLAG_HELP[name].value !== 'HOST:PORT' || name === 'dns-server') continue;
    for (const value of [flags[name]].flat()) {
      try {
        parseHostPort(String(value));
      } catch (err) {
        throw new UsageError(`--${name}: ${(err as Error).message}`);
      }
    }
  }
  // explain's one word is its URL (src/explain checks it).
  if (positionals.length > 0 && command !== 'explain') {
    const word = positionals[0]!;
    const hint = FLAG_HELP.config.commands.includes(command) && !word.startsWith('-') ? ` (a path goes after --config: --config ${word})` : '';
    throw new UsageError(`${command} takes flags only, not ${JSON.stringify(word)}${hint}`);
  }
  const required = COMMAND_HELP[command].requires ?? {};
  for (const [name, what] of Object.entries(required) as [FlagName, string][]) {
    const value = flags[name];
    if (value === undefined || (Array.isArray(value) && value.length === 0)) {
      const valueName = FLAG_HELP[name].per?.[command]?.value ?? FLAG_HELP[name].value;
      throw new UsageError(`--${name} ${valueName} (${what}) is required`);
    }
  }
}

function usageError(message: string, command: string | undefined): number {
  process.stderr.write(`svcproxy: ${message}\n${usageHint(command)}\n`);
  return 2;
}

/** The settings of the flags; `gvc` (the GVC of records that name none) falls back to `defaultGvc` (the sidecar's own). */
export function settingsFrom(flags: Flags, defaultGvc?: string): Settings {
  const gvc = flags.gvc ?? defaultGvc;
  return {
    vendor: flags.vendor ?? defaultSettings.vendor,
    appDomain: (flags['app-domain'] ?? defaultSettings.appDomain).toLowerCase(),
    directDomain: (flags['direct-domain'] ?? defaultSettings.directDomain).toLowerCase(),
    internalDomain: (flags['internal-domain'] ?? defaultSettings.internalDomain).toLowerCase(),
    ...(gvc === undefined || gvc === '' ? {} : { gvc }),
  };
}

/** `--workers`: 1 (one process, no cluster) unless asked; `auto` is one per core. */
export function workersFrom(flags: Flags): number {
  const n = parseWorkers(flags.workers, availableParallelism);
  if (typeof n !== 'number') throw new UsageError(n.error);
  return n;
}

function loggerFrom(flags: Flags, sync = false): Logger {
  const level = flags['log-level'] ?? (flags.debug ? 'trace' : flags.verbose ? 'debug' : 'info');
  return createLogger({ level, sync });
}

export async function main(argv: string[]): Promise<number> {
  const words = wordsOf(argv);
  const asked = words[0];
  if (asked === 'help' || argv.includes('--help') || argv.includes('-h')) return help(asked === 'help' ? words[1] : asked);
  let parsed: ReturnType<typeof parseFlags>;
  try {
    parsed = parseFlags(argv);
  } catch (err) {
    return usageError((err as Error).message, asked);
  }
  const { command, flags } = parsed;
  if (command === undefined) {
    process.stderr.write(globalHelp());
    return 2;
  }
  if (!isCommand(command)) {
    const guess = didYouMean(command, [...COMMANDS, ...Object.keys(CLIENT_COMMANDS)]);
    return usageError(`unknown command ${JSON.stringify(command)}${guess ? ` (did you mean ${guess}?)` : ''}`, undefined);
  }
  try {
    checkCommandLine(command, flags, parsed.positionals);
  } catch (err) {
    return usageError((err as Error).message, command);
  }
  try {
    switch (command) {
      case 'validate':
        return await validate(flags);
      case 'endpoints':
        return await endpoints(flags);
      // The other commands' modules are loaded when asked for: a sidecar or an ingress, started
      // once beside every replica, holds none of `up`, `logs`, `explain` or the rate-limit service.
      case 'explain':
        return await (await import('./explain/index.js')).runExplain(flags, parsed.positionals, settingsFrom(flags));
      case 'up':
        return await (await import('./roles/up.js')).runUp(flags, settingsFrom(flags), loggerFrom(flags));
      case 'ingress':
        return await runRole('ingress', flags);
      case 'sidecar':
        return await runRole('sidecar', flags);
      case 'logs':
        return await (await import('./logs/index.js')).runLogs(flags);
      case 'ratelimit':
        return await (await import('./ratelimit/index.js')).runRateLimitService(flags, loggerFrom(flags));
    }
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const line of err.errors) process.stderr.write(`${line}\n`);
      process.stderr.write(`svcproxy: configuration invalid (${err.errors.length} error${err.errors.length === 1 ? '' : 's'})\n`);
      return 1;
    }
    if (err instanceof UsageError) return usageError(err.message, command);
    process.stderr.write(`svcproxy: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

/** `svcproxy --help`, `svcproxy help`: the overview; `svcproxy COMMAND --help`, `svcproxy help COMMAND`: the command's. */
function help(command: string | undefined): number {
  if (command === undefined || command === 'help') {
    process.stdout.write(globalHelp());
    return 0;
  }
  if (!isCommand(command)) {
    const guess = didYouMean(command, [...COMMANDS, ...Object.keys(CLIENT_COMMANDS)]);
    return usageError(`unknown command ${JSON.stringify(command)}${guess ? ` (did you mean ${guess}?)` : ''}`, undefined);
  }
  process.stdout.write(commandHelp(command));
  return 0;
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
  const { validateReport } = await import('./config/validate-report.js');
  const report = await validateReport(requireConfig(flags), settingsFrom(flags));
  for (const line of report.stdout) process.stdout.write(`${line}\n`);
  for (const line of report.stderr) process.stderr.write(`${line}\n`);
  return report.exitCode;
}

async function endpoints(flags: Flags): Promise<number> {
  const snapshot = await loadOrExit(flags);
  const list = listEndpoints(snapshot);
  const format = flags.output ?? 'text';
  if (format === 'json') process.stdout.write(JSON.stringify(list, null, 2) + '\n');
  else if (format === 'yaml') process.stdout.write((await import('./yaml.js')).dumpYaml(list));
  else if (format === 'text') process.stdout.write(formatEndpointsText(list));
  else throw new UsageError(`--output must be text, json or yaml, not ${JSON.stringify(format)}`);
  return 0;
}


/** `--mesh-cert/--mesh-key/--mesh-ca` (all three or none) and a sidecar's `--mesh-inbound`. */
function meshFlags(role: 'ingress' | 'sidecar', flags: Flags): Pick<RuntimeOptions, 'meshFiles' | 'meshInbound'> {
  const given = [flags['mesh-cert'], flags['mesh-key'], flags['mesh-ca']].filter((f) => f !== undefined).length;
  if (given !== 0 && given !== 3) throw new UsageError('--mesh-cert, --mesh-key and --mesh-ca go together');
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
  const env = process.env;
  const prefix = `${(flags.vendor ?? defaultSettings.vendor).toUpperCase()}_`;
  // A sidecar's own GVC (its identity) is also the GVC of records that name none.
  const settings = settingsFrom(flags, role === 'sidecar' ? env[`${prefix}GVC`] : undefined);
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
    ...(flags.status ? { status: flags.status } : {}),
    ...(flags.metrics ? { metrics: flags.metrics } : {}),
    logger,
    ...(flags['tracing-collector'] ? { tracingCollector: flags['tracing-collector'] } : {}),
    ...(flags['dns-server'] ? { dnsServers: flags['dns-server'] } : {}),
    ...(limitsFrom(flags) ? { limits: limitsFrom(flags)! } : {}),
    ...(flags.location ?? env[`${prefix}LOCATION`] ? { location: flags.location ?? env[`${prefix}LOCATION`]! } : {}),
    ...(flags.org ?? env[`${prefix}ORG`] ? { org: flags.org ?? env[`${prefix}ORG`]! } : {}),
  };
  if (role === 'ingress' && !options.location) throw new UsageError(`ingress needs --location NAME (or ${prefix}LOCATION)`);
  if (flags['listen-tls'] && !(flags['tls-cert'] && flags['tls-key'])) throw new UsageError('--listen-tls needs --tls-cert FILE and --tls-key FILE');
  if (role === 'sidecar') {
    const gvc = settings.gvc;
    const workload = flags.workload ?? env[`${prefix}WORKLOAD`];
    const location = options.location;
    if (!flags.app) throw new UsageError('sidecar needs --app HOST:PORT');
    if (!gvc || !workload || !location) {
      throw new UsageError(`sidecar needs its identity: --gvc, --workload, --location (or ${prefix}GVC, ${prefix}WORKLOAD, ${prefix}LOCATION)`);
    }
    (options as { sidecar?: RuntimeOptions['sidecar'] }).sidecar = {
      workload: `${gvc}/${workload}`,
      location,
      replica: flags.replica ?? env[`${prefix}REPLICA`] ?? env.HOSTNAME ?? `${workload}-0`,
      app: flags.app,
    };
  }
  const workers = workersFrom(flags);
  // node:cluster itself costs nothing more (Node loads it for every listen); the folder is loaded
  // only by the primary and the workers.
  if (workers > 1 || cluster.isWorker) return (await import('./cluster/index.js')).runClustered(options, workers, graceMs);
  // A --location or --org the records contradict stops it here, before anything is bound (src/roles/place.ts).
  const runtime = await Runtime.start(options);
  if (role === 'sidecar' && !runtime.store.current.workloads.has(options.sidecar!.workload)) {
    logger.warn({ workload: options.sidecar!.workload }, 'the sidecar workload is not in the configuration; requests get 404 until it is');
  }
  for (const l of runtime.listeners) logger.info({ address: formatHostPort(l.address), tls: l.tls }, `${role} listening`);
  for (const l of runtime.meshListeners) logger.info({ address: formatHostPort(l.address), identity: runtime.meshTls?.uri }, 'mesh (outbound) listening');
  for (const l of runtime.meshInboundListeners) logger.info({ address: formatHostPort(l.address), identity: runtime.meshTls?.uri }, 'mesh mTLS listening');
  logAdminListeners(logger, { admin: runtime.admin, status: runtime.statusListener, metrics: runtime.metricsListener });
  announceStart(runtimeSummary(runtime, options), logger);
  const signal = await waitForSignals(() => void runtime.store.reload());
  logger.info({ signal }, 'draining');
  await runtime.stop(graceMs(runtime.store.current));
  logger.info('stopped');
  return 0;
}

