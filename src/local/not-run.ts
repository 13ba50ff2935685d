/**
 * What `svcproxy up` cannot run of a workload, said once per workload (DESIGN §3, docs/local-platform.md):
 * `up` starts the containers that have a `command` as processes on this machine; it has no container
 * runtime, so a container with an `image` and no `command` is not run, nor is a cron workload (the
 * platform runs it as a job on `spec.job.schedule`; `up` has no scheduler), a container with both
 * runs its command on this machine rather than in the image, and a container's `volumes`
 * (volumesets, secrets, ...) are not mounted in the processes it runs. A workload of which
 * `up` runs nothing has a reason (`notRunReason`): its host names answer 503 `no healthy upstream:
 * REASON` and its `/workloads` rows carry it, and `up` logs what it does not run once per workload
 * (`notRunNotes`, made once per snapshot). Pure apart from that cache; never throws.
 */
import type { ContainerModel, Snapshot, WorkloadModel } from '../config/model.js';
import { isIgnored } from '../config/compile-workload.js';
import { changedWorkloadsOrDeployments } from '../config/changed.js';
import { LayeredMap } from '../layered-map.js';

/** The containers `up` runs a process for (those with a `command`), in declaration order. */
export function runnableContainers(workload: Pick<WorkloadModel, 'containers'>): ContainerModel[] {
  return workload.containers.filter((c) => c.command !== undefined && c.command !== '');
}

/** `container X has image Y and no command` (or `has no command`, without an image). */
function whyNotRun(c: ContainerModel): string {
  return `container ${c.name} has ${c.image === undefined || c.image === '' ? 'no' : `image ${c.image} and no`} command`;
}

/**
 * Why `up` runs no process of the workload, or `undefined` when it runs one. Suspension and
 * `svc/ignore` are not reasons here: they answer for themselves (503 `workload suspended`, 404).
 */
export function notRunReason(workload: Pick<WorkloadModel, 'type' | 'containers'>): string | undefined {
  const known = reasons.get(workload);
  if (known !== undefined) return known === NONE ? undefined : known;
  const reason = reasonOf(workload);
  // A compiled model is frozen and kept while its record is unchanged: the scaler's tick, the plans
  // and the health rows ask of all 10,000 workloads, and a change of one makes one new model.
  if (Object.isFrozen(workload)) reasons.set(workload, reason ?? NONE);
  return reason;
}

/** `notRunReason` of each frozen model asked (NONE: it runs). */
const reasons = new WeakMap<object, string>();
const NONE = '';

function reasonOf(workload: Pick<WorkloadModel, 'type' | 'containers'>): string | undefined {
  if (workload.type === 'cron') return 'svcproxy up runs no cron workload (the platform runs it as a job on spec.job.schedule)';
  if (workload.containers.length === 0) return 'svcproxy up runs nothing: the workload has no container';
  if (runnableContainers(workload).length > 0) return undefined;
  const images = workload.containers.some((c) => c.image !== undefined && c.image !== '');
  return `svcproxy up runs ${images ? 'no image' : 'only commands'} (${workload.containers.map(whyNotRun).join('; ')})`;
}

/**
 * The lines `up` logs once for a workload it runs only in part or not as the platform would: each
 * container it does not run, each command it runs on this machine instead of in the container's
 * image, and each run container's volumes it does not mount. Empty when it runs all of it as written
 * (and when it runs none: `notRunReason` says that).
 */
export function partlyRunNotes(workload: Pick<WorkloadModel, 'type' | 'containers'>): string[] {
  if (notRunReason(workload) !== undefined) return [];
  const notes: string[] = [];
  for (const c of workload.containers) {
    if (c.command === undefined || c.command === '') {
      notes.push(`svcproxy up runs no image: ${whyNotRun(c)}; the workload's other containers run`);
      continue;
    }
    // The platform runs the command inside the image; up, on this machine, with what it has there.
    if (c.image !== undefined && c.image !== '') notes.push(`svcproxy up runs container ${c.name}'s command ${c.command} on this machine, not in image ${c.image}`);
    if (c.volumes.length > 0) {
      const mounts = c.volumes.map((v) => `${v.path} (${v.uri})`).join(', ');
      notes.push(`svcproxy up mounts no volume: container ${c.name}'s ${mounts} ${c.volumes.length === 1 ? 'is' : 'are'} not there for its process`);
    }
  }
  return notes;
}

/** What `up` says of one workload it runs in part or not at all. */
export interface NotRunNote {
  /** `gvc/name`. */
  readonly workload: string;
  /** Why `up` runs none of it, when it runs none and no `deployment` record lists a replica of it. */
  readonly reason?: string;
  /** The log lines, each said once (as long as it stays true). */
  readonly lines: readonly string[];
}

/** Per snapshot, made once: a refused request asks for its workload's reason. */
const notesBySnapshot = new WeakMap<Snapshot, ReadonlyMap<string, NotRunNote>>();
/** The last notes made, from which the next snapshot's are made (one workload's change: its note). */
let lastNotes: { readonly snapshot: Snapshot; readonly notes: ReadonlyMap<string, NotRunNote> } | undefined;

/** What `up` says of one workload (undefined: nothing). */
export function noteOf(workload: WorkloadModel, snapshot: Snapshot): NotRunNote | undefined {
  if (workload.globallySuspended || isIgnored(workload, snapshot.settings.vendor)) return undefined;
  const why = notRunReason(workload);
  if (why === undefined) {
    const lines = partlyRunNotes(workload);
    return lines.length > 0 ? { workload: workload.key, lines } : undefined;
  }
  const elsewhere = (snapshot.deployments.get(workload.key)?.length ?? 0) > 0;
  return elsewhere
    ? { workload: workload.key, lines: [`${why}: the replicas of its deployment record serve it`] }
    : { workload: workload.key, reason: why, lines: [`${why}: its host names answer 503 no healthy upstream`] };
}

/**
 * The workloads of `snapshot` that `up` runs in part or not at all, by key; suspended and ignored
 * ones are left out (they answer for themselves). A note is a function of the workload's model, its
 * deployment and the vendor: those of the last snapshot's notes are kept for the workloads whose
 * model and deployment are the same objects (config/changed.ts).
 */
export function notRunNotes(snapshot: Snapshot): ReadonlyMap<string, NotRunNote> {
  const known = notesBySnapshot.get(snapshot);
  if (known) return known;
  const last = lastNotes;
  let notes: Map<string, NotRunNote> | LayeredMap<string, NotRunNote>;
  if (last !== undefined && last.snapshot.settings.vendor === snapshot.settings.vendor) {
    // Layered over the last notes (layered-map.ts), not a copy of 10,000.
    notes = LayeredMap.next(last.notes);
    for (const key of changedWorkloadsOrDeployments(last.snapshot, snapshot)) {
      const workload = snapshot.workloads.get(key);
      const note = workload === undefined ? undefined : noteOf(workload, snapshot);
      if (note === undefined) notes.delete(key);
      else notes.set(key, note);
    }
  } else {
    notes = new Map();
    for (const workload of snapshot.workloads.values()) {
      const note = noteOf(workload, snapshot);
      if (note !== undefined) notes.set(workload.key, note);
    }
  }
  notesBySnapshot.set(snapshot, notes);
  lastNotes = { snapshot, notes };
  return notes;
}
