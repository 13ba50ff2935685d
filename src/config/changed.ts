/**
 * What a new snapshot changed, read from the models' identity: compile.ts reuses the model of a
 * record that did not change (and of everything it was compiled from), so a model that is a new
 * object is a changed (or new) one. A file reload reads every record again: all are new then.
 */
import type { Snapshot } from './model.js';

/** Keys of the workloads `after` adds, changes or removes against `before`. */
export function changedWorkloads(before: Snapshot, after: Snapshot): string[] {
  const changed: string[] = [];
  for (const [key, workload] of after.workloads) if (before.workloads.get(key) !== workload) changed.push(key);
  for (const key of before.workloads.keys()) if (!after.workloads.has(key)) changed.push(key);
  return changed;
}

/** Keys of the workloads whose model or `deployment` replicas `after` adds, changes or removes against `before`. */
export function changedWorkloadsOrDeployments(before: Snapshot, after: Snapshot): Set<string> {
  const changed = new Set(changedWorkloads(before, after));
  for (const [key, list] of after.deployments) if (before.deployments.get(key) !== list) changed.add(key);
  for (const key of before.deployments.keys()) if (!after.deployments.has(key)) changed.add(key);
  return changed;
}
