/**
 * The platform's query language: a query is compiled once into a predicate over records and a sort,
 * and the predicate judges every term op of the spec on `property`, `tag` and `rel` terms. A GVC's
 * `staticPlacement.locationQuery` runs it over location records; nothing in it is particular to
 * locations, so any kind's records can be queried the same way. Pure and total: a malformed term (no
 * subject or two, an unknown op, an `=~` that does not compile; validation reports them) holds for no
 * record rather than throwing, so a query it cannot judge never selects everything.
 *
 * Sources:
 * - platform-spec.md (GVC table): the ops, `match` `all`/`any`/`none` default `all`, `value` a
 *   string, number, boolean or date-time, `sort` `{by, order}` default `asc`.
 * - docs.controlplane.com/core/query: terms target tags, properties or relations; a `rel` term's
 *   subject depends on the kind; `asc` is "A-Z, oldest first, lowest first"; locations sort by
 *   `provider`, `region`, `origin`.
 * - The vendor's query-spec notes (github.com/controlplane-com/ai-plugin, plugins/cpln/skills/
 *   query-spec/SKILL.md): `>` `>=` `<` `<=` compare numbers and dates, `~` is the "pattern match" op,
 *   `=~` a regular expression, `contains` a substring, boolean tag values are strings.
 * - The platform's own client, `@controlplane/cli` 3.10.1 (npm), for what `~` means in practice:
 *   dist/src/helm/helm-release-history-manager.js and dist/src/commands/helm.js find a release's
 *   secrets, named `cpln-helm-release-<release>-v<N>`, with the term
 *   `{op: '~', property: 'name', value: 'cpln-helm-release'}` (and the legacy ones, `cpln-release-…`,
 *   with `value: 'cpln-release'`): `~` holds for a name that contains the term's text, not one that is
 *   equal to it. dist/src/commands/query.js (`cpln KIND query`, and the `--query-*` options of
 *   `gvc`, `policy`, `group`) turns `--prop name~europe` into `{op: '~', property: 'name', value:
 *   'europe'}`, offers `~` and `*~` as its "fuzzy" completions, and turns a bare `--prop ~europe` (or
 *   `--tag ~eu`) into a term on the subject `*`: `{op: '~', property: '*', value: 'europe'}`, a
 *   search of every property (every tag) for the text.
 *
 * Where those leave a gap, svcproxy decides, as written here:
 *
 * - Subjects. `property` is a member path (`name`, `provider`, `region`, `status.geo.country`); `tag`
 *   is a key of `tags`; `rel` names the record's `links` entries with that `rel` (the platform gives a
 *   location `org` and `self`), and its values are the linked records' names (`/org/acme` gives
 *   `acme`). The subject `*` is every one of its kind at once: `property: '*'` reads every member of
 *   the record at any depth except `kind`, `tags` and `links` (which have subjects of their own),
 *   `tag: '*'` every tag's value, `rel: '*'` every link. A value that is a list (a property holding an
 *   array, a relation with several links, a `*` subject) is a set: a term holds when it holds for one
 *   of its elements. `null` and objects count as no value.
 * - Comparing. When both sides read as numbers (a number, or a string in decimal notation such as
 *   `20`, `-1.5`, `2e3`) they compare numerically, so `"20" = 20` and `9 < 10`. Else, when both read
 *   as ISO 8601 date-times (`2024-05-01`, `2024-05-01T10:00:00.5+02:00`; no zone means UTC) they
 *   compare as instants. Else both compare as text (booleans as `true`/`false`), ordered by UTF-16
 *   code units, the same on every machine: `us-west2 > us-east1` holds, and capitals sort before
 *   lower case. This one comparison serves `=`, `!=`, `>`, `>=`, `<` and `<=`.
 * - `!=` is the negation of `=`: it holds for a record without the value. Every other op needs the
 *   value (`exists` and `!exists` test only presence).
 * - `~` holds when the value's text contains the term's text, ignoring case (both sides lower-cased):
 *   `name ~ europe` selects `gcp-europe-west1` and `azure-westeurope`. A `*` in the term stands for
 *   any run of characters (none included), so `region ~ us-*` is "contains `us-`" and `name ~ aws*2`
 *   needs an `aws` with a `2` somewhere after it; no other character is special. Judged piece by
 *   piece (each piece between `*`s found after the previous one), so no term costs more than a scan
 *   per piece, whatever it holds.
 * - `contains` holds when the value's text includes the term's (case-sensitive); `=~` is a JavaScript
 *   regular expression searched anywhere in the text (`^…$` to anchor); one that does not compile
 *   holds for nothing.
 * - `match`: `all` every term holds, `any` one does, `none` none does; with no terms, `all` and `none`
 *   select every record and `any` none.
 * - `sort.by` is a property path; values compare as numbers when every record's value is a number,
 *   as instants when every one is a date-time, else as text; records without the value come last
 *   in either order, ties keep record order.
 */
import { parseLink } from './links.js';
import type { RawRecord } from './records.js';
import { isObject } from './schema.js';
import { isScalar, type Scalar } from './values.js';

/** A record's worth of a term: does this record satisfy it? */
type Predicate = (record: RawRecord) => boolean;

/** A compiled query: which records it selects, and how it orders them. */
export interface CompiledQuery {
  readonly selects: Predicate;
  /** Sorts in place (stable); a query without `sort.by` leaves the order. */
  readonly sort: (locations: RawRecord[]) => void;
}

const VALUE_OPS = new Set(['=', '>', '>=', '<', '<=', '!=', '~', '=~', 'contains']);

const NUMBER = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$/;
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})?)?$/;

/** The number a value reads as, or `undefined`. */
export function asNumber(v: Scalar): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string' || !NUMBER.test(v)) return undefined;
  const n = Number(v);
  return Number.isFinite(n) ? n : undefined;
}

function daysIn(year: number, month: number): number {
  if (month === 2) return (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0 ? 29 : 28;
  return [4, 6, 9, 11].includes(month) ? 30 : 31;
}

/** The instant (ms since the epoch, fractions kept) an ISO 8601 date-time names, or `undefined`. */
export function asInstant(v: Scalar): number | undefined {
  if (typeof v !== 'string') return undefined;
  const m = DATE_TIME.exec(v);
  if (m === null) return undefined;
  const [year, month, day, hour, minute, second] = [1, 2, 3, 4, 5, 6].map((i) => Number(m[i] ?? 0)) as [number, number, number, number, number, number];
  if (month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || hour > 23 || minute > 59 || second > 59) return undefined;
  let offset = 0;
  const zone = m[8];
  if (zone !== undefined && zone !== 'Z' && zone !== 'z') {
    const hours = Number(zone.slice(1, 3));
    const minutes = Number(zone.slice(4, 6));
    if (hours > 23 || minutes > 59) return undefined;
    offset = (zone.startsWith('-') ? -1 : 1) * (hours * 60 + minutes) * 60_000;
  }
  // Date.UTC maps years 0-99 to 1900-1999; setUTCFullYear takes the year as written.
  const at = new Date(Date.UTC(2000, month - 1, day, hour, minute, second));
  at.setUTCFullYear(year);
  const fraction = m[7] === undefined ? 0 : Number(m[7]) * 1000;
  return at.getTime() + fraction - offset;
}

function sign(d: number): number {
  return d < 0 ? -1 : d > 0 ? 1 : 0;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Orders two values: numerically, else as instants, else as text (see the module comment). */
export function compareValues(a: Scalar, b: Scalar): number {
  const x = asNumber(a);
  const y = asNumber(b);
  if (x !== undefined && y !== undefined) return sign(x - y);
  const s = asInstant(a);
  const t = asInstant(b);
  if (s !== undefined && t !== undefined) return sign(s - t);
  return compareText(String(a), String(b));
}

/**
 * `~`'s test: does `text` contain `term`, ignoring case, where a `*` in the term is any run of
 * characters? Each piece between the `*`s is looked for after the end of the one before; finding each
 * as early as it can be found never loses a match, since what follows may start anywhere after it.
 */
export function fuzzyContains(text: string, term: string): boolean {
  const haystack = text.toLowerCase();
  let from = 0;
  for (const piece of term.toLowerCase().split('*')) {
    const at = haystack.indexOf(piece, from);
    if (at === -1) return false;
    from = at + piece.length;
  }
  return true;
}

/** A test of one element of a record's value against the term's value, or `undefined` for "holds for nothing". */
function elementTest(op: string, value: Scalar): ((v: Scalar) => boolean) | undefined {
  switch (op) {
    case '=':
    case '!=':
      return (v) => compareValues(v, value) === 0;
    case '>':
      return (v) => compareValues(v, value) > 0;
    case '>=':
      return (v) => compareValues(v, value) >= 0;
    case '<':
      return (v) => compareValues(v, value) < 0;
    case '<=':
      return (v) => compareValues(v, value) <= 0;
    case 'contains': {
      const text = String(value);
      return (v) => String(v).includes(text);
    }
    case '=~': {
      let re: RegExp;
      try {
        re = new RegExp(String(value));
      } catch {
        return undefined;
      }
      return (v) => re.test(String(v));
    }
    case '~': {
      const text = String(value);
      return (v) => fuzzyContains(String(v), text);
    }
    default:
      return undefined;
  }
}

/** The scalars a value holds: itself, or a list's scalar elements; `null` and objects hold none. */
function scalarsOf(v: unknown): Scalar[] {
  if (isScalar(v)) return [v];
  return Array.isArray(v) ? v.filter(isScalar) : [];
}

/** Reads a term's subject from a record: its values, and whether it is present at all. */
type Reader = (record: RawRecord) => { readonly present: boolean; readonly values: readonly Scalar[] };

/** The members `property: '*'` leaves to subjects of their own. */
const NOT_PROPERTIES = new Set(['kind', 'tags', 'links']);

/** Every scalar under `v`, at any depth (a shared or cyclic object, as YAML anchors make, is read once). */
function scalarsBelow(v: unknown, into: Scalar[], seen: Set<object>): void {
  if (isScalar(v)) into.push(v);
  else if (typeof v === 'object' && v !== null && !seen.has(v)) {
    seen.add(v);
    for (const member of Array.isArray(v) ? v : Object.values(v)) scalarsBelow(member, into, seen);
  }
}

/** The subject `*`: every property, every tag or every relation of the record (see the module comment). */
function everyOf(subject: 'property' | 'tag' | 'rel'): Reader {
  return (record) => {
    const values: Scalar[] = [];
    if (subject === 'property') {
      const seen = new Set<object>([record]);
      for (const [key, v] of Object.entries(record)) if (!NOT_PROPERTIES.has(key)) scalarsBelow(v, values, seen);
    } else if (subject === 'tag') {
      if (isObject(record.tags)) for (const v of Object.values(record.tags)) values.push(...scalarsOf(v));
    } else {
      values.push(...linkedNames(record, () => true));
    }
    return { present: values.length > 0, values };
  };
}

/** The names of the records a record's `links` point to, of the entries `rel` admits. */
function linkedNames(record: RawRecord, rel: (r: unknown) => boolean): string[] {
  if (!Array.isArray(record.links)) return [];
  return record.links.filter((l): l is Record<string, unknown> => isObject(l) && rel(l.rel) && typeof l.href === 'string')
    .map((l) => parseLink(l.href as string)?.name ?? (l.href as string));
}

function readerOf(term: Record<string, unknown>): Reader | undefined {
  const subjects = (['property', 'tag', 'rel'] as const).filter((k) => term[k] !== undefined);
  if (subjects.length !== 1) return undefined;
  const subject = subjects[0]!;
  const name = term[subject];
  if (typeof name !== 'string') return undefined;
  if (name === '*') return everyOf(subject);
  if (subject === 'property') {
    const path = name.split('.');
    return (record) => {
      let v: unknown = record;
      for (const key of path) v = isObject(v) ? v[key] : undefined;
      return { present: v !== undefined && v !== null, values: scalarsOf(v) };
    };
  }
  if (subject === 'tag') {
    return (record) => {
      const v = isObject(record.tags) ? record.tags[name] : undefined;
      return { present: v !== undefined && v !== null, values: scalarsOf(v) };
    };
  }
  return (record) => {
    const names = linkedNames(record, (r) => r === name);
    return { present: names.length > 0, values: names };
  };
}

const NOTHING: Predicate = () => false;

/** One term as a predicate; a malformed term (no subject, unknown op, bad regex) holds for nothing. */
export function compileTerm(term: unknown): Predicate {
  if (!isObject(term)) return NOTHING;
  const read = readerOf(term);
  const op = term.op ?? '=';
  if (read === undefined || typeof op !== 'string') return NOTHING;
  if (op === 'exists') return (loc) => read(loc).present;
  if (op === '!exists') return (loc) => !read(loc).present;
  const test = VALUE_OPS.has(op) && isScalar(term.value) ? elementTest(op, term.value) : undefined;
  if (op === '!=') return test === undefined ? () => true : (loc) => !read(loc).values.some(test);
  if (test === undefined) return NOTHING;
  return (loc) => read(loc).values.some(test);
}

function sortOf(spec: Record<string, unknown>): (locations: RawRecord[]) => void {
  const sort = isObject(spec.sort) ? spec.sort : undefined;
  if (sort === undefined || typeof sort.by !== 'string' || sort.by === '') return () => {};
  const path = sort.by.split('.');
  const desc = sort.order === 'desc';
  return (locations) => {
    const keyOf = (loc: RawRecord): Scalar | undefined => {
      let v: unknown = loc;
      for (const key of path) v = isObject(v) ? v[key] : undefined;
      return isScalar(v) ? v : undefined;
    };
    const keys = new Map(locations.map((loc) => [loc, keyOf(loc)]));
    const present = [...keys.values()].filter((k): k is Scalar => k !== undefined);
    // One kind of comparison for the whole list, so the order is total (pairwise mixing is not).
    const byNumber = present.every((k) => asNumber(k) !== undefined);
    const byInstant = !byNumber && present.every((k) => asInstant(k) !== undefined);
    const order = (a: Scalar, b: Scalar): number => {
      if (byNumber) return sign((asNumber(a) as number) - (asNumber(b) as number));
      if (byInstant) return sign((asInstant(a) as number) - (asInstant(b) as number));
      return compareText(String(a), String(b));
    };
    locations.sort((a, b) => {
      const x = keys.get(a);
      const y = keys.get(b);
      if (x === undefined || y === undefined) return (x === undefined ? 1 : 0) - (y === undefined ? 1 : 0);
      return desc ? order(y, x) : order(x, y);
    });
  };
}

/** Compiles a `locationQuery` once: its terms under `match`, and its sort. */
export function compileQuery(query: unknown): CompiledQuery {
  const spec = isObject(query) && isObject(query.spec) ? query.spec : {};
  const terms = Array.isArray(spec.terms) ? spec.terms.map(compileTerm) : [];
  let selects: Predicate;
  if (spec.match === 'any') selects = (loc) => terms.some((t) => t(loc));
  else if (spec.match === 'none') selects = (loc) => !terms.some((t) => t(loc));
  else selects = (loc) => terms.every((t) => t(loc));
  return { selects, sort: sortOf(spec) };
}
