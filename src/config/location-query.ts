/**
 * The platform's query language as a GVC's `staticPlacement.locationQuery` uses it: a query is
 * compiled once into a predicate over location records and a sort, and the predicate judges every
 * term op of the spec on `property`, `tag` and `rel` terms. Pure and total: a malformed term (no
 * subject or two, an unknown op, an `=~` that does not compile; validation reports them) holds for no
 * location rather than throwing, so a query it cannot judge never selects every location.
 *
 * Sources: platform-spec.md (GVC table: the ops, `match` `all`/`any`/`none` default `all`, `value` a
 * string, number, boolean or date-time, `sort` `{by, order}` default `asc`); docs.controlplane.com
 * /core/query (terms target tags, properties or relations; a `rel` term's subject depends on the kind;
 * `asc` is "A-Z, oldest first, lowest first"; locations sort by `provider`, `region`, `origin`); the
 * vendor's query-spec notes (controlplane-com/ai-plugin, skills/query-spec: `>` `>=` `<` `<=` compare
 * numbers and dates, `~` is a pattern match, `=~` a regular expression, `contains` a substring, boolean
 * tag values are strings). Where those leave a gap, svcproxy decides, as written here:
 *
 * - Subjects. `property` is a member path (`name`, `provider`, `region`, `status.geo.country`); `tag`
 *   is a key of `tags`; `rel` names the location's `links` entries with that `rel` (the platform gives a
 *   location `org` and `self`), and its values are the linked records' names (`/org/acme` gives
 *   `acme`). A value that is a list (a property holding an array, a relation with several links) is a
 *   set: a term holds when it holds for one of its elements. `null` and objects count as no value.
 * - Comparing. When both sides read as numbers (a number, or a string in decimal notation such as
 *   `20`, `-1.5`, `2e3`) they compare numerically, so `"20" = 20` and `9 < 10`. Else, when both read
 *   as ISO 8601 date-times (`2024-05-01`, `2024-05-01T10:00:00.5+02:00`; no zone means UTC) they
 *   compare as instants. Else both compare as text (booleans as `true`/`false`), ordered by UTF-16
 *   code units, the same on every machine: `us-west2 > us-east1` holds, and capitals sort before
 *   lower case. This one comparison serves `=`, `!=`, `>`, `>=`, `<` and `<=`.
 * - `!=` is the negation of `=`: it holds for a location without the value. Every other op needs the
 *   value (`exists` and `!exists` test only presence).
 * - `contains` holds when the value's text includes the term's (case-sensitive); on a list, when one
 *   element's does. `=~` is a JavaScript regular expression searched anywhere in the text (`^…$` to
 *   anchor); one that does not compile holds for nothing. `~` is a wildcard pattern over the whole
 *   text, `*` any run of characters, `?` one, case-insensitive: `region ~ us-*`.
 * - `match`: `all` every term holds, `any` one does, `none` none does; with no terms, `all` and `none`
 *   select every location and `any` none.
 * - `sort.by` is a property path; values compare as numbers when every location's value is a number,
 *   as instants when every one is a date-time, else as text; locations without the value come last
 *   in either order, ties keep record order.
 */
import { parseLink } from './links.js';
import type { RawRecord } from './records.js';
import { isObject } from './schema.js';
import { isScalar, type Scalar } from './values.js';

/** A location record's worth of a term: does this location satisfy it? */
type Predicate = (location: RawRecord) => boolean;

/** A compiled query: which locations it selects, and how it orders them. */
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

/** `*` and `?` wildcards over the whole text; the caller lower-cases both sides. */
function wildcard(pattern: string): RegExp {
  const source = pattern.replace(/[.+^${}()|[\]\\*?]/g, (c) => (c === '*' ? '[\\s\\S]*' : c === '?' ? '[\\s\\S]' : `\\${c}`));
  return new RegExp(`^${source}$`);
}

/** A test of one element of a location's value against the term's value, or `undefined` for "holds for nothing". */
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
      const re = wildcard(String(value).toLowerCase());
      return (v) => re.test(String(v).toLowerCase());
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

/** Reads a term's subject from a location: its values, and whether it is present at all. */
type Reader = (location: RawRecord) => { readonly present: boolean; readonly values: readonly Scalar[] };

function readerOf(term: Record<string, unknown>): Reader | undefined {
  const subjects = ['property', 'tag', 'rel'].filter((k) => term[k] !== undefined);
  if (subjects.length !== 1) return undefined;
  if (typeof term.property === 'string') {
    const path = term.property.split('.');
    return (loc) => {
      let v: unknown = loc;
      for (const key of path) v = isObject(v) ? v[key] : undefined;
      return { present: v !== undefined && v !== null, values: scalarsOf(v) };
    };
  }
  if (typeof term.tag === 'string') {
    const key = term.tag;
    return (loc) => {
      const v = isObject(loc.tags) ? loc.tags[key] : undefined;
      return { present: v !== undefined && v !== null, values: scalarsOf(v) };
    };
  }
  if (typeof term.rel === 'string') {
    const rel = term.rel;
    return (loc) => {
      const hrefs = Array.isArray(loc.links)
        ? loc.links.filter((l): l is Record<string, unknown> => isObject(l) && l.rel === rel && typeof l.href === 'string')
          .map((l) => l.href as string)
        : [];
      return { present: hrefs.length > 0, values: hrefs.map((h) => parseLink(h)?.name ?? h) };
    };
  }
  return undefined;
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
