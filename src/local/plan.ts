/**
 * What `svcproxy up` should be running for a snapshot, as a pure function: for every workload and
 * every location of its GVC, the scaler's count (else `minScale`) of replicas named `W-N` (N from 0 per location) made of the
 * workload's containers that have a `command`. None where the workload is suspended (globally or
 * in that location) or `maxScale` is 0, and none for a workload `up` cannot run (not-run.ts: no
 * container with a command, or a cron workload) or tagged `svc/ignore: true`.
 * Each plan carries a fingerprint of everything its processes are started from, so a reload
 * restarts exactly the replicas whose definition changed. It does not fail: a GVC or location the
 * snapshot lacks (which `compile()` would have rejected) yields no replicas, or empty values.
 */
import type { ContainerModel, LocationModel, Snapshot, WorkloadModel } from '../config/model.js';
import { isIgnored } from '../config/compile-workload.js';
import { workloadGvc, type RawRecord } from '../config/records.js';
import { keyedAfter } from '../config/runs.js';
import { workloadVersion } from './env.js';
import { notRunReason, runnableContainers } from './not-run.js';
import { DEFAULT_ORG } from '../mesh/index.js';

export interface ReplicaPlan {
  /** `gvc/name|location|N`: identity across reloads. */
  readonly key: string;
  readonly workload: WorkloadModel;
  readonly location: LocationModel;
  readonly index: number;
  /** `W-N`. */
  readonly name: string;
  readonly gvcAlias: string;
  readonly org: string;
  readonly vendor: string;
  /** The containers that have a `command`, in declaration order. */
  readonly containers: readonly ContainerModel[];
  readonly workloadVersion: number;
  /** Changes when anything the processes are started from changes (not the version, not scale). */
  readonly fingerprint: string;
}

/**
 * Replicas to run in one location: `desired` when the scaler has decided (src/local/scaler.ts),
 * else `minScale` (0 for scale-to-zero: nothing runs before the first request), always within
 * `maxScale`, and none while suspended or with `maxScale` 0.
 */
export function replicaCount(options: { readonly suspend: boolean; readonly minScale: number; readonly maxScale: number }, desired?: number): number {
  if (options.suspend || options.maxScale <= 0) return 0;
  const wanted = desired ?? options.minScale;
  const n = Number.isFinite(wanted) ? Math.max(0, Math.floor(wanted)) : 1;
  return Math.min(n, Math.max(1, Math.floor(options.maxScale)));
}

/** The scaler's count for a workload (key) in a location; undefined: `minScale`. */
export type DesiredReplicas = (workload: string, location: string) => number | undefined;

/** The first workload record of each `gvc/name` of a snapshot's records, made once per records. */
const workloadRecords = new WeakMap<Snapshot['records'], ReadonlyMap<string, RawRecord>>();
/** The index made last, with its records: the next one is made from it when a write changed a few. */
let lastIndex: { readonly records: Snapshot['records']; readonly index: ReadonlyMap<string, RawRecord>; readonly duplicates: boolean } | undefined;

/** Past this many records replaced, the index is made again in full. */
const FEW = 64;

/** `gvc/name` of a workload record; undefined for any other record. */
function workloadKeyOf(r: RawRecord): string | undefined {
  if (r.kind !== 'workload' || typeof r.name !== 'string') return undefined;
  const gvc = workloadGvc(r);
  return typeof gvc === 'string' ? `${gvc}/${r.name}` : undefined;
}

function fullWorkloadIndex(records: Snapshot['records']): { index: Map<string, RawRecord>; duplicates: boolean } {
  const index = new Map<string, RawRecord>();
  let duplicates = false;
  for (const r of records) {
    const key = workloadKeyOf(r);
    if (key === undefined) continue;
    if (!index.has(key)) index.set(key, r);
    else duplicates = true;
  }
  return { index, duplicates };
}

/**
 * The index of `records` from the last one made, when they replaced a few of its records (a write)
 * and no key has several: config/runs.ts `keyedAfter`, not every record keyed again.
 */
function changedWorkloadIndex(records: Snapshot['records']): ReadonlyMap<string, RawRecord> | undefined {
  const before = lastIndex;
  if (before === undefined || before.duplicates) return undefined;
  return keyedAfter(before.index, before.records, records, workloadKeyOf, FEW);
}

/** The workload records of `records` by `gvc/name` (the first of each). */
function workloadIndex(records: Snapshot['records']): ReadonlyMap<string, RawRecord> {
  const known = workloadRecords.get(records);
  if (known !== undefined) return known;
  let index = changedWorkloadIndex(records);
  let duplicates = false;
  if (index === undefined) ({ index, duplicates } = fullWorkloadIndex(records));
  workloadRecords.set(records, index);
  lastIndex = { records, index, duplicates };
  return index;
}

/**
 * The workload's record among the snapshot's raw records (for its version), if there is one: the
 * first of its GVC and name. Looked up in an index made once per snapshot, as the health rows ask
 * for every workload on every readiness change (a scan each would cost workloads × records), and
 * made from the last one when a write replaced a few records (a scan of 20,000 records per write
 * otherwise).
 */
export function findWorkloadRecord(records: Snapshot['records'], workload: WorkloadModel): unknown {
  return workloadIndex(records).get(`${workload.gvc}/${workload.name}`);
}

/** `<VENDOR>_WORKLOAD_VERSION` of the configured workload. */
export function versionOf(snapshot: Snapshot, workload: WorkloadModel): number {
  const record = findWorkloadRecord(snapshot.records, workload);
  if (record !== undefined) return workloadVersion(record);
  // No raw record to hash (hand-built snapshots): the compiled definition stands in for it.
  return workloadVersion({ key: workload.key, type: workload.type, tags: workload.tags, containers: workload.containers });
}

/**
 * Whether `up` runs processes for the workload at all: not suspended, not ignored, and something it
 * can run (not-run.ts: a container with a command, not a cron workload).
 */
export function upRuns(workload: WorkloadModel, vendor: string): boolean {
  return !workload.globallySuspended && !isIgnored(workload, vendor) && notRunReason(workload) === undefined;
}

/**
 * How many replicas of `workload` `up` runs in `location` (what `planReplicas` plans there): none
 * where it does not run the workload or its GVC is not placed.
 */
export function plannedCount(snapshot: Snapshot, workload: WorkloadModel, location: string, desired?: DesiredReplicas): number {
  const gvc = snapshot.gvcs.get(workload.gvc);
  if (gvc === undefined || !gvc.locations.includes(location) || !upRuns(workload, snapshot.settings.vendor)) return 0;
  return replicaCount(workload.locationOptions.get(location) ?? workload.defaultOptions, desired?.(workload.key, location));
}

export function planReplicas(snapshot: Snapshot, desired?: DesiredReplicas): ReplicaPlan[] {
  const plans: ReplicaPlan[] = [];
  // The org of the replicas' SVC_ORG and of their mesh identities alike (the data plane's `org`).
  const org = snapshot.org?.name ?? DEFAULT_ORG;
  for (const workload of snapshot.workloads.values()) {
    const gvc = snapshot.gvcs.get(workload.gvc);
    if (gvc === undefined || !upRuns(workload, snapshot.settings.vendor)) continue;
    const containers = runnableContainers(workload);
    const version = versionOf(snapshot, workload);
    for (const locationName of gvc.locations) {
      const count = plannedCount(snapshot, workload, locationName, desired);
      if (count === 0) continue;
      const location = snapshot.locations.get(locationName) ?? { name: locationName, provider: '', region: '' };
      const fingerprint = JSON.stringify({
        containers,
        alias: gvc.alias,
        canonicalHost: workload.canonicalHost,
        org,
        vendor: snapshot.settings.vendor,
        provider: location.provider,
      });
      for (let index = 0; index < count; index++) {
        plans.push({
          key: `${workload.key}|${locationName}|${index}`,
          workload,
          location,
          index,
          name: `${workload.name}-${index}`,
          gvcAlias: gvc.alias,
          org,
          vendor: snapshot.settings.vendor,
          containers,
          workloadVersion: version,
          fingerprint,
        });
      }
    }
  }
  return plans;
}
