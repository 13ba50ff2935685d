/**
 * Lines for findings, looked up only once there are findings to show: the fast YAML path
 * (load.ts, yaml-fast.ts) keeps no positions and JSON.parse has none, so the files that hold a
 * record with a finding are read again and parsed with the `yaml` library's positions (JSON is
 * YAML), and each finding gets the line of the deepest part of its path that the file has: the key
 * of `spec.containers[0].ports[0].number`, or of `spec.containers[0]` when `name` is missing there.
 * A file's records are matched to its nodes in reading order (load.ts's `collect` order) and checked
 * by kind and name; a file that cannot be read again, no longer parses, or changed meanwhile keeps
 * the record's own line. Never throws.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import type { Document, LineCounter, Node } from 'yaml';
import { yamlLib } from '../yaml-lib.js';
import { findingText, INLINE, type Finding } from './findings.js';
import type { SourcedRecord } from './records.js';

export type ReadText = (file: string) => Promise<string>;

const readText: ReadText = (file) => readFile(file, 'utf8');

/** One segment of a finding's path: a member name or an item index. */
export type PathStep = string | number;

const STEP = /\.?([A-Za-z_$][\w$/-]*)|\[(\d+)\]|\[("(?:[^"\\]|\\.)*")\]/y;

/** `spec.containers[0]["a.b"]` → `['spec', 'containers', 0, 'a.b']`; stops where the text stops being a path. */
export function parsePath(path: string): PathStep[] {
  const steps: PathStep[] = [];
  STEP.lastIndex = 0;
  while (STEP.lastIndex < path.length) {
    const m = STEP.exec(path);
    if (m === null) break;
    if (m[1] !== undefined) steps.push(m[1]);
    else if (m[2] !== undefined) steps.push(Number(m[2]));
    else steps.push(JSON.parse(m[3]!) as string);
  }
  return steps;
}

/** The 1-based line of an offset in the parsed text. */
export type LineAt = (offset: number) => number;

/** `LineAt` of a `LineCounter` that counted a text starting at line `first`. */
export function linesOf(counter: LineCounter, first = 1): LineAt {
  return (offset) => counter.linePos(offset).line + first - 1;
}

function lineOf(node: { range?: readonly number[] | null } | null | undefined, lineAt: LineAt): number | undefined {
  const start = node?.range?.[0];
  return start === undefined ? undefined : lineAt(start);
}

/** The line of the deepest node along `steps` from `node` (a member's key line for members). */
export function lineAlong(node: unknown, steps: readonly PathStep[], lineAt: LineAt): number | undefined {
  const Y = yamlLib();
  let line = lineOf(node as Node, lineAt);
  let at: unknown = node;
  for (const step of steps) {
    if (typeof step === 'number') {
      if (!Y.isSeq(at)) break;
      const next: unknown = at.items[step];
      if (!Y.isNode(next)) break;
      line = lineOf(next, lineAt) ?? line;
      at = next;
    } else {
      if (!Y.isMap(at)) break;
      const pair = at.items.find((p) => (Y.isScalar(p.key) ? String(p.key.value) : p.key) === step);
      if (pair === undefined) break;
      line = lineOf(pair.key as Node, lineAt) ?? line;
      at = pair.value;
    }
  }
  return line;
}

/** A document of only comments, or the empty one after a trailing `---`. */
function isEmpty(doc: Document.Parsed): boolean {
  return doc.contents === null || (yamlLib().isScalar(doc.contents) && doc.contents.value === null);
}

/** The record nodes of a parsed file, in the order load.ts collects records. */
function recordNodes(docs: readonly Document.Parsed[]): unknown[] {
  const Y = yamlLib();
  const out: unknown[] = [];
  const visit = (node: unknown): void => {
    if (Y.isSeq(node)) {
      for (const item of node.items) visit(item);
      return;
    }
    if (!Y.isMap(node)) {
      out.push(undefined); // not a record: load.ts reported it, and the load stopped before validation
      return;
    }
    const items = node.get('items', true);
    if (Y.isSeq(items) && !node.has('name')) return visit(items);
    out.push(node);
  };
  for (const doc of docs) if (!isEmpty(doc)) visit(doc.contents);
  return out;
}

function scalarAt(node: unknown, key: string): unknown {
  const Y = yamlLib();
  return Y.isMap(node) ? node.get(key) : undefined;
}

function parseText(text: string, json: boolean): { docs: Document.Parsed[]; counter: LineCounter } | undefined {
  const Y = yamlLib();
  const counter = new Y.LineCounter();
  // JSON is YAML; `.json` files are read as JSON by load.ts, and as YAML here only for positions.
  const docs = Y.parseAllDocuments(text, { lineCounter: counter, uniqueKeys: false, logLevel: 'silent', ...(json ? { schema: 'json' as const } : {}) });
  if (!Array.isArray(docs) || docs.some((d) => d.errors.length > 0)) return undefined;
  return { docs, counter };
}

/** Offsets where each line of `text` starts (index 0 is line 1). */
function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

/** A file read again: its text, and its full parse when a record could not be found alone. */
class FileAgain {
  private full: { nodes: unknown[]; lineAt: LineAt } | undefined | null = null;
  private starts: number[] | undefined;
  constructor(readonly text: string, private readonly json: boolean, private readonly count: number) {}

  /**
   * The node of the record at `index` among the file's records. A record read by the fast path
   * knows the line its document starts on: the text from there to the next record's line is parsed
   * alone (a 10,000-workload file is not parsed whole for one error); anything else is found in the
   * whole file's parse.
   */
  node(index: number, line: number | undefined, nextLine: number | undefined): { node: unknown; lineAt: LineAt } | undefined {
    if (line !== undefined && !this.json) {
      this.starts ??= lineStarts(this.text);
      const from = this.starts[line - 1];
      const to = nextLine === undefined ? this.text.length : this.starts[nextLine - 1];
      const part = from === undefined || to === undefined ? undefined : parseText(this.text.slice(from, to), false);
      const docs = part?.docs.filter((d) => !isEmpty(d)) ?? [];
      if (part !== undefined && docs.length === 1 && yamlLib().isMap(docs[0]!.contents)) {
        return { node: docs[0]!.contents, lineAt: linesOf(part.counter, line) };
      }
    }
    if (this.full === null) {
      const whole = parseText(this.text, this.json);
      const nodes = whole === undefined ? [] : recordNodes(whole.docs);
      this.full = whole !== undefined && nodes.length === this.count ? { nodes, lineAt: linesOf(whole.counter) } : undefined;
    }
    return this.full === undefined ? undefined : { node: this.full.nodes[index], lineAt: this.full.lineAt };
  }
}

/**
 * The findings' lines with the line of each finding's path. `records` is the whole set validated
 * (its order gives each record's place in its file); `read` reads a file again (tests give their own).
 */
export async function locateFindings(findings: readonly Finding[], records: readonly SourcedRecord[], read: ReadText = readText): Promise<string[]> {
  const files = new Set<string>();
  for (const f of findings) if (f.record !== undefined && f.record.source !== INLINE) files.add(f.record.source);
  if (files.size === 0) return findings.map((f) => findingText(f));
  // Each record's index among the records of its file, and the line of the record after it.
  const place = new Map<SourcedRecord, { index: number; nextLine?: number }>();
  const counts = new Map<string, number>();
  const last = new Map<string, SourcedRecord>();
  for (const r of records) {
    if (!files.has(r.source)) continue;
    const n = counts.get(r.source) ?? 0;
    place.set(r, { index: n });
    const before = last.get(r.source);
    if (before !== undefined && r.line !== undefined) place.set(before, { index: n - 1, nextLine: r.line });
    last.set(r.source, r);
    counts.set(r.source, n + 1);
  }
  const again = new Map<string, FileAgain | undefined>();
  for (const file of files) {
    let text: string | undefined;
    try {
      text = await read(file);
    } catch {
      text = undefined;
    }
    if (text?.startsWith('\uFEFF')) text = text.slice(1);
    again.set(file, text === undefined ? undefined : new FileAgain(text, extname(file).toLowerCase() === '.json', counts.get(file) ?? 0));
  }
  const found = new Map<SourcedRecord, { node: unknown; lineAt: LineAt } | undefined>();
  return findings.map((f) => {
    const record = f.record;
    const at = record === undefined ? undefined : place.get(record);
    const file = record === undefined ? undefined : again.get(record.source);
    if (record === undefined || at === undefined || file === undefined) return findingText(f);
    if (!found.has(record)) found.set(record, file.node(at.index, record.line, at.nextLine));
    const hit = found.get(record);
    // The same record still? (A file rewritten between the load and now is not trusted.)
    // (Items of a list response may take their kind from the list: a node without one is not compared.)
    const kind = scalarAt(hit?.node, 'kind');
    if (hit === undefined || hit.node === undefined || scalarAt(hit.node, 'name') !== record.record.name || (kind !== undefined && kind !== record.record.kind)) {
      return findingText(f);
    }
    return findingText(f, lineAlong(hit.node, parsePath(f.at), hit.lineAt) ?? record.line);
  });
}
