/**
 * What a new snapshot changed, read from the models' identity: compile.ts reuses the model of a
 * record that did not change (and of everything it was compiled from), so a model that is a new
 * object is a changed (or new) one. A file reload reads every record again: all are new then.
 * Several listeners of one change ask the same: the answer for a pair of snapshots is made once
 * (kept with the newer snapshot), and for a snapshot compiled from the one before it is what the
 * compilation changed (compile.ts `compiledChange`), without a walk of every model.
 */
import type { Snapshot } from './model.js';
import { compiledChange } from './compile.js';

interface Known {
  readonly before: Snapshot;
  workloads?: readonly string[];
  withDeployments?: ReadonlySet<string>;
}

const known = new WeakMap<Snapshot, Known>();

function knownFor(before: Snapshot, after: Snapshot): Known {
  let k = known.get(after);
  if (k === undefined || k.before !== before) known.set(after, (k = { before }));
  return k;
}

/** Keys of the workloads `after` adds, changes or removes against `before`. */
export function changedWorkloads(before: Snapshot, after: Snapshot): readonly string[] {
  const k = knownFor(before, after);
  if (k.workloads !== undefined) return k.workloads;
  // Compiled from `before` (compile.ts): it knows what it changed, no walk of 10,000 models.
  const compiled = compiledChange(after);
  if (compiled?.before === before) return (k.workloads = Object.freeze([...compiled.workloads]));
  const changed: string[] = [];
  for (const [key, workload] of after.workloads) if (before.workloads.get(key) !== workload) changed.push(key);
  for (const key of before.workloads.keys()) if (!after.workloads.has(key)) changed.push(key);
  return (k.workloads = Object.freeze(changed));
}

/** Keys of the workloads whose model or `deployment` replicas `after` adds, changes or removes against `before`. */
export function changedWorkloadsOrDeployments(before: Snapshot, after: Snapshot): ReadonlySet<string> {
  const k = knownFor(before, after);
  if (k.withDeployments !== undefined) return k.withDeployments;
  const changed = new Set(changedWorkloads(before, after));
  const compiled = compiledChange(after);
  if (compiled?.before === before) {
    for (const key of compiled.deployments) changed.add(key);
    return (k.withDeployments = changed);
  }
  for (const [key, list] of after.deployments) if (before.deployments.get(key) !== list) changed.add(key);
  for (const key of before.deployments.keys()) if (!after.deployments.has(key)) changed.add(key);
  return (k.withDeployments = changed);
}
