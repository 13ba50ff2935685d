/**
 * `GET /org/{org}/quota`: the spec's built-in quotas (agents, workloads-per-gvc, memory-per-workload,
 * replicas-per-workload, cpu-per-workload, identities-per-gvc, gvcs, domains, cloudaccounts), each
 * with CURRENT computed from the records in force and a MAX `up` does not enforce (nothing is
 * refused for being over it: the local platform shows the numbers so code that reads them runs).
 * Per-GVC quotas come once per GVC with a `gvcLink` dimension (spec, Quota). The per-workload ones
 * are org-wide limits on each workload; their CURRENT is the largest value any workload has (the
 * one nearest the limit): the largest container's memory (MiB) and CPU (millicores), per container
 * as the spec says, and the largest `maxScale` of any location. Pure; never throws.
 */
import type { Snapshot } from '../../config/model.js';
import type { RawRecord } from '../../config/records.js';
import { selfLink, stableId, type RecordIndex } from './views.js';

/**
 * MAX of each quota. The platform's documentation (docs.controlplane.com/reference/quota, "Quota")
 * names the quotas (agents, domains, identities-per-gvc, workloads-per-gvc) but publishes no default
 * values, and the spec shows none: these are ours, chosen to be above what a machine running `up`
 * holds, and are only ever shown.
 */
export const QUOTA_DEFAULTS = {
  agents: { max: 10, unit: 'count', description: 'Max number of agents' },
  'workloads-per-gvc': { max: 100, unit: 'count', description: 'Max number of workloads in a gvc' },
  'memory-per-workload': { max: 8192, unit: 'MiB', description: 'Max memory of a container of a workload' },
  'replicas-per-workload': { max: 20, unit: 'count', description: 'Max replicas of a workload in a location' },
  'cpu-per-workload': { max: 4000, unit: 'millicore', description: 'Max CPU of a container of a workload' },
  'identities-per-gvc': { max: 50, unit: 'count', description: 'Max number of workload identities in a gvc' },
  gvcs: { max: 25, unit: 'count', description: 'Max number of GVCs' },
  domains: { max: 25, unit: 'count', description: 'Max number of domains' },
  cloudaccounts: { max: 10, unit: 'count', description: 'Max number of cloud accounts' },
} as const;

export type QuotaName = keyof typeof QUOTA_DEFAULTS;

/** `500m` → 500, `1.5` / `"2"` → 1500 / 2000 millicores; undefined when unreadable. */
export function cpuMillicores(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? Math.round(value * 1000) : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(m?)\s*$/.exec(value);
  if (!m) return undefined;
  const n = Number(m[1]);
  return Math.round(m[2] === 'm' ? n : n * 1000);
}

const MEMORY_UNITS: Readonly<Record<string, number>> = {
  '': 1 / (1024 * 1024), k: 1000 / 1048576, M: 1e6 / 1048576, G: 1e9 / 1048576, T: 1e12 / 1048576,
  Ki: 1 / 1024, Mi: 1, Gi: 1024, Ti: 1024 * 1024,
};

/** `128Mi` → 128, `1Gi` → 1024, `500M` → 477 MiB (rounded up); undefined when unreadable. */
export function memoryMiB(value: unknown): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) && value >= 0 ? Math.ceil(value / 1048576) : undefined;
  if (typeof value !== 'string') return undefined;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(Ki|Mi|Gi|Ti|k|M|G|T|)\s*$/.exec(value);
  if (!m) return undefined;
  return Math.ceil(Number(m[1]) * MEMORY_UNITS[m[2]!]!);
}

function containersOf(record: RawRecord): readonly Record<string, unknown>[] {
  const spec = record.spec;
  const list = spec !== null && typeof spec === 'object' ? (spec as Record<string, unknown>).containers : undefined;
  return Array.isArray(list) ? list.filter((c): c is Record<string, unknown> => c !== null && typeof c === 'object') : [];
}

/** The largest `measure` of any container of any workload (0 when none says). */
function largestContainer(workloads: Iterable<RawRecord>, measure: (v: unknown) => number | undefined, member: string): number {
  let most = 0;
  for (const w of workloads) for (const c of containersOf(w)) most = Math.max(most, measure(c[member]) ?? 0);
  return most;
}

interface QuotaRow {
  readonly name: QuotaName;
  readonly current: number;
  readonly gvc?: string;
}

/** Every quota with its CURRENT, in the spec's order, per-GVC ones once per GVC. */
export function quotaRows(snapshot: Snapshot, index: RecordIndex): QuotaRow[] {
  const gvcs = [...snapshot.gvcs.keys()];
  const perGvc = (kind: string): Map<string, number> => {
    const counts = new Map(gvcs.map((g) => [g, 0]));
    for (const key of index.of(kind).keys()) {
      const g = key.slice(0, key.indexOf('/'));
      if (counts.has(g)) counts.set(g, counts.get(g)! + 1);
    }
    return counts;
  };
  const workloads = [...index.of('workload').values()];
  let replicas = 0;
  for (const w of snapshot.workloads.values()) {
    replicas = Math.max(replicas, w.defaultOptions.maxScale, ...[...w.locationOptions.values()].map((o) => o.maxScale));
  }
  return [
    { name: 'agents', current: index.of('agent').size },
    ...[...perGvc('workload')].map(([gvc, n]) => ({ name: 'workloads-per-gvc' as const, current: n, gvc })),
    { name: 'memory-per-workload', current: largestContainer(workloads, memoryMiB, 'memory') },
    { name: 'replicas-per-workload', current: replicas },
    { name: 'cpu-per-workload', current: largestContainer(workloads, cpuMillicores, 'cpu') },
    ...[...perGvc('identity')].map(([gvc, n]) => ({ name: 'identities-per-gvc' as const, current: n, gvc })),
    { name: 'gvcs', current: snapshot.gvcs.size },
    { name: 'domains', current: index.of('domain').size },
    { name: 'cloudaccounts', current: index.of('cloudaccount').size },
  ];
}

/** A quota row as a record of the list (spec, Quota: ID, NAME, DESCRIPTION, ORIGIN, CURRENT, MAX, UNIT, DIMENSIONS). */
export function quotaView(row: QuotaRow, org: string): Record<string, unknown> {
  const d = QUOTA_DEFAULTS[row.name];
  const dimensions = row.gvc === undefined ? {} : { gvcLink: selfLink(org, 'gvc', row.gvc) };
  const key = row.gvc === undefined ? row.name : `${row.name}.${row.gvc}`;
  const id = stableId(`${selfLink(org, 'org', org)}/quota/${key}`);
  return {
    kind: 'quota',
    id,
    name: row.name,
    description: d.description,
    origin: 'builtin',
    current: row.current,
    max: d.max,
    unit: d.unit,
    dimensions,
    links: [{ rel: 'self', href: `${selfLink(org, 'org', org)}/quota/${id}` }],
  };
}
