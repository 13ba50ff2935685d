/**
 * The live configuration of a running process: the current snapshot, swapped whole on a valid
 * reload and kept on an invalid one (DESIGN §2). A rejected reload logs every error, records them in
 * `lastErrors` / `lastErrorAt` for `/config`, and leaves the process serving what it had; nothing of
 * a rejected set is applied. `watch()` watches the folders that hold the config files, not the
 * files, so a file replaced by rename (editors, `kubectl` ConfigMap `..data` swaps) is seen; events
 * are debounced (100 ms) into one reload, and reloads run one at a time. SIGHUP is wired by the CLI
 * to `reload()`. `open()` throws a `ConfigError` when the first load is invalid.
 *
 * A follower store (`follow()`, a `--workers` cluster worker) reads no files: it compiles the record
 * sets its primary already validated, each with the primary's generation, and logs nothing of its
 * own, so a reload is reported once however many workers apply it.
 *
 * A reload in which a file that held records now holds none (it exists, but is empty or only
 * comments) is rejected too: that is what a file looks like while an editor or `echo >` rewrites it
 * in place, and applying it would remove every route it held. To remove a file's records, delete
 * the file (or leave one record in it). Files are best replaced by rename, which is atomic.
 *
 * `add()` puts a record in while running (`up`'s platform API: a POSTed GVC): validated with the
 * records in force as a reload would be, applied as a new generation, and kept by every later
 * reload from files (after the files' records, as `records` are) until the process stops.
 */
import { EventEmitter } from 'node:events';
import { existsSync, type FSWatcher } from 'node:fs';
import type { Logger } from 'pino';
import { watchConfigPaths } from './watch.js';
import { readRecords } from './load.js';
import type { Settings, Snapshot } from './model.js';
import type { RawRecord } from './records.js';
import { ConfigError, compileLocated, compileRecords, defaultSettings, toSourced, type LoadResult, type RecordInput } from './snapshot.js';

export interface ConfigStoreOptions {
  /** Files and folders to read (`--config`). */
  readonly paths?: readonly string[];
  /** Records held in memory (the built-in demo), added after those of `paths`. */
  readonly records?: readonly RecordInput[];
  readonly settings?: Settings;
  readonly logger: Logger;
  /** Quiet time after the last file event before reloading; default 100 ms. */
  readonly debounceMs?: number;
  /** Wall clock for `lastErrorAt`; default `Date.now`. */
  readonly now?: () => number;
  /**
   * What the process itself cannot take, beyond validation (an ingress's `--org` against a new org
   * record): a reload or `add()` whose snapshot it names a reason for is rejected with that reason.
   * Not asked of the first load (the caller checks that one and stops).
   */
  readonly refuse?: (snapshot: Snapshot) => string | undefined;
}

interface Events {
  change: [snapshot: Snapshot];
  /** A reload was rejected; the last good snapshot stays in force. */
  rejected: [errors: readonly string[]];
}


export class ConfigStore extends EventEmitter<Events> {
  private snapshot: Snapshot;
  private errors: readonly string[] | undefined;
  private errorAt: Date | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private watchers: FSWatcher[] = [];
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Records per config file in the snapshot in force. */
  private perFile: ReadonlyMap<string, number>;
  /** Records `add()` put in, in order: part of every reload after `options.records`. */
  private added: readonly RawRecord[] = [];

  private constructor(private readonly options: ConfigStoreOptions, first: Loaded & { ok: true }) {
    super();
    this.snapshot = first.snapshot;
    this.perFile = first.perFile;
  }

  static async open(options: ConfigStoreOptions): Promise<ConfigStore> {
    const result = await load(options, 1);
    if (!result.ok) throw new ConfigError(result.errors, result.warnings);
    const store = new ConfigStore(options, result);
    store.logLoaded(result.snapshot);
    return store;
  }

  /**
   * A store that holds what another process validated: `records` compiled with `generation`.
   * Throws a `ConfigError` if they do not compile (they passed the same pipeline there).
   */
  static follow(options: { records: readonly RecordInput[]; generation: number; settings: Settings; logger: Logger }): ConfigStore {
    const result = compileRecords(options.records, options.settings, options.generation);
    if (!result.ok) throw new ConfigError(result.errors, result.warnings);
    return new ConfigStore({ settings: options.settings, logger: options.logger }, { ...result, perFile: new Map() });
  }

  /**
   * A follower's reload: swap in `records` at `generation` and emit `change`. An older or equal
   * generation is ignored (`false`); records that do not compile keep the current snapshot.
   */
  adopt(records: readonly RecordInput[], generation: number): boolean {
    if (generation <= this.snapshot.generation) return false;
    const result = compileRecords(records, this.options.settings ?? defaultSettings, generation);
    if (!result.ok) {
      // Cannot happen for records the primary compiled; kept safe rather than trusted.
      this.options.logger.error({ generation, errors: result.errors }, 'configuration from the primary rejected: keeping the last good one');
      return false;
    }
    this.snapshot = result.snapshot;
    try {
      this.emit('change', result.snapshot);
    } catch (e) {
      this.options.logger.error({ err: e }, 'configuration change listener failed');
    }
    return true;
  }

  get current(): Snapshot {
    return this.snapshot;
  }

  /** The errors of the last rejected reload; cleared by the next valid one. */
  get lastErrors(): readonly string[] | undefined {
    return this.errors;
  }

  get lastErrorAt(): Date | undefined {
    return this.errorAt;
  }

  /** Loads again; `true` when the new configuration was applied (and `change` emitted). */
  reload(): Promise<boolean> {
    const run = this.queue.then(() => this.reloadNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  /**
   * Adds `record` to the configuration in force. Valid (with every record in force, by the same
   * rules as a file's): applied as a new generation, `change` emitted, kept across reloads. Invalid:
   * nothing changes and the result holds the errors (not a rejected reload: `lastErrors` stays).
   */
  add(record: RawRecord): Promise<LoadResult> {
    const run = this.queue.then(() => this.addNow(record));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private addNow(record: RawRecord): LoadResult {
    // The snapshot's own records, not the files read again: an edit half-written meanwhile is not
    // applied by a POST, nor does it refuse one.
    const result = refused(compileRecords([...this.snapshot.records, record], this.options.settings ?? defaultSettings, this.snapshot.generation + 1), this.options);
    if (!result.ok) return result;
    this.added = [...this.added, record];
    this.apply(result.snapshot);
    return result;
  }

  private async reloadNow(): Promise<boolean> {
    const options = this.added.length === 0 ? this.options : { ...this.options, records: [...(this.options.records ?? []), ...this.added] };
    let result: Loaded = await load(options, this.snapshot.generation + 1);
    const { logger } = this.options;
    if (result.ok) {
      const now = result.perFile;
      const emptied = [...this.perFile].filter(([file, n]) => n > 0 && !now.has(file) && existsSync(file));
      if (emptied.length > 0) {
        result = {
          ok: false,
          warnings: [],
          errors: emptied.map(([file, n]) => `${file}: holds no records now (it held ${n}); an emptied file is taken for one being rewritten — delete it to remove its records`),
        };
      }
    }
    result = refused(result, this.options);
    if (!result.ok) {
      this.errors = Object.freeze([...result.errors]);
      this.errorAt = new Date((this.options.now ?? Date.now)());
      for (const line of result.errors) logger.error(`configuration rejected: ${line}`);
      logger.error({ errors: result.errors.length, generation: this.snapshot.generation }, 'configuration rejected: keeping the last good one');
      this.emit('rejected', this.errors);
      return false;
    }
    this.perFile = result.perFile;
    this.errors = undefined;
    this.errorAt = undefined;
    this.apply(result.snapshot);
    return true;
  }

  /** Puts `snapshot` in force and tells the listeners (a reload's or an `add()`'s). */
  private apply(snapshot: Snapshot): void {
    this.snapshot = snapshot;
    this.logLoaded(snapshot);
    try {
      this.emit('change', snapshot);
    } catch (e) {
      // The swap happened; a failing listener is its own bug, not a rejected configuration.
      this.options.logger.error({ err: e }, 'configuration change listener failed');
    }
  }

  /** Watches the folders of the config paths and reloads after changes. Idempotent. */
  watch(): void {
    if (this.watchers.length > 0) return;
    this.watchers = watchConfigPaths(this.options.paths ?? [], () => this.schedule(), this.options.logger);
  }

  /** Stops watching; the current snapshot stays readable. */
  close(): void {
    for (const w of this.watchers) w.close();
    this.watchers = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private schedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.reload();
    }, this.options.debounceMs ?? 100);
  }

  private logLoaded(snapshot: Snapshot): void {
    const { logger } = this.options;
    for (const w of snapshot.warnings) logger.warn(`configuration: ${w}`);
    logger.info(
      { generation: snapshot.generation, records: snapshot.records.length, workloads: snapshot.workloads.size, warnings: snapshot.warnings.length },
      'configuration loaded',
    );
  }
}

/** `result`, or its rejection when `options.refuse` names a reason against its snapshot. */
function refused<R extends LoadResult>(result: R, options: ConfigStoreOptions): R | (LoadResult & { ok: false }) {
  const reason = result.ok ? options.refuse?.(result.snapshot) : undefined;
  return reason === undefined || !result.ok ? result : { ok: false, errors: [reason], warnings: [...result.snapshot.warnings] };
}

type Loaded = (LoadResult & { ok: false }) | (LoadResult & { ok: true; perFile: ReadonlyMap<string, number> });

async function load(options: ConfigStoreOptions, generation: number): Promise<Loaded> {
  const settings = options.settings ?? defaultSettings;
  const records = options.records ?? [];
  try {
    if (!options.paths || options.paths.length === 0) {
      const result = compileRecords(records, settings, generation);
      return result.ok ? { ...result, perFile: new Map() } : result;
    }
    // As loadSnapshot, keeping how many records each file held.
    const read = await readRecords(options.paths);
    if (read.errors.length > 0) return { ok: false, errors: read.errors, warnings: [] };
    const perFile = new Map<string, number>();
    for (const r of read.records) perFile.set(r.source, (perFile.get(r.source) ?? 0) + 1);
    const result = await compileLocated([...read.records, ...toSourced(records)], settings, generation);
    return result.ok ? { ...result, perFile } : result;
  } catch (e) {
    // The pipeline answers invalid input with errors; an exception is a bug in it. A running process
    // must still keep its configuration rather than die on a debounced reload.
    return { ok: false, errors: [`configuration: internal error: ${(e as Error).message}`], warnings: [] };
  }
}

