/**
 * `svcproxy up`: the whole data plane on one machine. The ingress listener, a mesh listener for
 * internal host names (called from the host's shell), the admin listener, and the workload processes
 * the supervisor starts (one in-process sidecar per replica: the ingress applies each workload's
 * sidecar filters itself, saving a hop; each replica also gets its mesh identity, mTLS listener and
 * outbound listener: src/roles/up-mesh.ts). Without `--config` it runs the built-in demo. On SIGINT/SIGTERM it stops accepting, lets
 * requests in flight finish within the grace period, stops the processes and exits 0.
 */
import type { Logger } from 'pino';
import type { Settings, Snapshot } from '../config/model.js';
import { listEndpoints, type Endpoint } from '../routing/index.js';
import { Supervisor, demoRecords, echoScriptPath, planReplicas } from '../local/index.js';
import type { Replica, ReplicaRegistry } from '../routing/replicas.js';
import { Runtime, type RuntimeOptions } from './runtime.js';
import { formatHostPort, parseHostPort } from '../address.js';
import type { Flags } from '../flags.js';
import { UsageError, graceMs, limitsFrom } from '../flags.js';
import { waitForSignals } from '../signals.js';
import { DEFAULT_LOG_DIR, WorkloadLogFiles, teeLogger } from '../logs/index.js';
import { ConfigStore } from '../config/index.js';
import { parseDuration } from '../config/values.js';
import { systemClock } from '../deps.js';
import { DEFAULT_ORG } from '../mesh/index.js';
import { DEFAULT_CERT_TTL_MS, UpMesh } from './up-mesh.js';
import { join, resolve } from 'node:path';
import { Scaler } from '../local/scaler.js';
import { HealthWatch, healthLine, type HealthChange } from '../local/workloads.js';
import { changedWorkloads, changedWorkloadsOrDeployments } from '../config/changed.js';
import { notRunNotes } from '../local/not-run.js';
import { isIgnored } from '../config/compile-workload.js';
import { randomBytes } from 'node:crypto';
import { PlatformApi, DEFAULT_API_ADDRESS, openOperatorKey } from '../local/api/index.js';
import { FolderRecordState } from '../config/record-state.js';
import { VersionBook, deploymentStatuses } from '../local/deployments.js';

/** Where `up` keeps what outlives a run, in the folder it runs in. */
export const DEFAULT_STATE_DIR = '.svcproxy';
/** The operator key's file in the state folder (DESIGN §13). */
export const OPERATOR_KEY_FILE = 'api-token';
/** The folder of the API's changes and the records' versions in the state folder (DESIGN §13). */
export const RECORD_STATE_DIR = 'api';

export interface UpOptions extends Omit<RuntimeOptions, 'role'> {
  /** Restart backoff of the processes (tests shorten it). */
  readonly backoff?: { initialMs?: number; maxMs?: number; resetAfterMs?: number };
  /** Also write each workload's process output and access-log lines here, for `svcproxy logs`. */
  readonly logDir?: string;
  /**
   * Where `up` keeps what outlives a run (default `.svcproxy`): the mesh CA (`ca/`, unless `caDir`
   * says otherwise) and the operator key (`api-token`).
   */
  readonly stateDir?: string;
  /** Where the mesh's local CA is kept (default `<stateDir>/ca`). */
  readonly caDir?: string;
  /** Validity of the replicas' mesh certificates (default 24 h; renewed at two thirds). */
  readonly meshCertTtlMs?: number;
  /** The autoscaler's scale-down window (tests shorten it; default 60 s). */
  readonly scaleDownWindowMs?: number;
  /** Called at each change of a workload's health in a location (also logged at info); the CLI prints it. */
  readonly onHealthChange?: (change: HealthChange) => void;
  /**
   * The platform API's listener for callers outside every workload (`--api`); none when unset.
   * `optional` (the default address, not asked for): when it is taken (another `up` runs), `up`
   * runs without it and says so, rather than failing.
   */
  readonly api?: {
    readonly address: string;
    readonly optional?: boolean;
    /** Items in a page of a list (default 100). */
    readonly pageSize?: number;
    /** Time a client has to send a whole body (default 30 s). */
    readonly bodyTimeoutMs?: number;
  };
}

export interface Up {
  readonly runtime: Runtime;
  readonly supervisor: Supervisor;
  /** The platform API (DESIGN §12): each replica's SVC_ENDPOINT, and `--api`. */
  readonly api: PlatformApi;
  /** The operator key's file (DESIGN §13). */
  readonly operatorKeyFile: string;
  stop(graceMs?: number): Promise<void>;
}

/** Start `up` programmatically (the CLI and the integration tests). */
export async function startUp(options: UpOptions): Promise<Up> {
  // Process output (through deps.logger) and access-log lines (through logger) also go to the files.
  const files = options.logDir ? new WorkloadLogFiles(options.logDir) : undefined;
  const withFiles = (l: Logger): Logger => (files ? teeLogger(l, files) : l);
  const logger = withFiles(options.logger);
  const stateDir = options.stateDir ?? DEFAULT_STATE_DIR;
  // The platform API's changes and the records' versions, kept between runs (DESIGN §13).
  const store = options.store ?? await ConfigStore.open({
    ...(options.configPaths ? { paths: [...options.configPaths] } : {}),
    ...(options.records ? { records: options.records } : {}),
    settings: options.settings,
    logger: logger.child({ component: 'config' }),
    state: await FolderRecordState.open(join(stateDir, RECORD_STATE_DIR)),
  });
  const operatorKeyFile = join(stateDir, OPERATOR_KEY_FILE);
  const org = store.current.org?.name ?? DEFAULT_ORG;
  let operatorKey: string;
  try {
    operatorKey = await openOperatorKey(operatorKeyFile, org, logger.child({ component: 'api' }));
  } catch (err) {
    store.close();
    throw err;
  }
  const mesh = await UpMesh.open({
    dir: options.caDir ?? join(stateDir, 'ca'),
    org,
    ttlMs: options.meshCertTtlMs ?? DEFAULT_CERT_TTL_MS,
    clock: options.deps?.clock ?? systemClock,
    logger,
  }).catch((err: unknown) => {
    store.close();
    throw err;
  });
  let runtime: Runtime;
  try {
    runtime = await Runtime.start({
      ...options,
      store,
      meshCredentials: mesh.outside,
      logger,
      ...(options.deps?.logger ? { deps: { ...options.deps, logger: withFiles(options.deps.logger) } } : {}),
      role: 'up',
    });
  } catch (err) {
    mesh.close();
    throw err;
  }
  mesh.bind(runtime);
  // One key per run for every SVC_TOKEN: the supervisor mints them, the API checks them.
  const tokenSecret = randomBytes(32);
  // The workloads' deployments (the API's `deployment` records): the replicas the supervisor runs,
  // the counts the scaler wants, the record version each replica was started from.
  const book = new VersionBook();
  book.observe(runtime.store.current);
  runtime.store.on('change', (snapshot: Snapshot) => book.observe(snapshot));
  let supervisor: Supervisor | undefined;
  let scaler: Scaler | undefined;
  const ingress = runtime.listeners[0];
  const api = new PlatformApi({
    store: runtime.store,
    org: () => runtime.dataplane.org,
    tokenSecret,
    operatorKey,
    logger,
    deployments: (key) => deploymentStatuses({
      snapshot: runtime.store.current,
      registry: runtime.replicas,
      up: supervisor?.replicaStates(),
      ...(scaler ? { desired: scaler.desired } : {}),
      book,
      nowMs: runtime.deps.clock.now(),
    }, key),
    // `-connect` (svcproxy connect): the processes of a workload's replicas, with their environment.
    replicaProcesses: (key) => supervisor?.processes().filter((p) => p.workload === key) ?? [],
    endpointUrl: (host) => ingress === undefined ? `http://${host}` : `${ingress.tls ? 'https' : 'http'}://${host}${ingress.address.port === (ingress.tls ? 443 : 80) ? '' : `:${ingress.address.port}`}`,
    ...(options.api?.pageSize !== undefined ? { pageSize: options.api.pageSize } : {}),
    ...(options.api?.bodyTimeoutMs !== undefined ? { bodyTimeoutMs: options.api.bodyTimeoutMs } : {}),
  });
  mesh.api = api;
  try {
    if (options.api !== undefined) {
      await api.listen(options.api.address, runtime.opts.limits).catch((err: NodeJS.ErrnoException) => {
        if (!options.api?.optional || err.code !== 'EADDRINUSE') throw err;
        logger.warn({ address: options.api.address }, 'platform API: the default --api address is taken; running without it (replicas still reach theirs)');
      });
    }
  } catch (err) {
    await runtime.stop(0);
    mesh.close();
    throw err;
  }
  // The autoscaler decides each workload's count per location; the supervisor runs that many.
  const applyCounts = (): void => {
    supervisor?.apply(runtime.store.current).catch((err: Error) => options.logger.error({ err }, 'applying the scaled replica counts failed'));
  };
  scaler = new Scaler({
    snapshot: () => runtime.store.current,
    registry: runtime.replicas,
    held: (workload) => runtime.dataplane.heldCount(workload),
    requests: (workload) => runtime.metrics.requestsOf(workload),
    apply: applyCounts,
    clock: runtime.deps.clock,
    logger: logger.child({ component: 'scaler' }),
    ...(options.scaleDownWindowMs !== undefined ? { scaleDownWindowMs: options.scaleDownWindowMs } : {}),
  });
  const theScaler = scaler;
  runtime.dataplane.activator = (workload, location) => theScaler.wake(workload, location);
  // What up cannot run (src/local/not-run.ts): the 503's reason, and a line per workload, said once.
  runtime.dataplane.notRun = (workload) => notRunNotes(runtime.store.current).get(workload)?.reason;
  const sayNotRun = notRunSayer(logger.child({ component: 'up' }));
  sayNotRun(runtime.store.current);
  const theSupervisor = supervisor = new Supervisor({
    registry: runtime.replicas,
    deps: runtime.deps,
    mesh,
    desired: scaler.desired,
    tokenSecret,
    ...(options.backoff ? { backoff: options.backoff } : {}),
  });
  // `/ready` once every workload `up` keeps running has a ready replica in each of its locations.
  runtime.readiness = () => wantedReplicasReady(runtime.store.current, runtime.replicas);
  try {
    await supervisor.apply(runtime.store.current);
  } catch (err) {
    await runtime.stop(0);
    await supervisor.stop(0);
    await api.close();
    mesh.close();
    await files?.close();
    throw err;
  }
  scaler.start();
  runtime.store.on('change', (snapshot: Snapshot) => {
    sayNotRun(snapshot);
    supervisor.apply(snapshot).catch((err: Error) => options.logger.error({ err }, 'applying the new configuration to the processes failed'));
  });
  // Health per workload and location (src/local/workloads.ts): `/workloads`, the gauge, and a line per change.
  runtime.upReplicas = () => supervisor.replicaStates();
  const health = new HealthWatch((only) => runtime.workloads(only), runtime.replicas, runtime.deps.clock, (change) => {
    const s = change.status;
    logger.info({ workload: s.workload, gvc: s.gvc, location: s.location, health: s.health, from: change.from ?? null, ready: s.ready, replicas: s.replicas }, 'workload health');
    options.onHealthChange?.(change);
  });
  // A change that leaves the replicas alone (a suspend, a workload added without one) moves its workloads' rows alone.
  let healthSeen = runtime.store.current;
  runtime.store.on('change', (snapshot: Snapshot) => {
    health.reconfigured(changedWorkloads(healthSeen, snapshot));
    healthSeen = snapshot;
  });
  // Processes run in their own process groups (so Ctrl-C reaches only us and we stop them in order);
  // if this process dies without stopping them, take them down with it.
  const killOnExit = (): void => supervisor.killNow();
  process.once('exit', killOnExit);
  let stopped: Promise<void> | undefined;
  return {
    runtime,
    supervisor,
    api,
    operatorKeyFile,
    stop: (grace = graceMs(runtime.store.current)) =>
      (stopped ??= (async () => {
        health.stop();
        scaler.stop();
        // Stop accepting and drain first, then stop the processes the drained requests were using.
        await Promise.all([runtime.stop(grace), api.close()]);
        await supervisor.stop(grace);
        mesh.close();
        process.off('exit', killOnExit);
        await files?.close();
      })()),
  };
}

function endpointUrl(e: Endpoint, port: number, meshPort: number | undefined): string {
  if (e.kind === 'internal' || e.kind === 'internal-replica') {
    return meshPort ? `http://${e.host}/  (through the mesh listener: curl -x http://127.0.0.1:${meshPort} …)` : `http://${e.host}/`;
  }
  return `http://${e.host}${port === 80 ? '' : `:${port}`}/`;
}

export async function runUp(flags: Flags, settings: Settings, logger: Logger): Promise<number> {
  const demo = !flags.config || flags.config.length === 0;
  const options: UpOptions = {
    settings,
    ...(demo ? { records: demoRecords(echoScriptPath(), process.execPath) } : { configPaths: flags.config! }),
    listen: flags.listen ?? ['127.0.0.1:8080'],
    mesh: flags.mesh ?? ['127.0.0.1:15001'],
    ...(flags['listen-tls'] ? { listenTls: flags['listen-tls'] } : {}),
    ...(flags['tls-cert'] && flags['tls-key'] ? { tls: { certFile: flags['tls-cert'], keyFile: flags['tls-key'], ...(flags['tls-client-ca'] ? { clientCaFile: flags['tls-client-ca'] } : {}) } } : {}),
    ...(flags['extauth-ca'] ? { extAuthCaFile: flags['extauth-ca'] } : {}),
    admin: flags.admin ?? '127.0.0.1:9901',
    ...(flags.status ? { status: flags.status } : {}),
    ...(flags.metrics ? { metrics: flags.metrics } : {}),
    api: flags.api !== undefined ? { address: flags.api } : { address: DEFAULT_API_ADDRESS, optional: true },
    logger,
    logDir: flags['log-dir'] ?? DEFAULT_LOG_DIR,
    ...(flags['mesh-cert-ttl'] ? { meshCertTtlMs: meshCertTtl(flags['mesh-cert-ttl']) } : {}),
    ...(flags['tracing-collector'] ? { tracingCollector: flags['tracing-collector'] } : {}),
    ...(flags['dns-server'] ? { dnsServers: flags['dns-server'] } : {}),
    ...(limitsFrom(flags) ? { limits: limitsFrom(flags)! } : {}),
    onHealthChange: (change) => process.stdout.write(`${healthLine(change)}\n`),
  };
  if (flags.api !== undefined && !isLoopbackHost(parseHostPort(flags.api).host)) {
    logger.warn({ api: flags.api }, 'platform API: --api is not on loopback; anyone who reaches it with the operator key (.svcproxy/api-token) may change every record');
  }
  const up = await startUp(options);
  const { runtime } = up;
  const snapshot = runtime.store.current;
  // The store has logged the configuration's warnings at load (and does at each reload): once each.
  const port = runtime.listeners[0]?.address.port ?? 8080;
  const meshPort = runtime.meshListeners[0]?.address.port;
  const lines: string[] = [demo ? 'svcproxy up: built-in demo' : 'svcproxy up'];
  for (const l of runtime.listeners) lines.push(`  listening    ${l.tls ? 'https' : 'http'}://${formatHostPort(l.address)}`);
  for (const l of runtime.meshListeners) {
    lines.push(`  mesh         http://${formatHostPort(l.address)}  (internal names from this shell, as spiffe://${runtime.dataplane.org}/ingress: admitted by inboundAllowType same-org)`);
  }
  lines.push(`  mesh CA      ${options.caDir ?? join(options.stateDir ?? DEFAULT_STATE_DIR, 'ca')}  (each replica: its own certificate, mTLS listener and HTTP_PROXY)`);
  if (runtime.admin) {
    lines.push(`  admin        http://${formatHostPort(runtime.admin.address)}  (/healthz /ready /metrics /config /workloads)`);
    lines.push(`  dashboard    http://${formatHostPort(runtime.admin.address)}/`);
  }
  if (runtime.statusListener) lines.push(`  status       http://${formatHostPort(runtime.statusListener.address)}  (/healthz /ready)`);
  if (runtime.metricsListener) lines.push(`  metrics      http://${formatHostPort(runtime.metricsListener.address)}  (/metrics)`);
  if (up.api.url) {
    lines.push(`  api          ${up.api.url}  (platform API; each replica: ${up.api.endpoint()} through its HTTP_PROXY, docs/platform-api.md)`);
    lines.push(`  operator key ${up.operatorKeyFile}  (an org administrator at the api; mode 0600)`);
    lines.push(`  api changes  ${join(options.stateDir ?? DEFAULT_STATE_DIR, RECORD_STATE_DIR)}  (kept across runs; an edit of a record in --config wins over an earlier API change to it)`);
    lines.push(`  cpln         ${profileCommand(up.api.url, resolve(up.operatorKeyFile), runtime.dataplane.org)}`);
  }
  if (options.logDir) lines.push(`  logs         ${options.logDir}  (svcproxy logs --workload NAME)`);
  const byWorkload = new Map<string, Endpoint[]>();
  for (const e of listEndpoints(snapshot, runtime.replicas)) {
    const workload = snapshot.workloads.get(`${e.gvc}/${e.workload}`);
    if (workload && isIgnored(workload, snapshot.settings.vendor)) continue; // neither started nor routed: warned at load
    const key = `${e.gvc}/${e.workload}`;
    if (!byWorkload.has(key)) byWorkload.set(key, []);
    byWorkload.get(key)!.push(e);
  }
  const notes = notRunNotes(snapshot);
  for (const [key, list] of byWorkload) {
    lines.push(`workload ${key}`);
    for (const line of notes.get(key)?.lines ?? []) lines.push(`  note             ${line}`);
    for (const e of list) lines.push(`  ${e.kind.padEnd(17)}${endpointUrl(e, port, meshPort)}${e.location ? `  [${e.location}${e.replica !== undefined ? ` #${e.replica}` : ''}]` : ''}`);
  }
  if (demo) {
    const first = [...byWorkload.values()][0]?.find((e) => e.kind === 'canonical');
    if (first) lines.push('', `try:  curl ${endpointUrl(first, port, meshPort)}`);
  }
  process.stdout.write(lines.join('\n') + '\n');
  announceReady(runtime, (line) => process.stdout.write(`${line}\n`));
  const signal = await waitForSignals(() => void runtime.store.reload());
  logger.info({ signal }, 'draining');
  await up.stop();
  logger.info('stopped');
  return 0;
}

/** Whether a listener on `host` is reached from this machine only. */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * The platform CLI's command that makes a profile for this `up` (DESIGN §13): the key is read from
 * its file by the shell, so it is never printed.
 */
export function profileCommand(apiUrl: string, keyFile: string, org: string): string {
  const quoted = /^[A-Za-z0-9_./-]+$/.test(keyFile) ? keyFile : `'${keyFile.replaceAll("'", "'\\''")}'`;
  return `cpln profile update svcproxy-up --endpoint ${apiUrl} --token "$(cat ${quoted})" --org ${org}`;
}

/** `--mesh-cert-ttl`: a duration of at least 3 s (renewal runs at two thirds of it). */
function meshCertTtl(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms < 3000) throw new UsageError(`--mesh-cert-ttl must be a duration of at least 3s, not ${JSON.stringify(text)}`);
  return ms;
}

/**
 * Logs (warn) each line of what `up` does not run of a workload (src/local/not-run.ts) the first time
 * it is true: at start, then for what a reload adds or changes; never per request.
 */
export function notRunSayer(logger: Logger): (snapshot: Snapshot) => void {
  const said = new Map<string, readonly string[]>();
  let last: Snapshot | undefined;
  return (snapshot) => {
    const notes = notRunNotes(snapshot);
    // After the first, only the workloads a change touched can say something new (or stop saying it).
    const keys = last === undefined ? notes.keys() : changedWorkloadsOrDeployments(last, snapshot);
    last = snapshot;
    for (const key of keys) {
      const note = notes.get(key);
      if (note === undefined) {
        said.delete(key);
        continue;
      }
      const [gvc, workload] = [key.slice(0, key.indexOf('/')), key.slice(key.indexOf('/') + 1)];
      const before = said.get(key) ?? [];
      for (const line of note.lines) if (!before.includes(line)) logger.warn({ workload, gvc }, `workload ${key}: ${line}`);
      said.set(key, note.lines);
    }
  };
}

/** Every (workload, location) `up` runs with `minScale` of 1 or more has a ready replica. */
export function wantedReplicasReady(snapshot: Snapshot, replicas: ReplicaRegistry): boolean {
  for (const plan of planReplicas(snapshot)) {
    const options = plan.workload.locationOptions.get(plan.location.name) ?? plan.workload.defaultOptions;
    if (options.minScale >= 1 && !replicas.hasReady(plan.workload.key, plan.location.name)) return false;
  }
  return true;
}

/** Prints a line the first time each workload has a ready replica in a location (those already ready at once). */
function announceReady(runtime: Runtime, print: (line: string) => void): void {
  const seen = new Set<string>();
  const announce = (r: Replica): void => {
    const key = `${r.workload}\u0000${r.location}`;
    if (!r.ready || seen.has(key)) return;
    seen.add(key);
    print(`ready        ${r.workload} in ${r.location}  (${r.name}, ${process.uptime().toFixed(2)} s after start)`);
  };
  for (const r of runtime.replicas.all()) announce(r);
  runtime.replicas.on('ready', announce);
}
