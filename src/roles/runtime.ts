/**
 * What every long-running role shares: the configuration store (with hot reload), the replica table
 * and the probes of `deployment` replicas, the data plane, its listeners and the admin listener.
 * A rejected reload keeps the last good snapshot (the store logs every error); a good one is swapped
 * into the data plane and the deployment replicas. `stop()` drains: listeners stop accepting, requests
 * in flight get up to the grace period, then everything is closed.
 */
import { readFileSync } from 'node:fs';
import type { Logger } from 'pino';
import type { Settings, Snapshot } from '../config/model.js';
import { ConfigStore, type ConfigStoreOptions } from '../config/index.js';
import { orgConflict, placeProblem } from './place.js';
import { systemClock, type Deps } from '../deps.js';
import { startupDone } from '../v8-flags.js';
import { Metrics } from '../admin/metrics.js';
import { adminAddresses, redact, startAdminListeners, type AdminListeners, type AdminServer } from '../admin/server.js';
import { processSource } from '../admin/dashboard-sources.js';
import { ReplicaRegistry } from '../routing/replicas.js';
import { DataPlane } from '../proxy/dataplane.js';
import type { SidecarIdentity } from '../proxy/dataplane-options.js';
import { listen, type Listener, type ListenerHandlers, type ListenerLimits } from '../listener/index.js';
import { OverloadGuard } from '../proxy/overload.js';
import type { FilterFactories } from '../proxy/routes.js';
import { defaultFactories } from '../proxy/policy.js';
import type { RequestTelemetry } from '../observe/index.js';
import { createTelemetry } from '../tracing/index.js';
import { healthSamples, workloadStatuses, type WorkloadStatus } from '../local/workloads.js';
import type { UpReplicaState } from '../local/supervisor.js';
import { LatencyProber } from '../routing/latency.js';
import { parseHostPort } from '../address.js';
import { UsageError } from '../flags.js';
import { checkDnsServer } from '../discovery/dns.js';
import { DeploymentReplicas } from './deployment-replicas.js';
import { fileCredentials, uriSanOf, workloadUri, type CredentialSource, type MeshCredentials } from '../mesh/index.js';
import { MeshTlsClient } from '../proxy/mesh-tls.js';
import type { MeshInbound, OutboundCaller } from '../proxy/mesh-peer.js';
import type { PeerCertificate, TLSSocket } from 'node:tls';

export interface RuntimeOptions {
  readonly role: 'up' | 'ingress' | 'sidecar';
  readonly settings: Settings;
  readonly configPaths?: readonly string[];
  /** In-memory records (the built-in demo). */
  readonly records?: readonly Record<string, unknown>[];
  /** `host:port` addresses; port 0 picks a free port. */
  readonly listen: readonly string[];
  /** TLS listeners (HTTP/1.1 and h2 by ALPN). */
  readonly listenTls?: readonly string[];
  /** `clientCaFile`: request client certificates on TLS listeners, verified against this CA (ext_authz peer identity). */
  readonly tls?: { readonly certFile: string; readonly keyFile: string; readonly clientCaFile?: string };
  /** Mesh (outbound) listeners: internal host names. */
  readonly mesh?: readonly string[];
  /** A sidecar's mTLS listeners for calls from other sidecars (`--mesh-inbound`; DESIGN §9). */
  readonly meshInbound?: readonly string[];
  /** This process's mesh identity: `--mesh-cert`, `--mesh-key`, `--mesh-ca` PEM files (reloaded on change). */
  readonly meshFiles?: { readonly cert: string; readonly key: string; readonly ca: string };
  /** This process's mesh identity, from a source of the caller's (`up`'s local CA); wins over `meshFiles`. */
  readonly meshCredentials?: CredentialSource;
  /** `host:port` of the admin listener; undefined: none. */
  readonly admin?: string;
  /** `host:port` of the status listener (`--status`: `/healthz`, `/ready` only); undefined: none. */
  readonly status?: string;
  /** `host:port` of the metrics listener (`--metrics`: `/metrics` only); undefined: none. */
  readonly metrics?: string;
  readonly logger: Logger;
  /** The location this ingress or sidecar serves (one of the configuration's, when it has any). */
  readonly location?: string;
  /** `--org`: the org of the identity when the records have no org record; never another than theirs (src/roles/place.ts). */
  readonly org?: string;
  /** A standalone sidecar's identity (role `sidecar`). */
  readonly sidecar?: Omit<SidecarIdentity, 'app'> & { readonly app: string };
  readonly watch?: boolean;
  readonly deps?: Partial<Deps>;
  readonly factories?: FilterFactories;
  /** `--extauth-ca`: a PEM file of extra CAs trusted for https external authorization services. */
  readonly extAuthCaFile?: string;
  /** Tracing / access-log layer; by default the one built from the configuration (src/tracing). */
  readonly telemetry?: RequestTelemetry;
  /** `--tracing-collector`: where `spec.tracing.provider.controlplane` sends spans. */
  readonly tracingCollector?: string;
  /**
   * Every listener's limits (`--headers-timeout`, `--max-connections`, ...), and the event-loop delay
   * past which new requests are shed (`--max-event-loop-delay`; 0: never). Absent: the defaults.
   */
  readonly limits?: ListenerLimits & { readonly maxEventLoopDelayMs?: number };
  /** A store opened by the caller (a `--workers` cluster worker follows its primary's); `configPaths` and `records` are then unused. */
  readonly store?: ConfigStore;
  /** Requests one workload may have waiting for a starting replica (DataPlaneOptions.maxHeldPerWorkload). */
  readonly maxHeldPerWorkload?: number;
  /** The `--workers` slot this process serves, for the per-worker metric (src/cluster). */
  readonly worker?: string;
  /** `--dns-server HOST:PORT`: the servers asked for deployment replicas named by DNS; absent: the system's. */
  readonly dnsServers?: readonly string[];
}

/** The store a role reads its configuration with (a `--workers` primary's too). */
export function storeOptions(opts: RuntimeOptions): ConfigStoreOptions {
  const { org } = opts;
  return {
    ...(opts.configPaths ? { paths: [...opts.configPaths] } : {}),
    ...(opts.records ? { records: opts.records } : {}),
    settings: opts.settings,
    logger: opts.logger.child({ component: 'config' }),
    ...(org !== undefined ? { refuse: (snapshot: Snapshot) => orgConflict(org, snapshot) } : {}),
  };
}

/**
 * The workload a process serves alone: a standalone sidecar without a mesh listener forwards to its
 * own app only, so it needs no replica table and none of the other workloads' filters or telemetry.
 * With a mesh listener it routes the internal host names like an ingress (DESIGN §4).
 */
function ownWorkloadOnly(opts: RuntimeOptions): string | undefined {
  return opts.role === 'sidecar' && !(opts.mesh?.length) ? opts.sidecar?.workload : undefined;
}


export class Runtime {
  readonly listeners: Listener[] = [];
  readonly meshListeners: Listener[] = [];
  readonly meshInboundListeners: Listener[] = [];
  admin: AdminServer | undefined;
  /** The `--status` listener (`/healthz`, `/ready`), when asked for. */
  statusListener: AdminServer | undefined;
  /** The `--metrics` listener (`/metrics`), when asked for. */
  metricsListener: AdminServer | undefined;
  private adminListeners: AdminListeners | undefined;
  /** This process's mesh identity, when it has one. */
  meshCredentials: CredentialSource | undefined;
  /** Its mTLS client (calls through its mesh listeners). */
  meshTls: MeshTlsClient | undefined;
  /** A role's own condition for the admin `/ready` (`up`: every wanted workload has a ready replica). */
  readiness: (() => boolean) | undefined;
  prober: LatencyProber | undefined;
  /** Load shedding and the overload counters (src/proxy/overload.ts). */
  overload: OverloadGuard | undefined;
  /** The replicas of `deployment` records; none for a process that serves its own workload alone. */
  private readonly deployments: DeploymentReplicas | undefined;
  private listening = false;
  private stopping = false;

  private constructor(
    readonly opts: RuntimeOptions,
    readonly store: ConfigStore,
    readonly deps: Deps,
    readonly metrics: Metrics,
    readonly replicas: ReplicaRegistry,
    readonly dataplane: DataPlane,
  ) {
    if (ownWorkloadOnly(opts) === undefined) {
      this.deployments = new DeploymentReplicas({
        deps, logger: opts.logger, metrics, registry: replicas, dataplane, current: () => store.current, dnsServers: opts.dnsServers,
      });
    }
  }

  static async start(opts: RuntimeOptions): Promise<Runtime> {
    try {
      for (const server of opts.dnsServers ?? []) checkDnsServer(server);
    } catch (err) {
      throw new UsageError((err as Error).message);
    }
    const deps: Deps = {
      clock: opts.deps?.clock ?? systemClock,
      random: opts.deps?.random ?? Math.random,
      logger: opts.deps?.logger ?? opts.logger,
    };
    const store = opts.store ?? await ConfigStore.open(storeOptions(opts));
    const problem = placeProblem(opts, store.current);
    if (problem !== undefined) {
      if (!opts.store) store.close();
      throw new UsageError(problem);
    }
    let runtime: Runtime | undefined;
    const metrics = new Metrics({
      defaultMetrics: true,
      connections: () => runtime?.openConnections() ?? 0,
      readyReplicas: () => runtime?.readyCounts() ?? [],
      workloadHealth: () => (runtime ? healthSamples(runtime.workloads()) : []),
      ...(opts.worker !== undefined ? { worker: opts.worker } : {}),
    });
    const own = opts.location;
    const onlyWorkload = ownWorkloadOnly(opts);
    const replicas = new ReplicaRegistry();
    const prober = new LatencyProber(replicas, deps.clock);
    const maxDelay = opts.limits?.maxEventLoopDelayMs;
    const maxHeld = opts.maxHeldPerWorkload;
    const overload = new OverloadGuard({ registry: metrics.registry, ...(maxDelay !== undefined ? { maxEventLoopDelayMs: maxDelay } : {}) });
    const dataplane = new DataPlane(store.current, {
      replicas,
      deps,
      metrics,
      overload,
      accessLog: opts.logger.child({ component: 'access' }),
      // With a mesh listener a sidecar also applies a target's filters in-process, for replicas that
      // have no sidecar of their own: then every workload's chain is built.
      ...(onlyWorkload !== undefined ? { sidecarOf: onlyWorkload } : {}),
      ...(maxHeld !== undefined ? { maxHeldPerWorkload: maxHeld } : {}),
      ...(opts.org !== undefined ? { org: opts.org } : {}),
      factories: opts.factories ?? defaultFactories(opts.extAuthCaFile ? { extAuth: { ca: readFileSync(opts.extAuthCaFile) } } : {}),
      // Inert (a flag check per hook) until some GVC traces or some sidecar.envoy has an accessLog.
      telemetry: opts.telemetry ?? await createTelemetry(store.current, {
        role: opts.role, logger: opts.logger, registry: metrics.registry, clock: deps.clock,
        collector: opts.tracingCollector, location: opts.location, sidecar: opts.sidecar, ...(onlyWorkload !== undefined ? { onlyWorkload } : {}),
      }),
      // The router's own location is 0 ms away; others are measured by active probes.
      latencyOf: (loc: string) => (loc === own ? 0 : prober.latencyOf(loc)),
    });
    runtime = new Runtime(opts, store, deps, metrics, replicas, dataplane);
    try {
      await runtime.openMeshIdentity();
    } catch (err) {
      await runtime.stop(0);
      throw err;
    }
    runtime.prober = prober;
    runtime.overload = overload;
    overload.start();
    prober.start();
    runtime.deployments?.apply(store.current);
    // Replicas named by DNS are known before the listeners open (or their first lookup failed, logged).
    await runtime.deployments?.firstLookups();
    store.on('change', (snapshot: Snapshot) => runtime!.onConfig(snapshot));
    store.on('rejected', () => metrics.configReloads.labels('rejected').inc());
    if (opts.watch !== false && opts.configPaths?.length) store.watch();
    try {
      await runtime.bind();
    } catch (err) {
      // A port in use, a certificate that cannot be read: release what started (the watcher, probe
      // and sampling timers, listeners already bound) so the caller can exit instead of hanging.
      await runtime.stop(0);
      throw err;
    }
    startupDone();
    return runtime;
  }

  private onConfig(snapshot: Snapshot): void {
    this.metrics.configReloads.labels('ok').inc();
    this.dataplane.update(snapshot);
    this.deployments?.apply(snapshot);
  }


  /** The mesh identity of this process (`--mesh-cert`...), checked against the sidecar's workload. */
  private async openMeshIdentity(): Promise<void> {
    const { opts } = this;
    // Callers require the target workload's identity of its sidecar (secure naming): a certificate
    // for another would be refused by all, at start or when the files are replaced.
    let accept: ((c: MeshCredentials) => string | undefined) | undefined;
    if (opts.role === 'sidecar' && opts.sidecar) {
      const [gvc, name] = opts.sidecar.workload.split('/') as [string, string];
      const want = workloadUri(this.dataplane.org, gvc, name);
      accept = (c) => (c.uri === want ? undefined : `--mesh-cert carries ${c.uri}; the sidecar of ${opts.sidecar!.workload} must present ${want}`);
    }
    const source = opts.meshCredentials ?? (opts.meshFiles
      ? await fileCredentials(opts.meshFiles, { logger: opts.logger.child({ component: 'mesh' }), watch: opts.watch !== false, ...(accept ? { accept } : {}) })
      : undefined);
    if (!source) {
      if (opts.meshInbound?.length) throw new Error('--mesh-inbound needs the sidecar\'s mesh identity: --mesh-cert, --mesh-key and --mesh-ca');
      return;
    }
    this.meshCredentials = source;
    const problem = accept?.(source.current());
    if (problem !== undefined) throw new Error(problem);
    const handshakes = this.metrics.meshHandshakes;
    this.meshTls = new MeshTlsClient(source, () => handshakes.inc({ side: 'client' }));
  }

  /** Handshake counters and the log line of a refused one, with the peer's identity when it sent one. */
  meshListenerEvents(): { handshake: () => void; handshakeFailed: (err: Error, socket: TLSSocket, presented: PeerCertificate | undefined) => void } {
    const log = this.opts.logger.child({ component: 'mesh' });
    return {
      handshake: () => this.metrics.meshHandshakes.inc({ side: 'server' }),
      handshakeFailed: (err, socket, presented) => {
        // TLS 1.3: Node refuses a client certificate after the handshake, so the error is a hang-up
        // and the certificate's verdict is on the socket.
        const reason = handshakeReason(err, (socket as TLSSocket & { authorizationError?: unknown }).authorizationError);
        this.metrics.meshHandshakeFailures.inc({ reason });
        let peer: string | undefined;
        try {
          peer = uriSanOf(presented ?? socket.getPeerCertificate());
        } catch {
          peer = undefined;
        }
        log.info({ reason, peer, remote: socket.remoteAddress }, 'mesh handshake refused');
      },
    };
  }

  private async bind(): Promise<void> {
    const { opts } = this;
    const tls = opts.tls
      ? { cert: readFileSync(opts.tls.certFile), key: readFileSync(opts.tls.keyFile), ...(opts.tls.clientCaFile ? { clientCa: readFileSync(opts.tls.clientCaFile) } : {}) }
      : undefined;
    const specs: { address: string; tls: boolean; mesh: boolean }[] = [
      ...opts.listen.map((address) => ({ address, tls: false, mesh: false })),
      ...(opts.listenTls ?? []).map((address) => ({ address, tls: true, mesh: false })),
      ...(opts.mesh ?? []).map((address) => ({ address, tls: false, mesh: true })),
    ];
    for (const spec of specs) {
      const { host, port } = parseHostPort(spec.address);
      if (spec.tls && !tls) throw new Error(`--listen-tls ${spec.address} needs --tls-cert and --tls-key`);
      const listener = await listen({
        host, port, handlers: (bound) => this.handlersFor(spec.mesh, bound), ...(spec.tls && tls ? { tls } : {}),
        ...(opts.limits ? { limits: opts.limits } : {}),
        events: { connectionRejected: () => this.overload?.connectionRejected(), sessionCalmed: () => this.overload?.sessionClosed() },
      });
      (spec.mesh ? this.meshListeners : this.listeners).push(listener);
    }
    for (const address of opts.meshInbound ?? []) await this.bindMeshInbound(address);
    this.adminListeners = await startAdminListeners(adminAddresses(opts), this.metrics, {
      ready: () => this.listening && !this.stopping && (this.readiness?.() ?? true),
      config: () => this.configDump(),
      workloads: () => this.workloads(),
      dashboard: processSource({ role: opts.role, metrics: this.metrics, store: this.store, replicas: this.replicas, clock: this.deps.clock, workloads: () => this.workloads() }),
    });
    this.admin = this.adminListeners.admin;
    this.statusListener = this.adminListeners.status;
    this.metricsListener = this.adminListeners.metrics;
    this.listening = true;
  }

  /** A standalone sidecar's mTLS listener: its own workload's internal names, to its app. */
  private async bindMeshInbound(address: string): Promise<void> {
    const { opts } = this;
    const s = opts.sidecar;
    const source = this.meshCredentials!;
    if (!s) throw new Error('--mesh-inbound is a sidecar\'s listener');
    const app = parseHostPort(s.app);
    const identity: MeshInbound = {
      workload: s.workload,
      location: s.location,
      replica: s.replica,
      index: replicaIndex(s.replica),
      uri: () => source.current().uri,
      // The primary port is `--app`; other declared ports are the app's host on their own number (one pod).
      app: (port) => (port === this.store.current.workloads.get(s.workload)?.primaryPort?.number ? app : { host: app.host, port }),
    };
    const listener = await startMeshInbound(address, identity, source, this);
    this.meshInboundListeners.push(listener);
  }

  private handlersFor(mesh: boolean, listener: Listener): ListenerHandlers {
    const { opts, dataplane } = this;
    if (opts.role === 'sidecar' && !mesh) {
      const s = opts.sidecar!;
      return dataplane.sidecarHandlers({ workload: s.workload, location: s.location, replica: s.replica, app: parseHostPort(s.app) }, { port: listener.address.port, tls: listener.tls });
    }
    if (mesh) {
      // A sidecar's mesh listener carries its own workload's outbound calls; elsewhere the caller has
      // no workload identity and counts as a member of the org.
      const s = opts.sidecar;
      const tls = this.meshTls ? { tls: this.meshTls } : {};
      let caller: OutboundCaller = tls;
      if (s) {
        const app = parseHostPort(s.app);
        const own = s.workload;
        caller = {
          workload: own, gvc: own.split('/')[0]!, ...tls,
          // Containers of one replica share its network: a sibling is the app's host on the declared port.
          sibling: (container, port) => {
            const c = this.store.current.workloads.get(own)?.containers.find((x) => x.name === container);
            return c?.ports.some((p) => p.number === port) ? { host: app.host, port } : undefined;
          },
        };
      }
      return dataplane.meshHandlers({ port: listener.address.port }, caller);
    }
    return dataplane.ingressHandlers({ port: listener.address.port, tls: listener.tls });
  }

  /** `up`: its supervisor's replicas (start times, restarts, stopping), for `workloads()`. */
  upReplicas: (() => readonly UpReplicaState[]) | undefined;

  /** The admin `/workloads` rows and the health gauge's source (src/local/workloads.ts); `only`: one workload's (key), or those workloads'. */
  workloads(only?: string | readonly string[]): WorkloadStatus[] {
    return workloadStatuses(this.store.current, this.replicas, this.upReplicas?.(), this.deps.clock.now(), only);
  }

  /** Ready replicas per workload and location (every known pair, 0 included). */
  readyCounts(): [string, string, number][] {
    const counts = new Map<string, [string, string, number]>();
    for (const r of this.replicas.all()) {
      const key = `${r.workload}\u0000${r.location}`;
      const entry = counts.get(key) ?? [r.workload, r.location, 0];
      if (r.ready) entry[2]++;
      counts.set(key, entry);
    }
    return [...counts.values()];
  }

  openConnections(): number {
    let n = 0;
    for (const l of this.listeners) n += l.openConnections();
    for (const l of this.meshListeners) n += l.openConnections();
    for (const l of this.meshInboundListeners) n += l.openConnections();
    return n;
  }

  configDump(): unknown {
    const snapshot = this.store.current;
    return {
      role: this.opts.role,
      generation: snapshot.generation,
      settings: snapshot.settings,
      records: redact(snapshot.records),
      warnings: snapshot.warnings,
      lastError: this.store.lastErrors ? { at: this.store.lastErrorAt, errors: this.store.lastErrors } : null,
      replicas: this.replicas.all().map((r) => ({ workload: r.workload, location: r.location, name: r.name, ready: r.ready, outstanding: r.outstanding })),
    };
  }

  /** Stop accepting, let requests in flight finish (up to `graceMs`), then close everything. */
  async stop(graceMs: number): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    await Promise.all([...this.listeners, ...this.meshListeners, ...this.meshInboundListeners].map((l) => l.stopAccepting()));
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.dataplane.drained(),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, graceMs))),
    ]);
    clearTimeout(timer);
    for (const l of [...this.listeners, ...this.meshListeners, ...this.meshInboundListeners]) l.destroy();
    this.meshTls?.close();
    if (!this.opts.meshCredentials) this.meshCredentials?.close();
    this.deployments?.close();
    this.prober?.stop();
    this.overload?.stop();
    this.store.close();
    await this.dataplane.close();
    await this.adminListeners?.close();
  }
}

/** A refused handshake's reason for the metric: the certificate's verdict, else the TLS error's code. */
function handshakeReason(err: unknown, verdict: unknown): string {
  const pick = (e: unknown): string | undefined => {
    if (typeof e === 'string' && e !== '') return e;
    if (e instanceof Error) return (e as NodeJS.ErrnoException).code ?? e.message;
    return undefined;
  };
  const code = pick(verdict) ?? pick(err) ?? 'unknown';
  return code.replace(/^ERR_SSL_/, '').toLowerCase().slice(0, 64);
}

/** N of a replica named `W-N` (a pod name's ordinal), else 0. */
function replicaIndex(name: string): number {
  const m = /-(\d+)$/.exec(name);
  return m ? Number(m[1]) : 0;
}

/**
 * An mTLS listener serving `identity` (DESIGN §9): its certificate follows the credential source's
 * renewals (new connections get the new one), its handshakes are counted, refusals logged.
 */
export async function startMeshInbound(address: string, identity: MeshInbound, source: CredentialSource, runtime: Runtime): Promise<Listener> {
  const { host, port } = parseHostPort(address);
  const pem = (c: MeshCredentials) => ({ cert: c.certPem, key: c.keyPem, ca: c.caPem });
  const listener = await listen({
    host, port,
    mtls: pem(source.current()),
    handlers: (bound) => runtime.dataplane.meshInboundHandlers(identity, { port: bound.address.port }),
    ...(runtime.opts.limits ? { limits: runtime.opts.limits } : {}),
    events: runtime.meshListenerEvents(),
  });
  const unsubscribe = source.onChange((c) => listener.setCredentials(pem(c)));
  const destroy = listener.destroy.bind(listener);
  return Object.assign(listener, { destroy: () => { unsubscribe(); destroy(); } });
}
