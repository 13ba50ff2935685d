/**
 * Compiles validated records into the immutable `Snapshot` of model.ts: org, locations, GVCs (alias
 * given or generated, placement resolved to location names, tracing falling back to the org's),
 * workloads (compile-workload.ts), domains (hosts lower-cased without a trailing dot, routes ordered
 * and their regexes compiled) and deployment replicas. Records of kinds svcproxy does not read are
 * kept in `records` only. Expects records that passed `validate()`: it does not re-check, and may
 * throw on what validation rejects. Location defaults: `provider` is the name's first hyphen-separated
 * part, `region` the rest (`aws-us-west-2` → `aws`, `us-west-2`; `local` → `local`, `local`).
 */
import { gvcAlias } from './alias.js';
import { buildCatalog, catalogChange, type Catalog } from './catalog.js';
import { LayeredMap } from '../layered-map.js';
import { compileWorkload } from './compile-workload.js';
import { deepFreeze, frozen } from './frozen.js';
import { linkOfKind, locationName, workloadRef } from './links.js';
import type {
  DeploymentReplicaModel, DomainModel, DomainPortModel, DomainRouteModel, GvcModel, LocationModel, LocationOptionModel,
  OrgModel, Settings, Snapshot, TracingModel, WorkloadModel,
} from './model.js';
import type {
  DeploymentRecord, DomainRecord, DomainRouteRecord, GvcRecord, LocationRecord, OrgRecord, SourcedRecord, WorkloadRecord,
} from './records.js';
import { workloadGvc } from './records.js';
import { isObject } from './schema.js';
import { tagStrings } from './tags.js';
import { canonicalHostName, isScalar } from './values.js';

/** `spec.tracing` → model; `sampling` defaults to 100 (Envoy's default), custom tags become strings. */
export function compileTracing(raw: unknown): TracingModel | undefined {
  if (!isObject(raw)) return undefined;
  const provider = isObject(raw.provider) ? raw.provider : {};
  const customTags: Record<string, string> = {};
  for (const [k, v] of Object.entries(isObject(raw.customTags) ? raw.customTags : {})) {
    const literal = isObject(v) && isObject(v.literal) ? v.literal.value : v;
    if (isScalar(literal)) customTags[k] = String(literal);
  }
  const otel = isObject(provider.otel) && typeof provider.otel.endpoint === 'string' ? provider.otel.endpoint : undefined;
  return Object.freeze({
    sampling: typeof raw.sampling === 'number' ? raw.sampling : 100,
    customTags: Object.freeze(customTags),
    ...(otel === undefined ? {} : { otelEndpoint: otel }),
    controlplane: provider.controlplane !== undefined && provider.controlplane !== null,
    raw: frozen(raw),
  });
}

function compileOrg(org: OrgRecord): OrgModel {
  const tracing = compileTracing(org.spec?.tracing);
  const prefix = org.status?.endpointPrefix;
  return Object.freeze({ name: org.name, ...(prefix ? { endpointPrefix: prefix } : {}), ...(tracing ? { tracing } : {}) });
}

function compileLocation(loc: LocationRecord): LocationModel {
  const dash = loc.name.indexOf('-');
  const latencyMs = loc.status?.latencyMs;
  return Object.freeze({
    name: loc.name,
    provider: loc.provider ?? (dash > 0 ? loc.name.slice(0, dash) : loc.name),
    region: loc.region ?? (dash > 0 ? loc.name.slice(dash + 1) : loc.name),
    ...(latencyMs === undefined ? {} : { latencyMs }),
  });
}

function compileGvc(gvc: GvcRecord, locations: readonly string[], org: OrgModel | undefined): GvcModel {
  const spec = gvc.spec ?? {};
  const options = new Map<string, LocationOptionModel>();
  for (const o of spec.staticPlacement?.locationOptions ?? []) {
    const name = linkOfKind(o.locationLink, 'location')?.name;
    if (name === undefined || !locations.includes(name)) continue;
    options.set(name, Object.freeze({
      ...(o.routingTier === undefined ? {} : { routingTier: o.routingTier }),
      latencyOffsetMs: o.latencyOffsetMs ?? 0,
      ...(o.latencyToleranceMs === undefined ? {} : { latencyToleranceMs: o.latencyToleranceMs }),
    }));
  }
  const aliasWorkload = workloadRef(spec.aliasWorkloadLink, gvc.name)?.name;
  const tracing = compileTracing(spec.tracing) ?? org?.tracing;
  return Object.freeze({
    name: gvc.name,
    alias: gvcAlias(gvc.name, gvc.alias),
    endpointNamingFormat: spec.endpointNamingFormat ?? 'default',
    locations: Object.freeze([...locations]),
    locationOptions: options,
    ...(aliasWorkload === undefined ? {} : { aliasWorkload }),
    ...(tracing ? { tracing } : {}),
    trustedProxies: spec.loadBalancer?.trustedProxies ?? 0,
    ...(spec.sidecar?.envoy ? { sidecarEnvoy: frozen(spec.sidecar.envoy) } : {}),
    tags: tagStrings(gvc.tags),
  });
}

/** Anchored full match on the path, as Envoy's `safe_regex` matches. */
export function routeRegex(source: string): RegExp {
  return new RegExp(`^(?:${source})$`);
}

/**
 * Routes in match order: when every route is a prefix route, longest prefix first (so `/` comes
 * last; equal lengths keep written order); when any route is a regex, written order.
 */
export function orderRoutes<T extends { readonly prefix?: string | undefined }>(routes: readonly T[]): T[] {
  if (!routes.every((r) => r.prefix !== undefined)) return [...routes];
  return [...routes].sort((a, b) => (b.prefix as string).length - (a.prefix as string).length);
}

function compileRoute(route: DomainRouteRecord, gvc: string | undefined): DomainRouteModel {
  const ref = workloadRef(route.workloadLink, gvc);
  const set = route.headers?.request?.set ?? {};
  return Object.freeze({
    ...(route.prefix === undefined ? {} : { prefix: route.prefix }),
    ...(route.regex === undefined ? {} : { regex: routeRegex(route.regex) }),
    ...(route.replacePrefix === undefined ? {} : { replacePrefix: route.replacePrefix }),
    workload: `${ref?.gvc ?? ''}/${ref?.name ?? ''}`,
    ...(route.port === undefined ? {} : { port: route.port }),
    ...(route.replica === undefined ? {} : { replica: route.replica }),
    setHeaders: deepFreeze(Object.entries(set).map(([k, v]) => [k.toLowerCase(), String(v)] as const)),
  });
}

function compileDomain(domain: DomainRecord): DomainModel {
  const gvc = linkOfKind(domain.spec?.gvcLink, 'gvc')?.name;
  const ports: DomainPortModel[] = (domain.spec?.ports ?? []).map((p) => Object.freeze({
    number: p.number,
    routes: Object.freeze(orderRoutes((p.routes ?? []).map((r) => compileRoute(r, gvc)))),
  }));
  return Object.freeze({ host: canonicalHostName(domain.name), ...(gvc === undefined ? {} : { gvc }), ports: Object.freeze(ports) });
}

/** Replicas of a deployment record; a replica's index is its position in its location's list. */
function compileDeployment(deployment: DeploymentRecord): DeploymentReplicaModel[] {
  const out: DeploymentReplicaModel[] = [];
  for (const loc of deployment.status?.locations ?? []) {
    const location = locationName(loc.name) ?? loc.name;
    (loc.replicas ?? []).forEach((r, index) => out.push(Object.freeze({
      name: r.name,
      index,
      location,
      address: r.address,
      ...(r.sidecar === undefined ? {} : { sidecar: r.sidecar }),
      ...(r.mesh === undefined ? {} : { mesh: r.mesh }),
      forcedNotReady: r.ready === false,
    })));
  }
  return out;
}

/**
 * Models compiled before, by the (frozen) record they were compiled from, with what else they were
 * compiled from: a model is reused when its record is the same object and so is everything else
 * (the org's and GVC's models, the settings, a GVC's locations). A write through the API compiles
 * again only what it changed and what depends on it; everything else comes out as it did (the
 * models are pure functions of these inputs, test/config/incremental-compile.test.ts holds them to a
 * full compile). Records not frozen (built in memory) are compiled every time.
 */
const orgModels = new WeakMap<object, OrgModel>();
const gvcModels = new WeakMap<object, { readonly locations: string; readonly org: OrgModel | undefined; readonly model: GvcModel }>();
const workloadModels = new WeakMap<object, { readonly gvc: GvcModel; readonly org: OrgModel | undefined; readonly settings: Settings; readonly model: WorkloadModel }>();
const deploymentModels = new WeakMap<object, readonly DeploymentReplicaModel[]>();

function reusedOrg(record: OrgRecord): OrgModel {
  const known = orgModels.get(record);
  if (known !== undefined) return known;
  const model = compileOrg(record);
  if (Object.isFrozen(record)) orgModels.set(record, model);
  return model;
}

function reusedGvc(record: GvcRecord, locations: readonly string[], org: OrgModel | undefined): GvcModel {
  const key = locations.join('\u0000');
  const known = gvcModels.get(record);
  if (known !== undefined && known.locations === key && known.org === org) return known.model;
  const model = compileGvc(record, locations, org);
  if (Object.isFrozen(record)) gvcModels.set(record, { locations: key, org, model });
  return model;
}

function reusedWorkload(record: WorkloadRecord, gvc: GvcModel, org: OrgModel | undefined, settings: Settings): WorkloadModel {
  const known = workloadModels.get(record);
  if (known !== undefined && known.gvc === gvc && known.org === org && known.settings === settings) return known.model;
  const model = compileWorkload(record, gvc, org, settings);
  if (Object.isFrozen(record)) workloadModels.set(record, { gvc, org, settings, model });
  return model;
}

function reusedDeployment(record: DeploymentRecord): readonly DeploymentReplicaModel[] {
  const known = deploymentModels.get(record);
  if (known !== undefined) return known;
  const model = Object.freeze(compileDeployment(record));
  if (Object.isFrozen(record)) deploymentModels.set(record, model);
  return model;
}

/**
 * Builds the snapshot; `warnings` are validation's, carried along for `/config` and the logs, and
 * `catalog` the index validation built of the same records (built here when not given).
 */
export function compile(
  records: readonly SourcedRecord[],
  settings: Settings,
  generation: number,
  warnings: readonly string[] = [],
  catalog: Catalog = buildCatalog(records).catalog,
): Snapshot {
  const snapshot = changedCompile(records, settings, generation, warnings, catalog) ?? fullCompile(records, settings, generation, warnings, catalog);
  compiledFrom.set(catalog, { settings, snapshot });
  return snapshot;
}

/** The snapshot compiled from each index (with the settings it was compiled with). */
const compiledFrom = new WeakMap<Catalog, { readonly settings: Settings; readonly snapshot: Snapshot }>();

/**
 * The snapshot of `catalog` made from the one compiled from the index it was made from
 * (catalog.ts `catalogChange`: a few workloads and deployments changed, everything else the same
 * objects) with the same settings: those workloads and deployments compiled (or removed) again, in
 * maps layered over the ones before (layered-map.ts, a `Map`'s order: the order a full
 * compile gives), everything else that snapshot's. A write of one workload then costs its own
 * models rather than a pass over 10,000. Undefined when `catalog` was made otherwise.
 */
function changedCompile(records: readonly SourcedRecord[], settings: Settings, generation: number, warnings: readonly string[], catalog: Catalog): Snapshot | undefined {
  const change = catalogChange(catalog);
  const from = change?.from.deref();
  const before = from === undefined ? undefined : compiledFrom.get(from);
  if (change === undefined || before === undefined || before.settings !== settings) return undefined;
  const previous = before.snapshot;
  const org = previous.org;
  const workloads = LayeredMap.next(previous.workloads);
  for (const key of change.workloads.deleted) workloads.delete(key);
  for (const key of change.workloads.put) {
    const w = catalog.workloads.get(key)!;
    const gvc = previous.gvcs.get(workloadGvc(w) as string);
    if (gvc) workloads.set(key, reusedWorkload(w as unknown as WorkloadRecord, gvc, org, settings));
    else workloads.delete(key);
  }
  const deployments = LayeredMap.next(previous.deployments);
  for (const key of change.deployments.deleted) deployments.delete(key);
  for (const key of change.deployments.put) deployments.set(key, reusedDeployment(catalog.deployments.get(key)! as unknown as DeploymentRecord));
  const snapshot: Snapshot = Object.freeze({
    settings: previous.settings,
    ...(org ? { org } : {}),
    locations: previous.locations,
    gvcs: previous.gvcs,
    workloads,
    domains: previous.domains,
    deployments,
    records: Object.freeze(records.map((r) => frozen(r.record))),
    warnings: Object.freeze([...warnings]),
    generation,
  });
  const differs = <T>(keys: readonly string[], a: ReadonlyMap<string, T>, b: ReadonlyMap<string, T>): string[] => [...new Set(keys)].filter((k) => a.get(k) !== b.get(k));
  compiledChanges.set(snapshot, {
    before: previous,
    workloads: differs([...change.workloads.deleted, ...change.workloads.put], previous.workloads, workloads),
    deployments: differs([...change.deployments.deleted, ...change.deployments.put], previous.deployments, deployments),
  });
  return snapshot;
}

/** What a snapshot made from the one before changed of it: the keys whose workload model or deployment replicas differ. */
export interface CompiledChange {
  readonly before: Snapshot;
  readonly workloads: readonly string[];
  readonly deployments: readonly string[];
}

const compiledChanges = new WeakMap<Snapshot, CompiledChange>();

/** How `snapshot` differs from the one it was compiled from, when `compile` made it from that one (config/changed.ts reads it). */
export function compiledChange(snapshot: Snapshot): CompiledChange | undefined {
  return compiledChanges.get(snapshot);
}

function fullCompile(records: readonly SourcedRecord[], settings: Settings, generation: number, warnings: readonly string[], catalog: Catalog): Snapshot {
  const org = catalog.org ? reusedOrg(catalog.org as unknown as OrgRecord) : undefined;
  const locations = new Map<string, LocationModel>();
  for (const [name, loc] of catalog.locations) locations.set(name, compileLocation(loc as unknown as LocationRecord));
  const gvcs = new Map<string, GvcModel>();
  for (const [name, gvc] of catalog.gvcs) {
    gvcs.set(name, reusedGvc(gvc as unknown as GvcRecord, catalog.gvcLocations.get(name) ?? [], org));
  }
  const workloads = new Map<string, WorkloadModel>();
  for (const [key, w] of catalog.workloads) {
    const gvc = gvcs.get(workloadGvc(w) as string);
    if (gvc) workloads.set(key, reusedWorkload(w as unknown as WorkloadRecord, gvc, org, settings));
  }
  const domains = new Map<string, DomainModel>();
  for (const [host, d] of catalog.domains) domains.set(host, compileDomain(d as unknown as DomainRecord));
  const deployments = new Map<string, readonly DeploymentReplicaModel[]>();
  for (const [key, d] of catalog.deployments) deployments.set(key, reusedDeployment(d as unknown as DeploymentRecord));

  return Object.freeze({
    settings: Object.freeze({ ...settings }),
    ...(org ? { org } : {}),
    locations,
    gvcs,
    workloads,
    domains,
    deployments,
    records: Object.freeze(records.map((r) => frozen(r.record))),
    warnings: Object.freeze([...warnings]),
    generation,
  });
}
