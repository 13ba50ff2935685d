/**
 * One `--workers` worker: the same `Runtime` a single process runs (listeners, data plane, probes of
 * deployment replicas, outlier and retry state of its own), without admin, status or metrics
 * listeners and without reading the configuration files: it asks the primary for the snapshot in
 * force and applies every later one the primary sends (a worker started while the files on disk are
 * invalid still starts with the last good configuration). The listen sockets are shared through node:cluster.
 *
 * It stops (drains within the grace period, exits 0) when the primary says `drain`, or when it gets
 * SIGINT/SIGTERM itself (Ctrl-C reaches the whole process group).
 * SIGHUP is ignored: reloads are the primary's. A worker that cannot start (a port in use, a
 * certificate that cannot be read) tells the primary why, in the words a single process would use,
 * and exits 1 without printing: the primary reports it once.
 */
import { getSystemErrorMap } from 'node:util';
import { ConfigStore } from '../config/index.js';
import { Runtime, type RuntimeOptions } from '../roles/runtime.js';
import { formatHostPort } from '../address.js';
import type { Snapshot } from '../config/model.js';
import { isMessage, type BoundListener, type Question, type ReplicaView, type ToPrimary, type ToWorker } from './messages.js';

type ErrnoWithAddress = Error & { code?: string; syscall?: string; errno?: number; address?: string; port?: number };

/**
 * A listen error as a single process words it. node:cluster binds in the primary and reports
 * `bind EADDRINUSE 127.0.0.1:8080`; one process alone reports `listen EADDRINUSE: address already in
 * use 127.0.0.1:8080`, which is what operators (and scripts) look for.
 */
export function singleProcessMessage(err: ErrnoWithAddress): string {
  if (err.syscall !== 'bind' || typeof err.errno !== 'number' || typeof err.address !== 'string' || !err.code) return err.message;
  const description = getSystemErrorMap().get(err.errno)?.[1];
  if (!description) return err.message;
  return `listen ${err.code}: ${description} ${err.address}${err.port ? `:${err.port}` : ''}`;
}

/** Resolves once the message is written (or at once, when the primary is gone). */
function send(message: ToPrimary): Promise<void> {
  if (!process.connected) return Promise.resolve();
  return new Promise((resolve) => process.send!(message, undefined, {}, () => resolve()));
}

function answer(runtime: Runtime, id: number, what: Question): void {
  if (what === 'metrics') {
    runtime.metrics.registry.getMetricsAsJSON().then(
      (value) => void send({ svcproxy: 'answer', id, value }),
      (err: Error) => void send({ svcproxy: 'answer', id, error: err.message }),
    );
    return;
  }
  const value: ReplicaView[] = runtime.replicas.all().map((r) => ({ workload: r.workload, location: r.location, name: r.name, ready: r.ready, outstanding: r.outstanding }));
  void send({ svcproxy: 'answer', id, value });
}

/** Runs worker `slot` until it is told to stop; resolves with the exit code. */
export async function runWorker(options: RuntimeOptions, slot: string, graceMs: (snapshot: Snapshot) => number): Promise<number> {
  const logger = options.logger.child({ worker: slot });
  let runtime: Runtime | undefined;
  let store: ConfigStore | undefined;
  // The newest configuration received while the runtime was starting (applied once it runs).
  let queued: Extract<ToWorker, { svcproxy: 'config' }> | undefined;
  let firstConfig!: (m: Extract<ToWorker, { svcproxy: 'config' }>) => void;
  const gotConfig = new Promise<Extract<ToWorker, { svcproxy: 'config' }>>((resolve) => (firstConfig = resolve));
  let requestStop!: (grace: number | undefined) => void;
  const stopRequested = new Promise<number | undefined>((resolve) => (requestStop = resolve));

  const apply = (m: Extract<ToWorker, { svcproxy: 'config' }>): void => {
    if (store!.adopt(m.records, m.generation)) void send({ svcproxy: 'applied', generation: m.generation });
  };
  process.on('message', (m: unknown) => {
    if (!isMessage<ToWorker>(m)) return;
    switch (m.svcproxy) {
      case 'config':
        if (!store) firstConfig(m);
        else if (!runtime) queued = m;
        else apply(m);
        return;
      case 'ask':
        if (runtime) answer(runtime, m.id, m.what);
        else void send({ svcproxy: 'answer', id: m.id, error: 'not ready' });
        return;
      case 'drain':
        requestStop(m.graceMs);
        return;
    }
  });
  process.on('SIGHUP', () => logger.debug('SIGHUP ignored by a worker: the primary reloads'));
  const onSignal = (signal: NodeJS.Signals): void => {
    logger.info({ signal }, 'draining');
    requestStop(undefined);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  // A primary that is gone (killed outright) takes its workers with it: node:cluster exits a worker
  // whose channel closes unexpectedly, at once (its listen sockets were the primary's anyway).
  void send({ svcproxy: 'hello' });

  const first = await Promise.race([gotConfig, stopRequested.then(() => undefined)]);
  if (!first) return exit(0);
  try {
    store = ConfigStore.follow({ records: first.records, generation: first.generation, settings: options.settings, logger: logger.child({ component: 'config' }) });
    runtime = await Runtime.start({ ...options, logger, store, worker: slot, admin: undefined, status: undefined, metrics: undefined, watch: false });
  } catch (err) {
    await send({ svcproxy: 'failed', message: singleProcessMessage(err as ErrnoWithAddress) });
    return exit(1);
  }
  if (queued) apply(queued);
  queued = undefined;
  const listeners: BoundListener[] = [
    ...runtime.listeners.map((l) => ({ address: formatHostPort(l.address), tls: l.tls, mesh: false })),
    ...runtime.meshListeners.map((l) => ({ address: formatHostPort(l.address), tls: false, mesh: true })),
    ...runtime.meshInboundListeners.map((l) => ({ address: formatHostPort(l.address), tls: true, mesh: true })),
  ];
  void send({ svcproxy: 'ready', generation: store.current.generation, listeners });
  logger.debug({ pid: process.pid }, 'worker ready');

  const grace = await stopRequested;
  await runtime.stop(grace ?? graceMs(runtime.store.current));
  logger.debug('worker stopped');
  return exit(0);
}

/**
 * End the process. Not by letting go of the primary's channel (which holds the event loop open):
 * node:cluster exits a worker whose channel closes with code 0, whatever went wrong. The logger
 * flushes on exit.
 */
function exit(code: number): number {
  process.exit(code);
}
