/**
 * The replicas `svcproxy explain` can name for a workload without probing anything: the compiled
 * `deployment` records (snapshot.deployments; an entry whose address is a DNS name is one name here,
 * never looked up: the router turns it into one replica per address it answers) and, for a workload
 * `svcproxy up` runs processes for, the `W-0..W-(n-1)` that src/local/plan.ts plans in each location.
 * Readiness is never known here (nothing is probed); an entry forced not ready (`ready: false`) says so.
 */
import type { Snapshot, WorkloadModel } from '../config/model.js';
import { discoveredNameOf } from '../discovery/names.js';
import { planReplicas } from '../local/plan.js';

export interface KnownReplica {
  readonly location: string;
  readonly name: string;
  readonly index: number;
  /** `deployment`: a record's entry; `dns`: a record's entry named by DNS; `up`: a process `up` starts. */
  readonly source: 'deployment' | 'dns' | 'up';
  /** The app, `host:port` (deployment records only). */
  readonly address?: string;
  /** The replica's own sidecar: its filters run there, not in the router. */
  readonly sidecar?: string;
  readonly mesh?: string;
  /** `ready: false` in the record: never routed to (unless the workload publishes not-ready addresses). */
  readonly forcedNotReady: boolean;
}

export function knownReplicas(snapshot: Snapshot, workload: WorkloadModel): KnownReplica[] {
  const out: KnownReplica[] = [];
  for (const d of snapshot.deployments.get(workload.key) ?? []) {
    out.push({
      location: d.location,
      name: d.name,
      index: d.index,
      source: discoveredNameOf(d).name === undefined ? 'deployment' : 'dns',
      address: d.address,
      ...(d.sidecar !== undefined ? { sidecar: d.sidecar } : {}),
      ...(d.mesh !== undefined ? { mesh: d.mesh } : {}),
      forcedNotReady: d.forcedNotReady,
    });
  }
  for (const plan of planReplicas(snapshot)) {
    if (plan.workload.key !== workload.key) continue;
    out.push({ location: plan.location.name, name: plan.name, index: plan.index, source: 'up', forcedNotReady: false });
  }
  return out;
}

/**
 * The replica table as geo routing asks it (`hasReady`), from what the config lists: a location
 * counts when it lists a replica not forced not ready (any replica, with `includeNotReady`).
 */
export function listedReplicas(list: readonly KnownReplica[], includeNotReady: boolean): { hasReady(workload: string, location: string): boolean } {
  return { hasReady: (_workload, location) => list.some((r) => r.location === location && (includeNotReady || !r.forcedNotReady)) };
}
