/**
 * The spec's built-in quotas (agents, workloads-per-gvc, memory-per-workload, replicas-per-workload,
 * cpu-per-workload, identities-per-gvc, gvcs, domains, cloudaccounts; config/quotas.ts), as the
 * platform API shows and enforces them (DESIGN §13). Each has a CURRENT computed from the records in
 * force and a MAX: its `quota` record's `max` when the API (or a file) set one, else svcproxy's
 * default. Per-GVC quotas come once per GVC with a `gvcLink` dimension (spec, Quota). The
 * per-workload ones are org-wide limits on each workload; their CURRENT is the largest value any
 * workload has (the one nearest the limit): the largest container's memory (MiB) and CPU
 * (millicores), per container as the spec says, and the largest `maxScale` of any location.
 *
 * `quotaCheck` refuses an API write that takes a quota past its MAX: a count (GVCs, domains, a
 * GVC's workloads or identities) that grows over its max, or a written workload whose container
 * memory or CPU, or `maxScale` in a location, grows over the per-workload max. 429 `quota_exceeded`,
 * its message naming the quota (the platform's CLI retries a 429 unless its message says "quota",
 * util/axiosRetry.js). What the `--config` files hold is the operator's and is never refused: a
 * count the files already put over its max refuses only writes that make it larger. Pure apart from
 * the thrown refusal; never throws otherwise.
 */
import type { Snapshot } from '../../config/model.js';
import type { RawRecord } from '../../config/records.js';
import { QUOTA_DEFAULTS, isQuotaName, type QuotaName } from '../../config/quotas.js';
import type { WriteAccept } from '../../config/store.js';
import { ApiError } from './errors.js';
import { indexChange, indexOf, selfLink, stableId, type RecordIndex } from './views.js';

export { QUOTA_DEFAULTS, type QuotaName };

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

function containersOf(record: RawRecord | undefined): readonly Record<string, unknown>[] {
  const spec = record?.spec;
  const list = spec !== null && typeof spec === 'object' ? (spec as Record<string, unknown>).containers : undefined;
  return Array.isArray(list) ? list.filter((c): c is Record<string, unknown> => c !== null && typeof c === 'object') : [];
}

/** The largest `measure` of any container of `record` (0 when none says). */
function largestContainer(record: RawRecord | undefined, measure: (v: unknown) => number | undefined, member: string): number {
  let most = 0;
  for (const c of containersOf(record)) most = Math.max(most, measure(c[member]) ?? 0);
  return most;
}

/** The per-workload quotas of one workload: its largest container's memory and CPU, its largest `maxScale`. */
function perWorkload(snapshot: Snapshot, index: RecordIndex, key: string): Record<'memory-per-workload' | 'cpu-per-workload' | 'replicas-per-workload', number> {
  const record = index.of('workload').get(key);
  const model = snapshot.workloads.get(key);
  return {
    'memory-per-workload': largestContainer(record, memoryMiB, 'memory'),
    'cpu-per-workload': largestContainer(record, cpuMillicores, 'cpu'),
    'replicas-per-workload': model === undefined ? 0 : Math.max(model.defaultOptions.maxScale, ...[...model.locationOptions.values()].map((o) => o.maxScale)),
  };
}

export interface QuotaRow {
  readonly name: QuotaName;
  /** The GVC of a per-GVC quota. */
  readonly gvc?: string;
  readonly current: number;
  readonly max: number;
  /** The quota's record (its max and its increase requests), when one was written. */
  readonly record?: RawRecord;
}

/** The `max` a quota record sets, else the default. */
export function maxOf(name: QuotaName, record: RawRecord | undefined): number {
  const max = record?.max;
  return typeof max === 'number' && Number.isSafeInteger(max) && max >= 0 ? max : QUOTA_DEFAULTS[name].max;
}

/** The quota record of `name` (of `gvc`) in force. */
export function quotaRecord(index: RecordIndex, name: QuotaName, gvc?: string): RawRecord | undefined {
  return index.of('quota').get(gvc === undefined ? name : `${gvc}/${name}`);
}

/** `counts` per snapshot and org: a write counts the snapshot in force, which the write before it counted. */
const counted = new WeakMap<Snapshot, { readonly org: string; readonly counts: ReadonlyMap<string, number> }>();

/** Counted quotas of a snapshot by `name` or `name/gvc`: what a write may not grow past its max. */
function counts(snapshot: Snapshot, index: RecordIndex): ReadonlyMap<string, number> {
  const known = counted.get(snapshot);
  if (known !== undefined && known.org === index.org) return known.counts;
  const made = countsAfter(snapshot, index) ?? countsOf(snapshot, index);
  counted.set(snapshot, { org: index.org, counts: made });
  countedIndex.set(index, made);
  return made;
}

/** `counts` of each index counted (an index made from another: views.ts `indexChange`). */
const countedIndex = new WeakMap<RecordIndex, ReadonlyMap<string, number>>();

/**
 * `countsOf(snapshot, index)` from the counts of the index `index` was made from, when they were
 * counted and the GVCs are the same: the keys that came and went counted, not 10,000 workloads
 * again at every write.
 */
function countsAfter(snapshot: Snapshot, index: RecordIndex): Map<string, number> | undefined {
  const change = indexChange(index);
  const from = change?.from.deref();
  const before = from === undefined ? undefined : countedIndex.get(from);
  if (change === undefined || before === undefined) return undefined;
  // The same GVCs: their per-GVC counts are there, and no others.
  const org = orgCounts(snapshot, index);
  for (const g of snapshot.gvcs.keys()) if (!before.has(`${PER_GVC[0][1]}/${g}`)) return undefined;
  if (before.size !== org.length + PER_GVC.length * snapshot.gvcs.size) return undefined;
  const out = new Map(before);
  for (const [name, n] of org) out.set(name, n);
  const follow = (ids: readonly string[], by: number): void => {
    for (const id of ids) {
      const kind = id.slice(0, id.indexOf('/'));
      const name = PER_GVC.find(([k]) => k === kind)?.[1];
      if (name === undefined) continue;
      const key = id.slice(kind.length + 1);
      const k = `${name}/${key.slice(0, key.indexOf('/'))}`;
      const n = out.get(k);
      if (n !== undefined) out.set(k, n + by);
    }
  };
  follow(change.added, 1);
  follow(change.removed, -1);
  return out;
}

/** The org's counted quotas: how many records of a kind (GVCs: how many the snapshot has). */
function orgCounts(snapshot: Snapshot, index: RecordIndex): [string, number][] {
  return [
    ['agents', index.of('agent').size],
    ['gvcs', snapshot.gvcs.size],
    ['domains', index.of('domain').size],
    ['cloudaccounts', index.of('cloudaccount').size],
  ];
}

/** The per-GVC counted quotas: the kind counted, the quota's name. */
const PER_GVC = [['workload', 'workloads-per-gvc'], ['identity', 'identities-per-gvc']] as const;

function countsOf(snapshot: Snapshot, index: RecordIndex): Map<string, number> {
  const out = new Map<string, number>(orgCounts(snapshot, index));
  for (const [kind, name] of PER_GVC) {
    for (const g of snapshot.gvcs.keys()) out.set(`${name}/${g}`, 0);
    for (const key of index.of(kind).keys()) {
      const k = `${name}/${key.slice(0, key.indexOf('/'))}`;
      const n = out.get(k);
      if (n !== undefined) out.set(k, n + 1);
    }
  }
  return out;
}

/** Every quota with its CURRENT and MAX, in the spec's order, per-GVC ones once per GVC. */
export function quotaRows(snapshot: Snapshot, index: RecordIndex): QuotaRow[] {
  const count = counts(snapshot, index);
  let memory = 0;
  let cpu = 0;
  let replicas = 0;
  for (const key of index.of('workload').keys()) {
    const w = perWorkload(snapshot, index, key);
    memory = Math.max(memory, w['memory-per-workload']);
    cpu = Math.max(cpu, w['cpu-per-workload']);
    replicas = Math.max(replicas, w['replicas-per-workload']);
  }
  const current: Record<string, number> = { 'memory-per-workload': memory, 'cpu-per-workload': cpu, 'replicas-per-workload': replicas };
  const rows: QuotaRow[] = [];
  for (const name of Object.keys(QUOTA_DEFAULTS) as QuotaName[]) {
    const gvcs = QUOTA_DEFAULTS[name].perGvc ? [...snapshot.gvcs.keys()] : [undefined];
    for (const gvc of gvcs) {
      const record = quotaRecord(index, name, gvc);
      rows.push({
        name,
        ...(gvc !== undefined ? { gvc } : {}),
        current: current[name] ?? count.get(gvc === undefined ? name : `${name}/${gvc}`) ?? 0,
        max: maxOf(name, record),
        ...(record !== undefined ? { record } : {}),
      });
    }
  }
  return rows;
}

/** A quota's id: derived from the org, the quota and its GVC (the same every run; its self link names it). */
export function quotaId(org: string, name: string, gvc?: string): string {
  return stableId(`${selfLink(org, 'org', org)}/quota/${gvc === undefined ? name : `${name}.${gvc}`}`);
}

/** A quota row as a record of the list (spec, Quota: ID, NAME, DESCRIPTION, ORIGIN, CURRENT, MAX, UNIT, DIMENSIONS). */
export function quotaView(row: QuotaRow, org: string, since: string): Record<string, unknown> {
  const d = QUOTA_DEFAULTS[row.name];
  const id = quotaId(org, row.name, row.gvc);
  const record = row.record;
  const created = typeof record?.created === 'string' ? record.created : since;
  return {
    kind: 'quota',
    id,
    name: row.name,
    description: typeof record?.description === 'string' ? record.description : d.description,
    ...(record?.tags !== undefined ? { tags: record.tags } : {}),
    version: typeof record?.version === 'number' ? record.version : 1,
    created,
    lastModified: typeof record?.lastModified === 'string' ? record.lastModified : created,
    origin: 'builtin',
    current: row.current,
    max: row.max,
    unit: d.unit,
    dimensions: row.gvc === undefined ? {} : { gvcLink: selfLink(org, 'gvc', row.gvc) },
    links: [{ rel: 'self', href: `${selfLink(org, 'org', org)}/quota/${id}` }],
  };
}

/** The quota an id, or a name that only one quota has, names; undefined when none. Throws 400 for a name several quotas share. */
export function findQuota(rows: readonly QuotaRow[], org: string, ref: string): QuotaRow | undefined {
  const byId = rows.find((r) => quotaId(org, r.name, r.gvc) === ref);
  if (byId !== undefined || !isQuotaName(ref)) return byId;
  const named = rows.filter((r) => r.name === ref);
  if (named.length <= 1) return named[0];
  throw new ApiError('bad_request', `${ref} is one quota per GVC (${named.length} of them): name one by its id`, {
    quota: ref, ids: Object.fromEntries(named.map((r) => [r.gvc!, quotaId(org, r.name, r.gvc)])),
  });
}

function refusal(name: QuotaName, what: string, current: number, max: number, details: Record<string, unknown>): ApiError {
  const unit = QUOTA_DEFAULTS[name].unit;
  const amount = (n: number): string => (unit === 'count' ? String(n) : `${n} ${unit}`);
  return new ApiError('quota_exceeded', `quota ${name} exceeded: ${what} ${amount(current)}, over its max of ${amount(max)} (ask for more with POST .../quota/-request)`, {
    quota: name, current, max, ...details,
  });
}

/**
 * The store's accept hook for an API write of the record `key` (record-meta.ts): refuses, 429, a
 * result that takes a quota past its max and past where it was (see the module comment).
 */
export function quotaCheck(org: string, key: string): WriteAccept {
  return (next, previous) => {
    const after = indexOf(next, org);
    const before = indexOf(previous, org);
    const now = counts(next, after);
    const was = counts(previous, before);
    for (const [k, n] of now) {
      const slash = k.indexOf('/');
      const name = (slash < 0 ? k : k.slice(0, slash)) as QuotaName;
      const gvc = slash < 0 ? undefined : k.slice(slash + 1);
      const max = maxOf(name, quotaRecord(after, name, gvc));
      if (n <= max || n <= (was.get(k) ?? 0)) continue;
      const what = gvc === undefined ? 'the org would have' : `gvc ${gvc} would have`;
      throw refusal(name, what, n, max, gvc === undefined ? {} : { gvc });
    }
    if (!key.startsWith('workload/')) return;
    const workload = key.slice('workload/'.length);
    const mine = perWorkload(next, after, workload);
    const old = perWorkload(previous, before, workload);
    for (const name of ['memory-per-workload', 'cpu-per-workload', 'replicas-per-workload'] as const) {
      const max = maxOf(name, quotaRecord(after, name));
      if (mine[name] <= max || mine[name] <= old[name]) continue;
      const what = name === 'replicas-per-workload' ? `workload ${workload} would scale to` : `workload ${workload} would have a container of`;
      throw refusal(name, what, mine[name], max, { workload });
    }
  };
}
