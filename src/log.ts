/**
 * The process logger: pino writing JSON asynchronously to stdout (about 2.5 µs a line, flushed in 4 KiB
 * batches, and at least once a second, so a quiet process's lines reach `kubectl logs` or a pipe
 * within a second), pretty-printed when stdout is a terminal (one line per entry). Components take
 * child loggers with their own fields (`component`, `workload`, `location`, `replica`, `container`).
 * The async destination is flushed on exit so the last lines are not lost.
 */
import pino, { type Logger } from 'pino';

/** The longest a log line waits in the batch before it is written. */
export const LOG_FLUSH_MS = 1000;

export interface LogOptions {
  level?: string;
  /** Pretty-print (default: when stdout is a terminal). */
  pretty?: boolean;
  /** Write synchronously (tests and short commands). */
  sync?: boolean;
}

export function createLogger(opts: LogOptions = {}): Logger {
  const level = opts.level ?? 'info';
  const pretty = opts.pretty ?? Boolean(process.stdout.isTTY);
  if (pretty) {
    try {
      return pino({ level, base: undefined, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', singleLine: true } } });
    } catch {
      // pino-pretty missing: fall back to JSON.
    }
  }
  const destination = pino.destination({ dest: 1, sync: opts.sync ?? false, minLength: opts.sync ? 0 : 4096 });
  const logger = pino({ level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime }, destination);
  if (!opts.sync) {
    // Batches keep the cost per line low under load; the timer bounds how long a line waits.
    const flusher = setInterval(() => {
      try {
        destination.flush();
      } catch {
        // stdout closed, or a write in progress: the next tick or the exit flush takes it
      }
    }, LOG_FLUSH_MS);
    flusher.unref();
    process.once('exit', () => {
      try {
        destination.flushSync();
      } catch {
        // stdout already closed
      }
    });
  }
  return logger;
}

/** A logger that drops everything (tests). */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
