/**
 * The admin `/workloads` rows and the `svcproxy_workload_health` gauge (DESIGN §10): for every
 * workload of the snapshot (but ignored ones) and every location of its GVC, plus the removed ones
 * whose replicas are still stopping, its health (src/local/health.ts), ready and total replicas, and
 * version; under `up`, `notRun` says why nothing answers for a workload it cannot run (not-run.ts). Replicas come from the registry (`deployment` ones too); `up` adds what its supervisor
 * knows of the replicas it runs (start time, restarts, stopping). Under `up` the version is
 * `<VENDOR>_WORKLOAD_VERSION` of the newest running replica (the configured one when none runs);
 * other roles report the record's `version` member, or null. `HealthWatch` turns changes into
 * callbacks for `up`'s printed lines: it re-evaluates on every readiness or replica-list change and
 * once a second (the loading deadline and crash restarts pass without an event), that pass a slice
 * of the workloads per turn of the event loop. Nothing here throws.
 */
import type { Snapshot, WorkloadModel } from '../config/model.js';
import { isIgnored } from '../config/compile-workload.js';
import type { Clock, Timer } from '../deps.js';
import type { Replica, ReplicaRegistry } from '../routing/replicas.js';
import { HEALTH_VALUES, loadingDeadlineMs, workloadHealth, type Health, type ReplicaFacts } from './health.js';
import { notRunNotes, notRunReason } from './not-run.js';
import { findWorkloadRecord, plannedCount, versionOf } from './plan.js';
import type { UpReplicaState } from './supervisor.js';

export interface WorkloadStatus {
  readonly workload: string;
  readonly gvc: string;
  readonly location: string;
  readonly health: Health;
  /** Ready replicas (not stopping). */
  readonly ready: number;
  /** Replicas there (not stopping). */
  readonly replicas: number;
  readonly version: number | null;
  /**
   * Under `up`: why it runs no replica of the workload (not-run.ts: an image without a command, a
   * cron workload), when none runs elsewhere either; the health is then `Unknown`.
   */
  readonly notRun?: string;
}

/** The record's own `version` member (the platform's bookkeeping), when it is a number. */
function recordVersion(snapshot: Snapshot, workload: WorkloadModel): number | null {
  const record = findWorkloadRecord(snapshot.records, workload) as { version?: unknown } | undefined;
  return typeof record?.version === 'number' ? record.version : null;
}

interface Planned {
  /** Replicas `up` runs of the workload in the location. */
  count(workload: WorkloadModel, location: string): number;
  /** `<VENDOR>_WORKLOAD_VERSION` of the configured workload. */
  version(workload: WorkloadModel): number;
}

/**
 * Per snapshot, made once and filled as rows ask (a change reads the rows of the workloads it
 * changed: planning all 10,000 for one took tens of ms); as planned by plan.ts.
 */
const plannedBySnapshot = new WeakMap<Snapshot, Planned>();

function plannedOf(snapshot: Snapshot): Planned {
  let planned = plannedBySnapshot.get(snapshot);
  if (planned) return planned;
  const versions = new Map<string, number>();
  planned = {
    count: (workload, location) => plannedCount(snapshot, workload, location),
    version: (workload) => {
      let v = versions.get(workload.key);
      if (v === undefined) versions.set(workload.key, (v = versionOf(snapshot, workload)));
      return v;
    },
  };
  plannedBySnapshot.set(snapshot, planned);
  return planned;
}

function pairKey(workload: string, location: string): string {
  return `${workload}\u0000${location}`;
}

/**
 * Every row, in snapshot order then removed workloads. `up`: the supervisor's replica states
 * (undefined for other roles, whose workloads nothing starts). `only`: the rows of that workload
 * (key), or of those workloads, alone.
 */
export function workloadStatuses(snapshot: Snapshot, registry: ReplicaRegistry, up: readonly UpReplicaState[] | undefined, nowMs: number, only?: string | readonly string[]): WorkloadStatus[] {
  const upOf = new Map<Replica, UpReplicaState>();
  const stoppingAt = new Map<string, UpReplicaState[]>();
  for (const s of up ?? []) {
    upOf.set(s.replica, s);
    if (!s.stopping) continue;
    const key = pairKey(s.replica.workload, s.replica.location);
    stoppingAt.set(key, [...(stoppingAt.get(key) ?? []), s]);
  }
  const wanted = up === undefined ? undefined : plannedOf(snapshot);
  const vendor = snapshot.settings.vendor;
  const rows: WorkloadStatus[] = [];
  const seen = new Set<string>();

  const row = (key: string, location: string, workload: WorkloadModel | undefined): void => {
    const pair = pairKey(key, location);
    seen.add(pair);
    const facts: ReplicaFacts[] = [];
    let ready = 0;
    let newest: UpReplicaState | undefined;
    for (const r of registry.list(key, location)) {
      const s = upOf.get(r);
      if (s?.stopping) continue; // counted below, once
      if (r.ready) ready++;
      if (s) {
        if (newest === undefined || s.startedAtMs >= newest.startedAtMs) newest = s;
        facts.push({ ready: r.ready, stopping: false, wasReady: s.wasReady, restarts: s.restarts, startedAtMs: s.startedAtMs, checked: true });
      } else {
        facts.push({ ready: r.ready, stopping: false, wasReady: r.ready, restarts: 0, checked: r.ready || !registry.awaitsFirstCheck(r) });
      }
    }
    const live = facts.length;
    for (const s of stoppingAt.get(pair) ?? []) {
      facts.push({ ready: false, stopping: true, wasReady: s.wasReady, restarts: s.restarts, startedAtMs: s.startedAtMs, checked: true });
    }
    const options = workload?.locationOptions.get(location) ?? workload?.defaultOptions;
    const runnable = workload !== undefined && notRunReason(workload) === undefined;
    const suspended = workload !== undefined && (workload.globallySuspended || options?.suspend === true);
    const health = workloadHealth({
      configured: workload !== undefined,
      suspended,
      wanted: wanted !== undefined && runnable ? wanted.count(workload, location) : undefined,
      replicas: facts,
      nowMs,
      loadingDeadlineMs: loadingDeadlineMs(workload?.containers[0]?.readinessProbe),
    });
    let version: number | null = newest?.workloadVersion ?? null;
    if (version === null && workload !== undefined) version = wanted !== undefined && runnable ? wanted.version(workload) : recordVersion(snapshot, workload);
    const [gvc, name] = splitKey(key);
    // Why nothing answers, under `up`, when it runs none of the workload and nothing else lists a replica.
    const notRun = up !== undefined && !suspended && live === 0 ? notRunNotes(snapshot).get(key)?.reason : undefined;
    rows.push({ workload: name, gvc, location, health, ready, replicas: live, version, ...(notRun === undefined ? {} : { notRun }) });
  };

  const keys = typeof only === 'string' ? [only] : only;
  const chosen = keys === undefined ? undefined : new Set(keys);
  const workloads = keys === undefined ? snapshot.workloads.values() : keys.map((k) => snapshot.workloads.get(k)).filter((w) => w !== undefined);
  for (const workload of workloads) {
    if (isIgnored(workload, vendor)) continue;
    const gvc = snapshot.gvcs.get(workload.gvc);
    for (const location of gvc?.locations ?? []) row(workload.key, location, workload);
  }
  // Removed workloads (or locations) whose replicas are still stopping: `Deleting` until they are gone.
  for (const s of up ?? []) {
    if (chosen !== undefined && !chosen.has(s.replica.workload)) continue;
    const pair = pairKey(s.replica.workload, s.replica.location);
    if (!seen.has(pair)) row(s.replica.workload, s.replica.location, undefined);
  }
  return rows;
}

function splitKey(key: string): [gvc: string, name: string] {
  const slash = key.indexOf('/');
  return slash < 0 ? ['', key] : [key.slice(0, slash), key.slice(slash + 1)];
}

/** The gauge's samples: every row with each of the five values, 1 for its health and 0 for the others (as kube-state-metrics does). */
export function* healthSamples(rows: Iterable<WorkloadStatus>): Generator<[labels: [string, string, string, string], value: number]> {
  for (const r of rows) for (const h of HEALTH_VALUES) yield [[r.workload, r.gvc, r.location, h], h === r.health ? 1 : 0];
}

export interface HealthChange {
  readonly status: WorkloadStatus;
  /** Undefined: the row is new (a workload or location added by a reload). */
  readonly from: Health | undefined;
}

/** Workloads whose rows the timer's pass reads in one turn (500 took 12-60 ms of a quiet machine: a request waited behind it). */
const SWEEP_SLICE = 100;

/**
 * Re-evaluates the rows when replicas change and every `intervalMs`, and reports each changed health.
 * A replica's readiness changing re-evaluates its workload's rows alone (`rows(key)`): with thousands
 * of workloads coming up at once, every row at every readiness change would cost workloads² rows. A
 * change of the replica lists (replicas started or stopped, a reload that changes them) and the timer
 * re-evaluate all; a new configuration that leaves them alone, the rows of the workloads it changed.
 * The timer's pass reads the rows of the workloads it knows (its last rows') `SWEEP_SLICE` at a time,
 * a turn of the event loop each, so requests are served between them.
 */
export class HealthWatch {
  private readonly last = new Map<string, Health>();
  private timer: Timer | undefined;
  private stopped = false;
  private queued = false;
  /** What the queued check covers: every row, or the rows of these workloads (keys). */
  private pendingAll = false;
  private readonly pending = new Set<string>();
  /**
   * Coalesced to the end of the current job: the supervisor takes a replica out of rotation (an event)
   * before it lists it as stopping, and a reload changes many replicas at once.
   */
  private queue(workload: string | undefined): void {
    if (workload === undefined) this.pendingAll = true;
    else this.pending.add(workload);
    if (this.queued) return;
    this.queued = true;
    queueMicrotask(() => {
      this.queued = false;
      const all = this.pendingAll;
      const some = [...this.pending];
      this.pendingAll = false;
      this.pending.clear();
      if (all) this.check();
      else for (const workload of some) this.checkWorkload(workload);
    });
  }

  private readonly onReady = (replica: Replica): void => this.queue(replica.workload);
  private readonly onChangeOfReplicas = (): void => this.queue(undefined);

  constructor(
    /** Every row; with `only`, the rows of that workload (key), or of those, alone. */
    private readonly rows: (only?: string | readonly string[]) => readonly WorkloadStatus[],
    private readonly registry: ReplicaRegistry,
    private readonly clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
    private readonly onChange: (change: HealthChange) => void,
    private readonly intervalMs = 1000,
  ) {
    // The current values are the baseline: only later changes are reported.
    for (const r of rows()) this.last.set(rowKey(r), r.health);
    registry.on('ready', this.onReady);
    registry.on('change', this.onChangeOfReplicas);
    this.schedule();
  }

  /**
   * A new configuration changed these workloads (keys): their rows are evaluated again (the others'
   * did not move); all rows in one pass when it changed most (a reload of the files changes all).
   */
  reconfigured(workloads: readonly string[]): void {
    if (workloads.length * 2 > this.last.size) this.queue(undefined);
    else for (const workload of workloads) this.queue(workload);
  }

  check(): void {
    if (this.stopped) return;
    const now = new Set<string>();
    for (const status of this.rows()) now.add(this.compare(status));
    for (const key of this.last.keys()) if (!now.has(key)) this.last.delete(key);
  }

  /**
   * The timer's pass: the rows of every workload of the last rows, a slice per turn; a row no longer
   * there is forgotten. The next pass is scheduled when this one is done.
   */
  private sweep(): void {
    const byWorkload = new Map<string, string[]>();
    for (const key of this.last.keys()) {
      const workload = key.slice(0, key.indexOf('\u0000'));
      const rows = byWorkload.get(workload);
      if (rows === undefined) byWorkload.set(workload, [key]);
      else rows.push(key);
    }
    const workloads = [...byWorkload.keys()];
    const step = (from: number): void => {
      if (this.stopped) return;
      const slice = workloads.slice(from, from + SWEEP_SLICE);
      const seen = new Set<string>();
      for (const status of this.rows(slice)) seen.add(this.compare(status));
      for (const workload of slice) for (const key of byWorkload.get(workload) ?? []) if (!seen.has(key)) this.last.delete(key);
      if (from + SWEEP_SLICE < workloads.length) setImmediate(() => step(from + SWEEP_SLICE));
      else this.schedule();
    };
    step(0);
  }

  /** The rows of one workload (its replica lists unchanged: none comes or goes). */
  private checkWorkload(workload: string): void {
    if (this.stopped) return;
    for (const status of this.rows(workload)) this.compare(status);
  }

  /** Reports `status` if its health changed; its row key. */
  private compare(status: WorkloadStatus): string {
    const key = rowKey(status);
    const from = this.last.get(key);
    if (from !== status.health) {
      this.last.set(key, status.health);
      this.onChange({ status, from });
    }
    return key;
  }

  stop(): void {
    this.stopped = true;
    this.clock.clearTimeout(this.timer);
    this.registry.off('ready', this.onReady);
    this.registry.off('change', this.onChangeOfReplicas);
  }

  private schedule(): void {
    this.timer = this.clock.setTimeout(() => {
      if (!this.stopped) this.sweep();
    }, this.intervalMs);
    (this.timer as { unref?: () => void }).unref?.();
  }
}

function rowKey(r: WorkloadStatus): string {
  return `${r.gvc}/${r.workload}\u0000${r.location}`;
}

/** `up`'s line for a change: `health       demo/echo in aws-us-east-2: Loading -> Healthy (1/1 ready)`. */
export function healthLine(change: HealthChange): string {
  const s = change.status;
  return `health       ${s.gvc}/${s.workload} in ${s.location}: ${change.from ?? 'new'} -> ${s.health} (${s.ready}/${s.replicas} ready)`;
}
