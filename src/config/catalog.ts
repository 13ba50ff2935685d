/**
 * The record index that validation and compilation share: records of the kinds svcproxy reads, keyed
 * the way links name them (locations and GVCs by name, workloads and deployments by `gvc/name`,
 * domains by lower-cased host), plus each GVC's locations. Built in one pass that also finds
 * duplicates; the first record of a key wins in the index and later ones are returned as
 * duplicates for validation to report. Records without a usable kind or name are left out (the
 * validator reports those). Never throws.
 */
import { gvcLocations } from './placement.js';
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
