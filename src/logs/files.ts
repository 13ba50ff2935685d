/**
 * Where `svcproxy up` keeps what `svcproxy logs` reads: one JSON-lines file per workload,
 * `<dir>/<gvc>/<workload>.jsonl`, holding the lines of the workload's processes (pino lines with
 * `workload`, `gvc`, `location`, `replica`, `container`) and its access-log lines (`component:
 * "access"`), each with its ISO `time`. Files are rotated at a size bound (`<workload>.1.jsonl` is the
 * newest old one; `keep` old ones are kept).
 *
 * `WorkloadLogFiles` is a pino destination: it picks each line's workload from the JSON text without
 * parsing it, and appends through one async write stream per workload. It never throws into the
 * logger: a line it cannot place is skipped; lines beyond `maxPendingBytes` waiting for the disk are
 * dropped and counted; a file that fails to open or write is given up (counted in `errors`).
 * Directory creation, opening and rotation renames are synchronous; they happen once per file and
 * once per `maxBytes` written.
 */
import fs from 'node:fs';
import path from 'node:path';
import pino, { type DestinationStream, type Logger } from 'pino';

export const DEFAULT_LOG_DIR = '.svcproxy/logs';
const MB = 1024 * 1024;

export interface LogFilesOptions {
  /** Rotate a workload's file when it would grow past this (default 16 MiB). */
  readonly maxBytes?: number;
  /** Rotated files kept per workload (default 3). */
  readonly keep?: number;
  /** Bytes waiting for the disk before lines are dropped (default 8 MiB per workload). */
  readonly maxPendingBytes?: number;
}

/** The files of one workload, oldest first: `W.K.jsonl` … `W.1.jsonl`, `W.jsonl`. */
export function workloadFiles(dir: string, gvc: string, workload: string, keep = 3): string[] {
  const base = path.join(dir, gvc, workload);
  const out: string[] = [];
  for (let i = keep; i >= 1; i--) out.push(`${base}.${i}.jsonl`);
  out.push(`${base}.jsonl`);
  return out;
}

const GVC = /"gvc":"([^"\\]+)"/;
const WORKLOAD = /"workload":"([^"\\]+)"/;
const SAFE = /^[a-z0-9][a-z0-9.-]*$/i;

interface OpenFile {
  readonly file: string;
  stream: fs.WriteStream | undefined;
  size: number;
  broken: boolean;
}

export class WorkloadLogFiles implements DestinationStream {
  private readonly files = new Map<string, OpenFile>();
  private readonly maxBytes: number;
  private readonly keep: number;
  private readonly maxPending: number;
  /** Lines dropped because the disk fell behind. */
  dropped = 0;
  /** Files given up after an error. */
  errors = 0;

  constructor(readonly dir: string, opts: LogFilesOptions = {}) {
    this.maxBytes = opts.maxBytes ?? 16 * MB;
    this.keep = Math.max(opts.keep ?? 3, 1);
    this.maxPending = opts.maxPendingBytes ?? 8 * MB;
  }

  write(line: string): boolean {
    // Process output carries `container`; the access log `component: "access"`. Anything else is the
    // proxy's own logging, which stays on stdout only.
    if (!line.includes('"container":"') && !line.includes('"component":"access"')) return true;
    const gvc = GVC.exec(line)?.[1];
    const workload = WORKLOAD.exec(line)?.[1];
    if (!gvc || !workload || !SAFE.test(gvc) || !SAFE.test(workload)) return true;
    const key = `${gvc}/${workload}`;
    let f = this.files.get(key);
    if (!f) {
      f = { file: path.join(this.dir, gvc, `${workload}.jsonl`), stream: undefined, size: 0, broken: false };
      this.files.set(key, f);
    }
    if (f.broken) return true;
    const bytes = Buffer.byteLength(line);
    if (f.stream && f.size > 0 && f.size + bytes > this.maxBytes) this.rotate(f);
    if (!f.stream && !this.open(f)) return true;
    if (f.stream!.writableLength > this.maxPending) {
      this.dropped++;
      return true;
    }
    f.stream!.write(line);
    f.size += bytes;
    return true;
  }

  private open(f: OpenFile): boolean {
    try {
      fs.mkdirSync(path.dirname(f.file), { recursive: true });
      // Opened synchronously so the file exists (and can be rotated) before the first write lands.
      const fd = fs.openSync(f.file, 'a');
      f.size = fs.fstatSync(fd).size;
      const stream = fs.createWriteStream(f.file, { fd });
      stream.on('error', () => {
        f.broken = true;
        this.errors++;
      });
      f.stream = stream;
      return true;
    } catch {
      f.broken = true;
      this.errors++;
      return false;
    }
  }

  /** `W.jsonl` → `W.1.jsonl` → … → `W.K.jsonl` (the oldest is overwritten). */
  private rotate(f: OpenFile): void {
    // Writes still queued on the old stream land in the renamed file: the descriptor follows it.
    f.stream?.end();
    f.stream = undefined;
    const stem = f.file.slice(0, -'.jsonl'.length);
    try {
      for (let i = this.keep - 1; i >= 1; i--) {
        if (fs.existsSync(`${stem}.${i}.jsonl`)) fs.renameSync(`${stem}.${i}.jsonl`, `${stem}.${i + 1}.jsonl`);
      }
      fs.renameSync(f.file, `${stem}.1.jsonl`);
    } catch {
      // A failed rename leaves the file growing; the next open appends to it.
    }
    f.size = 0;
  }

  /** Flush and close every file. */
  async close(): Promise<void> {
    const streams = [...this.files.values()].map((f) => f.stream).filter((s): s is fs.WriteStream => s !== undefined);
    this.files.clear();
    await Promise.all(streams.map((s) => new Promise<void>((resolve) => s.end(() => resolve()))));
  }
}

/**
 * A logger that writes what `logger` writes, plus (at info and above) to `files`. The original
 * destination keeps its own level; the new logger's level is the lower of that and info, so access
 * and process lines reach the files even when the console shows only warnings.
 */
export function teeLogger(logger: Logger, files: DestinationStream): Logger {
  const original = (logger as unknown as Record<symbol, DestinationStream>)[pino.symbols.streamSym];
  const level = logger.level;
  const streams: pino.StreamEntry[] = [{ level: 'info', stream: files }];
  if (original && level !== 'silent') streams.unshift({ level: level as pino.Level, stream: original });
  const lower = level !== 'silent' && pino.levels.values[level]! < pino.levels.values.info! ? level : 'info';
  return pino({ level: lower, base: undefined, timestamp: pino.stdTimeFunctions.isoTime }, pino.multistream(streams));
}
