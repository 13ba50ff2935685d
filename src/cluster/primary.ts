/**
 * The `--workers N` primary of `svcproxy ingress` and `svcproxy sidecar`. It serves no user traffic:
 * it loads and validates the configuration (an invalid one exits 1 before any worker starts, as a
 * single process does), forks the workers, which share the listen sockets through node:cluster,
 * and serves the admin listener (and the status and metrics listeners) itself so `/metrics`,
 * `/ready` and `/config` are one view. It is the one watcher of the configuration folders and the
 * one SIGHUP handler: a valid reload goes to every worker, a rejected one is logged once and keeps
 * the last good configuration everywhere.
 *
 * Start-up fails (exit 1, the first worker's error as a single process words it: `listen
 * EADDRINUSE: address already in use 127.0.0.1:8080`) when any worker cannot start. Later, a worker
 * that exits is restarted with backoff. SIGINT/SIGTERM drain every worker with the grace period a
 * single process would use; the primary exits 0 once they have all exited.
 */
import cluster from 'node:cluster';
import type { Logger } from 'pino';
import { ConfigStore } from '../config/index.js';
import type { Snapshot } from '../config/model.js';
import { adminAddresses, redact, startAdminListeners, type AdminListeners } from '../admin/server.js';
import { primarySource } from '../admin/dashboard-sources.js';
import { storeOptions, type RuntimeOptions } from '../roles/runtime.js';
import { placeProblem } from '../roles/place.js';
import { UsageError } from '../flags.js';
import { parseHostPort } from '../address.js';
import { logAdminListeners } from '../summary.js';
import { waitForSignals } from '../signals.js';
import { aggregatedMetrics, mergeReplicas, primaryMetrics } from './admin.js';
import type { ReplicaView } from './messages.js';
import { WorkerPool } from './pool.js';

export interface PrimaryOptions {
  /** The options a single process would run with; the workers re-derive them from the same flags. */
  readonly runtime: RuntimeOptions;
  readonly workers: number;
  /** The drain grace period of a snapshot (the CLI's rule). */
  readonly graceMs: (snapshot: Snapshot) => number;
}

/**
 * Round-robin in the primary (node:cluster's default on Linux), unless NODE_CLUSTER_SCHED_POLICY
 * says otherwise: with SCHED_NONE every worker accepts from the shared socket itself, which saves a
 * hop but lets the kernel hand most connections to whichever worker wakes first (README, "Multiple
 * cores", has the measurements).
 */
function choosePolicy(): void {
  if (!process.env.NODE_CLUSTER_SCHED_POLICY) cluster.schedulingPolicy = cluster.SCHED_RR;
}

export async function runPrimary(opts: PrimaryOptions): Promise<number> {
  const { runtime: options, workers: count } = opts;
  const logger: Logger = options.logger;
  const store = await ConfigStore.open(storeOptions(options));
  const problem = placeProblem(options, store.current);
  if (problem !== undefined) {
    store.close();
    throw new UsageError(problem);
  }
  let pool: WorkerPool | undefined;
  const metrics = primaryMetrics(count, () => pool?.views().filter((w) => w.ready).length ?? 0);
  choosePolicy();
  pool = new WorkerPool({
    count,
    current: () => store.current,
    logger,
    onRestart: () => metrics.restarts.inc(),
    ...(options.deps?.clock ? { clock: options.deps.clock } : {}),
  });
  const workers = pool;
  store.on('change', (snapshot) => {
    metrics.configReloads.labels('ok').inc();
    workers.broadcast(snapshot);
  });
  store.on('rejected', () => metrics.configReloads.labels('rejected').inc());

  let admin: AdminListeners | undefined;
  let stopping = false;
  try {
    await workers.start();
    // The admin, status and metrics listeners are the primary's: one view of every worker.
    admin = await startAdminListeners(adminAddresses(options), aggregatedMetrics(metrics.registry, () => workers.ask('metrics')), {
      ready: () => !stopping && workers.allReady(),
      config: async () => configView(options.role, store, workers, (await workers.ask('replicas')) as ReplicaView[][]),
      dashboard: primarySource({
        role: options.role, workers: count, store,
        askMetrics: () => workers.ask('metrics'),
        replicas: async () => mergeReplicas((await workers.ask('replicas')) as ReplicaView[][]),
      }),
    });
  } catch (err) {
    await workers.stop(0);
    store.close();
    throw err;
  }
  if (options.watch !== false && options.configPaths?.length) store.watch();

  if (options.role === 'sidecar' && !store.current.workloads.has(options.sidecar!.workload)) {
    logger.warn({ workload: options.sidecar!.workload }, 'the sidecar workload is not in the configuration; requests get 404 until it is');
  }
  for (const l of workers.listeners()) logger.info({ address: l.address, tls: l.tls, workers: count }, l.mesh ? 'mesh listening' : `${options.role} listening`);
  logAdminListeners(logger, admin);

  const signal = await waitForSignals(() => void store.reload());
  stopping = true;
  logger.info({ signal, workers: count }, 'draining');
  await workers.stop(opts.graceMs(store.current));
  store.close();
  await admin?.close();
  logger.info('stopped');
  return 0;
}

function configView(role: string, store: ConfigStore, pool: WorkerPool, replicas: readonly ReplicaView[][]): unknown {
  const snapshot = store.current;
  return {
    role,
    generation: snapshot.generation,
    settings: snapshot.settings,
    records: redact(snapshot.records),
    warnings: snapshot.warnings,
    lastError: store.lastErrors ? { at: store.lastErrorAt, errors: store.lastErrors } : null,
    workers: pool.views(),
    replicas: mergeReplicas(replicas),
  };
}
