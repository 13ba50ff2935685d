/**
 * The start-up summary of `svcproxy ingress` and `svcproxy sidecar` (said by src/summary.ts): role,
 * location, org, every listener, admin, the configuration's paths and what they hold, the sidecar's
 * identity and app, the mesh identity, the worker count. Read from what the Runtime already exposes
 * after it started (its bound listeners, store and mesh client), so nothing here runs again later.
 */
import { formatHostPort } from '../address.js';
import type { Snapshot } from '../config/model.js';
import { count, probeRows, type StartSummary } from '../summary.js';
import type { Runtime, RuntimeOptions } from './runtime.js';

/** What the configuration holds, for the summary. */
export function configCounts(snapshot: Snapshot): { records: number; workloads: number; gvcs: number; domains: number; deploymentReplicas: number } {
  let deploymentReplicas = 0;
  for (const list of snapshot.deployments.values()) deploymentReplicas += list.length;
  return { records: snapshot.records.length, workloads: snapshot.workloads.size, gvcs: snapshot.gvcs.size, domains: snapshot.domains.size, deploymentReplicas };
}

export function runtimeSummary(runtime: Runtime, options: RuntimeOptions, workers = 1): StartSummary {
  const role = options.role;
  const counts = configCounts(runtime.store.current);
  const listeners = [
    ...runtime.listeners.map((l) => ({ address: formatHostPort(l.address), kind: l.tls ? 'https' : 'http' })),
    ...runtime.meshListeners.map((l) => ({ address: formatHostPort(l.address), kind: 'mesh' })),
    ...runtime.meshInboundListeners.map((l) => ({ address: formatHostPort(l.address), kind: 'mesh-mtls' })),
  ];
  const admin = runtime.admin ? formatHostPort(runtime.admin.address) : undefined;
  const status = runtime.statusListener ? formatHostPort(runtime.statusListener.address) : undefined;
  const metrics = runtime.metricsListener ? formatHostPort(runtime.metricsListener.address) : undefined;
  const identity = runtime.meshTls?.uri;
  const sidecar = options.sidecar;
  const paths = options.configPaths ?? [];
  // The org of the identities, when something names one (the records, or --org); else none is shown.
  const org = runtime.store.current.org !== undefined || options.org !== undefined ? runtime.dataplane.org : undefined;
  const rows: [string, string][] = [];
  if (options.location !== undefined) rows.push(['location', options.location]);
  if (org !== undefined) rows.push(['org', org]);
  if (sidecar) rows.push(['workload', `${sidecar.workload}  replica ${sidecar.replica}  app ${sidecar.app}`]);
  for (const l of listeners) {
    if (l.kind === 'mesh') rows.push(['mesh', `http://${l.address}  (outbound: internal names, siblings, egress)`]);
    else if (l.kind === 'mesh-mtls') rows.push(['mesh mTLS', `${l.address}  (calls from other sidecars)`]);
    else rows.push(['listening', `${l.kind}://${l.address}`]);
  }
  if (identity !== undefined) rows.push(['identity', identity]);
  if (admin !== undefined) rows.push(['admin', `http://${admin}  (/healthz /ready /metrics /config)`]);
  rows.push(...probeRows(status, metrics));
  rows.push([
    'config',
    `${paths.join(', ')}  (${count(counts.records, 'record')}: ${count(counts.workloads, 'workload')}, ${count(counts.gvcs, 'gvc')}, ${count(counts.domains, 'domain')}, ${count(counts.deploymentReplicas, 'deployment replica')})`,
  ]);
  rows.push(['workers', String(workers)]);
  return {
    role,
    rows,
    fields: {
      role,
      ...(options.location !== undefined ? { location: options.location } : {}),
      ...(org !== undefined ? { org } : {}),
      ...(sidecar ? { sidecar: { workload: sidecar.workload, replica: sidecar.replica, app: sidecar.app } } : {}),
      listeners,
      ...(admin !== undefined ? { admin } : {}),
      ...(status !== undefined ? { status } : {}),
      ...(metrics !== undefined ? { metrics } : {}),
      ...(identity !== undefined ? { identity } : {}),
      config: { paths, ...counts },
      workers,
    },
  };
}

