/**
 * A workload's deployments under `up` (DESIGN §13): one per location of its GVC, what the platform's
 * read-only `deployment` records say and what `cpln workload get` (its READY column) and `cpln apply
 * --ready` read (the CLI's `getWorkloadHealth`): whether the location serves (`ready`: its health is
 * `Healthy`, src/local/health.ts), the record `version` the replicas were started from, and per
 * version whether its replicas are ready. Replicas run `<VENDOR>_WORKLOAD_VERSION`, a hash of what
 * they are started from (env.ts); `VersionBook` remembers which record `version` each hash stood for
 * (the latest, as scaling changes bump the record but not the hash). The current version is ready
 * when as many of its replicas are ready as the location wants (none wanted, scaled to zero: ready);
 * replicas `up` does not run (`deployment` records) are ready when one is. A workload `up` runs no
 * process for (no container has a `command`) is never ready, and says why (not-run.ts). Pure apart from the
 * book's memory; never throws.
 */
import type { Snapshot, WorkloadModel } from '../config/model.js';
import type { ReplicaRegistry } from '../routing/replicas.js';
import { workloadVersion } from './env.js';
import { changedWorkloads } from '../config/changed.js';
import type { Health } from './health.js';
import { findWorkloadRecord, replicaCount, upRuns, versionOf, type DesiredReplicas } from './plan.js';
import type { UpReplicaState } from './supervisor.js';
import { workloadStatuses } from './workloads.js';
import { notRunReason } from './not-run.js';

/** Hashes remembered per workload (older ones are forgotten: their replicas are long replaced). */
const BOOK_DEPTH = 16;

/** Which record `version` each `<VENDOR>_WORKLOAD_VERSION` stood for, per workload key. */
export class VersionBook {
  private readonly byWorkload = new Map<string, Map<number, number>>();

  private last: Snapshot | undefined;

  /**
   * Notes the versions of `snapshot`'s workloads (call at start and at every change): after the
   * first, of the workloads it changed (a record's new version is a new record, so a new model).
   */
  observe(snapshot: Snapshot): void {
    const keys = this.last === undefined ? snapshot.workloads.keys() : changedWorkloads(this.last, snapshot);
    this.last = snapshot;
    for (const key of keys) {
      const workload = snapshot.workloads.get(key);
      if (workload === undefined) continue;
      const record = findWorkloadRecord(snapshot.records, workload) as { version?: unknown } | undefined;
      if (record === undefined || !Number.isSafeInteger(record.version)) continue;
      let book = this.byWorkload.get(workload.key);
      if (!book) this.byWorkload.set(workload.key, (book = new Map()));
      const hash = workloadVersion(record);
      book.delete(hash);
      book.set(hash, record.version as number);
      if (book.size > BOOK_DEPTH) book.delete(book.keys().next().value!);
    }
  }

  recordVersion(workload: string, hash: number): number | undefined {
    return this.byWorkload.get(workload)?.get(hash);
  }
}

export interface VersionStatus {
  /** The record `version`. */
  readonly workload: number;
  readonly ready: boolean;
  readonly replicas: number;
  readonly readyReplicas: number;
  readonly containers: Readonly<Record<string, { readonly ready: boolean; readonly restarts: number }>>;
}

export interface DeploymentStatus {
  readonly location: string;
  readonly health: Health;
  /** The location serves requests (`Healthy`). */
  readonly ready: boolean;
  /** The record version in force. */
  readonly version: number;
  readonly currentReady: boolean;
  /** Replicas wanted there (undefined: `up` starts none). */
  readonly wanted: number | undefined;
  readonly replicas: number;
  readonly readyReplicas: number;
  /** Older versions still running, or the current one not ready yet. */
  readonly deploying: boolean;
  readonly versions: readonly VersionStatus[];
  readonly message: string;
}

export interface DeploymentInput {
  readonly snapshot: Snapshot;
  readonly registry: ReplicaRegistry;
  /** The supervisor's replicas (undefined: nothing runs under `up`). */
  readonly up: readonly UpReplicaState[] | undefined;
  readonly desired?: DesiredReplicas;
  readonly book: VersionBook;
  readonly nowMs: number;
}

function recordVersionOf(snapshot: Snapshot, workload: WorkloadModel): number {
  const v = (findWorkloadRecord(snapshot.records, workload) as { version?: unknown } | undefined)?.version;
  return Number.isSafeInteger(v) ? (v as number) : 1;
}

/** One status per location of the workload's GVC (none for an unknown workload). */
export function deploymentStatuses(input: DeploymentInput, key: string): DeploymentStatus[] {
  const { snapshot } = input;
  const workload = snapshot.workloads.get(key);
  if (workload === undefined) return [];
  const version = recordVersionOf(snapshot, workload);
  const runs = upRuns(workload, snapshot.settings.vendor);
  const hashNow = versionOf(snapshot, workload);
  const rows = workloadStatuses(snapshot, input.registry, input.up, input.nowMs, key);
  const out: DeploymentStatus[] = [];
  for (const row of rows) {
    if (snapshot.workloads.get(`${row.gvc}/${row.workload}`) !== workload) continue;
    const location = row.location;
    const options = workload.locationOptions.get(location) ?? workload.defaultOptions;
    const wanted = runs ? replicaCount(options, input.desired?.(key, location)) : undefined;
    let versions: VersionStatus[];
    if (input.up !== undefined && runs) {
      const groups = new Map<number, UpReplicaState[]>([[hashNow, []]]);
      for (const s of input.up) {
        if (s.stopping || s.replica.workload !== key || s.replica.location !== location) continue;
        const list = groups.get(s.workloadVersion) ?? [];
        list.push(s);
        groups.set(s.workloadVersion, list);
      }
      versions = [...groups].map(([hash, states]) => {
        const readyReplicas = states.filter((s) => s.replica.ready).length;
        const containers: Record<string, { ready: boolean; restarts: number }> = {};
        for (const s of states) {
          for (const c of s.containers) {
            const seen = containers[c.name];
            containers[c.name] = { ready: (seen?.ready ?? true) && c.ready, restarts: (seen?.restarts ?? 0) + c.restarts };
          }
        }
        const current = hash === hashNow;
        return {
          workload: current ? version : input.book.recordVersion(key, hash) ?? 0,
          ready: current ? readyReplicas >= (wanted ?? 0) : states.length > 0 && readyReplicas === states.length,
          replicas: states.length,
          readyReplicas,
          containers,
        };
      });
    } else {
      // Replicas svcproxy does not run (a deployment record), or none at all.
      const replicas = input.registry.list(key, location);
      const readyReplicas = replicas.filter((r) => r.ready).length;
      versions = [{ workload: version, ready: readyReplicas > 0, replicas: replicas.length, readyReplicas, containers: {} }];
    }
    const current = versions.find((v) => v.workload === version)!;
    const ready = row.health === 'Healthy';
    const external = !runs && row.replicas > 0;
    // Why nothing answers (not-run.ts, as the 503 and `/workloads` say it), unless replicas up does
    // not run answer for it.
    const reason = external ? undefined : notRunReason(workload);
    const message = reason ?? `${row.health}: ${row.ready}/${wanted ?? row.replicas} replicas ready`;
    out.push({
      location,
      health: row.health,
      ready,
      version,
      currentReady: current.ready,
      wanted,
      replicas: row.replicas,
      readyReplicas: row.ready,
      deploying: versions.length > 1 || !current.ready,
      versions,
      message,
    });
  }
  return out;
}

/**
 * The workload's readiness over its deployments, as the platform's CLI computes it: `ready` when a
 * location serves; `readyLatest` when every location counted serves the current version (a location
 * its `localOptions` suspend or scale to nothing is not counted).
 */
export function workloadReadiness(workload: WorkloadModel, statuses: readonly DeploymentStatus[]): { ready: boolean; readyLatest: boolean } {
  let ready = 0;
  let latest = 0;
  let counted = statuses.length;
  for (const s of statuses) {
    if (!s.ready) continue;
    ready++;
    if (s.currentReady) latest++;
  }
  for (const [, options] of workload.locationOptions) {
    if (options.suspend || (options.minScale === 0 && options.maxScale === 0)) counted--;
  }
  return { ready: ready > 0, readyLatest: ready > 0 && latest >= counted };
}
