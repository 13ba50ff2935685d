/**
 * Which locations a GVC runs in: the `spec.staticPlacement.locationLinks` in written order, then the
 * locations a `locationQuery` selects, without repeats. A query is evaluated against the location
 * records when it is simple: every term names a `property` (a member path of the location record,
 * such as `name`, `provider`, `region`) or a `tag`, with op `=`, `!=`, `exists`, `!exists`, `contains`
 * (substring) or `=~` (regular expression, unanchored); values compare as strings. Any other term
 * (`rel`, ordering ops, `~`) cannot be judged here, so the query then selects every location record:
 * a data plane that may be asked for a location should know it. `sort.by` orders the query's
 * locations (numbers numerically, else as strings). Links that name no location record are skipped
 * (validation reports them). Pure; never throws on malformed input.
 */
import { linkOfKind } from './links.js';
import type { RawRecord } from './records.js';
import { isObject, objectAt, valueAt } from './schema.js';
import { isScalar } from './values.js';

const SIMPLE_OPS = new Set(['=', '!=', 'exists', '!exists', 'contains', '=~']);

type Term = Readonly<Record<string, unknown>>;

function isSimple(term: Term): boolean {
  const op = term.op ?? '=';
  const named = typeof term.property === 'string' || typeof term.tag === 'string';
  return named && term.rel === undefined && typeof op === 'string' && SIMPLE_OPS.has(op);
}

function termMatches(term: Term, location: RawRecord): boolean {
  const raw = typeof term.tag === 'string'
    ? valueAt(location, 'tags', term.tag)
    : valueAt(location, ...(term.property as string).split('.'));
  const actual = isScalar(raw) ? String(raw) : undefined;
  const expected = isScalar(term.value) ? String(term.value) : '';
  switch (term.op ?? '=') {
    case 'exists':
      return raw !== undefined && raw !== null;
    case '!exists':
      return raw === undefined || raw === null;
    case '!=':
      return actual !== expected;
    case 'contains':
      return actual !== undefined && actual.includes(expected);
    case '=~':
      try {
        return actual !== undefined && new RegExp(expected).test(actual);
      } catch {
        return false;
      }
    default:
      return actual === expected;
  }
}

function compareBy(path: string, desc: boolean): (a: RawRecord, b: RawRecord) => number {
  return (a, b) => {
    const x = valueAt(a, ...path.split('.'));
    const y = valueAt(b, ...path.split('.'));
    const order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x ?? '').localeCompare(String(y ?? ''));
    return desc ? -order : order;
  };
}

/** Location names a `locationQuery` selects, in location-record order unless it sorts them. */
export function queryLocations(query: unknown, locations: ReadonlyMap<string, RawRecord>): string[] {
  const spec = objectAt(query, 'spec');
  const terms: Term[] = Array.isArray(spec.terms) ? spec.terms.filter(isObject) : [];
  let selected = [...locations.values()];
  if (terms.every(isSimple)) {
    const match = spec.match ?? 'all';
    selected = selected.filter((loc) => {
      if (match === 'any') return terms.some((t) => termMatches(t, loc));
      if (match === 'none') return !terms.some((t) => termMatches(t, loc));
      return terms.every((t) => termMatches(t, loc));
    });
  }
  const sort = isObject(spec.sort) ? spec.sort : undefined;
  if (sort && typeof sort.by === 'string') selected.sort(compareBy(sort.by, sort.order === 'desc'));
  return selected.map((loc) => loc.name as string);
}

/** The GVC's location names: its location links in order, then what its query selects. */
export function gvcLocations(gvc: RawRecord, locations: ReadonlyMap<string, RawRecord>): string[] {
  const placement = objectAt(gvc, 'spec', 'staticPlacement');
  const names: string[] = [];
  if (Array.isArray(placement.locationLinks)) {
    for (const link of placement.locationLinks) {
      const name = linkOfKind(link, 'location')?.name;
      if (name !== undefined && locations.has(name)) names.push(name);
    }
  }
  if (placement.locationQuery !== undefined && placement.locationQuery !== null) {
    names.push(...queryLocations(placement.locationQuery, locations));
  }
  return [...new Set(names)];
}
