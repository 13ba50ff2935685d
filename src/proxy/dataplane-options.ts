/**
 * What a data plane is built with (DataPlaneOptions) and who a standalone sidecar is
 * (SidecarIdentity): the types the data plane and the tunnels it hands upgrades to both read, in a
 * module of their own so that neither imports the other for them. Types only; nothing here runs.
 */
import type { Logger } from 'pino';
import type { Deps } from '../deps.js';
import type { Metrics } from '../admin/metrics.js';
import type { HostPort, ReplicaRegistry } from '../routing/index.js';
import type { RequestTelemetry } from '../observe/index.js';
import type { FilterFactories } from './routes.js';
import type { OverloadGuard } from './overload.js';

export interface DataPlaneOptions {
  readonly replicas: ReplicaRegistry;
  readonly deps: Deps;
  readonly metrics: Metrics;
  /** Access log: one line per request, at info. */
  readonly accessLog: Logger;
  readonly factories?: FilterFactories;
  /** Tracing and access-log services; none: no hook is called. */
  readonly telemetry?: RequestTelemetry;
  /** Measured latency to a location (ms), for geo routing; `location.status.latencyMs` wins. */
  readonly latencyOf?: (location: string) => number | undefined;
  /** Load shedding: new requests get 503 `overloaded` while it says so. */
  readonly overload?: OverloadGuard;
  /**
   * A standalone sidecar's workload key: only its own sidecar filters are built (it forwards to its
   * own app; other workloads' sidecar filters run in their own sidecars or at an ingress).
   */
  readonly sidecarOf?: string;
  /**
   * Requests one workload may have waiting for a starting replica (DESIGN §10); past it, 503
   * `overloaded`. Default `MAX_HELD_PER_WORKLOAD`.
   */
  readonly maxHeldPerWorkload?: number;
  /**
   * `--org` (or `SVC_ORG`): the org of the mesh identities (`spiffe://ORG/...`) while the records
   * carry no org record; the records' org wins (the CLI refuses another at start, a reload to
   * another is rejected). Neither: `DEFAULT_ORG`.
   */
  readonly org?: string;
}

/** The identity of a standalone sidecar. */
export interface SidecarIdentity {
  readonly workload: string;
  readonly location: string;
  readonly replica: string;
  /** The app container, `host:port`. */
  readonly app: HostPort;
}
