/**
 * What a data plane is built with (DataPlaneOptions), what each stage of its pipeline reads of it
 * (Plane), and who a standalone sidecar is (SidecarIdentity): the types the data plane, its stages
 * and the tunnels it hands upgrades to all read, in a module of their own so that none imports
 * another for them. Types only; nothing here runs.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { Deps } from '../deps.js';
import type { Metrics } from '../admin/metrics.js';
import type { PortModel } from '../config/model.js';
import type { HostPort, Replica, ReplicaRegistry } from '../routing/index.js';
import type { RequestTelemetry } from '../observe/index.js';
import type { FilterFactories, RouteTable } from './routes.js';
import type { OverloadGuard } from './overload.js';
import type { ExchangeObserver, Exchange } from './exchange.js';
import type { Hop } from './mesh-peer.js';

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
   * `overloaded`. Default `MAX_HELD_PER_WORKLOAD` (activator.ts).
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

/**
 * The data plane as its stages see it (src/proxy/dataplane.ts is the one): its options, the table of
 * the configuration in force (a request keeps the one it was routed with; what is read afresh says
 * so), the org of the mesh identities, and the observer every exchange reports to.
 */
export interface Plane extends ExchangeObserver {
  readonly opts: DataPlaneOptions;
  readonly table: RouteTable;
  /** The org whose trust domain the mesh identities are in. */
  readonly org: string;
  /** For `svc/publishNotReadyAddresses`: a location counts when it has any replica, ready or not. */
  readonly anyReplica: Pick<ReplicaRegistry, 'hasReady'>;
  /** Requests started and not finished yet (draining waits for none). */
  inFlight: number;
  /** The debug headers of a request that asked for them; `undefined` for every other. */
  debugHeaders(ex: Exchange): OutgoingHttpHeaders | undefined;
  /** How a request reaches `replica` on `port` (see Hop), under the table in force; `internal`: for an internal name. */
  hopOf(ex: Exchange, replica: Replica, port: PortModel | undefined, internal: boolean): Hop;
}
