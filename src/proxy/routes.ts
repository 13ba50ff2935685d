/**
 * Everything the request path reads, compiled from one configuration snapshot and swapped whole on
 * reload: the host index, each workload's ingress and sidecar filter chains, the header names of the
 * configured vendor. Requests in flight keep the table they started with.
 */
import type { PortModel, Protocol, Snapshot, WorkloadModel } from '../config/model.js';
import type { Deps } from '../deps.js';
import { buildHostIndex, type HostIndex } from '../routing/index.js';
import { buildChain, type Chain } from './filters.js';
import { vendorHeaders, type FilterFactory, type SharedResources, type VendorHeaders } from '../filter/index.js';
import type { Metrics } from '../admin/metrics.js';
import { compileRetryPolicy, type RetryPolicy } from '../retry/policy.js';

export interface RouteTable {
  readonly snapshot: Snapshot;
  readonly hosts: HostIndex;
  readonly ingressChains: ReadonlyMap<string, Chain>;
  readonly sidecarChains: ReadonlyMap<string, Chain>;
  /** Compiled `requestRetryPolicy` per workload. */
  readonly retryPolicies: ReadonlyMap<string, RetryPolicy>;
  readonly headers: VendorHeaders;
}

export interface FilterFactories {
  readonly ingress: readonly FilterFactory[];
  readonly sidecar: readonly FilterFactory[];
}

export interface RouteTableDeps {
  readonly deps: Deps;
  readonly metrics: Metrics;
  readonly shared: SharedResources;
  /** A standalone sidecar's workload: the only one whose sidecar chain is built. */
  readonly sidecarOf?: string;
}

export function buildRouteTable(snapshot: Snapshot, factories: FilterFactories, env: RouteTableDeps): RouteTable {
  const ingressChains = new Map<string, Chain>();
  const sidecarChains = new Map<string, Chain>();
  const retryPolicies = new Map<string, RetryPolicy>();
  for (const workload of snapshot.workloads.values()) {
    retryPolicies.set(workload.key, compileRetryPolicy(workload.retryPolicy));
    const ctx = { snapshot, workload, gvc: snapshot.gvcs.get(workload.gvc), ...env };
    ingressChains.set(workload.key, buildChain(factories.ingress, ctx));
    if (env.sidecarOf === undefined || env.sidecarOf === workload.key) sidecarChains.set(workload.key, buildChain(factories.sidecar, ctx));
  }
  return {
    snapshot,
    hosts: buildHostIndex(snapshot),
    ingressChains,
    sidecarChains,
    retryPolicies,
    headers: vendorHeaders(snapshot.settings.vendor),
  };
}

/** The declared port (of any container) with this number; the primary port when none is given. */
export function findPort(workload: WorkloadModel, number: number | undefined): PortModel | undefined {
  if (number === undefined) return workload.primaryPort;
  for (const c of workload.containers) for (const p of c.ports) if (p.number === number) return p;
  return undefined;
}

/** The config layer already resolved `ports[].protocol` over the deprecated `svc/protocol` tag. */
export function protocolOf(port: PortModel | undefined): Protocol {
  return port ? port.protocol : 'http';
}
