/**
 * YAML as svcproxy reads and writes it, with js-yaml: the library the platform's CLI reads records and
 * prints `-o yaml` with, so a file means the same to both and svcproxy's YAML is the CLI's bytes.
 *
 * `readYaml` parses every document of a text and knows the line of each of its values, for messages
 * that name a line: a mapping's or sequence's first line, each mapping key's line and each sequence
 * item's, from js-yaml's parse events (its `listener` option), kept beside the values (weak maps on the
 * objects js-yaml built). Aliases are js-yaml's: an anchored value shared by reference, so whatever walks
 * a document walks every alias, and a few aliases of aliases make a billion nodes (the billion laughs);
 * a document whose expansion adds more than `MAX_ALIAS_EXPANSION` nodes is refused. A syntax error is
 * the first one met, with its line and column and js-yaml's reason without the text of the file it
 * quotes (parser-message.ts: a file may hold secrets). Never throws.
 *
 * The quick reader of record files (config/yaml-fast.ts) reads what js-yaml reads, and is tested against it.
 */
import jsyaml from 'js-yaml';
import { jsYamlMessage } from './config/parser-message.js';

/** Nodes a document's aliases may add when expanded (a billion-laughs document adds 10^9). */
export const MAX_ALIAS_EXPANSION = 10_000;

export interface YamlError {
  /** 1-based. */
  readonly line: number;
  readonly column: number;
  /** What is wrong, without text of the file. */
  readonly message: string;
}

/** One document: its value, and the line its content starts on (1-based). */
export interface YamlDocument {
  readonly value: unknown;
  readonly line: number;
}

/** Lines of the values of a parse (1-based); `undefined` for a value that is not from it. */
export interface YamlLines {
  /** The line a mapping or sequence starts on. */
  of(value: unknown): number | undefined;
  /** The line of `key` in a mapping. */
  key(map: unknown, key: string): number | undefined;
  /** The line of item `index` of a sequence. */
  item(seq: unknown, index: number): number | undefined;
}

export type YamlRead =
  | { readonly ok: true; readonly docs: readonly YamlDocument[]; readonly lines: YamlLines }
  | { readonly ok: false; readonly error: YamlError };

export interface ReadOptions {
  /** js-yaml's schema (default: its core schema). */
  readonly schema?: jsyaml.Schema;
  /** A repeated key wins over the earlier one (as in `JSON.parse`) instead of being an error. */
  readonly json?: boolean;
}

/** A node being parsed: the line its content starts on, and its children's values and lines so far. */
interface Frame {
  readonly line: number;
  readonly children: { readonly value: unknown; readonly line: number }[];
}

/** Every document of `text`, with the lines of its values; or the first syntax error. */
export function readYaml(text: string, options: ReadOptions = {}): YamlRead {
  // Maps, not weak ones: they live as long as the parse's values (their `YamlLines`), and a weak
  // map's entries cost the garbage collector far more.
  const starts = new Map<object, number>();
  const keys = new Map<object, Map<string, number>>();
  const items = new Map<object, number[]>();
  const docs: YamlDocument[] = [];
  const stack: Frame[] = [];
  const listener = (event: 'open' | 'close', state: jsyaml.State): void => {
    if (event === 'open') {
      stack.push({ line: contentLine(state.input, state.position, state.line + 1), children: [] });
      return;
    }
    const frame = stack.pop()!;
    const value: unknown = state.result;
    // An alias closes with the anchored value, whose lines are the anchor's (kept: `has`).
    if (value !== null && typeof value === 'object' && !starts.has(value)) {
      starts.set(value, frame.line);
      if (state.kind === 'mapping') keys.set(value, keyLines(value as Record<string, unknown>, frame.children));
      else if (state.kind === 'sequence') items.set(value, frame.children.map((c) => c.line));
    }
    const parent = stack[stack.length - 1];
    if (parent !== undefined) parent.children.push({ value, line: frame.line });
    else docs.push({ value, line: frame.line });
  };
  try {
    jsyaml.loadAll(text, undefined, { schema: options.schema ?? jsyaml.CORE_SCHEMA, json: options.json === true, listener });
  } catch (e) {
    return { ok: false, error: errorOf(e) };
  }
  // No `*`, no alias: nothing to expand.
  for (const doc of text.includes('*') ? docs : []) {
    if (aliasExpansion(doc.value) > MAX_ALIAS_EXPANSION) {
      return { ok: false, error: { line: doc.line, column: 1, message: `its aliases expand to more than ${MAX_ALIAS_EXPANSION} nodes` } };
    }
  }
  const lines: YamlLines = {
    of: (value) => (value !== null && typeof value === 'object' ? starts.get(value) : undefined),
    key: (map, key) => (map !== null && typeof map === 'object' ? keys.get(map)?.get(key) : undefined),
    item: (seq, index) => (seq !== null && typeof seq === 'object' ? items.get(seq)?.[index] : undefined),
  };
  return { ok: true, docs, lines };
}

/** The text of `value` as the platform's CLI prints YAML (js-yaml, 2 spaces, shared values written out). */
export function dumpYaml(value: unknown): string {
  return jsyaml.dump(value, { indent: 2, noRefs: true, skipInvalid: true });
}

/**
 * The line a node opened at `position` starts on: js-yaml opens a value before it skips the spaces,
 * line breaks and comments in front of it (after a key's `:` or an item's `-`).
 */
function contentLine(input: string, position: number, line: number): number {
  let atLineStart = position === 0 || input.charCodeAt(position - 1) === 10;
  for (let i = position; i < input.length; i++) {
    const c = input.charCodeAt(i);
    if (c === 10) {
      line++;
      atLineStart = true;
    } else if (c === 32 || c === 9 || c === 13) {
      continue;
    } else if (c === 35 /* # */ && (atLineStart || i === position || isSpace(input.charCodeAt(i - 1)))) {
      const end = input.indexOf('\n', i);
      if (end < 0) return line;
      i = end - 1;
    } else {
      return line;
    }
  }
  return line;
}

function isSpace(c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13;
}

/**
 * A mapping's keys and their lines, from its children in parse order: key, value, key, value... A
 * child that does not fit that order (a flow mapping's key without a value) makes the lines be read
 * by key text instead, the first child of each key's text taken.
 */
function keyLines(map: Record<string, unknown>, children: readonly { readonly value: unknown; readonly line: number }[]): Map<string, number> {
  const lines = new Map<string, number>();
  let paired = children.length % 2 === 0;
  for (let i = 0; paired && i < children.length; i += 2) {
    const key = keyText(children[i]!.value);
    if (key === undefined || !Object.hasOwn(map, key)) paired = false;
    else lines.set(key, children[i]!.line);
  }
  if (paired) return lines;
  lines.clear();
  for (const child of children) {
    const key = keyText(child.value);
    if (key !== undefined && Object.hasOwn(map, key) && !lines.has(key)) lines.set(key, child.line);
  }
  return lines;
}

function keyText(value: unknown): string | undefined {
  return value === null || typeof value !== 'object' ? String(value) : undefined;
}

/**
 * The nodes a value's aliases add when written out: the size of the value as a tree minus its size as
 * js-yaml built it (each object once), counted with each object's tree size computed once.
 */
function aliasExpansion(value: unknown): number {
  const size = new Map<object, number>();
  const treeSize = (v: unknown, path: Set<object>): number => {
    if (v === null || typeof v !== 'object') return 1;
    const known = size.get(v);
    if (known !== undefined) return known;
    // A recursive alias (an anchor used inside itself) never ends when written out.
    if (path.has(v)) return Number.POSITIVE_INFINITY;
    path.add(v);
    let n = 1;
    for (const child of Object.values(v)) n += treeSize(child, path);
    path.delete(v);
    size.set(v, n);
    return n;
  };
  const tree = treeSize(value, new Set());
  // As written: an alias is one node.
  let written = 0;
  const seen = new Set<object>();
  const count = (v: unknown): void => {
    written++;
    if (v === null || typeof v !== 'object' || seen.has(v)) return;
    seen.add(v);
    for (const child of Object.values(v)) count(child);
  };
  count(value);
  return tree - written;
}

function errorOf(e: unknown): YamlError {
  const err = e as { reason?: string; message?: string; mark?: { line: number; column: number } };
  return {
    line: (err.mark?.line ?? 0) + 1,
    column: (err.mark?.column ?? 0) + 1,
    message: jsYamlMessage(err.reason ?? err.message ?? String(e)),
  };
}
