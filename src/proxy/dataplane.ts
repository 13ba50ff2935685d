/**
 * The request pipeline of DESIGN §5, shared by every role. The ingress path: normalize the path →
 * resolve the host → ingress filters (external firewall) → suspended? → pick a location (geo, for
 * canonical, alias and domain hosts) → pick a ready replica → hand the request to the replica's own
 * sidecar, or run the sidecar filters in-process and forward to the app container's port in its
 * protocol. The sidecar path (a standalone `svcproxy sidecar`) starts at the filters. Every answer the
 * proxy makes itself goes through `Exchange.reply` (DESIGN §6); nothing here throws to the server.
 */
import http2 from 'node:http2';
import http, { type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { CONNECTION_ESTABLISHED } from './tunnel.js';
import type { Snapshot, PortModel } from '../config/model.js';
import { timeoutMsIn } from '../config/compile-workload.js';
import {
  chooseLocation,
  geoCandidates,
  pickReplica,
  resolveHost,
  routeTo,
  whenFirstChecked,
  type HostTarget,
  type HostPort,
  type Replica,
} from '../routing/index.js';
import { MAX_URL_LENGTH, normalizePath, routingAuthority } from './path.js';
import { newRequestId, validRequestId } from './request-id.js';
import type { DownstreamRequest, DownstreamResponse } from './errors.js';
import type { ErrorCode } from '../filter/index.js';
import { Exchange, abortOnClientClose, type ExchangeObserver } from './exchange.js';
import { runChain, EMPTY_CHAIN } from './filters.js';
import { forwardHttp1, forwardHttp2, type ForwardHooks } from './forward.js';
import { ERRORS, hasBody, SharedResources, type LocalReply } from '../filter/index.js';
import type { Readable } from 'node:stream';
import { DebugInfo, freshTraceparent, traceIdFor } from './debug.js';
import type { FailureKind, RetryPolicy } from '../retry/policy.js';
import { backoffMs, retryAfterMs } from '../retry/backoff.js';
import { RetryBudgets, type RetryBudget } from '../retry/budget.js';
import { ReplayableBody } from '../retry/replay.js';
import { OutlierDetector } from '../routing/outlier.js';
import type { Role } from '../observe/index.js';
import { clientAddress, upstreamHeaders } from './headers.js';
import { DEFAULT_LIMITS, sniff, type ListenerHandlers } from './listener.js';
import type { Socket } from 'node:net';
import { buildRouteTable, debugAsked, findPort, locateRoute, NO_LOCATION, protocolOf, replicaHop, routeTarget, type FilterFactories, type Route, type RouteTable, type RouteTableDeps } from './routes.js';
import { Upstreams } from './upstreams.js';
import { internalFirewall, type MeshCaller } from '../firewall/internal.js';
import { Tunnels, type RoutingPath } from './tunnels.js';
import { overHttp2, problemReply, requestProblem } from './sanitize.js';
import type { MeshTlsClient } from './mesh-tls.js';
import { callerOf, sanitizeSet, verifiedPeerOf, xfccOf, type Hop, type MeshAdmission, type MeshInbound, type OutboundCaller } from './mesh-peer.js';
import { DEFAULT_ORG, workloadUri } from '../mesh/index.js';
import { parseHostHeader } from '../routing/hosts.js';
import { Egress } from './entry/egress.js';
import type { DataPlaneOptions, SidecarIdentity } from './dataplane-options.js';

/** Requests of one workload that may wait for a starting replica at once (DESIGN §10). */
export const MAX_HELD_PER_WORKLOAD = 1000;

/** A request waiting for a replica to turn ready. */
interface HeldRequest {
  readonly location: string | undefined;
  wake(): void;
}

/** What every attempt of one request sends. */
interface AttemptPlan {
  table: RouteTable;
  route: Route;
  protocol: string;
  headers: OutgoingHttpHeaders;
  path: string;
  hop: Hop;
}

/** Retry bookkeeping of one request whose workload retries. */
interface AttemptState {
  plan: AttemptPlan;
  policy: RetryPolicy;
  budget: RetryBudget;
  retries: number;
  tried: Replica[];
  triedLocations: string[];
  body: ReplayableBody | undefined;
}

const NO_FILTERS: FilterFactories = { ingress: [], sidecar: [] };

export class DataPlane implements ExchangeObserver {
  private table: RouteTable;
  readonly upstreams = new Upstreams();
  private readonly budgets = new RetryBudgets();
  private readonly outlier: OutlierDetector;
  /** Clients of outside services (auth, rate limit), kept across reloads. */
  readonly shared = new SharedResources();
  private readonly factories: FilterFactories;
  private readonly forwardHooks: ForwardHooks;
  private inFlight = 0;
  /** For `svc/publishNotReadyAddresses`: a location counts when it has any replica, ready or not. */
  private readonly anyReplica = { hasReady: (workload: string, location: string) => this.opts.replicas.list(workload, location).length > 0 };
  private drainWaiters: (() => void)[] = [];
  /** WebSocket upgrades and CONNECT tunnels. */
  private readonly tunnels: Tunnels;
  /**
   * Asked when a request finds no replica ready or starting: true when a replica of the workload
   * (in `location`, when fixed) is being started for it (`up`'s scaler, scale from zero).
   */
  activator: ((workload: string, location: string | undefined) => boolean) | undefined = undefined;
  /**
   * Asked when a request finds no replica and none to wait for: why nothing runs the workload (`up`:
   * src/local/not-run.ts), said after `no healthy upstream: ` so clients matching the message still
   * match; undefined: the plain answer. Off the request path: only a refused request asks.
   */
  notRun: ((workload: string) => string | undefined) | undefined = undefined;
  /** Requests waiting for a starting replica, per workload (see holdForStarting). */
  private readonly held = new Map<string, Set<HeldRequest>>();
  /** Each mesh caller's mTLS upstreams. */
  private readonly meshUpstreams = new Map<MeshTlsClient, Upstreams>();
  /** Destinations outside the mesh, through outbound listeners. */
  private readonly egress: Egress;

  constructor(snapshot: Snapshot, private readonly opts: DataPlaneOptions) {
    this.factories = opts.factories ?? NO_FILTERS;
    this.table = buildRouteTable(snapshot, this.factories, this.tableDeps());
    this.forwardHooks = {
      responseHeaders: (ex) => this.debugHeaders(ex),
      onResponse: (ex, status, headers) => this.onAttemptResponse(ex, status, headers),
      onFailure: (ex, kind) => this.onAttemptFailure(ex, kind),
    };
    this.tunnels = new Tunnels({
      table: () => this.table,
      hop: (ex, replica, port, internal) => this.hopOf(ex, replica, port, internal),
      route: (table, target, at) => this.route(table, target, at),
      anyReplica: this.anyReplica,
      record: (ex) => this.record(ex),
      org: () => this.org,
    }, opts);
    opts.replicas.on('ready', (replica: Replica) => this.wakeHeld(replica));
    this.egress = new Egress({ metrics: opts.metrics, logger: opts.deps.logger.child({ component: 'egress' }) });
    this.outlier = new OutlierDetector(opts.replicas, opts.deps.clock, opts.deps.logger.child({ component: 'outlier' }), {
      onEject: (replica) => opts.metrics.ejections.labels(replica.workload, replica.location).inc(),
    });
  }

  get snapshot(): Snapshot {
    return this.table.snapshot;
  }

  get requestsInFlight(): number {
    return this.inFlight;
  }

  /** Swap in a new configuration; requests in flight finish on the old one. */
  update(snapshot: Snapshot): void {
    this.table = buildRouteTable(snapshot, this.factories, this.tableDeps());
    this.opts.telemetry?.update(snapshot);
  }

  /** Resolves once no request is in flight. */
  drained(): Promise<void> {
    if (this.inFlight === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  async close(): Promise<void> {
    await Promise.all([this.upstreams.close(), this.shared.close(), this.opts.telemetry?.close(), ...[...this.meshUpstreams.values()].map((u) => u.close())]);
    this.meshUpstreams.clear();
  }

  /** The org whose trust domain the mesh identities are in. */
  get org(): string {
    return this.table.snapshot.org?.name ?? this.opts.org ?? DEFAULT_ORG;
  }

  /** A mesh listener went away (a replica that stopped): drop every caller's connections to it. */
  forgetMesh(address: HostPort): void {
    for (const upstreams of this.meshUpstreams.values()) upstreams.forget(address);
  }

  /** A mesh caller went away (a replica `up` stopped): close its mTLS connections. */
  releaseCaller(tls: MeshTlsClient): void {
    const upstreams = this.meshUpstreams.get(tls);
    this.meshUpstreams.delete(tls);
    void upstreams?.close();
  }

  private upstreamsOf(tls: MeshTlsClient): Upstreams {
    let upstreams = this.meshUpstreams.get(tls);
    if (!upstreams) this.meshUpstreams.set(tls, (upstreams = new Upstreams(tls)));
    return upstreams;
  }

  private tableDeps(): RouteTableDeps {
    return { deps: this.opts.deps, metrics: this.opts.metrics, shared: this.shared, ...(this.opts.sidecarOf !== undefined ? { sidecarOf: this.opts.sidecarOf } : {}) };
  }

  // ---- handlers per listener -------------------------------------------------------------------

  /** The ingress's external listener (or `up`'s): every host but internal ones. */
  ingressHandlers(listener: { port: number; tls: boolean }): ListenerHandlers {
    return {
      request: (req, res) => this.onIngressRequest(req, res, listener.port, listener.tls, 'external'),
      upgrade: (req, socket, head) => this.tunnels.upgrade(req, socket, head, listener.port, listener.tls, 'external'),
      connect: (req, socket, head) => this.tunnels.connect(req, socket, head, listener.port, listener.tls, 'external'),
    };
  }

  /**
   * A mesh (outbound) listener: answers internal host names (and every other workload host) for
   * callers inside the mesh. `caller` is the identity of the workload whose outbound traffic this
   * listener carries; the target's internal firewall decides whether it may call (DESIGN §4).
   */
  meshHandlers(listener: { port: number }, caller: OutboundCaller = {}): ListenerHandlers {
    const request = (req: DownstreamRequest, res: DownstreamResponse): void => this.onIngressRequest(req, res, listener.port, false, 'mesh', caller);
    const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => this.tunnels.upgrade(req, socket, head, listener.port, false, 'mesh', caller);
    // Requests inside a CONNECT to an HTTP port (proxy clients that always tunnel, as undici's
    // EnvHttpProxyAgent does): served like requests to the listener itself, each routed by its Host.
    let tunnelled: TunnelServers | undefined;
    return {
      request,
      upgrade,
      connect: (req, socket, head) => {
        const target = resolveHost(this.table.hosts, req.url ?? '', 'mesh', listener.port);
        if (target === undefined) {
          // A destination outside the mesh (HTTPS_PROXY's CONNECT host:443): the egress firewall decides.
          const workload = caller.workload === undefined ? undefined : this.table.snapshot.workloads.get(caller.workload);
          if (workload) return this.egress.connect(req, socket, head, workload);
        } else if (target.kind !== 'domain' && protocolOf(findPort(target.workload, 'port' in target ? target.port : undefined)) !== 'tcp') {
          const servers = (tunnelled ??= tunnelServers(request, upgrade));
          socket.write(CONNECTION_ESTABLISHED);
          if (head.length > 0) socket.unshift(head);
          // HTTP/1.1 or HTTP/2 with prior knowledge (gRPC clients behind a proxy): the first bytes
          // say, as on the listener itself.
          sniff(socket as Socket, servers.h1, servers.h2, DEFAULT_LIMITS.headersTimeoutMs, undefined);
          return;
        }
        this.tunnels.connect(req, socket, head, listener.port, false, 'mesh', caller);
      },
    };
  }

  /**
   * A sidecar's mTLS listener (`--mesh-inbound`; one per replica under `up`): requests from other
   * sidecars for this replica's internal names. The handshake verified the caller's certificate;
   * here its identity meets the internal firewall, then the sidecar filters and the app (DESIGN §9).
   */
  meshInboundHandlers(identity: MeshInbound, listener: { port: number }): ListenerHandlers {
    return {
      request: (req, res) => this.onMeshInbound(req, res, identity, listener.port),
      upgrade: (req, socket, head) => this.tunnels.meshInboundUpgrade(req, socket, head, identity, listener.port, this.meshGate(identity)),
      connect: (req, socket, head) => this.tunnels.meshInboundConnect(req, socket, head, identity, listener.port, this.meshGate(identity)),
    };
  }

  /** A standalone sidecar's inbound listener: filters, then the app. */
  sidecarHandlers(identity: SidecarIdentity, listener: { port: number; tls: boolean }): ListenerHandlers {
    return {
      request: (req, res) => this.onSidecarRequest(req, res, identity, listener.tls, listener.port),
      upgrade: (req, socket, head) => this.tunnels.sidecarUpgrade(req, socket, head, identity, listener),
      connect: (req, socket, head) => this.tunnels.sidecarConnect(req, socket, head, identity, listener),
    };
  }

  // ---- the pipeline ----------------------------------------------------------------------------

  private start(req: DownstreamRequest, res: DownstreamResponse, tls: boolean, port = 0, role: Role = 'ingress'): Exchange | undefined {
    const norm = normalizePath(req.url ?? '/');
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && validRequestId(given) ? given : newRequestId();
    const url = req.url ?? '/';
    const host = routingAuthority(url, (req.headers[':authority'] as string | undefined) ?? req.headers.host ?? '');
    const peer = req.socket?.remoteAddress ?? '';
    this.inFlight++;
    const ex = new Exchange(
      req, res, requestId,
      norm.ok ? norm.path : req.url ?? '',
      norm.ok ? norm.query : '',
      host, peer, this.opts.deps.clock.now(), this.opts.deps.clock, this,
    );
    ex.tls = tls;
    ex.listenerPort = port;
    this.opts.telemetry?.requestStart(ex, role);
    abortOnClientClose(ex);
    // Shed before any work: an overloaded process answers at once instead of queueing.
    if (this.opts.overload?.shed()) {
      ex.reply({ code: 'OVERLOADED' });
      return undefined;
    }
    const problem = requestProblem(req);
    if (problem) {
      // The connection is closed after the answer: its framing can no longer be trusted.
      // (The listener serves nothing after it on that connection: see listener.ts.)
      ex.reply({ ...problemReply(problem), ...(overHttp2(req) ? {} : { headers: { connection: 'close' } }) });
      return undefined;
    }
    // Only an HTTP/2 CONNECT gets here (HTTP/1.1's go to Tunnels): tunnels to `tcp` ports are
    // HTTP/1.1 CONNECTs, and nothing else is ever a tunnel (never an open proxy).
    if (req.method === 'CONNECT') {
      ex.reply({ code: 'NO_ROUTE' });
      return undefined;
    }
    if (url.length > MAX_URL_LENGTH) {
      ex.reply({ code: 'URI_TOO_LONG' });
      return undefined;
    }
    if (!norm.ok) {
      ex.reply({ code: 'BAD_REQUEST', message: `bad request: ${norm.reason}` });
      return undefined;
    }
    return ex;
  }

  private onIngressRequest(req: DownstreamRequest, res: DownstreamResponse, port: number, tls: boolean, listener: 'external' | 'mesh', caller?: OutboundCaller): void {
    const ex = this.start(req, res, tls, port);
    if (!ex) return;
    ex.listenerKind = listener;
    const table = this.table;
    const target = resolveHost(table.hosts, ex.host, listener, port);
    // Through a workload's outbound listener, a host outside the mesh is a sibling container or egress.
    if (!target && caller?.workload !== undefined) return this.outside(ex, caller, caller.workload);
    if (caller?.gvc !== undefined && target?.kind === 'internal-replica' && target.workload.gvc !== caller.gvc &&
        !table.snapshot.workloads.get(caller.workload ?? '')?.mesh.discoverCrossGvcReplicas) {
      return ex.reply({ code: 'NO_ROUTE' });
    }
    const route = target && this.route(table, target, ex);
    if (!route) return ex.reply({ code: 'NO_ROUTE' });
    const workload = route.workload;
    ex.workload = workload;
    if (route.canonical && workload.defaultOptions.debug) this.askedForDebug(ex, target, route);
    this.opts.telemetry?.routed?.(ex);
    if (caller) {
      ex.meshCaller = caller;
      // Judged here too when the target's sidecar will judge it again: a denied call never leaves.
      if (isInternal(target) && !internalFirewall(workload)(caller)) return ex.reply({ code: 'FIREWALL_BLOCKED' });
    }
    const gvc = table.snapshot.gvcs.get(workload.gvc);
    ex.clientAddress = clientAddress(ex.peer, req.headers['x-forwarded-for'], gvc?.trustedProxies ?? 0);
    const chain = table.ingressChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.toReplica(ex, table, route, tls);
    runChain(chain, ex, (result) => (result ? ex.reply(result) : this.toReplica(ex, table, route, tls)));
  }

  /** `x-svc-debug: true` or `trace` on a canonical or alias name of a workload with debug on (DESIGN §11). */
  private askedForDebug(ex: Exchange, target: HostTarget, route: Route): void {
    const asked = debugAsked(route, ex.req.headers[this.table.headers.debug]);
    if (asked === undefined) return;
    const w = route.workload;
    ex.debugInfo = new DebugInfo(asked === 'trace', `${target.kind}; gvc=${w.gvc}; workload=${w.name}${route.port ? `; port=${route.port.number}` : ''}`);
  }

  /** Host target → workload, port and path (domain routes rewrite): routes.ts's `routeTarget`. */
  private route(table: RouteTable, target: HostTarget, ex: RoutingPath): Route | undefined {
    return routeTarget(table.snapshot, target, ex);
  }

  /**
   * None of the workload's replicas is ready. When some have not completed a first readiness check
   * (a router that just started: deployment replicas' first checks are spread over its first
   * seconds), run those checks now and route again once one made a replica ready, all are done, or
   * `FIRST_CHECK_WAIT_MS` passed, instead of answering 503 before a replica was ever checked.
   * Returns false when there is nothing to wait for.
   */
  private awaitFirstChecks(ex: Exchange, table: RouteTable, route: Route, tls: boolean): boolean {
    const checked = whenFirstChecked(this.opts.replicas, route.workload.key, this.opts.deps.clock);
    if (checked === undefined) return false;
    ex.debugInfo?.queued(this.opts.deps.clock.now());
    void checked.then(() => this.toReplica(ex, table, route, tls, true));
    return true;
  }

  /**
   * No replica is ready, but one is starting (`up` just started its process): the request waits for
   * a replica of its workload (in its location, when fixed) to turn ready, then is routed again; the
   * workload's timeout covers the wait (504 `upstream request timeout`). At most `maxHeld` requests
   * of one workload wait; past that, 503 `overloaded`. False when there is nothing to wait for.
   */
  private holdForStarting(ex: Exchange, table: RouteTable, route: Route, tls: boolean): boolean {
    const key = route.workload.key;
    if (ex.isFinished) return false;
    // Nothing starting: a workload scaled to zero may be woken (`up`'s scaler starts a replica).
    if (!this.opts.replicas.hasStarting(key, route.fixedLocation) && !this.activator?.(key, route.fixedLocation)) return false;
    this.hold(ex, table, route, tls);
    return true;
  }

  /** Holds the request until a replica of its workload turns ready or finishes a request (see holdForStarting). */
  private hold(ex: Exchange, table: RouteTable, route: Route, tls: boolean): void {
    const key = route.workload.key;
    let waiting = this.held.get(key);
    if (!waiting) this.held.set(key, (waiting = new Set()));
    if (waiting.size >= (this.opts.maxHeldPerWorkload ?? MAX_HELD_PER_WORKLOAD)) {
      ex.reply({ code: 'OVERLOADED' });
      return;
    }
    ex.startTimeout(timeoutMsIn(route.workload, route.fixedLocation));
    ex.debugInfo?.queued(this.opts.deps.clock.now());
    const set = waiting;
    const release = (): void => {
      set.delete(waiter);
      if (set.size === 0 && this.held.get(key) === set) this.held.delete(key);
      if (ex.abortUpstream === release) ex.abortUpstream = undefined;
    };
    const waiter: HeldRequest = {
      location: route.fixedLocation,
      wake: () => {
        release();
        this.toReplica(ex, table, route, tls, true);
      },
    };
    set.add(waiter);
    // The timeout or the client going away ends the wait.
    ex.abortUpstream = release;
  }

  /** Requests of a workload waiting for a replica: in `location` (fixed there), or anywhere (location undefined). */
  heldCount(workload: string): { readonly anywhere: number; readonly byLocation: ReadonlyMap<string, number> } {
    let anywhere = 0;
    const byLocation = new Map<string, number>();
    for (const waiter of this.held.get(workload) ?? []) {
      if (waiter.location === undefined) anywhere++;
      else byLocation.set(waiter.location, (byLocation.get(waiter.location) ?? 0) + 1);
    }
    return { anywhere, byLocation };
  }

  /** The oldest request waiting for `replica`'s workload (in its location, or anywhere) is routed. */
  private wakeOldest(replica: Replica): void {
    const waiting = this.held.get(replica.workload);
    if (!waiting) return;
    for (const waiter of waiting) {
      if (waiter.location !== undefined && waiter.location !== replica.location) continue;
      waiter.wake();
      return;
    }
  }

  /** 503 `no healthy upstream`, with why nothing runs the workload when `notRun` knows. */
  private noHealthyUpstream(workload: string): LocalReply {
    const why = this.notRun?.(workload);
    return why === undefined ? { code: 'NO_HEALTHY_UPSTREAM' } : { code: 'NO_HEALTHY_UPSTREAM', message: `${ERRORS.NO_HEALTHY_UPSTREAM.message}: ${why}` };
  }

  /** A replica turned ready: the requests waiting for its workload (and location) are routed. */
  private wakeHeld(replica: Replica): void {
    if (!replica.ready) return;
    const waiting = this.held.get(replica.workload);
    if (!waiting) return;
    for (const waiter of [...waiting]) if (waiter.location === undefined || waiter.location === replica.location) waiter.wake();
  }

  /** Suspend → location → replica → forward. */
  private toReplica(ex: Exchange, table: RouteTable, route: Route, tls: boolean, waited = false): void {
    if (ex.isFinished) return;
    const { workload } = route;
    const { replicas, deps } = this.opts;
    if (waited) ex.debugInfo?.dequeued(deps.clock.now());
    const located = locateRoute(table.snapshot, route, route.includeNotReady ? this.anyReplica : replicas, this.opts.latencyOf ?? noLatency);
    if (typeof located !== 'string') {
      if (located === NO_LOCATION) {
        if (!waited && this.awaitFirstChecks(ex, table, route, tls)) return;
        if (this.holdForStarting(ex, table, route, tls)) return;
      }
      return ex.reply(located.code === 'NO_HEALTHY_UPSTREAM' ? this.noHealthyUpstream(workload.key) : { code: located.code });
    }
    const location = located;
    ex.location = location;
    const list = replicas.list(workload.key, location);
    let replica: Replica | undefined;
    if (route.fixedReplica !== undefined) {
      const r = list.find((x) => x.index === route.fixedReplica);
      replica = r && (r.ready || route.includeNotReady) ? r : undefined;
    } else {
      replica = pickReplica(list, deps.random, deps.clock.now(), route.includeNotReady ? { includeNotReady: true } : undefined);
    }
    if (!replica) {
      if (!waited && this.awaitFirstChecks(ex, table, route, tls)) return;
      if (this.holdForStarting(ex, table, route, tls)) return;
      return ex.reply(this.noHealthyUpstream(workload.key));
    }
    // `autoscaling.maxConcurrency`: a replica takes at most that many requests at once; the rest
    // wait for one to finish (or for a new replica). An idle replica is under any cap: no lookup.
    if (replica.outstanding > 0 && route.fixedReplica === undefined) {
      const cap = workload.locationOptions.get(location)?.maxConcurrency ?? 0;
      if (cap > 0 && replica.outstanding >= cap) {
        replica = underCap(list, cap, deps.clock.now(), route.includeNotReady);
        if (!replica) return void this.hold(ex, table, route, tls);
      }
    }
    ex.replica = replica;
    routeTo(replica);
    ex.startTimeout(timeoutMsIn(workload, location));
    const serverless = workload.type === 'serverless';
    const headers = upstreamHeaders(ex.req.headers, {
      host: serverless ? workload.canonicalHost : ex.host,
      peer: ex.peer,
      proto: tls ? 'https' : 'http',
      requestId: ex.requestId,
      stripPrefixes: table.headers.strip,
      keepTeTrailers: true,
      ...(serverless ? { forwardedHost: ex.host } : {}),
      ...(route.setHeaders && route.setHeaders.length > 0 ? { set: route.setHeaders } : {}),
    });
    if (ex.debugInfo?.trace) this.traceForDebug(ex, headers);
    ex.targetPort = route.port?.number;
    const hop = this.hopOf(ex, replica, route.port, route.internal === true);
    const plan: AttemptPlan = { table, route, protocol: protocolOf(route.port), headers, path: route.upstreamPath, hop };
    if (hop === 'mesh') ex.destinationPrincipal = workloadUri(this.org, workload.gvc, workload.name);
    // A replica with its own sidecar applies the workload's filters there.
    const chain = hop !== 'app' ? EMPTY_CHAIN : table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.startAttempts(ex, plan);
    runChain(chain, ex, (result) => {
      if (result) return ex.reply(result);
      plan.path = withQueryMutations(ex, plan.path);
      plan.headers = applyMutations(ex, headers);
      this.startAttempts(ex, plan);
    });
  }

  // ---- attempts and retries (DESIGN §7) -----------------------------------------------------------

  private startAttempts(ex: Exchange, plan: AttemptPlan): void {
    if (ex.isFinished) return;
    const policy = plan.table.retryPolicies.get(plan.route.workload.key);
    if (policy && policy.retries > 0) {
      const budget = this.budgets.for(plan.route.workload.key);
      budget.active++;
      const state: AttemptState = {
        plan,
        policy,
        budget,
        retries: 0,
        tried: [],
        triedLocations: [],
        body: hasBody(ex) ? new ReplayableBody(ex.bodyOverride ?? (ex.req as Readable)) : undefined,
      };
      ex.attemptState = state;
    } else {
      ex.attemptState = plan;
    }
    this.sendAttempt(ex);
  }

  private sendAttempt(ex: Exchange): void {
    if (ex.isFinished) return;
    const state = ex.attemptState as AttemptState | AttemptPlan;
    const plan = 'plan' in state ? state.plan : state;
    ex.attempts++;
    plan.headers['x-envoy-attempt-count'] = String(ex.attempts);
    if ('plan' in state && state.body) {
      const body = state.body.attempt();
      if (!body) return ex.reply({ code: 'UPSTREAM_RESET' });
      ex.bodyOverride = body;
    }
    const replica = ex.replica!;
    ex.debugInfo?.attemptStarted(replica.name, ex.location ?? '', this.opts.deps.clock.now());
    // A retry lands on a replica reached the same way (a filter chain skipped for a sidecar that
    // runs it must not be skipped for one that does not), or not at all.
    if (this.hopOf(ex, replica, plan.route.port, plan.route.internal === true) !== plan.hop) return ex.reply({ code: 'NO_HEALTHY_UPSTREAM' });
    if (plan.hop === 'mesh') {
      const upstreams = this.upstreamsOf(ex.meshCaller!.tls!);
      return this.forward(ex, replica.mesh!, plan.protocol, plan.path, plan.headers, upstreams, ex.destinationPrincipal);
    }
    const target = plan.hop === 'sidecar' ? replica.sidecar : appAddress(replica, plan.route.port);
    if (!target) return ex.reply({ code: 'NO_HEALTHY_UPSTREAM' });
    this.forward(ex, target, plan.protocol, plan.path, plan.headers);
  }

  /** How a request reaches `replica` on `port` (see Hop); `internal`: for an internal name. */
  hopOf(ex: Exchange, replica: Replica, port: PortModel | undefined, internal: boolean): Hop {
    return replicaHop(this.table.snapshot, ex.workload!, replica, port, internal, ex.meshCaller);
  }

  private onAttemptResponse(ex: Exchange, status: number, headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
    const replica = ex.replica;
    if (replica && ex.attemptState !== undefined) {
      if (status >= 500) this.outlier.failure(replica);
      else this.outlier.success(replica);
    }
    const state = ex.attemptState as AttemptState | AttemptPlan | undefined;
    const retried =
      state !== undefined &&
      'policy' in state &&
      this.mayRetry(ex, state) &&
      state.policy.shouldRetry({ kind: 'response', status, headers }) &&
      this.retry(ex, state, retryAfterMs(headers['retry-after'], this.opts.deps.clock.wallNow()));
    ex.debugInfo?.attemptEnded(String(status), retried, this.opts.deps.clock.now());
    this.opts.telemetry?.attemptEnd(ex, { status, retried });
    return !retried;
  }

  private onAttemptFailure(ex: Exchange, kind: FailureKind): boolean {
    if (ex.replica && ex.attemptState !== undefined) this.outlier.failure(ex.replica);
    const state = ex.attemptState as AttemptState | AttemptPlan | undefined;
    const retried =
      state !== undefined &&
      'policy' in state &&
      this.mayRetry(ex, state) &&
      state.policy.shouldRetry({ kind: 'failure', failure: kind }) &&
      this.retry(ex, state, undefined);
    ex.debugInfo?.attemptEnded(kind, retried, this.opts.deps.clock.now());
    this.opts.telemetry?.attemptEnd(ex, { failure: kind, retried });
    return retried;
  }

  private mayRetry(ex: Exchange, state: AttemptState): boolean {
    return (
      state.retries < state.policy.retries &&
      !ex.timedOut &&
      !ex.isFinished &&
      !ex.res.headersSent &&
      (state.body === undefined || state.body.replayable) &&
      state.budget.allows()
    );
  }

  /** Schedule the next attempt on another replica (or location) after a jittered backoff. */
  private retry(ex: Exchange, state: AttemptState, retryAfter: number | undefined): boolean {
    const next = this.nextReplica(ex, state);
    if (!next) return false;
    state.retries++;
    state.budget.retrying++;
    this.opts.metrics.retries.labels(state.plan.route.workload.key).inc();
    const previous = ex.replica!;
    previous.outstanding--;
    next.replica.outstanding++;
    ex.replica = next.replica;
    ex.location = next.location;
    ex.abortUpstream = undefined;
    const { clock, random } = this.opts.deps;
    const delay = retryAfter ?? backoffMs(state.retries, random);
    clock.setTimeout(() => {
      state.budget.retrying--;
      this.sendAttempt(ex);
    }, delay);
    return true;
  }

  /**
   * Another ready, non-ejected replica of the same location when there is one; otherwise, for
   * geo-routed hosts, the best other location; otherwise the same replica again.
   */
  private nextReplica(ex: Exchange, state: AttemptState): { replica: Replica; location: string } | undefined {
    const current = ex.replica;
    const location = ex.location;
    if (!current || location === undefined) return undefined;
    state.tried.push(current);
    const { route, table } = state.plan;
    if (route.fixedReplica !== undefined) return { replica: current, location };
    const { replicas, deps } = this.opts;
    const now = deps.clock.now();
    const opts = route.includeNotReady ? { includeNotReady: true, exclude: current } : { exclude: current };
    const fresh = (r: Replica | undefined): r is Replica => r !== undefined && !state.tried.includes(r);
    const same = pickReplica(replicas.list(route.workload.key, location), deps.random, now, opts);
    if (fresh(same)) return { replica: same, location };
    if (route.fixedLocation === undefined) {
      if (!state.triedLocations.includes(location)) state.triedLocations.push(location);
      const candidates = geoCandidates(table.snapshot, route.workload, route.includeNotReady ? this.anyReplica : replicas, this.opts.latencyOf ?? noLatency)
        .filter((c) => !state.triedLocations.includes(c.name));
      const other = chooseLocation(candidates);
      if (other !== undefined) {
        const r = pickReplica(replicas.list(route.workload.key, other), deps.random, now, route.includeNotReady ? { includeNotReady: true } : undefined);
        if (r) return { replica: r, location: other };
      }
    }
    // Nowhere else to go: Envoy retries the same host.
    return same ? { replica: same, location } : current.ready ? { replica: current, location } : undefined;
  }

  private onSidecarRequest(req: DownstreamRequest, res: DownstreamResponse, identity: SidecarIdentity, tls: boolean, port: number): void {
    const ex = this.start(req, res, tls, port, 'sidecar');
    if (!ex) return;
    ex.listenerKind = 'sidecar';
    const table = this.table;
    const workload = table.snapshot.workloads.get(identity.workload);
    if (!workload) return ex.reply({ code: 'NO_ROUTE' });
    ex.workload = workload;
    this.opts.telemetry?.routed?.(ex);
    ex.location = identity.location;
    const gvc = table.snapshot.gvcs.get(workload.gvc);
    ex.clientAddress = clientAddress(ex.peer, req.headers['x-forwarded-for'], (gvc?.trustedProxies ?? 0) + 1);
    const forwardedProto = req.headers['x-forwarded-proto'];
    const headers = upstreamHeaders(req.headers, {
      host: ex.host,
      peer: ex.peer,
      proto: typeof forwardedProto === 'string' ? forwardedProto : tls ? 'https' : 'http',
      requestId: ex.requestId,
      keepTeTrailers: true,
    });
    ex.startTimeout(timeoutMsIn(workload, identity.location));
    const protocol = protocolOf(workload.primaryPort);
    ex.targetPort = workload.primaryPort?.number;
    const chain = table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.forward(ex, identity.app, protocol, ex.pathWithQuery, headers);
    runChain(chain, ex, (result) => {
      if (result) return ex.reply(result);
      this.forward(ex, identity.app, protocol, withQueryMutations(ex, ex.pathWithQuery), applyMutations(ex, headers));
    });
  }

  // ---- the mesh (DESIGN §9) ----------------------------------------------------------------------

  /**
   * Who may call `identity` on its mTLS listener, and where the request goes: the Host must be one
   * of its internal names on a declared port (a sidecar is no relay), and its internal firewall
   * must admit the caller's verified identity. Answers the refusal's code otherwise.
   */
  admitMesh(ex: Exchange, identity: MeshInbound): MeshAdmission | ErrorCode {
    const peer = verifiedPeerOf(ex.req);
    ex.sourcePrincipal = peer?.uri;
    ex.sourceIdentity = peer?.identity;
    ex.location = identity.location;
    const target = resolveHost(this.table.hosts, ex.host, 'mesh', ex.listenerPort);
    if (!target || !isInternal(target) || target.workload.key !== identity.workload) return 'NO_ROUTE';
    if (target.kind === 'internal-replica' && (target.location !== identity.location || target.index !== identity.index)) return 'NO_ROUTE';
    const workload = target.workload;
    ex.workload = workload;
    const caller = callerOf(peer, this.org);
    if (!peer || !caller || !internalFirewall(workload)(caller)) return 'FIREWALL_BLOCKED';
    const port = findPort(workload, target.port);
    const app = port && identity.app(port.number);
    if (!port || !app) return 'NO_ROUTE';
    ex.targetPort = port.number;
    return { workload, port, app, xfcc: xfccOf(peer, identity.uri()) };
  }

  private onMeshInbound(req: DownstreamRequest, res: DownstreamResponse, identity: MeshInbound, port: number): void {
    const ex = this.start(req, res, true, port, 'sidecar');
    if (!ex) return;
    ex.listenerKind = 'sidecar';
    const admitted = this.admitMesh(ex, identity);
    if (typeof admitted === 'string') return ex.reply({ code: admitted });
    const { workload, port: portModel, app } = admitted;
    this.opts.telemetry?.routed?.(ex);
    const table = this.table;
    const gvc = table.snapshot.gvcs.get(workload.gvc);
    // Behind the caller's sidecar: one more trusted hop (it appended its app's address).
    ex.clientAddress = clientAddress(ex.peer, req.headers['x-forwarded-for'], (gvc?.trustedProxies ?? 0) + 1);
    // Before the filters: ext_authz's check must show the verified caller's value, as the app gets.
    sanitizeSet(req, admitted.xfcc);
    const forwardedProto = req.headers['x-forwarded-proto'];
    const headers = upstreamHeaders(req.headers, {
      host: ex.host,
      peer: ex.peer,
      proto: typeof forwardedProto === 'string' ? forwardedProto : 'http',
      requestId: ex.requestId,
      keepTeTrailers: true,
    });
    ex.startTimeout(timeoutMsIn(workload, identity.location));
    const protocol = protocolOf(portModel);
    const chain = portModel.number === workload.mesh.inboundDisabledPort ? EMPTY_CHAIN : table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.forward(ex, app, protocol, ex.pathWithQuery, headers);
    runChain(chain, ex, (result) => {
      if (result) return ex.reply(result);
      this.forward(ex, app, protocol, withQueryMutations(ex, ex.pathWithQuery), applyMutations(ex, headers));
    });
  }

  /** The admission check for tunnels on an mTLS listener. */
  private meshGate(identity: MeshInbound): (ex: Exchange) => MeshAdmission | ErrorCode {
    return (ex) => this.admitMesh(ex, identity);
  }

  /**
   * A host the mesh does not serve, through a workload's outbound listener: a container of the
   * caller's own replica by name (`http://side:9000`: plain text, same replica), else a destination
   * outside the mesh, which the caller's egress firewall decides.
   */
  private outside(ex: Exchange, caller: OutboundCaller, callerKey: string): void {
    const workload = this.table.snapshot.workloads.get(callerKey);
    if (!workload) return ex.reply({ code: 'NO_ROUTE' });
    const parsed = parseHostHeader(ex.host);
    const port = parsed?.port ?? 80;
    // `localhost` is the replica's own network (proxy clients send it here: NO_PROXY cannot name
    // `localhost` without every `*.localhost` internal name); a loopback address likewise.
    const local = parsed && isLoopbackHost(parsed.host) ? { host: parsed.host === 'localhost' ? '127.0.0.1' : parsed.host, port } : undefined;
    const sibling = local ?? (parsed && !parsed.host.includes('.') ? caller.sibling?.(parsed.host, port) : undefined);
    if (sibling) {
      ex.workload = workload;
      const headers = upstreamHeaders(ex.req.headers, { host: ex.host, peer: ex.peer, proto: 'http', requestId: ex.requestId, keepTeTrailers: true });
      ex.startTimeout(workload.timeoutMs);
      return this.forward(ex, sibling, protocolOf(findPort(workload, port)), ex.pathWithQuery, headers);
    }
    this.egress.request(ex, workload, (target, headers) => {
      ex.startTimeout(workload.timeoutMs);
      this.forward(ex, target, 'http', ex.pathWithQuery, headers);
    });
  }

  private forward(ex: Exchange, target: HostPort, protocol: string, path: string, headers: OutgoingHttpHeaders, upstreams = this.upstreams, serverUri?: string): void {
    if (ex.isFinished) return;
    this.opts.telemetry?.attemptStart(ex, target, headers);
    try {
      if (protocol === 'grpc' || protocol === 'http2') forwardHttp2(ex, upstreams.session(target, serverUri), path, headers, this.forwardHooks);
      else forwardHttp1(ex, upstreams.pool(target, serverUri), path, headers, this.forwardHooks);
    } catch (err) {
      this.opts.deps.logger.error({ err, requestId: ex.requestId }, 'forwarding failed');
      if (!ex.isFinished) ex.reply({ code: 'UPSTREAM_RESET' });
    }
  }

  /** Debug answers (src/proxy/debug.ts): on upstream answers and on the proxy's own replies. */
  debugHeaders(ex: Exchange): OutgoingHttpHeaders | undefined {
    const info = ex.debugInfo;
    if (info === undefined) return undefined;
    const names = this.table.headers;
    const now = this.opts.deps.clock.now();
    // An attempt still open when the proxy answers itself ended that way (a timeout, the retries spent).
    info.attemptEnded(ex.timedOut ? 'timeout' : ex.errorCode ?? 'failed', false, now);
    if (info.trace && info.traceId === undefined) info.traceId = this.opts.telemetry?.traceIdOf?.(ex);
    const upstreamMs = ex.upstreamHeadersAt > 0 ? ex.upstreamHeadersAt - ex.upstreamStartedAt : undefined;
    return {
      ...(ex.replica ? { [names.location]: ex.location ?? '', [names.replica]: ex.replica.name } : {}),
      ...info.headers(names, ex.startedAt, now, upstreamMs),
    };
  }

  /**
   * `x-svc-debug: trace` to a workload that does not trace: the answer still names a trace id, the
   * caller's (`traceparent`) or a new one sent upstream, so the app's own logs can be found by it.
   * A workload that traces samples the request instead (src/tracing) and its span's id is answered.
   */
  private traceForDebug(ex: Exchange, headers: OutgoingHttpHeaders): void {
    if (this.opts.telemetry?.tracesWorkload?.(ex.workload!.key)) return;
    const { id, fresh } = traceIdFor(ex.req.headers.traceparent);
    ex.debugInfo!.traceId = id;
    if (fresh) headers.traceparent = freshTraceparent(id);
  }

  // ---- bookkeeping -----------------------------------------------------------------------------

  onFinish(ex: Exchange): void {
    this.inFlight--;
    // A replica at its concurrency cap took one request less: the oldest request waiting goes.
    if (this.held.size > 0 && ex.replica !== undefined) this.wakeOldest(ex.replica);
    const state = ex.attemptState as AttemptState | AttemptPlan | undefined;
    if (state && 'budget' in state) state.budget.active--;
    if (this.inFlight === 0 && this.drainWaiters.length > 0) {
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w();
    }
    this.record(ex);
  }

  /** `svcproxy_mesh_requests_total`: reported by the caller's side and by the target's. */
  private countMesh(ex: Exchange, status: number): void {
    const target = ex.workload;
    const caller = ex.meshCaller;
    // At the target, the verified caller; at the caller's side, itself.
    const reporter = caller === undefined ? 'destination' : 'source';
    const key = caller?.workload;
    const source = caller === undefined
      ? { workload: ex.sourceIdentity?.workload, gvc: ex.sourceIdentity?.gvc }
      : { workload: key?.slice(key.indexOf('/') + 1), gvc: caller.gvc };
    this.opts.metrics.meshRequests.inc({
      reporter,
      source_workload: source.workload ?? 'unknown',
      source_gvc: source.gvc ?? 'unknown',
      destination_workload: ex.egress !== undefined ? 'egress' : target?.name ?? 'unknown',
      destination_gvc: ex.egress !== undefined ? 'egress' : target?.gvc ?? 'unknown',
      response_code: String(status),
      outcome: ex.errorCode === 'FIREWALL_BLOCKED' ? 'denied' : 'allowed',
    });
  }

  /** Telemetry, metrics and the access-log line of a finished exchange (requests and tunnels). */
  private record(ex: Exchange): void {
    this.opts.telemetry?.requestEnd(ex);
    const workload = ex.workload?.key ?? '';
    const location = ex.location ?? '';
    const upstreamSeconds = ex.upstreamHeadersAt > 0 ? (ex.upstreamHeadersAt - ex.upstreamStartedAt) / 1000 : undefined;
    const status = ex.status || 0;
    this.opts.metrics.countRequest(workload, location, status || 499, upstreamSeconds);
    if (ex.meshCaller !== undefined || ex.sourcePrincipal !== undefined) this.countMesh(ex, status || 499);
    const log = this.opts.accessLog;
    if (log.isLevelEnabled('info')) {
      log.info({
        requestId: ex.requestId,
        method: ex.req.method,
        host: ex.host,
        path: ex.path,
        status,
        workload: ex.workload?.name,
        gvc: ex.workload?.gvc,
        location: ex.location,
        replica: ex.replica?.name,
        bytesSent: ex.bytesSent,
        durationMs: Math.round(ex.durationMs * 1000) / 1000,
        upstreamMs: upstreamSeconds === undefined ? undefined : Math.round(upstreamSeconds * 1e6) / 1000,
        client: ex.clientAddress,
        protocol: ex.req.httpVersion === '2.0' ? 'HTTP/2' : 'HTTP/1.1',
        // The caller's identity: verified at the target, its own at the caller's side.
        ...(ex.sourcePrincipal ?? ex.meshCaller?.tls?.uri ? { sourcePrincipal: ex.sourcePrincipal ?? ex.meshCaller?.tls?.uri } : {}),
        ...(ex.destinationPrincipal ? { destinationPrincipal: ex.destinationPrincipal } : {}),
        ...(ex.egress ? { egress: ex.egress } : {}),
        ...(ex.errorCode ? { error: ex.errorCode } : {}),
        ...(ex.tunnel ? { tunnel: ex.tunnel.kind, bytesReceived: ex.tunnel.bytesIn } : {}),
      });
    }
  }
}

function isInternal(target: HostTarget | undefined): target is Extract<HostTarget, { kind: 'internal' | 'internal-replica' }> {
  return target?.kind === 'internal' || target?.kind === 'internal-replica';
}

interface TunnelServers {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
}

/** Servers for the connections CONNECT handed over (they never listen themselves). */
function tunnelServers(request: (req: DownstreamRequest, res: DownstreamResponse) => void, upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void): TunnelServers {
  const h1 = http.createServer({ maxHeaderSize: 64 * 1024 }, request);
  h1.on('upgrade', upgrade);
  h1.on('clientError', (_err, socket) => socket.destroy());
  // Node enforces the headers timeout once a server is 'listening'; this one never listens itself.
  h1.emit('listening');
  const h2 = http2.createServer({ settings: { enablePush: false } }, request);
  h2.on('sessionError', () => undefined);
  return { h1, h2 };
}

/** The ready, not ejected replica with the fewest requests in flight, if it is under `cap`. */
function underCap(list: readonly Replica[], cap: number, now: number, includeNotReady: boolean): Replica | undefined {
  let best: Replica | undefined;
  for (const r of list) {
    if (!(r.ready || includeNotReady) || r.ejectedUntil > now || r.outstanding >= cap) continue;
    if (best === undefined || r.outstanding < best.outstanding) best = r;
  }
  return best;
}

/** The replica's own loopback as proxy clients name it: `localhost` and NO_PROXY's two addresses. */
function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '127.0.0.1' || host === '::1';
}

function noLatency(): undefined {
  return undefined;
}

function appAddress(replica: Replica, port: PortModel | undefined): HostPort | undefined {
  if (port) return replica.ports.get(port.number);
  for (const address of replica.ports.values()) return address;
  return undefined;
}

/** Apply the query-parameter mutations the filters asked for (ext_authz `query_parameters_to_set/remove`). */
function withQueryMutations(ex: Exchange, pathWithQuery: string): string {
  if (!ex.upstreamQuerySet && !ex.upstreamQueryRemove) return pathWithQuery;
  const q = pathWithQuery.indexOf('?');
  const path = q < 0 ? pathWithQuery : pathWithQuery.slice(0, q);
  // Parameters not touched keep their bytes exactly as the client sent them.
  const drop = new Set<string>([...(ex.upstreamQueryRemove ?? []), ...(ex.upstreamQuerySet ?? []).map(([name]) => name)]);
  const kept = (q < 0 ? '' : pathWithQuery.slice(q + 1)).split('&').filter((pair) => {
    if (pair === '') return false;
    const eq = pair.indexOf('=');
    const raw = eq < 0 ? pair : pair.slice(0, eq);
    let name: string;
    try {
      name = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      name = raw;
    }
    return !drop.has(name);
  });
  // Removals apply after sets, as Envoy's ext_authz does: a parameter both set and removed is gone.
  const removed = new Set(ex.upstreamQueryRemove ?? []);
  if (ex.upstreamQuerySet) {
    for (const [name, value] of ex.upstreamQuerySet) if (!removed.has(name)) kept.push(`${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
  }
  return kept.length > 0 ? `${path}?${kept.join('&')}` : path;
}

/** Apply the upstream header mutations the filters asked for. */
function applyMutations(ex: Exchange, headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  if (ex.upstreamRemove) for (const name of ex.upstreamRemove) delete headers[name];
  if (ex.upstreamSet) for (const [name, value] of ex.upstreamSet) headers[name] = value;
  return headers;
}

export type { LocalReply };
export { MAX_URL_LENGTH };
