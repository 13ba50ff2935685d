/**
 * Host names → targets (DESIGN §4). `buildHostIndex` runs once per snapshot and precomputes maps
 * keyed by the full lower-cased host name, so `resolveHost` is a parse plus a few `Map` lookups and
 * never splits a name on its first hyphen (workload names contain hyphens; GVC names may too).
 * Fixed names (canonical, GVC alias, location, custom domain) map straight to a prebuilt target;
 * names carrying a replica index (`W-ALIAS-N.LOC…`, `replica-N.W.LOC.GVC…`) strip the index and
 * look the rest up. Internal names (`internal-replica` too, for every workload: DESIGN §4 gates
 * only the external replica names on `replicaDirect`) answer only on the mesh listener, which
 * also answers every external kind. Nothing here throws: a
 * malformed, unknown or disabled host (replica-direct off, alias to a suspended workload, an
 * internal port no container declares) resolves to `undefined`, which the proxy answers with 404.
 * Built-in names win over a `domain` record of the same name; two built-in names that collide
 * (possible only with the `legacy` format and hyphenated GVC names) keep the first and are listed
 * in `HostIndex.conflicts`.
 */
import type {
  DomainModel,
  DomainPortModel,
  GvcModel,
  OrgModel,
  Settings,
  Snapshot,
  WorkloadModel,
} from '../config/model.js';
import { isIgnored } from '../config/compile-workload.js';
import { changedWorkloads } from '../config/changed.js';
import { LayeredMap } from '../layered-map.js';

export type Listener = 'external' | 'mesh';

export type HostTarget =
  | { readonly kind: 'canonical'; readonly workload: WorkloadModel }
  | { readonly kind: 'alias'; readonly workload: WorkloadModel }
  | { readonly kind: 'location'; readonly workload: WorkloadModel; readonly location: string }
  | {
      readonly kind: 'replica';
      readonly workload: WorkloadModel;
      readonly location: string;
      readonly index: number;
    }
  /** `port` is a declared container port number (the Host's port, else the first declared). */
  | { readonly kind: 'internal'; readonly workload: WorkloadModel; readonly port: number }
  | {
      readonly kind: 'internal-replica';
      readonly workload: WorkloadModel;
      readonly location: string;
      readonly index: number;
      readonly port: number;
    }
  | { readonly kind: 'domain'; readonly domain: DomainModel; readonly port: DomainPortModel };

export type HostKind = HostTarget['kind'];

export interface ParsedHost {
  /** Lower-cased, without the trailing dot; IPv6 literals keep their brackets. */
  readonly host: string;
  readonly port?: number;
}

interface WorkloadLocation {
  readonly workload: WorkloadModel;
  readonly location: string;
}

interface InternalEntry {
  readonly workload: WorkloadModel;
  /** Port numbers declared by any container. */
  readonly ports: ReadonlySet<number>;
  /** First declared port of the first container that declares any. */
  readonly defaultPort?: number;
}

interface InternalReplicaEntry extends InternalEntry {
  readonly location: string;
}

interface DomainEntry {
  readonly first: HostTarget;
  readonly byNumber: ReadonlyMap<number, HostTarget>;
}

export interface HostIndex {
  readonly generation: number;
  /** Canonical, GVC alias and location hosts → prebuilt targets. */
  readonly fixed: ReadonlyMap<string, HostTarget>;
  readonly domains: ReadonlyMap<string, DomainEntry>;
  /** `W-ALIAS.LOC.DIRECT_DOMAIN` of replica-direct workloads, the key a replica host maps to. */
  readonly replicaBases: ReadonlyMap<string, WorkloadLocation>;
  /** `W.GVC.INTERNAL_DOMAIN`. */
  readonly internal: ReadonlyMap<string, InternalEntry>;
  /** `W.LOC.GVC.INTERNAL_DOMAIN`, the key `replica-N.…` maps to. */
  readonly internalReplicas: ReadonlyMap<string, InternalReplicaEntry>;
  /** Host names claimed twice; the first claim (snapshot order) is kept. */
  readonly conflicts: readonly string[];
}

/** Longest replica index accepted in a host name; keeps the number exact and the parse cheap. */
const MAX_INDEX_DIGITS = 9;

/**
 * The canonical host of a workload for its GVC's naming format. The `org` format needs the org's
 * `endpointPrefix` (validation demands it); without one it falls back to the `default` form, as
 * the config compiler does for `WorkloadModel.canonicalHost`.
 */
export function canonicalHostFor(
  settings: Settings,
  org: OrgModel | undefined,
  gvc: GvcModel,
  workloadName: string,
): string {
  const app = settings.appDomain;
  let host: string;
  switch (gvc.endpointNamingFormat) {
    case 'legacy':
      host = `${workloadName}-${gvc.name}.${app}`;
      break;
    case 'org': {
      const prefix = org?.endpointPrefix;
      host = prefix ? `${workloadName}-${gvc.alias}.${prefix}.${app}` : `${workloadName}-${gvc.alias}.${app}`;
      break;
    }
    default:
      host = `${workloadName}-${gvc.alias}.${app}`;
  }
  return normalizeName(host);
}

/** `ALIAS.APP_DOMAIN`, whatever the naming format. */
export function gvcAliasHost(settings: Settings, gvc: GvcModel): string {
  return normalizeName(`${gvc.alias}.${settings.appDomain}`);
}

export function locationHostFor(settings: Settings, gvc: GvcModel, workloadName: string, location: string): string {
  return normalizeName(`${workloadName}-${gvc.alias}.${location}.${settings.directDomain}`);
}

export function replicaHostFor(
  settings: Settings,
  gvc: GvcModel,
  workloadName: string,
  location: string,
  index: number,
): string {
  return normalizeName(`${workloadName}-${gvc.alias}-${index}.${location}.${settings.directDomain}`);
}

/** `W.GVC.INTERNAL_DOMAIN`, without a port. */
export function internalHostFor(settings: Settings, gvc: GvcModel, workloadName: string): string {
  return normalizeName(`${workloadName}.${gvc.name}.${settings.internalDomain}`);
}

/** `replica-N.W.LOC.GVC.INTERNAL_DOMAIN`, without a port. */
export function internalReplicaHostFor(
  settings: Settings,
  gvc: GvcModel,
  workloadName: string,
  location: string,
  index: number,
): string {
  return normalizeName(`replica-${index}.${workloadName}.${location}.${gvc.name}.${settings.internalDomain}`);
}

function normalizeName(name: string): string {
  const lower = name.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/**
 * Split a Host header (or `:authority`) into a lower-cased host without its trailing dot and an
 * optional port. `undefined` when it is malformed: empty, an unclosed `[`, a bare IPv6 literal, or
 * a port that is not 0–65535. An empty port (`host:`) counts as no port, as URI syntax allows.
 */
export function parseHostHeader(raw: string): ParsedHost | undefined {
  if (raw.length === 0) return undefined;
  let host: string;
  let portText: string | undefined;
  if (raw.charCodeAt(0) === 0x5b /* [ */) {
    const close = raw.indexOf(']');
    if (close < 0) return undefined;
    host = raw.slice(0, close + 1);
    if (close + 1 < raw.length) {
      if (raw.charCodeAt(close + 1) !== 0x3a /* : */) return undefined;
      portText = raw.slice(close + 2);
    }
  } else {
    const colon = raw.indexOf(':');
    if (colon < 0) host = raw;
    else {
      if (raw.indexOf(':', colon + 1) >= 0) return undefined;
      host = raw.slice(0, colon);
      portText = raw.slice(colon + 1);
    }
  }
  host = normalizeName(host);
  if (host.length === 0) return undefined;
  if (portText === undefined || portText.length === 0) return { host };
  const port = parsePort(portText);
  return port === undefined ? undefined : { host, port };
}

function parsePort(text: string): number | undefined {
  if (text.length > 5) return undefined;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  return n <= 65535 ? n : undefined;
}

/** A replica index as written in a host: decimal, no sign, no leading zero. */
function parseIndex(text: string, from: number, to: number): number | undefined {
  const len = to - from;
  if (len <= 0 || len > MAX_INDEX_DIGITS) return undefined;
  if (len > 1 && text.charCodeAt(from) === 48) return undefined;
  let n = 0;
  for (let i = from; i < to; i++) {
    const d = text.charCodeAt(i) - 48;
    if (d < 0 || d > 9) return undefined;
    n = n * 10 + d;
  }
  return n;
}

function declaredPorts(workload: WorkloadModel): { ports: Set<number>; defaultPort?: number } {
  const ports = new Set<number>();
  let defaultPort: number | undefined;
  for (const container of workload.containers) {
    for (const port of container.ports) {
      defaultPort ??= port.number;
      ports.add(port.number);
    }
  }
  return { ports, defaultPort };
}

/** The Host's port when a container declares it; the first declared port when it has none. */
function pickPort(entry: InternalEntry, requested: number | undefined): number | undefined {
  if (requested === undefined) return entry.defaultPort;
  return entry.ports.has(requested) ? requested : undefined;
}

/** One table while it is filled: a `Map` (a full build) or a `LayeredMap` (made from the one in force). */
interface Filling<V> extends ReadonlyMap<string, V> {
  set(key: string, value: V): unknown;
  delete(key: string): boolean;
}

/** The tables a host index is made of, while they are filled. */
interface Tables {
  readonly fixed: Filling<HostTarget>;
  readonly replicaBases: Filling<WorkloadLocation>;
  readonly internal: Filling<InternalEntry>;
  readonly internalReplicas: Filling<InternalReplicaEntry>;
  readonly domains: Map<string, DomainEntry>;
  readonly conflicts: string[];
}

/** Puts (or takes back) one name of a table: `claim` puts it, `release` takes back a workload's. */
type Claim = <V extends object>(map: Filling<V>, host: string, value: V & { readonly workload: WorkloadModel }) => void;

function claimer(conflicts: string[]): Claim {
  return (map, host, value) => {
    if (map.has(host)) conflicts.push(host);
    else map.set(host, value);
  };
}

/** Takes back a name only while it is still the given workload's (a name is one workload's when nothing conflicts). */
const release: Claim = (map, host, value) => {
  if ((map.get(host) as { readonly workload?: WorkloadModel } | undefined)?.workload === value.workload) map.delete(host);
};

/** The names of one workload (none for an ignored one, `svc/ignore`: it answers 404 like an unknown host). */
function workloadNames(t: Tables, snapshot: Snapshot, workload: WorkloadModel, claim: Claim): void {
  const { settings, org } = snapshot;
  const gvc = snapshot.gvcs.get(workload.gvc);
  if (!gvc || isIgnored(workload, settings.vendor)) return;
  const name = workload.name;
  claim(t.fixed, canonicalHostFor(settings, org, gvc, name), { kind: 'canonical', workload });
  const { ports, defaultPort } = declaredPorts(workload);
  claim(t.internal, internalHostFor(settings, gvc, name), { workload, ports, defaultPort });
  for (const location of gvc.locations) {
    const locationHost = locationHostFor(settings, gvc, name, location);
    claim(t.fixed, locationHost, { kind: 'location', workload, location });
    if (workload.replicaDirect) claim(t.replicaBases, locationHost, { workload, location });
    const internalKey = normalizeName(`${name}.${location}.${gvc.name}.${settings.internalDomain}`);
    claim(t.internalReplicas, internalKey, { workload, location, ports, defaultPort });
  }
}

/**
 * GVC alias names, after every workload's (a canonical name can never look like `ALIAS.APP_DOMAIN`:
 * it always carries `-`, so the order only matters for pathological configs), then the custom domains.
 */
function aliasAndDomainNames(t: Tables, snapshot: Snapshot, claim: Claim): void {
  const { settings } = snapshot;
  for (const gvc of snapshot.gvcs.values()) {
    if (gvc.aliasWorkload === undefined) continue;
    const workload = snapshot.workloads.get(`${gvc.name}/${gvc.aliasWorkload}`);
    // A globally suspended alias workload makes the alias route nowhere (per-location suspends
    // are ignored): the snapshot is immutable, so this is decided here once.
    if (!workload || workload.globallySuspended || isIgnored(workload, settings.vendor)) continue;
    claim(t.fixed, gvcAliasHost(settings, gvc), { kind: 'alias', workload });
  }
  for (const domain of snapshot.domains.values()) {
    if (domain.ports.length === 0) continue;
    const host = normalizeName(domain.host);
    if (t.fixed.has(host)) {
      t.conflicts.push(host);
      continue;
    }
    const byNumber = new Map<number, HostTarget>();
    for (const port of domain.ports) {
      if (!byNumber.has(port.number)) byNumber.set(port.number, { kind: 'domain', domain, port });
    }
    if (t.domains.has(host)) t.conflicts.push(host);
    else t.domains.set(host, { first: byNumber.get(domain.ports[0]!.number)!, byNumber });
  }
}

/** The index of tables filled: never changed again (the next index is made in maps of its own). */
function indexOf(t: Tables, snapshot: Snapshot): HostIndex {
  return {
    generation: snapshot.generation,
    fixed: t.fixed,
    domains: t.domains,
    replicaBases: t.replicaBases,
    internal: t.internal,
    internalReplicas: t.internalReplicas,
    conflicts: t.conflicts,
  };
}

/** Build the lookup tables for one snapshot. Cost is linear in workloads × locations. */
export function buildHostIndex(snapshot: Snapshot): HostIndex {
  const t = {
    fixed: new Map<string, HostTarget>(), replicaBases: new Map<string, WorkloadLocation>(), internal: new Map<string, InternalEntry>(),
    internalReplicas: new Map<string, InternalReplicaEntry>(), domains: new Map<string, DomainEntry>(), conflicts: [] as string[],
  };
  const claim = claimer(t.conflicts);
  for (const workload of snapshot.workloads.values()) workloadNames(t, snapshot, workload, claim);
  aliasAndDomainNames(t, snapshot, claim);
  return indexOf(t, snapshot);
}

/**
 * The index of `snapshot` made from `previous`, the index of `before`: the names of the workloads
 * whose model changed (a new object: compile.ts reuses the model of an unchanged record) are taken
 * back and claimed again, the GVC aliases and domains made again; the other names are kept, in
 * tables layered over the previous index's (layered-map.ts: `previous` is left as it is, for the
 * requests still reading it), so one workload's change costs its own names. A full build
 * instead when names may have moved for all (settings, the org, a GVC changed), when many workloads
 * changed, or when a name is claimed twice (the full build's order decides which claim wins).
 */
export function nextHostIndex(previous: HostIndex, before: Snapshot, snapshot: Snapshot): HostIndex {
  if (previous.conflicts.length > 0 || !sameNaming(before, snapshot)) return buildHostIndex(snapshot);
  const changed = changedWorkloads(before, snapshot);
  if (changed.length * 4 > snapshot.workloads.size) return buildHostIndex(snapshot);
  const t: Tables = {
    fixed: LayeredMap.next(previous.fixed),
    replicaBases: LayeredMap.next(previous.replicaBases),
    internal: LayeredMap.next(previous.internal),
    internalReplicas: LayeredMap.next(previous.internalReplicas),
    domains: new Map(),
    conflicts: [],
  };
  // The GVCs are the same objects (sameNaming): the alias names of `before` are theirs.
  for (const gvc of before.gvcs.values()) {
    const host = gvcAliasHost(before.settings, gvc);
    if (t.fixed.get(host)?.kind === 'alias') t.fixed.delete(host);
  }
  for (const key of changed) {
    const old = before.workloads.get(key);
    if (old !== undefined) workloadNames(t, before, old, release);
  }
  const claim = claimer(t.conflicts);
  for (const key of changed) {
    const workload = snapshot.workloads.get(key);
    if (workload !== undefined) workloadNames(t, snapshot, workload, claim);
  }
  aliasAndDomainNames(t, snapshot, claim);
  return t.conflicts.length > 0 ? buildHostIndex(snapshot) : indexOf(t, snapshot);
}

/** Whether every name of an unchanged workload is the same in both snapshots: the same settings, org and GVCs. */
function sameNaming(a: Snapshot, b: Snapshot): boolean {
  const x = a.settings;
  const y = b.settings;
  if (x.vendor !== y.vendor || x.appDomain !== y.appDomain || x.directDomain !== y.directDomain || x.internalDomain !== y.internalDomain) return false;
  if (a.org !== b.org || a.gvcs.size !== b.gvcs.size) return false;
  for (const [name, gvc] of a.gvcs) if (b.gvcs.get(name) !== gvc) return false;
  return true;
}

/**
 * Resolve a Host header on a listener. `listenerPort` picks a domain's port (the one whose
 * `number` equals it, else the domain's first port). The mesh listener answers every kind; the
 * external listener never answers internal names.
 */
export function resolveHost(
  index: HostIndex,
  hostHeader: string,
  listener: Listener,
  listenerPort?: number,
): HostTarget | undefined {
  const parsed = parseHostHeader(hostHeader);
  if (!parsed) return undefined;
  const host = parsed.host;

  const fixed = index.fixed.get(host);
  if (fixed) return fixed;
  const domain = index.domains.get(host);
  if (domain) return (listenerPort !== undefined && domain.byNumber.get(listenerPort)) || domain.first;

  const dot = host.indexOf('.');
  if (dot <= 0) return undefined;

  // `W-ALIAS-N.LOC.DIRECT_DOMAIN`: the index is the last `-` run of the first label.
  const dash = host.lastIndexOf('-', dot);
  if (dash > 0) {
    const replicaIndex = parseIndex(host, dash + 1, dot);
    if (replicaIndex !== undefined) {
      const base = index.replicaBases.get(host.slice(0, dash) + host.slice(dot));
      if (base) return { kind: 'replica', workload: base.workload, location: base.location, index: replicaIndex };
    }
  }

  if (listener !== 'mesh') return undefined;

  const entry = index.internal.get(host);
  if (entry) {
    const port = pickPort(entry, parsed.port);
    return port === undefined ? undefined : { kind: 'internal', workload: entry.workload, port };
  }

  // `replica-N.W.LOC.GVC.INTERNAL_DOMAIN`
  if (host.startsWith('replica-')) {
    const replicaIndex = parseIndex(host, 8, dot);
    if (replicaIndex === undefined) return undefined;
    const r = index.internalReplicas.get(host.slice(dot + 1));
    if (!r) return undefined;
    const port = pickPort(r, parsed.port);
    if (port === undefined) return undefined;
    return { kind: 'internal-replica', workload: r.workload, location: r.location, index: replicaIndex, port };
  }
  return undefined;
}
