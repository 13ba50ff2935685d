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
 * `write()` changes one record while running (`up`'s platform API, DESIGN §13): the change is laid
 * over the records of the files (overlay.ts), the whole set validated and compiled as a reload is
 * (validation checks again only what changed since the last one and what reads it: validate.ts
 * `ValidationMemo`), and on success kept in the record state (record-state.ts) before it is put in force as a new
 * generation; refused, nothing changes. Writes and reloads run one at a time, in order. Every record
 * in force carries its meta (`id`, `version`, `created`, `lastModified`: record-meta.ts), bumped when
 * its content changes, by a write or by an edited file. Per record the later change wins: a file
 * edited after an API change to the same record applies, and the API's change is dropped.
 */
import { EventEmitter } from 'node:events';
import { existsSync, type FSWatcher } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { setImmediate } from 'node:timers/promises';
import type { Logger } from 'pino';
import { watchConfigPaths } from './watch.js';
import { asApplied } from './applied.js';
import { ConvertedMemo } from './convert.js';
import { readRecords, type ReadCache } from './load.js';
import type { Settings, Snapshot } from './model.js';
import type { RawRecord, SourcedRecord } from './records.js';
import { deepFreeze } from './frozen.js';
import { INLINE } from './findings.js';
import { baseHashes, compose, positionsOf, recomposed, reconcile, stamp, type Recomposed, type Stamped } from './overlay.js';
import { BOOKKEEPING, recordKey, stableId, withoutBookkeeping, type RecordMeta } from './record-meta.js';
import { MemoryRecordState, type OverlayEntry, type RecordState, type StateEntry } from './record-state.js';
import { keyedAfter } from './runs.js';
import { LayeredMap } from '../layered-map.js';
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
  /** Wall clock for `lastErrorAt` and the records' `created` and `lastModified`; default `Date.now`. */
  readonly now?: () => number;
  /** Where the API's changes and the records' meta are kept between runs; default: in memory only. */
  readonly state?: RecordState;
  /**
   * What the process itself cannot take, beyond validation (an ingress's `--org` against a new org
   * record): a reload or a write whose snapshot it names a reason for is rejected with that reason.
   * Not asked of the first load (the caller checks that one and stops).
   */
  readonly refuse?: (snapshot: Snapshot) => string | undefined;
}

/** What a write does to its record: put this content (create or replace), or delete it. */
export type WriteDecision = { readonly put: RawRecord } | { readonly delete: true };

/** Judges a write's valid result (`next`) against the snapshot in force; throws to refuse it. */
export type WriteAccept = (next: Snapshot, previous: Snapshot) => void;

export type WriteResult =
  | {
    readonly ok: true;
    readonly snapshot: Snapshot;
    /** The record as in force now (with its meta); undefined when it was deleted. */
    readonly record: RawRecord | undefined;
    /** No record of that key was in force before. */
    readonly created: boolean;
  }
  | { readonly ok: false; readonly errors: string[]; readonly warnings: string[] };

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
  /** What the snapshot in force was composed from (files, overlay, meta), and its records by key. */
  private held: Held;
  private readonly state: RecordState;

  private constructor(
    private readonly options: ConfigStoreOptions,
    first: Composed,
    private readonly memo: ConvertedMemo = new ConvertedMemo(),
    /** What the files held when last read (load.ts): a reload parses only the files whose bytes changed. */
    private readonly files: ReadCache = new Map(),
  ) {
    super();
    this.state = options.state ?? new MemoryRecordState();
    this.snapshot = first.snapshot;
    this.held = heldOf(first);
  }

  static async open(options: ConfigStoreOptions): Promise<ConfigStore> {
    const state: RecordState = options.state ?? new MemoryRecordState();
    const overlay = new Map<string, OverlayEntry>();
    const meta = new Map<string, RecordMeta>();
    for (const [key, entry] of state.entries()) {
      if (entry.overlay) overlay.set(key, entry.overlay);
      if (entry.meta) meta.set(key, entry.meta);
    }
    const files: ReadCache = new Map();
    const read = await readBase(options, files);
    if (!read.ok) throw new ConfigError(read.errors, read.warnings);
    const memo = new ConvertedMemo();
    const result = await composeAndCompile({ ...options, state }, memo, read, overlay, meta, 1);
    if (!result.ok) {
      // Changes made through the API that no longer fit the files: say where they are kept.
      const where = state.where;
      const hint = where !== undefined && result.errors.some((e) => e.startsWith(`${where}: `))
        ? [`${where}: the errors above that name this folder are about changes made through the API and kept there; change the files to fit them, or move the folder away to start without them`]
        : [];
      throw new ConfigError([...result.errors, ...hint], result.warnings);
    }
    const store = new ConfigStore({ ...options, state }, result, memo, files);
    await store.keep(result);
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
    return new ConfigStore({ settings: options.settings, logger: options.logger }, {
      ...result, perFile: new Map(), base: [], baseHash: new Map(), overlay: new Map(), meta: new Map(), dropped: [], changed: new Set(),
      composed: [], positions: undefined, overlayInline: false,
    });
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
    this.held = { ...this.held, byKey: byKeyOf(result.snapshot) };
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

  /** The record of `key` (record-meta.ts `recordKey`) in force, with its meta; undefined when none. */
  record(key: string): RawRecord | undefined {
    return this.held.byKey.get(key);
  }

  /**
   * Changes the record of `key`: `decide` is called with the record in force (or undefined), when
   * the writes and reloads before this one are done, and says what to put there; it may throw to
   * refuse (the promise rejects with its error, nothing changes). The new set is validated and
   * compiled as a reload is (by the snapshot's records, not the files read again: an edit half
   * written meanwhile is neither applied by a write nor refuses one); `accept`, when given, is then
   * asked about the result against the snapshot in force and may throw to refuse it the same way
   * (the API's quotas: a limit on writes, never on the files). Valid: kept in the record state,
   * then applied as a new generation with `change`. Invalid: the result holds the errors, nothing
   * changes (not a rejected reload: `lastErrors` stays). Rejects when the state cannot be kept.
   */
  write(key: string, decide: (current: RawRecord | undefined) => WriteDecision, accept?: WriteAccept): Promise<WriteResult> {
    const run = this.queue.then(() => this.writeNow(key, decide, accept));
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async writeNow(key: string, decide: (current: RawRecord | undefined) => WriteDecision, accept: WriteAccept | undefined): Promise<WriteResult> {
    const current = this.held.byKey.get(key);
    const decision = decide(current);
    if ('put' in decision && recordKey(decision.put) !== key) throw new Error(`write of ${key}: the record's key is ${String(recordKey(decision.put))}`);
    const base = this.held.baseHash.get(key) ?? null;
    let entry: OverlayEntry | undefined;
    if ('delete' in decision) {
      // Deleting a record the files do not have leaves nothing to remember.
      entry = base === null ? undefined : { base };
    } else {
      entry = { base, record: deepFreeze(structuredClone(withoutBookkeeping(decision.put))) };
    }
    const overlay = new Map(this.held.overlay);
    if (entry === undefined) overlay.delete(key);
    else overlay.set(key, entry);
    const newId = (k: string): string | undefined => (k === key ? randomUUID() : undefined);
    const read: Read = { ok: true, base: this.held.base, perFile: this.held.perFile, baseHash: this.held.baseHash };
    // The records in force with this key's changed, rather than all of them composed and stamped again.
    const held = this.held;
    const now = new Date(this.now()).toISOString();
    const positions = held.positions ?? positionsOf(held.composed);
    // After a reload the API's records were composed at the state folder's place: placed as a write places them.
    const composed = held.overlayInline ? held.composed : placedInline(held.composed, held.overlay, positions);
    const again = recomposed({ records: composed, meta: held.meta }, positions, basePositions(held.base), key, entry, base !== null, now, newId);
    const result = refused(await composeAndCompile(this.options, this.memo, read, overlay, held.meta, this.snapshot.generation + 1, { newId, ...(again ? { recomposed: again } : {}) }), this.options);
    if (!result.ok) return result;
    accept?.(result.snapshot, this.snapshot);
    const kept = persistable(key, result.meta.get(key), entry);
    if (kept !== undefined || this.state.entries().has(key)) await this.state.save(new Map([[key, kept]]));
    let byKey: LayeredMap<string, RawRecord> | undefined;
    if (again !== undefined) {
      byKey = LayeredMap.next(held.byKey);
      if (again.at === undefined) byKey.delete(key);
      else byKey.set(key, result.snapshot.records[again.at]!);
    }
    this.commit(result, byKey);
    const record = this.held.byKey.get(key);
    return { ok: true, snapshot: result.snapshot, record, created: current === undefined && record !== undefined };
  }

  private async reloadNow(): Promise<boolean> {
    const { logger } = this.options;
    let result: Composed | (LoadResult & { ok: false });
    const read = await readBase(this.options, this.files);
    // Reading, hashing, composing, stamping, validating and compiling are turns of their own (see composeAndCompile).
    await setImmediate();
    result = read.ok ? await composeAndCompile(this.options, this.memo, unchangedKept(read, this.held), this.held.overlay, this.held.meta, this.snapshot.generation + 1) : read;
    if (result.ok) {
      const now = result.perFile;
      const emptied = [...this.held.perFile].filter(([file, n]) => n > 0 && !now.has(file) && existsSync(file));
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
      this.errorAt = new Date(this.now());
      for (const line of result.errors) logger.error(`configuration rejected: ${line}`);
      logger.error({ errors: result.errors.length, generation: this.snapshot.generation }, 'configuration rejected: keeping the last good one');
      this.emit('rejected', this.errors);
      return false;
    }
    await this.keep(result);
    this.errors = undefined;
    this.errorAt = undefined;
    this.commit(result);
    return true;
  }

  /**
   * Keeps what a load changed in the record state: overlay entries dropped (their file was edited
   * later) and meta that moved. A failure is logged, not fatal: the next start finds the same.
   */
  private async keep(result: Composed): Promise<void> {
    const { logger } = this.options;
    for (const key of result.dropped) {
      logger.info({ record: key }, 'configuration: the file\'s version of this record changed after the API\'s change to it: the file\'s applies');
    }
    const held = this.state.entries();
    const changes = new Map<string, StateEntry | undefined>();
    for (const key of new Set([...result.dropped, ...result.changed])) {
      const want = persistable(key, result.meta.get(key), result.overlay.get(key));
      const have = held.get(key);
      if (want === undefined ? have === undefined : have !== undefined && JSON.stringify(want) === JSON.stringify(have)) continue;
      changes.set(key, want);
    }
    if (changes.size === 0) return;
    try {
      await this.state.save(changes);
    } catch (err) {
      logger.error({ err }, 'configuration: the record state could not be written; versions may start over after a restart');
    }
  }

  private commit(result: Composed, byKey?: ReadonlyMap<string, RawRecord>): void {
    this.held = heldOf(result, byKey ?? byKeyAfter(this.held.byKey, this.snapshot.records, result.snapshot));
    this.apply(result.snapshot);
  }

  private now(): number {
    return (this.options.now ?? Date.now)();
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
function refused<R extends Composed | LoadResult>(result: R, options: ConfigStoreOptions): R | (LoadResult & { ok: false }) {
  const reason = result.ok ? options.refuse?.(result.snapshot) : undefined;
  return reason === undefined || !result.ok ? result : { ok: false, errors: [reason], warnings: [...result.snapshot.warnings] };
}

/** The base records read: files and `options.records`. */
type Read =
  | { readonly ok: true; readonly base: readonly SourcedRecord[]; readonly perFile: ReadonlyMap<string, number>; readonly baseHash: ReadonlyMap<string, string> }
  | (LoadResult & { ok: false });

/**
 * The records of the files and `options.records`, each GVC-scoped one that names no GVC placed in the
 * default one (applied.ts) before it is keyed: the API and the record state know it in its GVC.
 */
async function readBase(options: ConfigStoreOptions, files?: ReadCache): Promise<Read> {
  const gvc = options.settings?.gvc;
  const inline = toSourced(options.records ?? []);
  try {
    if (!options.paths || options.paths.length === 0) {
      const base = asApplied(inline, gvc);
      return { ok: true, base, perFile: new Map(), baseHash: baseHashes(base) };
    }
    const read = await readRecords(options.paths, files);
    if (read.errors.length > 0) return { ok: false, errors: read.errors, warnings: [] };
    // The last file was parsed in this turn: hashing 20,000 records is the next one's.
    await setImmediate();
    const perFile = new Map<string, number>();
    for (const r of read.records) perFile.set(r.source, (perFile.get(r.source) ?? 0) + 1);
    const base = asApplied([...read.records, ...inline], gvc);
    return { ok: true, base, perFile, baseHash: baseHashes(base) };
  } catch (e) {
    // The pipeline answers invalid input with errors; an exception is a bug in it. A running process
    // must still keep its configuration rather than die on a debounced reload.
    return { ok: false, errors: [`configuration: internal error: ${(e as Error).message}`], warnings: [] };
  }
}

/**
 * `read` with each record whose content the reload did not change (its hash and bookkeeping are the
 * held one's) replaced by the held object: what is made of it downstream (its stamped copy, its
 * models, the data plane's tables, its replicas) is then kept as a write keeps it, so an edit of one
 * record in a file of 10,000 costs about what the same change through the API does. Only the first
 * record of a key (the one `baseHashes` hashes); the member order of the held one stays.
 */
function unchangedKept(read: Read & { ok: true }, held: Held): Read & { ok: true } {
  const before = new Map<string, RawRecord>();
  for (const s of held.base) {
    const key = recordKey(s.record);
    if (key !== undefined && !before.has(key)) before.set(key, s.record);
  }
  const seen = new Set<string>();
  const base = read.base.map((s) => {
    const key = recordKey(s.record);
    if (key === undefined || seen.has(key)) return s;
    seen.add(key);
    const old = before.get(key);
    if (old === undefined || old === s.record || !Object.isFrozen(old) || held.baseHash.get(key) !== read.baseHash.get(key)) return s;
    if (BOOKKEEPING.some((k) => old[k] !== s.record[k])) return s;
    return { ...s, record: old };
  });
  return { ...read, base };
}

/**
 * `composed` with the records of the overlay's entries at `INLINE`, where a write's composition
 * places them (a reload with a state folder places them at the folder, for its findings to name).
 */
function placedInline(composed: readonly SourcedRecord[], overlay: ReadonlyMap<string, OverlayEntry>, positions: ReadonlyMap<string, number>): readonly SourcedRecord[] {
  let out: SourcedRecord[] | undefined;
  for (const [key, entry] of overlay) {
    const at = positions.get(key);
    if (entry.record === undefined || at === undefined || at < 0 || composed[at]!.source === INLINE) continue;
    out ??= [...composed];
    const { line: _line, ...placed } = { ...composed[at]!, source: INLINE };
    out[at] = placed;
  }
  return out ?? composed;
}

/** `positionsOf` each list of base records (made at the first write after a reload, then kept). */
const basePositionsKept = new WeakMap<readonly SourcedRecord[], ReadonlyMap<string, number>>();

function basePositions(base: readonly SourcedRecord[]): ReadonlyMap<string, number> {
  let known = basePositionsKept.get(base);
  if (known === undefined) basePositionsKept.set(base, (known = positionsOf(base)));
  return known;
}

/** A load or a write, composed and compiled: what `commit()` puts in force. */
interface Composed {
  readonly ok: true;
  readonly snapshot: Snapshot;
  readonly perFile: ReadonlyMap<string, number>;
  readonly base: readonly SourcedRecord[];
  readonly baseHash: ReadonlyMap<string, string>;
  /** The overlay entries in force (those `reconcile` kept). */
  readonly overlay: ReadonlyMap<string, OverlayEntry>;
  readonly meta: ReadonlyMap<string, RecordMeta>;
  /** Overlay entries dropped: their file changed after them. */
  readonly dropped: readonly string[];
  /** Keys whose meta is new, moved, or gone. */
  readonly changed: ReadonlySet<string>;
  /** The records composed and stamped: what was validated and compiled (one to one with the snapshot's records). */
  readonly composed: readonly SourcedRecord[];
  /** `positionsOf(composed)` (overlay.ts), when known. */
  readonly positions: ReadonlyMap<string, number> | undefined;
  /** The API's records in `composed` are placed at `INLINE`, as a write places them. */
  readonly overlayInline: boolean;
}

async function composeAndCompile(
  options: ConfigStoreOptions,
  /** What the last validation found: a change is checked for what it changed (validate.ts). */
  memo: ConvertedMemo,
  read: Read & { ok: true },
  overlay: ReadonlyMap<string, OverlayEntry>,
  meta: ReadonlyMap<string, RecordMeta>,
  generation: number,
  /**
   * A write: the id of a record it creates, and no place for the API's records in its findings (its
   * answer); `recomposed`, the records composed and stamped already from those in force (overlay.ts).
   */
  write?: { readonly newId: (key: string) => string | undefined; readonly recomposed?: Recomposed },
): Promise<Composed | (LoadResult & { ok: false })> {
  try {
    let stamped: Stamped & { readonly positions?: ReadonlyMap<string, number> | undefined } | undefined = write?.recomposed;
    let kept: ReadonlyMap<string, OverlayEntry> = overlay;
    let dropped: string[] = [];
    if (stamped === undefined) {
      ({ kept, dropped } = reconcile(read.baseHash, overlay));
      const now = new Date((options.now ?? Date.now)()).toISOString();
      const composed = compose(read.base, kept, write ? undefined : options.state?.where);
      await setImmediate();
      const full = stamp(composed, meta, now, write?.newId);
      // Where each key's record is (and the base's), for the next write to change its own alone: a turn of their own.
      await setImmediate();
      stamped = { ...full, positions: positionsOf(full.records) };
      basePositions(read.base);
    }
    // Composing, stamping, validating and compiling 20,000 records are each a turn of the event loop
    // of their own: requests to the data plane are served between them.
    await setImmediate();
    const result = await compileLocated(stamped.records, options.settings ?? defaultSettings, generation, { pause: () => setImmediate(), memo });
    if (!result.ok) return result;
    return {
      ...result, perFile: read.perFile, base: read.base, baseHash: read.baseHash, overlay: kept, meta: stamped.meta, dropped, changed: stamped.changed,
      composed: stamped.records, positions: stamped.positions, overlayInline: write !== undefined || options.state?.where === undefined,
    };
  } catch (e) {
    return { ok: false, errors: [`configuration: internal error: ${(e as Error).message}`], warnings: [] };
  }
}

/**
 * What the record state keeps of a key: its overlay entry with its meta, or its meta alone once it
 * is not what a first sight of the record makes again at the next start (a bumped version, an id
 * the API drew). Undefined: nothing.
 */
function persistable(key: string, meta: RecordMeta | undefined, overlay: OverlayEntry | undefined): StateEntry | undefined {
  if (overlay === undefined && (meta === undefined || (meta.version === 1 && meta.id === stableId(key)))) return undefined;
  return { ...(meta !== undefined ? { meta } : {}), ...(overlay !== undefined ? { overlay } : {}) };
}

/** What `commit()` keeps of a load or a write. */
interface Held {
  /** Records per config file in the snapshot in force. */
  readonly perFile: ReadonlyMap<string, number>;
  /** The records of the files and of `options.records` in force (before the overlay). */
  readonly base: readonly SourcedRecord[];
  /** `contentHash` of each key's record in `base`. */
  readonly baseHash: ReadonlyMap<string, string>;
  /** The API's changes in force, by record key. */
  readonly overlay: ReadonlyMap<string, OverlayEntry>;
  /** Meta of every record in force, by key. */
  readonly meta: ReadonlyMap<string, RecordMeta>;
  /** Every record in force (with its meta), by key. */
  readonly byKey: ReadonlyMap<string, RawRecord>;
  /** What the records in force were composed of, for a write to change at its key alone (Composed). */
  readonly composed: readonly SourcedRecord[];
  readonly positions: ReadonlyMap<string, number> | undefined;
  readonly overlayInline: boolean;
}

/** What `commit()` keeps of `c`; `byKey`, when given, is the records in force by key already. */
function heldOf(c: Composed, byKey: ReadonlyMap<string, RawRecord> = byKeyOf(c.snapshot)): Held {
  return {
    perFile: c.perFile, base: c.base, baseHash: c.baseHash, overlay: c.overlay, meta: c.meta, byKey,
    composed: c.composed, positions: c.positions, overlayInline: c.overlayInline,
  };
}

/** Past this many records replaced, the records by key are made again in full. */
const FEW = 64;

/**
 * `byKeyOf(snapshot)` made from `byKey`, the records by key of `records` (the snapshot before), when
 * the new records replace a few of those (a file edit of one record keeps the others' objects,
 * `unchangedKept`): config/runs.ts `keyedAfter`, rather than 20,000 records keyed again.
 */
function byKeyAfter(byKey: ReadonlyMap<string, RawRecord>, records: readonly RawRecord[], snapshot: Snapshot): ReadonlyMap<string, RawRecord> {
  return keyedAfter(byKey, records, snapshot.records, recordKey, FEW) ?? byKeyOf(snapshot);
}

/** Every record in force by key (the first of a key: a later one is a duplicate validation refused). */
function byKeyOf(snapshot: Snapshot): Map<string, RawRecord> {
  const out = new Map<string, RawRecord>();
  for (const record of snapshot.records) {
    const key = recordKey(record);
    if (key !== undefined && !out.has(key)) out.set(key, record);
  }
  return out;
}
