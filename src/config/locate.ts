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

function lineOf(node: { range?: readonly number[] | null } | null | undefined, counter: LineCounter): number | undefined {
  const start = node?.range?.[0];
  return start === undefined ? undefined : counter.linePos(start).line;
}

/** The line of the deepest node along `steps` from `node` (a member's key line for members). */
export function lineAlong(node: unknown, steps: readonly PathStep[], counter: LineCounter): number | undefined {
  const Y = yamlLib();
  let line = lineOf(node as Node, counter);
  let at: unknown = node;
  for (const step of steps) {
    if (typeof step === 'number') {
      if (!Y.isSeq(at)) break;
      const next: unknown = at.items[step];
      if (!Y.isNode(next)) break;
      line = lineOf(next, counter) ?? line;
      at = next;
    } else {
      if (!Y.isMap(at)) break;
      const pair = at.items.find((p) => (Y.isScalar(p.key) ? String(p.key.value) : p.key) === step);
      if (pair === undefined) break;
      line = lineOf(pair.key as Node, counter) ?? line;
      at = pair.value;
    }
  }
  return line;
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
  for (const doc of docs) {
    if (doc.contents === null || (Y.isScalar(doc.contents) && doc.contents.value === null)) continue;
    visit(doc.contents);
  }
  return out;
}

function scalarAt(node: unknown, key: string): unknown {
  const Y = yamlLib();
  return Y.isMap(node) ? node.get(key) : undefined;
}

interface Parsed {
  readonly nodes: unknown[];
  readonly counter: LineCounter;
}

async function parseFile(file: string, read: ReadText): Promise<Parsed | undefined> {
  let text: string;
  try {
    text = await read(file);
  } catch {
    return undefined;
  }
  if (text.startsWith('\uFEFF')) text = text.slice(1);
  const Y = yamlLib();
  const counter = new Y.LineCounter();
  // JSON is YAML; `.json` files are read as JSON by load.ts, and as YAML here only for positions.
  const docs = Y.parseAllDocuments(text, { lineCounter: counter, uniqueKeys: false, logLevel: 'silent', ...(extname(file).toLowerCase() === '.json' ? { schema: 'json' as const } : {}) });
  if (!Array.isArray(docs) || docs.some((d) => d.errors.length > 0)) return undefined;
  return { nodes: recordNodes(docs), counter };
}

/**
 * The findings' lines with the line of each finding's path. `records` is the whole set validated
 * (its order gives each record's place in its file); `read` reads a file again (tests give their own).
 */
export async function locateFindings(findings: readonly Finding[], records: readonly SourcedRecord[], read: ReadText = readText): Promise<string[]> {
  const files = new Set<string>();
  for (const f of findings) if (f.record !== undefined && f.record.source !== INLINE) files.add(f.record.source);
  if (files.size === 0) return findings.map((f) => findingText(f));
  // Each record's index among the records of its file.
  const index = new Map<SourcedRecord, number>();
  const counts = new Map<string, number>();
  for (const r of records) {
    if (!files.has(r.source)) continue;
    const n = counts.get(r.source) ?? 0;
    index.set(r, n);
    counts.set(r.source, n + 1);
  }
  const parsed = new Map<string, Parsed | undefined>();
  for (const file of files) {
    const p = await parseFile(file, read);
    parsed.set(file, p !== undefined && p.nodes.length === counts.get(file) ? p : undefined);
  }
  return findings.map((f) => {
    const record = f.record;
    const p = record === undefined ? undefined : parsed.get(record.source);
    const i = record === undefined ? undefined : index.get(record);
    if (record === undefined || p === undefined || i === undefined) return findingText(f);
    const node = p.nodes[i];
    // The same record still? (A file rewritten between the load and now is not trusted.)
    // (Items of a list response may take their kind from the list: a node without one is not compared.)
    const kind = scalarAt(node, 'kind');
    if (node === undefined || scalarAt(node, 'name') !== record.record.name || (kind !== undefined && kind !== record.record.kind)) {
      return findingText(f);
    }
    return findingText(f, lineAlong(node, parsePath(f.at), p.counter) ?? record.line);
  });
}
