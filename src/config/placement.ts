/**
 * Which locations a GVC runs in: the `spec.staticPlacement.locationLinks` in written order, then the
 * locations its `locationQuery` selects (location-query.ts has the language: every op of the spec on
 * `property`, `tag` and `rel` terms, `match`, `sort`), without repeats. Links that name no location
 * record are skipped (validation reports them). Pure; never throws on malformed input.
 */
import { linkOfKind } from './links.js';
import { compileQuery } from './location-query.js';
import type { RawRecord } from './records.js';
import { objectAt } from './schema.js';

/** Location names a `locationQuery` selects, in location-record order unless it sorts them. */
export function queryLocations(query: unknown, locations: ReadonlyMap<string, RawRecord>): string[] {
  const compiled = compileQuery(query);
  const selected = [...locations.values()].filter(compiled.selects);
  compiled.sort(selected);
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
