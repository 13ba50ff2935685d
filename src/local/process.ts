/**
 * One supervised container process: spawned without a shell (command + args), its stdout and
 * stderr logged line by line, restarted when it exits on its own after an exponential backoff
 * (1 s doubling to 30 s; back to 1 s once a run lasted 10 s), and stopped with SIGTERM, then
 * SIGKILL when the grace period runs out. A command that cannot be spawned (ENOENT, EACCES) is
 * treated as a crash and retried with the same backoff, so fixing the file brings it back. The
 * process leads its own process group (POSIX) and signals go to the whole group, so the children of
 * a wrapper script stop with it, and a Ctrl-C at the terminal reaches only svcproxy, which then
 * stops the processes in order instead of racing their restarts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Logger } from 'pino';
import type { Clock, Timer } from '../deps.js';
import { pipeLines } from './output.js';

export interface BackoffOptions {
  /** First restart delay. */
  readonly initialMs: number;
  /** Cap of the doubling. */
  readonly maxMs: number;
  /** A run at least this long resets the delay to `initialMs`. */
  readonly resetAfterMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = Object.freeze({ initialMs: 1000, maxMs: 30_000, resetAfterMs: 10_000 });

/**
 * The restart rule as a pure step: given the delay the next restart would use and how long the
 * process ran, the delay to wait now and the one after it.
 */
export function restartDelay(
  nextMs: number,
  ranMs: number,
  backoff: BackoffOptions,
): { readonly delayMs: number; readonly nextMs: number } {
  const delayMs = ranMs >= backoff.resetAfterMs ? backoff.initialMs : Math.min(nextMs, backoff.maxMs);
  return { delayMs, nextMs: Math.min(delayMs * 2, backoff.maxMs) };
}

export interface ContainerProcessOptions {
  readonly command: string;
  readonly args: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  /** Carries `workload`, `location`, `replica`, `container`; each output line adds `stream`. */
  readonly logger: Logger;
  readonly clock: Clock;
  readonly backoff: BackoffOptions;
  readonly cwd?: string;
  /** The process has been spawned (first start and every restart). */
  readonly onRunning?: (pid: number) => void;
  /** The process exited or could not be spawned; called before a restart is scheduled. */
  readonly onDown?: () => void;
}

type State = 'idle' | 'running' | 'backoff' | 'stopping' | 'stopped';

export class ContainerProcess {
  private state: State = 'idle';
  private child: ChildProcess | undefined;
  private startedAt = 0;
  private nextDelayMs: number;
  private restartTimer: Timer | undefined;
  private exited: Promise<void> = Promise.resolve();
  /** Restarts so far (for logs and tests). */
  restarts = 0;

  constructor(private readonly options: ContainerProcessOptions) {
    this.nextDelayMs = options.backoff.initialMs;
  }

  get pid(): number | undefined {
    return this.state === 'running' || this.state === 'stopping' ? this.child?.pid : undefined;
  }

  start(): void {
    if (this.state !== 'idle' && this.state !== 'backoff') return;
    this.restartTimer = undefined;
    const { command, args, env, logger, clock, cwd } = this.options;
    const child = spawn(command, [...args], {
      env,
      cwd,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: process.platform !== 'win32',
      windowsHide: true,
    });
    this.child = child;
    this.state = 'running';
    this.startedAt = clock.now();
    let resolveExited!: () => void;
    this.exited = new Promise((resolve) => (resolveExited = resolve));

    for (const stream of ['stdout', 'stderr'] as const) {
      const readable = child[stream];
      if (readable) pipeLines(readable, (line) => logger.info({ stream }, line));
    }

    let done = false;
    const onGone = (code: number | null, signal: NodeJS.Signals | null, error?: Error): void => {
      if (done) return;
      done = true;
      resolveExited();
      this.onExit(child, code, signal, error);
    };
    child.once('spawn', () => {
      logger.info({ childPid: child.pid, command, args }, 'process started');
      if (child.pid !== undefined) this.options.onRunning?.(child.pid);
    });
    child.once('exit', (code, signal) => onGone(code, signal));
    // 'error' without a pid means the spawn itself failed; 'exit' will not follow.
    child.on('error', (error) => {
      if (child.pid === undefined) onGone(null, null, error);
      else logger.warn({ err: error }, 'process error');
    });
  }

  /** SIGTERM now, SIGKILL after `graceMs`; resolves when the process is gone (or was not running). */
  async stop(graceMs: number): Promise<void> {
    if (this.state === 'stopped') return;
    if (this.state !== 'running' && this.state !== 'stopping') {
      this.options.clock.clearTimeout(this.restartTimer);
      this.restartTimer = undefined;
      this.state = 'stopped';
      return;
    }
    if (this.state === 'running') {
      this.state = 'stopping';
      this.signal('SIGTERM');
    }
    // A second stop() while stopping may shorten the grace period (shutdown after a reload).
    if (Number.isFinite(graceMs)) {
      const kill = this.options.clock.setTimeout(() => {
        if (this.state !== 'stopping') return;
        this.options.logger.warn({ childPid: this.child?.pid, graceMs }, 'process ignored SIGTERM; killing');
        this.signal('SIGKILL');
      }, Math.max(0, graceMs));
      void this.exited.then(() => this.options.clock.clearTimeout(kill));
    }
    await this.exited;
  }

  /**
   * SIGKILL now, synchronously, and no restart: for a `process.on('exit')` handler, where nothing
   * asynchronous runs any more. The processes lead their own groups, so nothing else would stop them.
   */
  killNow(): void {
    this.options.clock.clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    if (this.state === 'running' || this.state === 'stopping') {
      this.state = 'stopping';
      this.signal('SIGKILL');
    } else {
      this.state = 'stopped';
    }
  }

  private signal(signal: NodeJS.Signals): void {
    const child = this.child;
    if (child?.pid === undefined) return;
    try {
      // Negative pid: the whole process group the child leads (it was spawned detached).
      if (process.platform !== 'win32') process.kill(-child.pid, signal);
      else child.kill(signal);
    } catch {
      try {
        child.kill(signal);
      } catch {
        // Already gone.
      }
    }
  }

  private onExit(child: ChildProcess, code: number | null, signal: NodeJS.Signals | null, error?: Error): void {
    if (child !== this.child) return;
    const { logger, clock, backoff } = this.options;
    if (this.state === 'stopping' || this.state === 'stopped') {
      this.state = 'stopped';
      logger.info({ code, signal }, 'process stopped');
      this.options.onDown?.();
      return;
    }
    const ran = clock.now() - this.startedAt;
    const { delayMs, nextMs } = restartDelay(this.nextDelayMs, ran, backoff);
    this.nextDelayMs = nextMs;
    this.state = 'backoff';
    if (error) logger.error({ err: error, restartInMs: delayMs }, 'process could not be started');
    else logger.warn({ code, signal, ranMs: Math.round(ran), restartInMs: delayMs }, 'process exited');
    this.options.onDown?.();
    this.restartTimer = clock.setTimeout(() => {
      if (this.state !== 'backoff') return;
      this.restarts++;
      this.start();
    }, delayMs);
  }
}
