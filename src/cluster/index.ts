/**
 * `--workers N` for `svcproxy ingress` and `svcproxy sidecar`: one primary (configuration, admin
 * listener, supervision) and N workers sharing the listen sockets (node:cluster). The CLI loads
 * this folder only when there is more than one worker, or in a worker, so the default single
 * process pays nothing for it.
 */
import cluster from 'node:cluster';
import type { RuntimeOptions } from '../roles/runtime.js';
import type { Snapshot } from '../config/model.js';
import { runPrimary } from './primary.js';
import { runWorker } from './worker.js';
import { WORKER_SLOT_ENV } from './pool.js';

export { parseWorkers, MAX_WORKERS } from './workers.js';
export { mergeReplicas } from './admin.js';
export { singleProcessMessage } from './worker.js';

/** Runs this process's part: the primary, or (in a forked process) one worker. */
export function runClustered(runtime: RuntimeOptions, workers: number, graceMs: (snapshot: Snapshot) => number): Promise<number> {
  if (cluster.isWorker) return runWorker(runtime, process.env[WORKER_SLOT_ENV] ?? String(cluster.worker!.id - 1), graceMs);
  return runPrimary({ runtime, workers, graceMs });
}
