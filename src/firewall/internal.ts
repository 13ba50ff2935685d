/**
 * The internal firewall (`spec.firewallConfig.internal`): which callers inside the mesh may reach a
 * workload's internal endpoints. Deny by default, as on the platform: `inboundAllowType` `none` (the
 * default) admits nobody, `same-gvc` admits workloads of the target's GVC, `same-org` every workload
 * of the org, `workload-list` the workloads linked in `inboundAllowWorkload` (plus the target itself
 * never needs a rule to call its own replicas). A caller without a workload identity (the shared mesh
 * listener of `svcproxy up`, used from a developer's shell) counts as a member of the org, nothing more.
 */
import type { WorkloadModel } from '../config/model.js';
import { parseLink } from '../config/index.js';

export interface MeshCaller {
  /** `gvc/name` of the calling workload; undefined for a caller with no workload identity. */
  readonly workload?: string;
  readonly gvc?: string;
}

type AllowType = 'none' | 'same-gvc' | 'same-org' | 'workload-list';

function allowType(workload: WorkloadModel): AllowType {
  const internal = workload.firewallConfig?.internal as { inboundAllowType?: string } | undefined;
  const t = internal?.inboundAllowType;
  return t === 'same-gvc' || t === 'same-org' || t === 'workload-list' ? t : 'none';
}

/** Workload keys listed in `inboundAllowWorkload`, resolved against the target's GVC. */
function allowedWorkloads(workload: WorkloadModel): Set<string> {
  const internal = workload.firewallConfig?.internal as { inboundAllowWorkload?: unknown } | undefined;
  const out = new Set<string>();
  const list = Array.isArray(internal?.inboundAllowWorkload) ? internal.inboundAllowWorkload : [];
  for (const link of list) {
    if (typeof link !== 'string') continue;
    const parsed = parseLink(link);
    if (parsed?.kind === 'workload') out.add(`${parsed.gvc ?? workload.gvc}/${parsed.name}`);
  }
  return out;
}

const cache = new WeakMap<WorkloadModel, (caller: MeshCaller) => boolean>();

/** Compiled once per workload model (models are immutable and replaced on reload). */
export function internalFirewall(target: WorkloadModel): (caller: MeshCaller) => boolean {
  let check = cache.get(target);
  if (check) return check;
  const type = allowType(target);
  switch (type) {
    case 'none':
      check = (caller) => caller.workload === target.key;
      break;
    case 'same-gvc':
      check = (caller) => caller.workload !== undefined && caller.gvc === target.gvc;
      break;
    case 'same-org':
      check = () => true;
      break;
    case 'workload-list': {
      const allowed = allowedWorkloads(target);
      check = (caller) => caller.workload !== undefined && (caller.workload === target.key || allowed.has(caller.workload));
      break;
    }
  }
  cache.set(target, check);
  return check;
}
