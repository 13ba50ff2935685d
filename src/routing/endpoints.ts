/**
 * Every host name the data plane answers, per workload (`svcproxy endpoints`, the list `up`
 * prints; DESIGN §3). Built from the same name functions `hosts.ts` indexes, so the list and the
 * router never disagree. Per workload, in this order: canonical; the GVC alias when this is its
 * (not globally suspended) alias workload; one location host per GVC location; replica-direct
 * hosts for `replicaDirect` workloads; one internal host per declared port; internal replica hosts
 * per location, replica and declared port; then each custom domain that routes to it (once per
 * domain, whatever its ports and routes). Replica indexes come from the live registry when given,
 * else from `deployment` records, else `minScale` of that location (0 where it is suspended).
 * Pure; no failure modes (workloads whose GVC is missing are skipped).
 */
import { isIgnored } from '../config/compile-workload.js';
import type { Snapshot, WorkloadModel } from '../config/model.js';
import {
  canonicalHostFor,
  gvcAliasHost,
  internalHostFor,
  internalReplicaHostFor,
  locationHostFor,
  replicaHostFor,
  type HostKind,
} from './hosts.js';
import type { ReplicaRegistry } from './replicas.js';

export interface Endpoint {
  /** Workload name. */
  readonly workload: string;
  readonly gvc: string;
  readonly kind: HostKind;
  readonly host: string;
  readonly location?: string;
  readonly replica?: number;
}

function replicaIndexes(
  snapshot: Snapshot,
  workload: WorkloadModel,
  location: string,
  replicas: Pick<ReplicaRegistry, 'list'> | undefined,
): number[] {
  if (replicas) return unique(replicas.list(workload.key, location).map((r) => r.index));
  const deployed = snapshot.deployments.get(workload.key);
  if (deployed) return unique(deployed.filter((d) => d.location === location).map((d) => d.index));
  const options = workload.locationOptions.get(location) ?? workload.defaultOptions;
  const suspended = workload.globallySuspended || options.suspend || options.maxScale === 0;
  const count = suspended ? 0 : Math.max(0, options.minScale);
  return Array.from({ length: count }, (_, i) => i);
}

function unique(indexes: number[]): number[] {
  return [...new Set(indexes)].sort((a, b) => a - b);
}

function declaredPortNumbers(workload: WorkloadModel): number[] {
  const out: number[] = [];
  for (const c of workload.containers) for (const p of c.ports) if (!out.includes(p.number)) out.push(p.number);
  return out;
}

export function listEndpoints(snapshot: Snapshot, replicas?: Pick<ReplicaRegistry, 'list'>): Endpoint[] {
  const { settings, org } = snapshot;

  const domainsByWorkload = new Map<string, string[]>();
  for (const domain of snapshot.domains.values()) {
    const seen = new Set<string>();
    for (const port of domain.ports) for (const route of port.routes) seen.add(route.workload);
    for (const key of seen) {
      let hosts = domainsByWorkload.get(key);
      if (!hosts) domainsByWorkload.set(key, (hosts = []));
      hosts.push(domain.host);
    }
  }

  const out: Endpoint[] = [];
  for (const w of snapshot.workloads.values()) {
    const gvc = snapshot.gvcs.get(w.gvc);
    // An ignored workload (`svc/ignore`) answers on no host name.
    if (!gvc || isIgnored(w, settings.vendor)) continue;
    const base = { workload: w.name, gvc: gvc.name };
    out.push({ ...base, kind: 'canonical', host: canonicalHostFor(settings, org, gvc, w.name) });
    if (gvc.aliasWorkload === w.name && !w.globallySuspended) {
      out.push({ ...base, kind: 'alias', host: gvcAliasHost(settings, gvc) });
    }
    for (const location of gvc.locations) {
      out.push({ ...base, kind: 'location', host: locationHostFor(settings, gvc, w.name, location), location });
    }
    const perLocation = new Map(gvc.locations.map((l) => [l, replicaIndexes(snapshot, w, l, replicas)]));
    if (w.replicaDirect) {
      for (const [location, indexes] of perLocation) {
        for (const replica of indexes) {
          const host = replicaHostFor(settings, gvc, w.name, location, replica);
          out.push({ ...base, kind: 'replica', host, location, replica });
        }
      }
    }
    const ports = declaredPortNumbers(w);
    const internal = internalHostFor(settings, gvc, w.name);
    for (const port of ports) out.push({ ...base, kind: 'internal', host: `${internal}:${port}` });
    for (const [location, indexes] of perLocation) {
      for (const replica of indexes) {
        const host = internalReplicaHostFor(settings, gvc, w.name, location, replica);
        for (const port of ports) {
          out.push({ ...base, kind: 'internal-replica', host: `${host}:${port}`, location, replica });
        }
      }
    }
    for (const host of domainsByWorkload.get(w.key) ?? []) out.push({ ...base, kind: 'domain', host });
  }
  return out;
}

/** A readable table, one block per workload (`gvc/workload`), columns aligned across blocks. */
/** Which names need the mesh, under the table (DESIGN §9). */
export const MESH_NOTE =
  'internal and internal-replica names need the mesh: call them through a workload\'s outbound listener\n' +
  '(its HTTP_PROXY under "svcproxy up", a sidecar\'s --mesh), never through the ingress; the target\'s\n' +
  'internal firewall (firewallConfig.internal.inboundAllowType) decides by the caller\'s identity.';

export function formatEndpointsText(endpoints: readonly Endpoint[]): string {
  if (endpoints.length === 0) return 'no endpoints\n';
  let kindWidth = 'KIND'.length;
  let hostWidth = 'HOST'.length;
  let locationWidth = 'LOCATION'.length;
  const groups = new Map<string, Endpoint[]>();
  for (const e of endpoints) {
    kindWidth = Math.max(kindWidth, e.kind.length);
    hostWidth = Math.max(hostWidth, e.host.length);
    locationWidth = Math.max(locationWidth, e.location?.length ?? 0);
    const key = `${e.gvc}/${e.workload}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = []));
    group.push(e);
  }
  const row = (kind: string, host: string, location: string, replica: string): string =>
    `  ${kind.padEnd(kindWidth)}  ${host.padEnd(hostWidth)}  ${location.padEnd(locationWidth)}  ${replica}`.trimEnd();
  const lines: string[] = [];
  for (const [key, group] of groups) {
    if (lines.length > 0) lines.push('');
    lines.push(key);
    lines.push(row('KIND', 'HOST', 'LOCATION', 'REPLICA'));
    for (const e of group) lines.push(row(e.kind, e.host, e.location ?? '', e.replica?.toString() ?? ''));
  }
  if (endpoints.some((e) => e.kind === 'internal' || e.kind === 'internal-replica')) {
    lines.push('', MESH_NOTE);
  }
  return lines.join('\n') + '\n';
}
