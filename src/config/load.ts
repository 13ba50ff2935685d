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
import { readFile, readdir, stat } from 'node:fs/promises';
import { extname, join } from 'node:path';
import type { LineCounter } from 'yaml';
import jsyaml from 'js-yaml';
import { deepFreeze } from './frozen.js';
import { jsonErrorOffset } from './json-error.js';
import { jsonMessage, yamlMessage } from './parser-message.js';
import { FAST_CORE_SCHEMA, readPlainYaml } from './yaml-fast.js';
import { yamlLib } from '../yaml-lib.js';
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
  /** The line of a YAML node; `undefined` in JSON, where values are placed by item number instead. */
  readonly lineOf: (node: unknown) => number | undefined;
}

/** Adds the records in `value` (a record, an array of them, or a list response); `node` is its YAML node. */
function collect(value: unknown, node: unknown, index: number, sink: Sink, listKind?: unknown): void {
  if (Array.isArray(value)) {
    // `node` is the YAML node (full parse only; undefined for JSON, which never loads the library).
    const items = node !== undefined && yamlLib().isSeq(node) ? node.items : [];
    value.forEach((v, i) => collect(v, items[i], i + 1, sink, listKind));
    return;
  }
  if (!isObject(value)) {
    const line = sink.lineOf(node);
    sink.errors.push(`${sink.source}: ${line === undefined ? `item ${index}` : `line ${line}`}: ${NOT_A_RECORD}`);
    return;
  }
  if (Array.isArray(value.items) && value.name === undefined) {
    // A list response: its kind names the items' kind unless it is the generic `list`.
    const kind = typeof value.kind === 'string' && value.kind !== 'list' ? value.kind : undefined;
    collect(value.items, node !== undefined && yamlLib().isMap(node) ? node.get('items', true) : undefined, index, sink, kind);
    return;
  }
  const record: RawRecord = value.kind === undefined && listKind !== undefined ? { kind: listKind, ...value } : value;
  const line = sink.lineOf(node);
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

function parseYaml(text: string, sink: Sink, counter: LineCounter): void {
  // logLevel 'error': the library's warnings go to process.emitWarning (stderr) and quote the file.
  const docs = yamlLib().parseAllDocuments(text, { lineCounter: counter, prettyErrors: false, uniqueKeys: true, logLevel: 'error' });
  let index = 0;
  for (const doc of docs) {
    index++;
    if (doc.errors.length > 0) {
      for (const err of doc.errors) sink.errors.push(`${sink.source}: line ${counter.linePos(err.pos[0]).line}: ${yamlMessage(err.message)}`);
      continue;
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 100 });
    } catch (e) {
      sink.errors.push(`${sink.source}: line ${counter.linePos(doc.range[0]).line}: ${yamlMessage((e as Error).message)}`);
      continue;
    }
    if (value === null || value === undefined) continue; // an empty document (comments, a trailing `---`)
    collect(value, doc.contents, index, sink);
  }
}

/** Anchors or aliases: the `yaml` library's alias-expansion limit (billion laughs) must see them. */
const ANCHOR_OR_ALIAS = /(^|[\s[{,:-])[&*][^\s,\]}]/m;

/**
 * Where each YAML document's content starts: the first line after a `---` (or the file's start) that
 * is not blank, a comment or a directive.
 */
function documentStartLines(text: string): number[] {
  const starts: number[] = [];
  let seeking = true;
  let line = 0;
  for (const raw of text.split('\n')) {
    line++;
    if (raw.startsWith('---') && (raw.length === 3 || /\s/.test(raw[3]!))) {
      const rest = raw.slice(3).trim();
      seeking = rest === '' || rest.startsWith('#');
      if (!seeking) starts.push(line);
      continue;
    }
    if (raw.startsWith('...') && (raw.length === 3 || /\s/.test(raw[3]!))) {
      seeking = true;
      continue;
    }
    if (!seeking) continue;
    const trimmed = raw.trim();
    if (trimmed === '' || trimmed.startsWith('#') || raw.startsWith('%')) continue;
    starts.push(line);
    seeking = false;
  }
  return starts;
}

/**
 * The common case, about ten times faster than the full parse below (a 10,000-workload file loads in
 * a fraction of a second): a file of documents that are each one record, with no anchors or aliases.
 * The plainest files are read by lines (yaml-fast.ts, less than half of js-yaml's instructions), the rest by js-yaml.
 * Anything else (a syntax error, duplicate keys, lists, list responses, empty or scalar documents)
 * returns false and goes to the full parse, which reports every problem with its line.
 */
function parseYamlFast(text: string, source: string, records: SourcedRecord[]): boolean {
  if (ANCHOR_OR_ALIAS.test(text)) return false;
  const plain = readPlainYaml(text);
  if (plain !== undefined && !plain.docs.some((doc) => Array.isArray(doc.items))) {
    plain.docs.forEach((doc, i) => records.push({ record: doc as RawRecord, source, line: plain.lines[i]! }));
    return true;
  }
  let docs: unknown[];
  try {
    docs = jsyaml.loadAll(text, undefined, { schema: FAST_CORE_SCHEMA });
  } catch {
    return false;
  }
  const starts = documentStartLines(text);
  if (docs.length !== starts.length) return false;
  for (const doc of docs) {
    if (!isObject(doc) || Array.isArray(doc) || Array.isArray(doc.items)) return false;
  }
  docs.forEach((doc, i) => records.push({ record: doc as RawRecord, source, line: starts[i]! }));
  return true;
}

/** Parses one file's text; `format` defaults from the file name (`.json` is JSON, else YAML). */
export function parseRecords(text: string, source: string, format: 'json' | 'yaml' = extname(source).toLowerCase() === '.json' ? 'json' : 'yaml'): ReadResult {
  const body = text.startsWith('\uFEFF') ? text.slice(1) : text;
  const records: SourcedRecord[] = [];
  const errors: string[] = [];
  if (format === 'json') {
    if (body.trim() === '') return { records, errors };
    parseJson(body, { source, records, errors, lineOf: () => undefined });
  } else {
    if (parseYamlFast(body, source, records)) return owned(records, errors);
    const counter = new (yamlLib().LineCounter)();
    const lineOf = (node: unknown): number | undefined => {
      const range = (node as { range?: [number, number, number] } | undefined)?.range;
      return range ? counter.linePos(range[0]).line : undefined;
    };
    parseYaml(body, { source, records, errors, lineOf }, counter);
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

/** Reads every record the paths hold, with every error met on the way, in path order. */
export async function readRecords(paths: readonly string[]): Promise<ReadResult> {
  const records: SourcedRecord[] = [];
  const errors: string[] = [];
  for (const path of paths) {
    const { files, error } = await filesOf(path);
    if (error !== undefined) errors.push(error);
    for (const file of files) {
      let text: string;
      try {
        text = await readFile(file, 'utf8');
      } catch (e) {
        errors.push(`${file}: ${reason(e)}`);
        continue;
      }
      const parsed = parseRecords(text, file);
      records.push(...parsed.records);
      errors.push(...parsed.errors);
    }
  }
  return { records, errors };
}
