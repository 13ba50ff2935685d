/**
 * Reading record files (DESIGN §2): each path is a YAML or JSON file, or a folder whose `*.yaml`,
 * `*.yml` and `*.json` files are read in name order (not recursively; dot-files, such as editors'
 * lock and swap files, are skipped). A file holds several YAML documents (`---`), a JSON array, or one
 * object; a list response (`{kind, items: [...]}`, no `name`) is unwrapped, its items taking the
 * list's kind when they carry none. `.json` files are parsed as JSON, everything else as YAML.
 * Failures never throw: an unreadable path is `PATH: reason`, a syntax error `FILE: line L: message`,
 * a document that is not a record `FILE: line L: ...` (`FILE: item N: ...` in JSON), all collected.
 * A parser's message never quotes the file (parser-message.ts): it may hold secrets.
 */
import { createHash } from 'node:crypto';
import { readFile, readdir, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import { readYaml, type YamlLines } from '../yaml.js';
import { deepFreeze } from './frozen.js';
import { jsonErrorOffset } from './json-error.js';
import { jsonMessage } from './parser-message.js';
import { FAST_CORE_SCHEMA, readPlainYaml } from './yaml-fast.js';
import type { RawRecord, SourcedRecord } from './records.js';
import { isObject } from './schema.js';

export interface ReadResult {
  readonly records: SourcedRecord[];
  readonly errors: string[];
}

export const CONFIG_EXTENSIONS: readonly string[] = ['.yaml', '.yml', '.json'];

/** Whether a folder entry is read as configuration. */
export function isConfigFileName(name: string): boolean {
  return !name.startsWith('.') && CONFIG_EXTENSIONS.includes(extname(name).toLowerCase());
}

const NOT_A_RECORD = 'must be a record (an object with kind and name), a list of records, or a list response';

interface Sink {
  readonly source: string;
  readonly records: SourcedRecord[];
  readonly errors: string[];
  /** The lines of a YAML parse's values; `undefined` in JSON, where values are placed by item number instead. */
  readonly lines: YamlLines | undefined;
}

/** Adds the records in `value` (a record, an array of them, or a list response), found at `line` (YAML). */
function collect(value: unknown, line: number | undefined, index: number, sink: Sink, listKind?: unknown): void {
  if (Array.isArray(value)) {
    value.forEach((v, i) => collect(v, sink.lines?.item(value, i), i + 1, sink, listKind));
    return;
  }
  if (!isObject(value)) {
    sink.errors.push(`${sink.source}: ${line === undefined ? `item ${index}` : `line ${line}`}: ${NOT_A_RECORD}`);
    return;
  }
  if (Array.isArray(value.items) && value.name === undefined) {
    // A list response: its kind names the items' kind unless it is the generic `list`.
    const kind = typeof value.kind === 'string' && value.kind !== 'list' ? value.kind : undefined;
    collect(value.items, undefined, index, sink, kind);
    return;
  }
  const record: RawRecord = value.kind === undefined && listKind !== undefined ? { kind: listKind, ...value } : value;
  sink.records.push(line === undefined ? { record, source: sink.source } : { record, source: sink.source, line });
}

export function lineAt(text: string, offset: number): { line: number; col: number } {
  let line = 1;
  let start = 0;
  for (let i = text.indexOf('\n'); i !== -1 && i < offset; i = text.indexOf('\n', i + 1)) {
    line++;
    start = i + 1;
  }
  return { line, col: offset - start + 1 };
}

function parseJson(text: string, sink: Sink): void {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    const at = lineAt(text, Math.max(0, jsonErrorOffset(text)));
    // V8 ends its messages with the position or the text; the line and column replace both.
    const message = jsonMessage((e as Error).message);
    sink.errors.push(`${sink.source}: line ${at.line}: ${message} (column ${at.col})`);
    return;
  }
  collect(value, undefined, 1, sink);
}

/**
 * Every document of a YAML file, each record with its line (js-yaml, src/yaml.ts). An empty document
 * (comments, a trailing `---`) holds nothing; a syntax error is the file's one error.
 */
function parseYaml(text: string, source: string, records: SourcedRecord[], errors: string[]): void {
  const read = readYaml(text, { schema: FAST_CORE_SCHEMA });
  if (!read.ok) {
    errors.push(`${source}: line ${read.error.line}: ${read.error.message}`);
    return;
  }
  const sink: Sink = { source, records, errors, lines: read.lines };
  read.docs.forEach((doc, i) => {
    if (doc.value !== null && doc.value !== undefined) collect(doc.value, doc.line, i + 1, sink);
  });
}

/**
 * The common case, by lines (yaml-fast.ts, about 60% of js-yaml's instructions for a 10,000-workload
 * file): a file of documents that are each one record in the plainest YAML. Anything
 * else (anchors, multi-line scalars, lists, list responses, a syntax error) returns false and goes to
 * js-yaml, which reports every problem with its line.
 */
function parsePlain(text: string, source: string, records: SourcedRecord[]): boolean {
  const plain = readPlainYaml(text);
  if (plain === undefined || plain.docs.some((doc) => Array.isArray(doc.items))) return false;
  plain.docs.forEach((doc, i) => records.push({ record: doc as RawRecord, source, line: plain.lines[i]! }));
  return true;
}

/** Parses one file's text; `format` defaults from the file name (`.json` is JSON, else YAML). */
export function parseRecords(text: string, source: string, format: 'json' | 'yaml' = extname(source).toLowerCase() === '.json' ? 'json' : 'yaml'): ReadResult {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const records: SourcedRecord[] = [];
  const errors: string[] = [];
  if (format === 'json') {
    if (body.trim() === '') return { records, errors };
    parseJson(body, { source, records, errors, lines: undefined });
  } else if (!parsePlain(body, source, records)) {
    parseYaml(body, source, records, errors);
  }
  return owned(records, errors);
}

/** Nobody else holds what was just parsed: frozen in place, the snapshot needs no copy of it (frozen.ts). */
function owned(records: SourcedRecord[], errors: string[]): ReadResult {
  for (const r of records) deepFreeze(r.record);
  return { records, errors };
}

export function reason(e: unknown): string {
  const err = e as NodeJS.ErrnoException;
  if (err.code === 'ENOENT') return 'no such file or folder';
  if (err.code === 'EACCES') return 'permission denied';
  return err.message;
}

/** The files one path names: the file itself, or a folder's config files in name order. */
export async function filesOf(path: string): Promise<{ files: string[]; error?: string }> {
  let names: string[];
  try {
    if (!(await stat(path)).isDirectory()) return { files: [path] };
    names = (await readdir(path)).filter(isConfigFileName).sort();
  } catch (e) {
    return { files: [], error: `${path}: ${reason(e)}` };
  }
  const files: string[] = [];
  for (const name of names) {
    const file = join(path, name);
    // A folder entry that is not a regular file (a sub-folder, a dangling link) is not configuration.
    if (await stat(file).then((s) => s.isFile(), () => false)) files.push(file);
  }
  return { files };
}

/**
 * What a running process read of each file last: a digest of its bytes and what they parsed to. A
 * file whose bytes did not change is not parsed again, and its records are the objects they were
 * (frozen: what is made of them downstream, their hashes, models and tables, is kept by identity).
 */
export type ReadCache = Map<string, { readonly digest: string; readonly parsed: ReadResult }>;

/**
 * Reads every record the paths hold, with every error met on the way, in path order. `cache`, when
 * given, holds what the last read found (and is brought up to date): the files whose bytes did not
 * change are taken from it. Each file is read in a job of its own (the event loop turns between).
 */
export async function readRecords(paths: readonly string[], cache?: ReadCache): Promise<ReadResult> {
  const records: SourcedRecord[] = [];
  const errors: string[] = [];
  const read = new Set<string>();
  for (const path of paths) {
    const { files, error } = await filesOf(path);
    if (error !== undefined) errors.push(error);
    for (const file of files) {
      let bytes: Buffer;
      try {
        bytes = await readFile(file);
      } catch (e) {
        errors.push(`${file}: ${reason(e)}`);
        continue;
      }
      let parsed: ReadResult;
      if (cache === undefined) parsed = parseRecords(bytes.toString('utf8'), file);
      else {
        read.add(file);
        const digest = createHash('sha256').update(bytes).digest('base64');
        const known = cache.get(file);
        if (known !== undefined && known.digest === digest) parsed = known.parsed;
        else cache.set(file, { digest, parsed: (parsed = parseRecords(bytes.toString('utf8'), file)) });
      }
      for (const r of parsed.records) records.push(r);
      errors.push(...parsed.errors);
    }
  }
  if (cache !== undefined) for (const file of cache.keys()) if (!read.has(file)) cache.delete(file);
  return { records, errors };
}
