/**
 * The record index that validation and compilation share: records of the kinds svcproxy reads, keyed
 * the way links name them (locations and GVCs by name, workloads and deployments by `gvc/name`,
 * domains by lower-cased host), plus each GVC's locations. Built in one pass that also finds
 * duplicates; the first record of a key wins in the index and later ones are returned as
 * duplicates for validation to report. `locations` also holds the platform's own locations that the
 * records link by name without a record of them. Records without a usable kind or name are left out (the
 * validator reports those). Never throws.
 */
import { linkOfKind, locationName } from './links.js';
import { gvcLocations } from './placement.js';
import { platformLocationRecord } from './platform-locations.js';
import { objectAt, valueAt } from './schema.js';
import { isReadKind, workloadGvc, type RawRecord, type ReadKind, type SourcedRecord } from './records.js';
import { canonicalHostName } from './values.js';

export interface Catalog {
  /** The first org record (only one is allowed). */
  readonly org?: RawRecord;
  readonly locations: ReadonlyMap<string, RawRecord>;
  readonly gvcs: ReadonlyMap<string, RawRecord>;
  /** Keyed by `gvc/name`. */
  readonly workloads: ReadonlyMap<string, RawRecord>;
  /** Keyed by lower-cased host without a trailing dot. */
  readonly domains: ReadonlyMap<string, RawRecord>;
  /** Keyed by `gvc/name` of the workload. */
  readonly deployments: ReadonlyMap<string, RawRecord>;
  /** Location names of each GVC (placement.ts), keyed by GVC name. */
  readonly gvcLocations: ReadonlyMap<string, readonly string[]>;
}

export interface Duplicate {
  readonly record: SourcedRecord;
  /** The record of the same key that came first. */
  readonly first: SourcedRecord;
}

/** The index key of a record, `undefined` when it has no usable name (or GVC, where one is needed). */
export function recordKey(kind: ReadKind, record: RawRecord): string | undefined {
  const name = record.name;
  if (typeof name !== 'string' || name === '') return undefined;
  switch (kind) {
    case 'org':
      return 'org';
    case 'domain':
      return canonicalHostName(name);
    case 'workload':
    case 'deployment': {
      const gvc = workloadGvc(record);
      return gvc === undefined ? undefined : `${gvc}/${name}`;
    }
    default:
      return name;
  }
}

/** Every location name a GVC, workload or deployment links (placement, location options, local options, replicas' locations). */
function* linkedLocations(maps: Readonly<Record<ReadKind, Map<string, RawRecord>>>): Generator<string> {
  const names = (list: unknown, of: (item: unknown) => string | undefined): string[] =>
    (Array.isArray(list) ? list : []).map(of).filter((n): n is string => n !== undefined);
  for (const gvc of maps.gvc.values()) {
    const placement = objectAt(gvc, 'spec', 'staticPlacement');
    yield* names(placement.locationLinks, (l) => linkOfKind(l, 'location')?.name);
    yield* names(placement.locationOptions, (o) => linkOfKind(valueAt(o, 'locationLink'), 'location')?.name);
  }
  for (const w of maps.workload.values()) yield* names(objectAt(w, 'spec').localOptions, (o) => locationName(valueAt(o, 'location')));
  for (const d of maps.deployment.values()) yield* names(objectAt(d, 'status').locations, (l) => locationName(valueAt(l, 'name')));
}

/**
 * The platform's own locations the records link by name and define no record of (platform-locations.ts),
 * added after the location records: they place GVCs and route as records do, and a record of the
 * same name wins.
 */
function addLinkedPlatformLocations(maps: Record<ReadKind, Map<string, RawRecord>>): void {
  for (const name of linkedLocations(maps)) {
    if (maps.location.has(name)) continue;
    const record = platformLocationRecord(name);
    if (record !== undefined) maps.location.set(name, record);
  }
}

export function buildCatalog(records: readonly SourcedRecord[]): { catalog: Catalog; duplicates: Duplicate[] } {
  // The first record of each key, per kind (no `kind:key` string made and hashed per record).
  const seen: Record<ReadKind, Map<string, SourcedRecord>> = {
    org: new Map(), location: new Map(), gvc: new Map(), workload: new Map(), domain: new Map(), deployment: new Map(),
  };
  const maps: Record<ReadKind, Map<string, RawRecord>> = {
    org: new Map(), location: new Map(), gvc: new Map(), workload: new Map(), domain: new Map(), deployment: new Map(),
  };
  const duplicates: Duplicate[] = [];
  for (const sourced of records) {
    const kind = sourced.record.kind;
    if (!isReadKind(kind)) continue;
    const key = recordKey(kind, sourced.record);
    if (key === undefined) continue;
    const first = seen[kind].get(key);
    if (first) {
      duplicates.push({ record: sourced, first });
      continue;
    }
    seen[kind].set(key, sourced);
    maps[kind].set(key, sourced.record);
  }
  addLinkedPlatformLocations(maps);
  const placed = new Map<string, readonly string[]>();
  for (const [name, gvc] of maps.gvc) placed.set(name, gvcLocations(gvc, maps.location));
  const org = maps.org.get('org');
  const catalog: Catalog = {
    ...(org ? { org } : {}),
    locations: maps.location,
    gvcs: maps.gvc,
    workloads: maps.workload,
    domains: maps.domain,
    deployments: maps.deployment,
    gvcLocations: placed,
  };
  return { catalog, duplicates };
}
