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
import { replacedRun } from './runs.js';
import { LayeredMap } from '../layered-map.js';

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

/**
 * What `catalogAfter` changed of the index `from` (held weakly: indexes made one from another do not
 * keep each other): the workload and deployment keys deleted, then those put, in the order it did
 * (a `Map` filled alike has the index's order); every other member of the index is `from`'s own
 * object. compile.ts compiles only those again.
 */
export interface CatalogChange {
  readonly from: WeakRef<Catalog>;
  readonly workloads: { readonly deleted: readonly string[]; readonly put: readonly string[] };
  readonly deployments: { readonly deleted: readonly string[]; readonly put: readonly string[] };
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

function names(list: unknown, of: (item: unknown) => string | undefined): string[] {
  return (Array.isArray(list) ? list : []).map(of).filter((n): n is string => n !== undefined);
}

/** The location names a workload (its local options) or a deployment (its replicas' locations) links. */
function replicaLocations(kind: 'workload' | 'deployment', record: RawRecord): string[] {
  return kind === 'workload'
    ? names(objectAt(record, 'spec').localOptions, (o) => locationName(valueAt(o, 'location')))
    : names(objectAt(record, 'status').locations, (l) => locationName(valueAt(l, 'name')));
}

/** Every location name a GVC, workload or deployment links (placement, location options, local options, replicas' locations). */
function* linkedLocations(maps: Readonly<Record<ReadKind, Map<string, RawRecord>>>): Generator<string> {
  for (const gvc of maps.gvc.values()) {
    const placement = objectAt(gvc, 'spec', 'staticPlacement');
    yield* names(placement.locationLinks, (l) => linkOfKind(l, 'location')?.name);
    yield* names(placement.locationOptions, (o) => linkOfKind(valueAt(o, 'locationLink'), 'location')?.name);
  }
  for (const w of maps.workload.values()) yield* replicaLocations('workload', w);
  for (const d of maps.deployment.values()) yield* replicaLocations('deployment', d);
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

/** An index with the records it was built of (what `catalogAfter` changes). */
export interface BuiltCatalog {
  readonly records: readonly SourcedRecord[];
  readonly catalog: Catalog;
  readonly duplicates: readonly Duplicate[];
}

/** Changes beyond this many records are indexed again in full. */
const FEW = 64;

/** What `catalogAfter` changed to make each index it made from another. */
const changes = new WeakMap<Catalog, CatalogChange>();

/** How `catalog` was made from another index, when `catalogAfter` made it so. */
export function catalogChange(catalog: Catalog): CatalogChange | undefined {
  return changes.get(catalog);
}

/**
 * The index of `records`, made from `before` (the index of the records before a change) when the
 * change is a few workloads and deployments (and records of kinds the index leaves out) replaced,
 * removed, or added after the others: their entries replaced, deleted or added (in the order a full
 * build makes), everything else the same objects. Built in full when anything else changed, when
 * there are duplicates, or when a changed record links a location no location record defines (the
 * platform's locations the index adds depend on every record's links). Equal to
 * `buildCatalog(records)` (test/config/incremental-validate.test.ts).
 */
export function catalogAfter(before: BuiltCatalog | undefined, records: readonly SourcedRecord[]): BuiltCatalog {
  const built = before === undefined ? undefined : changedCatalog(before, records);
  return built ?? { records, ...buildCatalog(records) };
}

function changedCatalog(before: BuiltCatalog, records: readonly SourcedRecord[]): BuiltCatalog | undefined {
  if (before.duplicates.length > 0) return undefined;
  const { removed, added, tail } = replacedRun(before.records, records);
  if (removed.length + added.length > FEW) return undefined;
  if (removed.length + added.length === 0) return { ...before, records };
  const { catalog } = before;
  const maps = { workload: catalog.workloads, deployment: catalog.deployments };
  const out: Record<'workload' | 'deployment', ReadonlyMap<string, RawRecord>> = { workload: new Map(), deployment: new Map() };
  const gone = { workload: new Map<string, RawRecord>(), deployment: new Map<string, RawRecord>() };
  const keyed = (s: SourcedRecord): { kind: 'workload' | 'deployment'; key: string } | null | undefined => {
    const kind = s.record.kind;
    if (!isReadKind(kind)) return null;
    if (kind !== 'workload' && kind !== 'deployment') return undefined;
    const key = recordKey(kind, s.record);
    if (key === undefined) return null;
    // A location only the platform defines: the index's locations may change.
    for (const name of replicaLocations(kind, s.record)) if (catalog.locations.get(name) === platformLocationRecord(name)) return undefined;
    return { kind, key };
  };
  for (const s of removed) {
    const k = keyed(s);
    if (k === undefined) return undefined;
    if (k === null) continue;
    if (maps[k.kind].get(k.key) !== s.record || gone[k.kind].has(k.key)) return undefined;
    gone[k.kind].set(k.key, s.record);
  }
  const put = { workload: new Map<string, RawRecord>(), deployment: new Map<string, RawRecord>() };
  // A full build orders the keys as the records come: a replaced key keeps its place only while the
  // replaced keys come in the order they came, and a new key goes after the others, so only where
  // the change is at the end of the records and after the replaced ones.
  const order = { workload: [...gone.workload.keys()], deployment: [...gone.deployment.keys()] };
  const replaced = { workload: 0, deployment: 0 };
  const grown = { workload: false, deployment: false };
  for (const s of added) {
    const k = keyed(s);
    if (k === undefined) return undefined;
    if (k === null) continue;
    if (put[k.kind].has(k.key)) return undefined;
    if (gone[k.kind].has(k.key)) {
      if (grown[k.kind] || order[k.kind][replaced[k.kind]++] !== k.key) return undefined;
    } else {
      if (maps[k.kind].has(k.key) || tail > 0) return undefined;
      grown[k.kind] = true;
    }
    put[k.kind].set(k.key, s.record);
  }
  const done = { workload: { deleted: [] as string[], put: [] as string[] }, deployment: { deleted: [] as string[], put: [] as string[] } };
  for (const kind of ['workload', 'deployment'] as const) {
    if (gone[kind].size === 0 && put[kind].size === 0) {
      out[kind] = maps[kind];
      continue;
    }
    // Layered over the map before (layered-map.ts: a `Map`'s order), not a copy of 10,000.
    const next = LayeredMap.next(maps[kind]);
    for (const key of gone[kind].keys()) {
      if (put[kind].has(key)) continue;
      next.delete(key);
      done[kind].deleted.push(key);
    }
    for (const [key, record] of put[kind]) {
      next.set(key, record);
      done[kind].put.push(key);
    }
    out[kind] = next;
  }
  const next: Catalog = { ...catalog, workloads: out.workload, deployments: out.deployment };
  changes.set(next, { from: new WeakRef(catalog), workloads: done.workload, deployments: done.deployment });
  return { records, duplicates: [], catalog: next };
}
