/**
 * The primary's workers: `count` slots, each holding one node:cluster worker. `start()` forks them
 * all and resolves when every one is ready, or rejects with the first one's failure (its message
 * as a single process would print it); after that, a worker that exits is forked again after a
 * backoff (doubling from 200 ms to 30 s, back to 200 ms after a run of 10 s), and logged. Every
 * worker gets the configuration in force when it says hello, and every later one (`broadcast`).
 * `ask()` puts one question to every ready worker and gathers the answers that arrive within a
 * bound; a worker that dies or stalls is left out rather than failing the question. `stop()` tells
 * every worker to drain within the grace period and waits for them to exit (SIGKILL for one that
 * outlives the grace period by more than `killAfterMs`).
 */
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from 'pino';
import type { Snapshot } from '../config/model.js';
import { systemClock, type Clock, type Timer } from '../deps.js';
import { restartDelay, type BackoffOptions } from '../local/process.js';
import { isMessage, type BoundListener, type Question, type ToPrimary, type ToWorker } from './messages.js';

/** The environment variable that tells a worker its slot (0-based). */
export const WORKER_SLOT_ENV = 'SVCPROXY_WORKER_SLOT';

export const WORKER_BACKOFF: BackoffOptions = Object.freeze({ initialMs: 200, maxMs: 30_000, resetAfterMs: 10_000 });

export interface PoolOptions {
  readonly count: number;
  /** The configuration in force, sent to each worker as it starts. */
  readonly current: () => Snapshot;
  readonly logger: Logger;
  readonly backoff?: BackoffOptions;
  /** How long `ask()` waits for the slowest worker. */
  readonly askTimeoutMs?: number;
  /** How long past the grace period a draining worker may take before it is killed. */
  readonly killAfterMs?: number;
  /** Told about every restart (for metrics). */
  readonly onRestart?: () => void;
  /** Timers and the run time that resets the backoff (real time by default). */
  readonly clock?: Clock;
}

/** What `/config` shows of each slot. */
export interface WorkerView {
  readonly worker: number;
  readonly pid: number | null;
  readonly ready: boolean;
  readonly generation: number;
  readonly restarts: number;
}

interface Slot {
  readonly index: number;
  worker: Worker | undefined;
  /** The worker said hello: it gets every configuration from now on. */
  greeted: boolean;
  ready: boolean;
  generation: number;
  startedAt: number;
  nextDelayMs: number;
  restarts: number;
  timer: Timer | undefined;
  listeners: readonly BoundListener[];
}

interface Pending {
  readonly worker: Worker;
  readonly resolve: (value: unknown) => void;
}

export class WorkerPool {
  private readonly slots: Slot[];
  private readonly pending = new Map<number, Pending>();
  private readonly exits = new Map<Worker, Promise<void>>();
  private nextId = 0;
  private stopping = false;
  private startup: { resolve: () => void; reject: (err: Error) => void } | undefined;
  private readonly clock: Clock;

  constructor(private readonly opts: PoolOptions) {
    this.clock = opts.clock ?? systemClock;
    const backoff = opts.backoff ?? WORKER_BACKOFF;
    this.slots = Array.from({ length: opts.count }, (_, index) => ({
      index, worker: undefined, greeted: false, ready: false, generation: 0, startedAt: 0, nextDelayMs: backoff.initialMs, restarts: 0, timer: undefined, listeners: [],
    }));
  }

  /** Forks every worker; resolves when all are ready, rejects with the first failure. */
  start(): Promise<void> {
    const started = new Promise<void>((resolve, reject) => (this.startup = { resolve, reject }));
    for (const slot of this.slots) this.fork(slot);
    return started;
  }

  /** Every slot has a ready worker. */
  allReady(): boolean {
    return this.slots.every((s) => s.ready);
  }

  /** The listeners the first ready worker bound (all workers share them). */
  listeners(): readonly BoundListener[] {
    return this.slots.find((s) => s.ready)?.listeners ?? [];
  }

  views(): WorkerView[] {
    return this.slots.map((s) => ({ worker: s.index, pid: s.worker?.process.pid ?? null, ready: s.ready, generation: s.generation, restarts: s.restarts }));
  }

  /** Sends a new configuration to every worker that has said hello (a later one gets it then). */
  broadcast(snapshot: Snapshot): void {
    for (const slot of this.slots) if (slot.worker && slot.greeted) this.send(slot.worker, configMessage(snapshot));
  }

  /** One question to every ready worker; the answers that arrive within the bound. */
  async ask(what: Question): Promise<unknown[]> {
    const timeoutMs = this.opts.askTimeoutMs ?? 2000;
    const asked = this.slots.filter((s) => s.ready && s.worker?.isConnected()).map((s) => this.askOne(s.worker!, what, timeoutMs));
    const answers = await Promise.all(asked);
    return answers.filter((a) => a !== undefined);
  }

  /** Drains every worker within `graceMs` and waits for all of them to exit. */
  async stop(graceMs: number): Promise<void> {
    this.stopping = true;
    for (const slot of this.slots) {
      this.clock.clearTimeout(slot.timer);
      slot.timer = undefined;
      slot.ready = false;
      if (slot.worker) this.send(slot.worker, { svcproxy: 'drain', graceMs });
    }
    const live = [...this.exits.values()];
    if (live.length === 0) return;
    const killer = this.clock.setTimeout(() => {
      for (const w of this.exits.keys()) {
        this.opts.logger.warn({ pid: w.process.pid }, 'worker still running past the grace period: killing it');
        w.process.kill('SIGKILL');
      }
    }, graceMs + (this.opts.killAfterMs ?? 5000));
    await Promise.all(live);
    this.clock.clearTimeout(killer);
  }

  private fork(slot: Slot): void {
    slot.timer = undefined;
    if (this.stopping) return;
    const worker = cluster.fork({ [WORKER_SLOT_ENV]: String(slot.index) });
    slot.worker = worker;
    slot.greeted = false;
    slot.ready = false;
    slot.generation = 0;
    slot.startedAt = this.clock.now();
    this.exits.set(worker, new Promise<void>((resolve) => worker.once('exit', () => resolve())));
    worker.on('message', (m: unknown) => {
      if (isMessage<ToPrimary>(m)) this.onMessage(slot, worker, m);
    });
    // A worker that cannot be written to any more is about to exit: nothing to do until it does.
    worker.on('error', (err) => this.opts.logger.debug({ err, worker: slot.index }, 'worker channel error'));
    worker.once('exit', (code, signal) => this.onExit(slot, worker, code, signal));
  }

  private onMessage(slot: Slot, worker: Worker, m: ToPrimary): void {
    if (slot.worker !== worker) return;
    switch (m.svcproxy) {
      case 'hello':
        slot.greeted = true;
        this.send(worker, configMessage(this.opts.current()));
        return;
      case 'ready':
        slot.ready = true;
        slot.generation = m.generation;
        slot.listeners = m.listeners;
        if (this.startup && this.allReady()) {
          this.startup.resolve();
          this.startup = undefined;
        } else if (!this.startup) {
          this.opts.logger.info({ worker: slot.index, pid: worker.process.pid }, 'worker restarted and ready');
        }
        // A reload that happened while it was starting.
        if (m.generation < this.opts.current().generation) this.send(worker, configMessage(this.opts.current()));
        return;
      case 'applied':
        slot.generation = Math.max(slot.generation, m.generation);
        return;
      case 'failed':
        if (this.startup) this.failStartup(new Error(m.message));
        else if (!this.stopping) {
          this.opts.logger.error({ worker: slot.index, error: m.message }, 'worker failed to start');
        }
        return;
      case 'answer': {
        const p = this.pending.get(m.id);
        if (!p) return;
        this.pending.delete(m.id);
        p.resolve(m.error === undefined ? m.value : undefined);
        return;
      }
    }
  }

  /** The first worker that cannot start fails the start; the others' failures are not news. */
  private failStartup(err: Error): void {
    const startup = this.startup!;
    this.startup = undefined;
    this.stopping = true;
    startup.reject(err);
  }

  private onExit(slot: Slot, worker: Worker, code: number | null, signal: string | null): void {
    this.exits.delete(worker);
    for (const [id, p] of this.pending) {
      if (p.worker !== worker) continue;
      this.pending.delete(id);
      p.resolve(undefined);
    }
    if (slot.worker !== worker) return;
    slot.worker = undefined;
    const wasReady = slot.ready;
    slot.ready = false;
    if (this.stopping) return;
    if (this.startup) {
      // A worker that failed said why ('failed' comes before its exit); this is the one that did not.
      const startup = this.startup;
      this.clock.setTimeout(() => {
        if (this.startup === startup) this.failStartup(new Error(`worker ${slot.index} exited (${signal ?? `code ${code}`}) before it was ready`));
      }, 100);
      return;
    }
    const backoff = this.opts.backoff ?? WORKER_BACKOFF;
    const { delayMs, nextMs } = restartDelay(slot.nextDelayMs, this.clock.now() - slot.startedAt, backoff);
    slot.nextDelayMs = nextMs;
    slot.restarts++;
    this.opts.onRestart?.();
    this.opts.logger.error({ worker: slot.index, pid: worker.process.pid, code, signal, wasReady, restartInMs: delayMs }, 'worker exited: restarting it');
    slot.timer = this.clock.setTimeout(() => this.fork(slot), delayMs);
  }

  private askOne(worker: Worker, what: Question, timeoutMs: number): Promise<unknown> {
    const id = ++this.nextId;
    return new Promise((resolve) => {
      const timer = this.clock.setTimeout(() => {
        this.pending.delete(id);
        resolve(undefined);
      }, timeoutMs);
      this.pending.set(id, { worker, resolve: (value) => (this.clock.clearTimeout(timer), resolve(value)) });
      this.send(worker, { svcproxy: 'ask', id, what });
    });
  }

  private send(worker: Worker, message: ToWorker): void {
    if (!worker.isConnected()) return;
    try {
      worker.send(message);
    } catch (err) {
      // The channel closed between the check and the write: the exit handler takes over.
      this.opts.logger.debug({ err, pid: worker.process.pid }, 'message to a worker not sent');
    }
  }
}

function configMessage(snapshot: Snapshot): ToWorker {
  return { svcproxy: 'config', generation: snapshot.generation, records: snapshot.records };
}
