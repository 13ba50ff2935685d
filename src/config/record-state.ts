/**
 * What the config store keeps about records between runs (DESIGN §13, "Nothing lost"): per record
 * key, its meta (record-meta.ts) once it differs from what a first sight would give, and the API's
 * change to it (the overlay entry: the record as written, or its deletion, with `base`, the content
 * hash of the config file's version of that record when the change was made, or null when the files
 * had none). The store decides what the entries mean (store.ts); this module only keeps them.
 *
 * `FolderRecordState` keeps one JSON file per key in a folder (`.svcproxy/api/` under `up`), named by
 * a hash of the key, mode 0600 in a 0700 folder (a secret's data may be in it). Each file is written
 * whole to a temporary name, flushed (fsync), renamed over the old one, and the folder flushed after
 * the renames of one `save()`: a crash leaves each file old or new, never torn. Temporary files left
 * by a crash are removed at `open()`. A file that does not read as an entry makes `open()` throw,
 * naming it: it is never overwritten or skipped, as that would lose what it holds.
 * `MemoryRecordState` keeps the same in memory (a store without a state folder).
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import type { RawRecord } from './records.js';
import type { RecordMeta } from './record-meta.js';
import { isObject } from './schema.js';

export interface OverlayEntry {
  /** `contentHash` of the files' version of the record when the change was made; null: they had none. */
  readonly base: string | null;
  /** The record as written (without bookkeeping); absent: the change deleted it. */
  readonly record?: RawRecord;
}

export interface StateEntry {
  readonly meta?: RecordMeta;
  readonly overlay?: OverlayEntry;
}

export interface RecordState {
  /** Where the entries are (a folder): findings about the API's records name it. */
  readonly where?: string;
  /** Every entry, by record key. */
  entries(): ReadonlyMap<string, StateEntry>;
  /** Sets (or, for `undefined`, removes) the entries of these keys. Rejects when they cannot be kept. */
  save(changes: ReadonlyMap<string, StateEntry | undefined>): Promise<void>;
}

export class MemoryRecordState implements RecordState {
  private readonly map = new Map<string, StateEntry>();

  entries(): ReadonlyMap<string, StateEntry> {
    return this.map;
  }

  async save(changes: ReadonlyMap<string, StateEntry | undefined>): Promise<void> {
    for (const [key, entry] of changes) {
      if (entry === undefined) this.map.delete(key);
      else this.map.set(key, entry);
    }
  }
}

/** The file operations a save uses (tests inject failures). */
export interface StateIo {
  rename(from: string, to: string): Promise<void>;
}

const TMP = '.tmp';

function fileOf(key: string): string {
  return `${createHash('sha256').update(key).digest('hex').slice(0, 40)}.json`;
}

function isMeta(v: unknown): v is RecordMeta {
  return isObject(v) && typeof v.id === 'string' && Number.isSafeInteger(v.version) && typeof v.created === 'string'
    && typeof v.lastModified === 'string' && typeof v.hash === 'string';
}

function isOverlay(v: unknown): v is OverlayEntry {
  return isObject(v) && (v.base === null || typeof v.base === 'string') && (v.record === undefined || isObject(v.record));
}

export class FolderRecordState implements RecordState {
  private constructor(private readonly dir: string, private readonly map: Map<string, StateEntry>, private readonly io: StateIo) {}

  get where(): string {
    return this.dir;
  }

  /** Reads the folder (created 0700 when missing). Throws naming a file that holds no entry. */
  static async open(dir: string, io: StateIo = { rename }): Promise<FolderRecordState> {
    await mkdir(dir, { recursive: true, mode: 0o700 });
    const map = new Map<string, StateEntry>();
    for (const name of (await readdir(dir)).sort()) {
      const file = join(dir, name);
      if (name.endsWith(TMP)) {
        // Written by a save that did not reach its rename: the entry it was to replace stands.
        await unlink(file).catch(() => undefined);
        continue;
      }
      if (!name.endsWith('.json')) continue;
      let value: unknown;
      try {
        value = JSON.parse(await readFile(file, 'utf8'));
      } catch (e) {
        throw new Error(`${file}: not a record state entry (${(e as Error).name === 'SyntaxError' ? 'not JSON' : (e as Error).message}); move it away to start without it`);
      }
      const entry = isObject(value) ? value : {};
      const { key, meta, overlay } = entry;
      if (typeof key !== 'string' || fileOf(key) !== name || (meta !== undefined && !isMeta(meta)) || (overlay !== undefined && !isOverlay(overlay))) {
        throw new Error(`${file}: not a record state entry (key, meta, overlay); move it away to start without it`);
      }
      map.set(key, { ...(meta !== undefined ? { meta } : {}), ...(overlay !== undefined ? { overlay } : {}) });
    }
    return new FolderRecordState(dir, map, io);
  }

  entries(): ReadonlyMap<string, StateEntry> {
    return this.map;
  }

  async save(changes: ReadonlyMap<string, StateEntry | undefined>): Promise<void> {
    for (const [key, entry] of changes) {
      const file = join(this.dir, fileOf(key));
      if (entry === undefined) {
        await unlink(file).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'ENOENT') throw e;
        });
        continue;
      }
      const tmp = `${file}.${process.pid}${TMP}`;
      const handle = await open(tmp, 'w', 0o600);
      try {
        await handle.writeFile(`${JSON.stringify({ key, ...entry })}\n`);
        await handle.sync();
      } finally {
        await handle.close();
      }
      try {
        await this.io.rename(tmp, file);
      } catch (e) {
        await unlink(tmp).catch(() => undefined);
        throw e;
      }
    }
    // The renames (and removals) are durable once the folder is.
    const folder = await open(this.dir, 'r');
    try {
      await folder.sync();
    } finally {
      await folder.close();
    }
    for (const [key, entry] of changes) {
      if (entry === undefined) this.map.delete(key);
      else this.map.set(key, entry);
    }
  }
}
