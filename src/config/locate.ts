/**
 * Lines for findings, looked up only once there are findings to show: the quick YAML path
 * (load.ts, yaml-fast.ts) keeps no positions and JSON.parse has none, so the files that hold a
 * record with a finding are read again and parsed with the lines of their values (src/yaml.ts; JSON
 * is YAML), and each finding gets the line of the deepest part of its path that the file has: the key
 * of `spec.containers[0].ports[0].number`, or of `spec.containers[0]` when `name` is missing there.
 * A file's records are matched to its nodes in reading order (load.ts's `collect` order) and checked
 * by kind and name; a file that cannot be read again, no longer parses, or changed meanwhile keeps
 * the record's own line. Never throws.
 */
import { readFile } from 'node:fs/promises';
import { extname } from 'node:path';
import jsyaml from 'js-yaml';
import { readYaml, type YamlDocument, type YamlLines } from '../yaml.js';
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

/** The lines of a parse of a file, or of a part of it that starts at line `first`. */
export interface LinesIn {
  readonly lines: YamlLines;
  readonly first: number;
}

/** The line of the deepest value along `steps` from `value` (a member's key line for members). */
export function lineAlong(value: unknown, steps: readonly PathStep[], at: LinesIn): number | undefined {
  const { lines, first } = at;
  let line = lines.of(value);
  let here: unknown = value;
  for (const step of steps) {
    if (typeof step === 'number') {
      if (!Array.isArray(here) || step >= here.length) break;
      line = lines.item(here, step) ?? line;
      here = here[step];
    } else {
      if (!isMap(here) || !Object.hasOwn(here, step)) break;
      line = lines.key(here, step) ?? line;
      here = here[step];
    }
  }
  return line === undefined ? undefined : line + first - 1;
}

function isMap(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** A document of only comments, or the empty one after a trailing `---`. */
function isEmpty(doc: YamlDocument): boolean {
  return doc.value === null || doc.value === undefined;
}

/** The record values of a parsed file, in the order load.ts collects records. */
function recordValues(docs: readonly YamlDocument[]): unknown[] {
  const out: unknown[] = [];
  const visit = (value: unknown): void => {
    if (Array.isArray(value)) {
      for (const item of value) visit(item);
      return;
    }
    if (!isMap(value)) {
      out.push(undefined); // not a record: load.ts reported it, and the load stopped before validation
      return;
    }
    if (Array.isArray(value.items) && !Object.hasOwn(value, 'name')) return visit(value.items);
    out.push(value);
  };
  for (const doc of docs) if (!isEmpty(doc)) visit(doc.value);
  return out;
}

function scalarAt(value: unknown, key: string): unknown {
  return isMap(value) ? value[key] : undefined;
}

function parseText(text: string, json: boolean): { docs: readonly YamlDocument[]; lines: YamlLines } | undefined {
  // JSON is YAML; `.json` files are read as JSON by load.ts, and as YAML here only for lines (a
  // repeated key then wins, as in JSON.parse).
  const read = readYaml(text, json ? { schema: jsyaml.JSON_SCHEMA, json: true } : {});
  return read.ok ? { docs: read.docs, lines: read.lines } : undefined;
}

/** Offsets where each line of `text` starts (index 0 is line 1). */
function lineStarts(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}

/** A file read again: its text, and its full parse when a record could not be found alone. */
class FileAgain {
  private full: { values: unknown[]; at: LinesIn } | undefined | null = null;
  private starts: number[] | undefined;
  constructor(readonly text: string, private readonly json: boolean, private readonly count: number) {}

  /**
   * The value of the record at `index` among the file's records. A record read by the quick path
   * knows the line its document starts on: the text from there to the next record's line is parsed
   * alone (a 10,000-workload file is not parsed whole for one error); anything else is found in the
   * whole file's parse.
   */
  value(index: number, line: number | undefined, nextLine: number | undefined): { value: unknown; at: LinesIn } | undefined {
    if (line !== undefined && !this.json) {
      this.starts ??= lineStarts(this.text);
      const from = this.starts[line - 1];
      const to = nextLine === undefined ? this.text.length : this.starts[nextLine - 1];
      const part = from === undefined || to === undefined ? undefined : parseText(this.text.slice(from, to), false);
      const docs = part?.docs.filter((d) => !isEmpty(d)) ?? [];
      if (part !== undefined && docs.length === 1 && isMap(docs[0]!.value)) {
        return { value: docs[0]!.value, at: { lines: part.lines, first: line } };
      }
    }
    if (this.full === null) {
      const whole = parseText(this.text, this.json);
      const values = whole === undefined ? [] : recordValues(whole.docs);
      this.full = whole !== undefined && values.length === this.count ? { values, at: { lines: whole.lines, first: 1 } } : undefined;
    }
    return this.full === undefined ? undefined : { value: this.full.values[index], at: this.full.at };
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
  const found = new Map<SourcedRecord, { value: unknown; at: LinesIn } | undefined>();
  return findings.map((f) => {
    const record = f.record;
    const at = record === undefined ? undefined : place.get(record);
    const file = record === undefined ? undefined : again.get(record.source);
    if (record === undefined || at === undefined || file === undefined) return findingText(f);
    if (!found.has(record)) found.set(record, file.value(at.index, record.line, at.nextLine));
    const hit = found.get(record);
    // The same record still? (A file rewritten between the load and now is not trusted.)
    // (Items of a list response may take their kind from the list: a node without one is not compared.)
    const kind = scalarAt(hit?.value, 'kind');
    if (hit === undefined || hit.value === undefined || scalarAt(hit.value, 'name') !== record.record.name || (kind !== undefined && kind !== record.record.kind)) {
      return findingText(f);
    }
    return findingText(f, lineAlong(hit.value, parsePath(f.at), hit.at) ?? record.line);
  });
}
