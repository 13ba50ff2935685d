/**
 * The request pipeline of DESIGN §5, shared by every role, one module a stage, in the order a request
 * goes:
 *
 *   entry/        the listener's entry: the role's own first steps (entry/start.ts: the exchange,
 *                 shedding, malformed requests, the path normalized once)
 *                   ingress.ts       external listeners: host → route → ingress filters (external firewall)
 *                   outbound.ts      a workload's outbound (mesh) listener: the same with its caller's identity
 *                   egress.ts        hosts outside the mesh, through an outbound listener: the egress firewall
 *                   sidecar.ts       a standalone sidecar's listener: its filters, then its app
 *                   mesh-inbound.ts  a sidecar's mTLS listener: the caller admitted, its filters, its app
 *   dispatch.ts   suspended? → location (geo) → replica → the sidecar filters unless its sidecar runs them
 *   activator.ts  no replica ready: the request waits for one starting (or first checked), or 503
 *   attempts.ts   one attempt at a time, streamed by forward.ts; retries on another replica
 *   observation.ts  once the exchange is over: telemetry, metrics, the access-log line
 *
 * exchange.ts is the one request's state every stage shares; routes.ts the table compiled from the
 * configuration they all read. Upgrades and CONNECT tunnels go from their entry to tunnels.ts. Every
 * answer the proxy makes itself goes through `Exchange.reply` (DESIGN §6); nothing here throws to
 * the server.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { PortModel, Snapshot } from '../config/model.js';
import { SharedResources } from '../filter/index.js';
import { DEFAULT_ORG } from '../mesh/index.js';
import type { HostPort, Replica } from '../routing/index.js';
import { Activator } from './activator.js';
import { Attempts } from './attempts.js';
import { debugHeaders } from './debug-answers.js';
import type { DataPlaneOptions, Plane, SidecarIdentity } from './dataplane-options.js';
import { Dispatcher } from './dispatch.js';
import { Egress } from './entry/egress.js';
import { IngressEntry } from './entry/ingress.js';
import { MeshInboundEntry } from './entry/mesh-inbound.js';
import { OutboundEntry } from './entry/outbound.js';
import { SidecarEntry } from './entry/sidecar.js';
import type { Exchange } from './exchange.js';
import type { ListenerHandlers } from '../listener/index.js';
import type { MeshTlsClient } from './mesh-tls.js';
import type { Hop, MeshInbound, OutboundCaller } from './mesh-peer.js';
import { Observation } from './observation.js';
import { buildRouteTable, replicaHop, type FilterFactories, type RouteTable, type RouteTableDeps } from './routes.js';
import { Tunnels } from './tunnels.js';
import type { Upstreams } from './upstreams.js';

const NO_FILTERS: FilterFactories = { ingress: [], sidecar: [] };

export class DataPlane implements Plane {
  table: RouteTable;
  inFlight = 0;
  /** Clients of outside services (auth, rate limit), kept across reloads. */
  readonly shared = new SharedResources();
  readonly anyReplica = { hasReady: (workload: string, location: string) => this.opts.replicas.list(workload, location).length > 0 };
  private readonly factories: FilterFactories;
  private drainWaiters: (() => void)[] = [];
  // The stages, each given what it calls next.
  private readonly observation: Observation;
  private readonly attempts: Attempts;
  private readonly activation: Activator;
  private readonly dispatcher: Dispatcher;
  private readonly tunnels: Tunnels;
  private readonly ingress: IngressEntry;
  private readonly outbound: OutboundEntry;
  private readonly sidecar: SidecarEntry;
  private readonly meshInbound: MeshInboundEntry;

  constructor(snapshot: Snapshot, readonly opts: DataPlaneOptions) {
    this.factories = opts.factories ?? NO_FILTERS;
    this.table = buildRouteTable(snapshot, this.factories, this.tableDeps());
    this.observation = new Observation(opts);
    // Before the attempts: a replica turning ready wakes the requests held for it before outlier
    // detection (attempts.ts) forgets its ejection, as both listen to the registry's 'ready'.
    this.activation = new Activator(opts, (ex, table, route, tls) => this.dispatcher.dispatch(ex, table, route, tls, true));
    this.attempts = new Attempts(this);
    this.dispatcher = new Dispatcher(this, this.activation, this.attempts);
    this.tunnels = new Tunnels(this, this.observation);
    const egress = new Egress({ metrics: opts.metrics, logger: opts.deps.logger.child({ component: 'egress' }) });
    this.ingress = new IngressEntry(this, this.dispatcher, this.attempts, this.tunnels, egress);
    this.outbound = new OutboundEntry(this, this.ingress, this.tunnels, egress);
    this.sidecar = new SidecarEntry(this, this.attempts, this.tunnels);
    this.meshInbound = new MeshInboundEntry(this, this.attempts, this.tunnels);
  }

  // ---- handlers per listener (entry/) ----------------------------------------------------------

  /** The ingress's external listener (or `up`'s): every host but internal ones. */
  ingressHandlers(listener: { port: number; tls: boolean }): ListenerHandlers {
    return this.ingress.handlers(listener);
  }

  /**
   * A mesh (outbound) listener: answers internal host names (and every other workload host) for
   * callers inside the mesh. `caller` is the identity of the workload whose outbound traffic this
   * listener carries; the target's internal firewall decides whether it may call (DESIGN §4).
   */
  meshHandlers(listener: { port: number }, caller: OutboundCaller = {}): ListenerHandlers {
    return this.outbound.handlers(listener, caller);
  }

  /** A sidecar's mTLS listener (`--mesh-inbound`; one per replica under `up`). */
  meshInboundHandlers(identity: MeshInbound, listener: { port: number }): ListenerHandlers {
    return this.meshInbound.handlers(identity, listener);
  }

  /** A standalone sidecar's inbound listener: filters, then the app. */
  sidecarHandlers(identity: SidecarIdentity, listener: { port: number; tls: boolean }): ListenerHandlers {
    return this.sidecar.handlers(identity, listener);
  }

  // ---- the end of every exchange ---------------------------------------------------------------

  onFinish(ex: Exchange): void {
    this.inFlight--;
    this.activation.finished(ex);
    this.attempts.finished(ex);
    if (this.inFlight === 0 && this.drainWaiters.length > 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
    this.observation.record(ex);
  }

  /** Debug answers (debug-answers.ts): on upstream answers and on the proxy's own replies. */
  debugHeaders(ex: Exchange): OutgoingHttpHeaders | undefined {
    return ex.debugInfo === undefined ? undefined : debugHeaders(ex, this.table.headers, this.opts.deps.clock, this.opts.telemetry);
  }

  // ---- what the stages read --------------------------------------------------------------------

  /** The org whose trust domain the mesh identities are in. */
  get org(): string {
    return this.table.snapshot.org?.name ?? this.opts.org ?? DEFAULT_ORG;
  }

  hopOf(ex: Exchange, replica: Replica, port: PortModel | undefined, internal: boolean): Hop {
    return replicaHop(this.table.snapshot, ex.workload!, replica, port, internal, ex.meshCaller);
  }

  // ---- the data plane's life -------------------------------------------------------------------

  get snapshot(): Snapshot {
    return this.table.snapshot;
  }

  get requestsInFlight(): number {
    return this.inFlight;
  }

  /** Connection pools to apps and sidecars (HTTP/1.1 and HTTP/2), kept across reloads. */
  get upstreams(): Upstreams {
    return this.attempts.upstreams;
  }

  /**
   * Swap in a new configuration; requests in flight finish on the old one. What the change did not
   * touch is taken from the table in force (routes.ts).
   */
  update(snapshot: Snapshot): void {
    this.table = buildRouteTable(snapshot, this.factories, this.tableDeps(), this.table);
    this.opts.telemetry?.update(snapshot);
  }

  /** Resolves once no request is in flight. */
  drained(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  async close(): Promise<void> {
    await Promise.all([this.attempts.close(), this.shared.close(), this.opts.telemetry?.close()]);
  }

  /** A mesh listener went away (a replica that stopped): drop every caller's connections to it. */
  forgetMesh(address: HostPort): void {
    this.attempts.forgetMesh(address);
  }

  /** A mesh caller went away (a replica `up` stopped): close its mTLS connections. */
  releaseCaller(tls: MeshTlsClient): void {
    this.attempts.releaseCaller(tls);
  }

  /**
   * Asked when a request finds no replica ready or starting: true when a replica of the workload
   * (in `location`, when fixed) is being started for it (`up`'s scaler, scale from zero).
   */
  set activator(activate: ((workload: string, location: string | undefined) => boolean) | undefined) {
    this.activation.activate = activate;
  }

  /** Why nothing runs a workload (`up`: src/local/not-run.ts), said with its 503 `no healthy upstream`. */
  set notRun(notRun: ((workload: string) => string | undefined) | undefined) {
    this.activation.notRun = notRun;
  }

  /** Requests of a workload waiting for a replica: in `location` (fixed there), or anywhere (location undefined). */
  heldCount(workload: string): { readonly anywhere: number; readonly byLocation: ReadonlyMap<string, number> } {
    return this.activation.heldCount(workload);
  }

  private tableDeps(): RouteTableDeps {
    return { deps: this.opts.deps, metrics: this.opts.metrics, shared: this.shared, ...(this.opts.sidecarOf !== undefined ? { sidecarOf: this.opts.sidecarOf } : {}) };
  }
}
