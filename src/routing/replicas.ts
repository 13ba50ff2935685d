/**
 * The live replica table: which replicas each workload has in each location, where they listen,
 * whether they are ready, and how many requests each has outstanding. It is runtime state, not
 * configuration: sources (`svcproxy up`'s supervisor, the `deployment` records of the config) each
 * replace their own list, probes flip `ready`, the forwarder counts `outstanding`. Readers get the
 * merged per-workload, per-location view, made again only for the workloads whose replicas a source
 * changed.
 */
import { EventEmitter } from 'node:events';
import type { Clock, Timer } from '../deps.js';

export interface HostPort {
  readonly host: string;
  readonly port: number;
}

export interface Replica {
  /** Workload key `gvc/name`. */
  readonly workload: string;
  readonly location: string;
  /** `W-N` for replicas that `up` starts; the deployment record's name otherwise. */
  readonly name: string;
  /**
   * N in replica-direct host names: position in its location. A replica found by DNS takes its place
   * in its name's sorted answer, so N moves when the answer does (the registry re-sorts on `replace`).
   */
  index: number;
  /** Declared container port number → where the replica really listens for it. */
  readonly ports: ReadonlyMap<number, HostPort>;
  /** The replica's own sidecar; absent: the ingress applies the sidecar pipeline in-process. */
  readonly sidecar?: HostPort;
  /**
   * The replica's sidecar's mTLS listener (DESIGN §9): callers inside the mesh dial it with their own
   * certificate, and it applies the internal firewall by their identity. Absent: mesh calls are
   * judged by the caller's side and go to the app (or `sidecar`) in plain text.
   */
  readonly mesh?: HostPort;
  /** Set by readiness probes. */
  ready: boolean;
  /**
   * Its process has started and its first readiness check has not passed yet (`up`'s replicas):
   * a request that finds no ready replica waits for it (DESIGN §10).
   */
  starting?: boolean;
  /** Requests in flight to this replica (least-outstanding choice). */
  outstanding: number;
  /** Outlier ejection: not chosen before this clock time (ms). */
  ejectedUntil: number;
  /**
   * Replicas of `deployment` records: one object shared by the replicas of a workload, marked once a
   * request was routed to any of them (their probes slow down until then: src/local/probe.ts).
   */
  readonly traffic?: WorkloadTraffic;
}

export interface WorkloadTraffic {
  routed: boolean;
  /** Called once, at the first routed request (probes waiting out a quiet period). */
  readonly waiters: Set<() => void>;
}

export function workloadTraffic(): WorkloadTraffic {
  return { routed: false, waiters: new Set() };
}

/** A request (or tunnel) was sent to this replica: it counts as outstanding until it ends. */
export function routeTo(replica: Replica): void {
  replica.outstanding++;
  const traffic = replica.traffic;
  if (traffic !== undefined && !traffic.routed) {
    traffic.routed = true;
    for (const wake of traffic.waiters) wake();
    traffic.waiters.clear();
  }
}

const EMPTY: readonly Replica[] = Object.freeze([]);

/**
 * The longest a request waits for the first readiness checks of its workload's replicas when none is
 * ready yet (see `whenFirstChecked`): a TCP check's own timeout (1 s) and then some.
 */
export const FIRST_CHECK_WAIT_MS = 2000;

/**
 * When none of a workload's replicas is ready but some have not completed a first readiness check
 * (a router that just started), runs those checks now and resolves once one made a replica ready,
 * all are done, or `maxMs` passed; `undefined` when there is nothing to wait for.
 */
export function whenFirstChecked(
  registry: ReplicaRegistry,
  workload: string,
  clock: Pick<Clock, 'setTimeout' | 'clearTimeout'>,
  maxMs = FIRST_CHECK_WAIT_MS,
): Promise<void> | undefined {
  const pending = registry.firstChecks(workload);
  if (pending.length === 0) return undefined;
  return new Promise<void>((resolve) => {
    let left = pending.length;
    let timer: Timer | undefined;
    const done = (): void => {
      clock.clearTimeout(timer);
      resolve();
    };
    const oneDone = (): void => {
      if (--left === 0 || registry.locations(workload).some((location) => registry.hasReady(workload, location))) done();
    };
    timer = clock.setTimeout(done, maxMs);
    for (const check of pending) void check.then(oneDone);
  });
}

export class ReplicaRegistry extends EventEmitter {
  /** Each source's replicas by workload, in its list's order. */
  private readonly bySource = new Map<string, Map<string, readonly Replica[]>>();
  private readonly index = new Map<string, Map<string, Replica[]>>();
  /** Per workload: its replicas whose first readiness check has not completed, each with a way to run it now. */
  private readonly unchecked = new Map<string, Map<Replica, () => Promise<void>>>();

  /**
   * Replace every replica that `source` contributes. The same replicas in the same order are no
   * change (nothing made again, no `change` event): a reload that leaves them alone costs a
   * comparison. Otherwise only the workloads whose replicas of `source` differ (others, or in
   * another order) have their view made again (see `replaceWorkloads`).
   */
  replace(source: string, replicas: readonly Replica[]): void {
    const before = this.bySource.get(source);
    const after = byWorkload(replicas);
    const changed = new Map<string, readonly Replica[]>();
    for (const [workload, list] of after) if (!sameList(before?.get(workload), list)) changed.set(workload, list);
    if (before !== undefined) for (const workload of before.keys()) if (!after.has(workload)) changed.set(workload, EMPTY);
    if (changed.size > 0) this.replaceWorkloads(source, changed);
  }

  /**
   * Replace the replicas `source` contributes to the workloads named (an empty list: none any
   * more); the others' stay as they are, and only the named workloads' view is made again (each
   * location's in index order, so a replica whose index moved takes its place). A reader keeps the
   * lists it was given as they were.
   */
  replaceWorkloads(source: string, lists: ReadonlyMap<string, readonly Replica[]>): void {
    if (lists.size === 0) return;
    let own = this.bySource.get(source);
    if (own === undefined) this.bySource.set(source, (own = new Map()));
    let changed = false;
    for (const [workload, list] of lists) {
      if (list.length === 0) own.delete(workload);
      else own.set(workload, list);
      if (this.remake(workload)) changed = true;
    }
    if (own.size === 0) this.bySource.delete(source);
    if (changed) this.emit('change');
  }

  /** Replicas of a workload in one location, in index order. */
  list(workload: string, location: string): readonly Replica[] {
    return this.index.get(workload)?.get(location) ?? EMPTY;
  }

  /** Every location that has at least one replica of the workload. */
  locations(workload: string): readonly string[] {
    const byLocation = this.index.get(workload);
    return byLocation ? [...byLocation.keys()] : [];
  }

  /** Every replica of every workload (for probes and metrics). */
  all(): Replica[] {
    const out: Replica[] = [];
    for (const own of this.bySource.values()) for (const list of own.values()) for (const replica of list) out.push(replica);
    return out;
  }

  /** Whether a replica of the workload (in `location`, when given) is starting (see Replica.starting). */
  hasStarting(workload: string, location?: string): boolean {
    const byLocation = this.index.get(workload);
    if (!byLocation) return false;
    for (const [loc, list] of byLocation) {
      if (location !== undefined && loc !== location) continue;
      for (const r of list) if (r.starting === true) return true;
    }
    return false;
  }

  hasReady(workload: string, location: string): boolean {
    for (const r of this.list(workload, location)) if (r.ready) return true;
    return false;
  }

  /**
   * Called by probes of `deployment` replicas: `bring` runs the replica's first check now (if it has
   * not started) and resolves when it has completed; `undefined` once it has (or the probe stopped).
   */
  awaitingFirstCheck(replica: Replica, bring: (() => Promise<void>) | undefined): void {
    let byReplica = this.unchecked.get(replica.workload);
    if (bring) {
      if (!byReplica) this.unchecked.set(replica.workload, (byReplica = new Map()));
      byReplica.set(replica, bring);
    } else if (byReplica?.delete(replica) && byReplica.size === 0) {
      this.unchecked.delete(replica.workload);
    }
  }

  /** The replica's probe has not completed its first check yet (a `deployment` replica's health is then unknown). */
  awaitsFirstCheck(replica: Replica): boolean {
    return this.unchecked.get(replica.workload)?.has(replica) ?? false;
  }

  /**
   * Runs now the first checks of the workload's replicas that have not completed one (a router that
   * just started); one promise per replica, each resolving when its check is done. Empty when every
   * replica has been checked.
   */
  firstChecks(workload: string): Promise<void>[] {
    const byReplica = this.unchecked.get(workload);
    return byReplica ? [...byReplica.values()].map((bring) => bring()) : [];
  }

  /** Called by probes; emits `ready` with the replica when its readiness changes. */
  setReady(replica: Replica, ready: boolean): void {
    if (replica.ready === ready) return;
    replica.ready = ready;
    this.emit('ready', replica);
  }

  /** Makes the view of one workload again, from every source's replicas of it, each location's in index order; whether it differs. */
  private remake(workload: string): boolean {
    const byLocation = new Map<string, Replica[]>();
    for (const bySource of this.bySource.values()) {
      for (const replica of bySource.get(workload) ?? EMPTY) {
        let replicas = byLocation.get(replica.location);
        if (!replicas) byLocation.set(replica.location, (replicas = []));
        replicas.push(replica);
      }
    }
    for (const replicas of byLocation.values()) replicas.sort((a, b) => a.index - b.index);
    const before = this.index.get(workload);
    if (byLocation.size === 0) this.index.delete(workload);
    else this.index.set(workload, byLocation);
    if (before === undefined || before.size !== byLocation.size) return before !== undefined || byLocation.size > 0;
    for (const [location, replicas] of byLocation) if (!sameList(before.get(location), replicas)) return true;
    return false;
  }
}

function byWorkload(replicas: readonly Replica[]): Map<string, Replica[]> {
  const out = new Map<string, Replica[]>();
  for (const replica of replicas) {
    const list = out.get(replica.workload);
    if (list === undefined) out.set(replica.workload, [replica]);
    else list.push(replica);
  }
  return out;
}

function sameList(a: readonly Replica[] | undefined, b: readonly Replica[]): boolean {
  return a !== undefined && a.length === b.length && a.every((r, i) => r === b[i]);
}
