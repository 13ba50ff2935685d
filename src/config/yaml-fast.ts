/**
 * The quick ways through YAML record files (load.ts uses them before its full parse).
 *
 * `readPlainYaml` reads the YAML that record files are written in (block mappings and sequences,
 * one-line scalars, comments, `{}` and `[]`) by lines, with less than half of js-yaml's instructions, and
 * answers `undefined` for anything else: a tab, an anchor, a tag, a flow collection with members, a
 * block or multi-line scalar, an escape in a double-quoted scalar, a duplicate key, an indentation it
 * does not expect. What it answers is what js-yaml's core schema reads from the same text
 * (test/config/yaml-fast.test.ts compares them on generated files); what it declines goes to js-yaml.
 *
 * `FAST_CORE_SCHEMA` is js-yaml's core schema with the implicit typing of plain scalars behind one
 * quick test (`coreScalar`, which `readPlainYaml` uses too).
 */
import jsyaml from 'js-yaml';

// The core schema's own implicit types, in its order (null, bool, int, float); the typings omit the member.
const CORE_TYPES: readonly jsyaml.Type[] = (jsyaml.CORE_SCHEMA as unknown as { implicit: jsyaml.Type[] }).implicit;

/** Can `data` be anything but a string under the core schema? (`~ + - . 0-9 N F T n f t` start all others.) */
function maybeTyped(data: string | null): boolean {
  if (data === null || data.length === 0) return true;
  const c = data.charCodeAt(0);
  return c === 0x7e || c === 0x2b || c === 0x2d || c === 0x2e || (c >= 0x30 && c <= 0x39) || c === 0x4e || c === 0x46 || c === 0x54 || c === 0x6e || c === 0x66 || c === 0x74;
}

/** The value of a plain scalar under js-yaml's core schema: null, a boolean, a number, or the text itself. */
export function coreScalar(text: string): unknown {
  if (!maybeTyped(text)) return text;
  for (const t of CORE_TYPES) if (t.resolve(text)) return t.construct(text);
  return text;
}

/**
 * js-yaml's core schema, with its implicit typing behind `maybeTyped`: a scalar whose first character
 * can start no null, boolean or number is a string at once, instead of trying four resolvers, one a
 * regex, on each. Same values as CORE_SCHEMA (the explicit `!!int`... tags stay); ~5% fewer
 * instructions for a 10,000-workload file.
 */
export const FAST_CORE_SCHEMA = jsyaml.FAILSAFE_SCHEMA.extend({
  implicit: [new jsyaml.Type('tag:yaml.org,2002:core-scalar', {
    kind: 'scalar',
    resolve: (data: string | null) => maybeTyped(data) && CORE_TYPES.some((t) => t.resolve(data)),
    construct: (data: string | null) => (data === null ? null : coreScalar(data)),
  })],
  explicit: [...CORE_TYPES],
});

/** The documents of a file, each a mapping, and the line each starts on (1-based). */
export interface PlainYaml {
  readonly docs: Record<string, unknown>[];
  readonly lines: number[];
}

/** What js-yaml refuses as non-printable (its PATTERN_NON_PRINTABLE). */
const NON_PRINTABLE = /[\x00-\x08\x0B\x0C\x0E-\x1F\x7F-\x84\x86-\x9F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?:[^\uD800-\uDBFF]|^)[\uDC00-\uDFFF]/;

/** A plain key that reads as itself: letters, digits and `_ $ . / -`, not starting with a dot or hyphen. */
const PLAIN_KEY = /^[A-Za-z0-9_$][\w$./-]*$/;

/** Thrown (and caught in `readPlainYaml`) for anything the reader does not take. */
const DECLINE = new Error('not plain YAML');

function decline(): never {
  throw DECLINE;
}

const SPACE = 0x20;
const HASH = 0x23;
const DASH = 0x2d;
const COLON = 0x3a;
const DQUOTE = 0x22;
const SQUOTE = 0x27;

export function readPlainYaml(text: string): PlainYaml | undefined {
  if (text.includes('\t') || NON_PRINTABLE.test(text)) return undefined;
  try {
    return new Reader(text).documents();
  } catch (e) {
    if (e === DECLINE) return undefined;
    throw e;
  }
}

const LINE = 0;
const SEPARATOR = 1;
const END = 2;

/**
 * Reads line by line, one line ahead at most: the current content line is its indentation, where its
 * content starts and ends (trailing spaces and a CR dropped) and its number; strings are made only
 * for keys and values.
 */
class Reader {
  /** Where the next line starts. */
  private at = 0;
  private lineNumber = 0;
  /** The current line: content (LINE), a `---` (SEPARATOR), or the end of the text (END). */
  private kind = LINE;
  private indent = 0;
  private start = 0;
  private end = 0;
  private number = 0;
  private readonly hasCR: boolean;
  /** Keys by their text (see `key`). */
  private readonly keys = new Map<string, string>();

  constructor(private readonly text: string) {
    this.hasCR = text.includes('\r');
  }

  documents(): PlainYaml {
    const docs: Record<string, unknown>[] = [];
    const lines: number[] = [];
    this.next();
    while (this.kind !== END) {
      if (this.kind === SEPARATOR) {
        this.next(); // an empty document gives no record (the full parse skips it too)
        continue;
      }
      lines.push(this.number);
      docs.push(this.document());
    }
    return { docs, lines };
  }

  /** Moves to the next line that is not blank or a comment: content, a separator, or the end. */
  private next(): void {
    const { text } = this;
    while (this.at <= text.length) {
      let nl = text.indexOf('\n', this.at);
      if (nl < 0) nl = text.length;
      this.lineNumber++;
      const lineStart = this.at;
      this.at = nl + 1;
      let stop = nl;
      if (stop > lineStart && text.charCodeAt(stop - 1) === 0x0d) stop--;
      let start = lineStart;
      while (start < stop && text.charCodeAt(start) === SPACE) start++;
      if (start === stop || text.charCodeAt(start) === HASH) continue; // blank or a comment
      if (this.hasCR && find(text, 0x0d, start, stop) >= 0) decline();
      if (start === lineStart) {
        if (text.charCodeAt(start) === 0x25 /* % */ || text.startsWith('...', start)) decline();
        if (text.startsWith('---', start) && (stop - start === 3 || text.charCodeAt(start + 3) === SPACE)) {
          let rest = start + 3;
          while (rest < stop && text.charCodeAt(rest) === SPACE) rest++;
          if (rest < stop && text.charCodeAt(rest) !== HASH) decline(); // content on the `---` line
          this.kind = SEPARATOR;
          return;
        }
      }
      while (text.charCodeAt(stop - 1) === SPACE) stop--;
      this.kind = LINE;
      this.indent = start - lineStart;
      this.start = start;
      this.end = stop;
      this.number = this.lineNumber;
      return;
    }
    this.kind = END;
  }

  /** One document: a block mapping at the left margin, up to a separator or the end. */
  private document(): Record<string, unknown> {
    if (this.indent !== 0 || this.isEntry()) decline();
    const value = this.mapping(0);
    if (this.kind === LINE) decline();
    return value;
  }

  /** The current line is `- ...` or a lone `-`: a sequence entry. */
  private isEntry(): boolean {
    const s = this.start;
    return this.text.charCodeAt(s) === DASH && (s + 1 === this.end || this.text.charCodeAt(s + 1) === SPACE);
  }

  /**
   * The key `text[start, colon)`. The same keys recur in every record: each text is checked once and
   * the first string made of it used for all.
   */
  private key(start: number, colon: number): string {
    const raw = this.text.slice(start, colon);
    let key = this.keys.get(raw);
    if (key === undefined) {
      key = mappingKey(this.text, start, colon);
      this.keys.set(raw, key);
    }
    return key;
  }

  /** The block at `indent` that starts at the current line: a sequence or a mapping. */
  private block(indent: number): unknown {
    return this.isEntry() ? this.sequence(indent) : this.mapping(indent);
  }

  /** The value of a key or entry with nothing after it on its line: a nested block, or null. */
  private nested(indent: number, sameIndentSequence: boolean): unknown {
    if (this.kind !== LINE) return null;
    if (this.indent > indent) return this.block(this.indent);
    // `key:` followed by `- item` at the key's own indentation is the key's sequence.
    if (sameIndentSequence && this.indent === indent && this.isEntry()) return this.sequence(indent);
    return null;
  }

  /** After a value that ended its line: a following line indented deeper would continue it. */
  private ended(indent: number): void {
    if (this.kind === LINE && this.indent > indent) decline();
  }

  private mapping(indent: number): Record<string, unknown> {
    const { text } = this;
    const out: Record<string, unknown> = {};
    while (this.kind === LINE && this.indent === indent) {
      if (this.isEntry()) decline();
      const { start, end } = this;
      const colon = keyEnd(text, start, end);
      if (colon < 0) decline();
      const key = this.key(start, colon);
      if (key === '__proto__' || Object.hasOwn(out, key)) decline();
      let rest = colon + 1;
      while (rest < end && text.charCodeAt(rest) === SPACE) rest++;
      this.next();
      if (rest === end || text.charCodeAt(rest) === HASH) {
        out[key] = this.nested(indent, true);
      } else {
        out[key] = inlineValue(text, rest, end);
        this.ended(indent);
      }
    }
    return out;
  }

  private sequence(indent: number): unknown[] {
    const { text } = this;
    const out: unknown[] = [];
    while (this.kind === LINE && this.indent === indent && this.isEntry()) {
      const end = this.end;
      let content = this.start + 1;
      while (content < end && text.charCodeAt(content) === SPACE) content++;
      if (content === end || text.charCodeAt(content) === HASH) {
        this.next();
        out.push(this.nested(indent, false));
      } else if (text.charCodeAt(content) === DASH && (content + 1 === end || text.charCodeAt(content + 1) === SPACE)) {
        decline(); // `- - x`
      } else if (keyEnd(text, content, end) >= 0) {
        // `- key: value`: a mapping whose keys stand at the column of the first one.
        this.indent = indent + (content - this.start);
        this.start = content;
        out.push(this.mapping(this.indent));
      } else {
        this.next();
        out.push(inlineValue(text, content, end));
        this.ended(indent);
      }
    }
    return out;
  }
}

/** Where the `:` ending a mapping key that starts at `start` is (followed by a space or the end), or -1. */
function keyEnd(text: string, start: number, end: number): number {
  const c = text.charCodeAt(start);
  if (c === DQUOTE || c === SQUOTE) {
    const close = closingQuote(text, start, end);
    return close > 0 && isColonAt(text, close + 1, end) ? close + 1 : -1;
  }
  for (let i = find(text, COLON, start, end); i >= 0; i = find(text, COLON, i + 1, end)) if (isColonAt(text, i, end)) return i;
  return -1;
}

/** The first `code` in `text[start, end)`, or -1 (a bounded indexOf: one line, never the rest of the file). */
function find(text: string, code: number, start: number, end: number): number {
  for (let i = start; i < end; i++) if (text.charCodeAt(i) === code) return i;
  return -1;
}

function isColonAt(text: string, i: number, end: number): boolean {
  return i < end && text.charCodeAt(i) === COLON && (i + 1 === end || text.charCodeAt(i + 1) === SPACE);
}

/** The key `text[start, colon)` as js-yaml makes it: a string. */
function mappingKey(text: string, start: number, colon: number): string {
  const c = text.charCodeAt(start);
  if (c === DQUOTE || c === SQUOTE) return quoted(text, start, colon);
  const raw = text.slice(start, colon);
  if (!PLAIN_KEY.test(raw)) decline();
  // A key that types as a number, a boolean or null must read back as the same text (`8080`, not `0x1F`).
  const typed = coreScalar(raw);
  if (typed !== raw && String(typed) !== raw) decline();
  return raw;
}

/** The index of the quote closing the quoted scalar at `start`; -1 when it does not close on the line. */
function closingQuote(text: string, start: number, end: number): number {
  const q = text.charCodeAt(start);
  for (let i = start + 1; i < end; i++) {
    const c = text.charCodeAt(i);
    if (q === DQUOTE && c === 0x5c /* \ */) return -1; // escapes: js-yaml's to read
    if (c !== q) continue;
    if (q === SQUOTE && i + 1 < end && text.charCodeAt(i + 1) === SQUOTE) {
      i++; // '' inside single quotes
      continue;
    }
    return i;
  }
  return -1;
}

/** The quoted scalar that is the whole of `text[start, end)`. */
function quoted(text: string, start: number, end: number): string {
  if (closingQuote(text, start, end) !== end - 1) decline();
  const body = text.slice(start + 1, end - 1);
  return text.charCodeAt(start) === SQUOTE ? body.replaceAll("''", "'") : body;
}

/** Characters that start something other than a plain scalar in block context. */
const INDICATORS = new Set('&*!|>%@`,[]{}#?:-\'"'.split('').map((c) => c.charCodeAt(0)));

/** The value at `text[start, end)` after `key: ` or `- `: a quoted or plain scalar, `{}` or `[]`, and maybe a comment. */
function inlineValue(text: string, start: number, end: number): unknown {
  const c = text.charCodeAt(start);
  if (c === DQUOTE || c === SQUOTE) {
    const close = closingQuote(text, start, end);
    if (close < 0) decline();
    if (close + 1 < end) {
      // Only a comment may follow, after a space: `"a"#b` and `"a" b` are errors.
      let after = close + 1;
      while (after < end && text.charCodeAt(after) === SPACE) after++;
      if (after === close + 1 || text.charCodeAt(after) !== HASH) decline();
    }
    return quoted(text, start, close + 1);
  }
  let stop = end;
  let comment = find(text, HASH, start, end);
  while (comment >= 0 && text.charCodeAt(comment - 1) !== SPACE) comment = find(text, HASH, comment + 1, end);
  if (comment >= 0) {
    stop = comment;
    while (text.charCodeAt(stop - 1) === SPACE) stop--;
  }
  if (stop - start === 2 && c === 0x7b && text.charCodeAt(start + 1) === 0x7d) return {};
  if (stop - start === 2 && c === 0x5b && text.charCodeAt(start + 1) === 0x5d) return [];
  // `-1`, `::/0`, `?x` are plain scalars (`- `, `: `, `? ` are not); every other indicator starts something else.
  if (INDICATORS.has(c) && !((c === DASH || c === COLON || c === 0x3f) && stop - start > 1 && text.charCodeAt(start + 1) !== SPACE)) decline();
  const value = text.slice(start, stop);
  if (value.includes(': ') || value.endsWith(':')) decline();
  return coreScalar(value);
}
