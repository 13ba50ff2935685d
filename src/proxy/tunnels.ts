/**
 * WebSocket upgrades and CONNECT tunnels (to `tcp` ports) through the data plane, at the ingress
 * (and mesh listeners) and at a standalone sidecar. Each is one Exchange from the request head to
 * the connection's close, so it is routed, checked and observed like an HTTP request: the external
 * and internal firewalls, the sidecar filters (external authorization, rate limiting; run by the
 * replica's own sidecar when it has one, else in-process), one server span and one client span for
 * the upstream attempt with the trace context injected into the upgrade request (and into the
 * CONNECT re-issued to a sidecar), one access-log line and one access-log-service entry when it
 * closes, with the payload bytes each way. Its status is the answer that switched the connection
 * (101, or 200 for CONNECT) or the refusal. Tunnels are not requests in flight for draining.
 *
 * A CONNECT to a replica with its own sidecar is re-issued to that sidecar with the request's
 * headers (the sidecar authorizes it, then opens the tunnel to the app) and its answer relayed; a
 * CONNECT to a replica without one, or arriving at a sidecar, is a TCP connection to the app.
 * Never an open proxy: anything but a workload's `tcp` port gets 404.
 */
import http, { type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import https from 'node:https';
import tls from 'node:tls';
import type { Duplex } from 'node:stream';
import type { PortModel } from '../config/model.js';
import type { MeshCaller } from '../firewall/internal.js';
import { workloadUri } from '../mesh/index.js';
import { internalFirewall } from '../firewall/internal.js';
import { externalFirewall } from '../firewall/external.js';
import { chooseLocation, geoCandidates, pickReplica, resolveHost, routeTo, whenFirstChecked, type HostPort } from '../routing/index.js';
import type { DataPlaneOptions, Plane, SidecarIdentity } from './dataplane-options.js';
import { Exchange, type ExchangeObserver } from './exchange.js';
import { EMPTY_CHAIN } from './filters.js';
import { failureKind } from './forward.js';
import { applyHeaderOps, clientAddress, upstreamHeaders } from './headers.js';
import { ERRORS, strippedAtEdge, type ErrorCode } from '../filter/index.js';
import { MAX_URL_LENGTH, normalizePath, routingAuthority, type NormalizedPath } from './path.js';
import { newRequestId, validRequestId } from './request-id.js';
import { appAddress, isInternal, noLatency, protocolOf, routeTarget, type RequestPath } from './routes.js';
import type { Observation } from './observation.js';
import { problemReply, requestProblem } from './sanitize.js';
import { headerBytes, openTcpTunnel, rejectUpgrade, relayConnect, Tunnel, type TunnelKind } from './tunnel.js';
import { filterUpgrade } from './upgrade-filters.js';
import { sanitizeSet, type MeshAdmission, type MeshInbound } from './mesh-peer.js';
import { proxyWebSocket } from './websocket.js';

/** A CONNECT has no path (Envoy's `:path` is absent); domain routes are chosen as for `/`. */
const CONNECT_PATH: NormalizedPath = { ok: true, path: '', query: '' };
const CONNECT_ROUTING: RequestPath = { path: '/', query: '', pathWithQuery: '/' };

interface Picked {
  readonly address: HostPort;
  readonly port: PortModel | undefined;
  readonly path: string;
  /** The replica's own sidecar (plain, or over mTLS) runs the filters: none run here. */
  readonly viaSidecar: boolean;
  /** Over mTLS to the replica's sidecar: the options to dial it with. */
  readonly mesh?: tls.ConnectionOptions;
}

type ListenerKind = Exchange['listenerKind'];

export class Tunnels {
  private readonly opts: DataPlaneOptions;
  /** Tunnels are not requests in flight: a finished one is only recorded. */
  private readonly observer: ExchangeObserver;

  constructor(private readonly plane: Plane, observation: Observation) {
    this.opts = plane.opts;
    this.observer = { onFinish: (ex) => observation.record(ex) };
  }

  // ---- entry points ----------------------------------------------------------------------------

  /** `Upgrade: websocket` on an ingress or mesh listener. */
  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, port: number, tls: boolean, listener: 'external' | 'mesh', caller?: MeshCaller): void {
    const ex = this.start(req, socket, 'websocket', tls, port, listener);
    if (!ex) return;
    this.pick(ex, socket, listener, caller, (picked) => {
      req.url = picked.path;
      req.headers['x-request-id'] = ex.requestId;
      const strip = this.plane.table.headers.strip;
      for (const name of Object.keys(req.headers)) {
        if (strippedAtEdge(name, strip)) delete req.headers[name];
      }
      this.filtered(ex, socket, picked.viaSidecar, () => this.proxyUpgrade(ex, socket, head, picked.address, picked.mesh));
    });
  }

  /** `CONNECT host:port` on an ingress or mesh listener: a tunnel to a workload's `tcp` port. */
  connect(req: IncomingMessage, socket: Duplex, head: Buffer, port: number, tls: boolean, listener: 'external' | 'mesh', caller?: MeshCaller): void {
    const ex = this.start(req, socket, 'connect', tls, port, listener);
    if (!ex) return;
    this.pick(ex, socket, listener, caller, (picked) => {
      if (protocolOf(picked.port) !== 'tcp') return this.refuse(ex, socket, 'NO_ROUTE');
      this.filtered(ex, socket, picked.viaSidecar, () =>
        picked.viaSidecar ? this.relay(ex, socket, head, picked.address, picked.mesh) : this.open(ex, socket, head, picked.address));
    });
  }

  /** An upgrade at a standalone sidecar: its filters, then the app. */
  sidecarUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, identity: SidecarIdentity, listener: { port: number; tls: boolean }): void {
    const ex = this.start(req, socket, 'websocket', listener.tls, listener.port, 'sidecar');
    if (!ex || !this.asSidecar(ex, socket, identity)) return;
    this.filtered(ex, socket, false, () => this.proxyUpgrade(ex, socket, head, identity.app));
  }

  /** A CONNECT at a standalone sidecar (re-issued by the ingress): its filters, then the app's `tcp` port. */
  sidecarConnect(req: IncomingMessage, socket: Duplex, head: Buffer, identity: SidecarIdentity, listener: { port: number; tls: boolean }): void {
    const ex = this.start(req, socket, 'connect', listener.tls, listener.port, 'sidecar');
    if (!ex || !this.asSidecar(ex, socket, identity)) return;
    if (protocolOf(ex.workload!.primaryPort) !== 'tcp') return this.refuse(ex, socket, 'NO_ROUTE');
    this.filtered(ex, socket, false, () => this.open(ex, socket, head, identity.app));
  }

  /** An upgrade on a sidecar's mTLS listener: the caller admitted, then the filters and the app. */
  meshInboundUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer, identity: MeshInbound, port: number, admit: (ex: Exchange) => MeshAdmission | ErrorCode): void {
    const ex = this.start(req, socket, 'websocket', true, port, 'sidecar');
    if (!ex) return;
    const admitted = admit(ex);
    if (typeof admitted === 'string') return this.refuse(ex, socket, admitted);
    this.asMeshTarget(ex, admitted, identity);
    this.filtered(ex, socket, admitted.port.number === admitted.workload.mesh.inboundDisabledPort, () => this.proxyUpgrade(ex, socket, head, admitted.app));
  }

  /** A CONNECT on a sidecar's mTLS listener (re-issued by the caller's sidecar): to the app's `tcp` port. */
  meshInboundConnect(req: IncomingMessage, socket: Duplex, head: Buffer, identity: MeshInbound, port: number, admit: (ex: Exchange) => MeshAdmission | ErrorCode): void {
    const ex = this.start(req, socket, 'connect', true, port, 'sidecar');
    if (!ex) return;
    const admitted = admit(ex);
    if (typeof admitted === 'string') return this.refuse(ex, socket, admitted);
    if (protocolOf(admitted.port) !== 'tcp') return this.refuse(ex, socket, 'NO_ROUTE');
    this.asMeshTarget(ex, admitted, identity);
    this.filtered(ex, socket, admitted.port.number === admitted.workload.mesh.inboundDisabledPort, () => this.open(ex, socket, head, admitted.app));
  }

  private asMeshTarget(ex: Exchange, admitted: MeshAdmission, identity: MeshInbound): void {
    ex.location = identity.location;
    const trusted = (this.plane.table.snapshot.gvcs.get(admitted.workload.gvc)?.trustedProxies ?? 0) + 1;
    ex.clientAddress = clientAddress(ex.peer, ex.req.headers['x-forwarded-for'], trusted);
    // A client-sent value never reaches the filters or the app; the caller's is set from its verified certificate.
    sanitizeSet(ex.req, admitted.xfcc);
  }

  // ---- the exchange ----------------------------------------------------------------------------

  /** The tunnel's exchange, or `undefined` when the request was refused before routing. */
  private start(req: IncomingMessage, socket: Duplex, kind: TunnelKind, tls: boolean, port: number, listenerKind: ListenerKind): Exchange | undefined {
    socket.on('error', () => socket.destroy());
    const { deps, telemetry, overload } = this.opts;
    const given = req.headers['x-request-id'];
    const requestId = typeof given === 'string' && validRequestId(given) ? given : newRequestId();
    const url = req.url ?? '';
    const norm = kind === 'connect' ? CONNECT_PATH : normalizePath(url);
    const ex = new Exchange(
      req, new http.ServerResponse(req), requestId,
      norm.ok ? norm.path : url, norm.ok ? norm.query : '',
      kind === 'connect' ? url : routingAuthority(url, req.headers.host ?? ''),
      req.socket?.remoteAddress ?? '', deps.clock.now(), deps.clock, this.observer,
    );
    ex.tunnel = new Tunnel(kind);
    ex.tls = tls;
    ex.listenerPort = port;
    ex.listenerKind = listenerKind;
    telemetry?.requestStart(ex, listenerKind === 'sidecar' ? 'sidecar' : 'ingress');
    socket.once('close', () => this.end(ex));
    if (overload?.shed()) return void this.refuse(ex, socket, 'OVERLOADED');
    const problem = requestProblem(req);
    if (problem) {
      const { code, message } = problemReply(problem);
      return void this.refuse(ex, socket, code, message);
    }
    if (url.length > MAX_URL_LENGTH) return void this.refuse(ex, socket, 'URI_TOO_LONG');
    if (!norm.ok) return void this.refuse(ex, socket, 'BAD_REQUEST', `bad request: ${norm.reason}`);
    return ex;
  }

  /** Answer on the raw socket and end the exchange. */
  private refuse(ex: Exchange, socket: Duplex, code: ErrorCode, message?: string, status?: number): void {
    // The client is gone (and the tunnel already recorded as such).
    if (ex.isFinished) return void socket.destroy();
    const entry = ERRORS[code];
    const sent = rejectUpgrade(socket, status ?? entry.status, message ?? entry.message, ex.requestId, code);
    ex.errorCode = code;
    ex.status = sent.status;
    ex.bytesSent = sent.bodyBytes;
    ex.tunnel!.responseHeaderBytes = sent.headerBytes;
    ex.finish();
  }

  /** The connection closed: the tunnel is over. */
  private end(ex: Exchange): void {
    if (ex.isFinished) return;
    const tunnel = ex.tunnel!;
    const counts = tunnel.counts();
    tunnel.bytesIn = counts.in;
    if (counts.out > 0) ex.bytesSent = counts.out;
    ex.finish();
  }

  /** Run the workload's sidecar filters (unless the replica's own sidecar does), then `go`. */
  private filtered(ex: Exchange, socket: Duplex, viaSidecar: boolean, go: () => void): void {
    const chain = viaSidecar ? EMPTY_CHAIN : this.plane.table.sidecarChains.get(ex.workload!.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return go();
    void filterUpgrade(chain, ex, socket).then((ok) => ok && !ex.isFinished && go());
  }

  // ---- routing ---------------------------------------------------------------------------------

  /**
   * Resolve to one replica address (the exchange gets workload, location and replica) and hand it to
   * `go`, or refuse. When no replica is ready because some have not had their first readiness check
   * yet (a router that just started), those checks run first, as for requests (activator.ts).
   */
  private pick(ex: Exchange, socket: Duplex, listener: 'external' | 'mesh', caller: MeshCaller | undefined, go: (picked: Picked) => void, waited = false): void {
    if (ex.isFinished) return void socket.destroy();
    if (caller) ex.meshCaller = caller;
    const table = this.plane.table;
    const target = resolveHost(table.hosts, ex.host, listener, ex.listenerPort);
    const route = target && routeTarget(table.snapshot, target, ex.tunnel!.kind === 'connect' ? CONNECT_ROUTING : ex);
    if (!route) return void this.refuse(ex, socket, 'NO_ROUTE');
    const { workload } = route;
    ex.workload = workload;
    ex.targetPort = route.port?.number;
    const trusted = table.snapshot.gvcs.get(workload.gvc)?.trustedProxies ?? 0;
    ex.clientAddress = clientAddress(ex.peer, ex.req.headers['x-forwarded-for'], trusted);
    if (caller && isInternal(target) && !internalFirewall(workload)(caller)) return void this.refuse(ex, socket, 'FIREWALL_BLOCKED');
    // The ingress filter chain is for HTTP requests: the external firewall is applied here.
    if (listener === 'external' && externalFirewall(workload).check?.(ex.clientAddress, ex.req.rawHeaders)) return void this.refuse(ex, socket, 'FIREWALL_BLOCKED');
    if (workload.globallySuspended) return void this.refuse(ex, socket, 'SUSPENDED');
    const { replicas, deps, latencyOf } = this.opts;
    const location = route.fixedLocation
      ?? chooseLocation(geoCandidates(table.snapshot, workload, route.includeNotReady ? this.plane.anyReplica : replicas, latencyOf ?? noLatency));
    const list = location === undefined ? [] : replicas.list(workload.key, location);
    const replica = route.fixedReplica !== undefined
      ? list.find((r) => r.index === route.fixedReplica && (r.ready || route.includeNotReady))
      : pickReplica(list, deps.random, deps.clock.now(), route.includeNotReady ? { includeNotReady: true } : undefined);
    const hop = replica && this.plane.hopOf(ex, replica, route.port, isInternal(target));
    const address = replica && (hop === 'mesh' ? replica.mesh : hop === 'sidecar' ? replica.sidecar : appAddress(replica, route.port));
    if (!replica || !address) {
      const checked = replica || waited ? undefined : whenFirstChecked(replicas, workload.key, deps.clock);
      if (checked) return void checked.then(() => this.pick(ex, socket, listener, caller, go, true));
      return void this.refuse(ex, socket, 'NO_HEALTHY_UPSTREAM');
    }
    ex.location = location;
    // An open tunnel is an outstanding request to its replica (least-request balancing sees it).
    ex.replica = replica;
    routeTo(replica);
    if (hop === 'mesh') {
      ex.destinationPrincipal = workloadUri(this.plane.org, workload.gvc, workload.name);
      const mesh = ex.meshCaller!.tls!.options(ex.destinationPrincipal, 'http/1.1');
      return go({ address, port: route.port, path: route.upstreamPath, viaSidecar: true, mesh });
    }
    go({ address, port: route.port, path: route.upstreamPath, viaSidecar: hop === 'sidecar' || hop === 'bare' });
  }

  /** A standalone sidecar's identity on the exchange; false when its workload is gone (answered 404). */
  private asSidecar(ex: Exchange, socket: Duplex, identity: SidecarIdentity): boolean {
    const table = this.plane.table;
    const workload = table.snapshot.workloads.get(identity.workload);
    if (!workload) {
      this.refuse(ex, socket, 'NO_ROUTE');
      return false;
    }
    ex.workload = workload;
    ex.location = identity.location;
    ex.targetPort = workload.primaryPort?.number;
    // Behind the ingress: one more trusted hop (the ingress appended the client).
    const trusted = (table.snapshot.gvcs.get(workload.gvc)?.trustedProxies ?? 0) + 1;
    ex.clientAddress = clientAddress(ex.peer, ex.req.headers['x-forwarded-for'], trusted);
    return true;
  }

  // ---- the upstream attempt ------------------------------------------------------------------------

  private attemptStart(ex: Exchange, target: HostPort, headers: OutgoingHttpHeaders | undefined): void {
    ex.attempts = 1;
    ex.upstreamStartedAt = this.opts.deps.clock.now();
    // Trace context goes nowhere on a raw TCP connection, but the attempt still gets its span.
    if (ex.telemetry !== undefined) this.opts.telemetry?.attemptStart(ex, target, headers ?? {});
  }

  /** The upstream switched the connection (`status`), or answered otherwise. */
  private answered(ex: Exchange, status: number): void {
    ex.status = status;
    ex.upstreamHeadersAt = this.opts.deps.clock.now();
    this.opts.telemetry?.attemptEnd(ex, { status, retried: false });
  }

  /** The upstream could not be reached: 503 while the client has been sent nothing. */
  private unreachable(ex: Exchange, socket: Duplex, connected: boolean): void {
    if (ex.isFinished) return;
    this.opts.telemetry?.attemptEnd(ex, { failure: connected ? 'reset' : 'connect-failure', retried: false });
    this.refuse(ex, socket, 'UPSTREAM_RESET');
  }

  /** WebSocket: the upgrade request (with the filters' mutations and trace context) to `target`. */
  private proxyUpgrade(ex: Exchange, socket: Duplex, head: Buffer, target: HostPort, mesh?: tls.ConnectionOptions): void {
    const req = ex.req as IncomingMessage;
    this.attemptStart(ex, target, req.headers as OutgoingHttpHeaders);
    const tunnel = ex.tunnel!;
    let failed = false;
    // Over mTLS: an agent for this one upgrade (its connection becomes the tunnel).
    const agent = mesh ? new https.Agent({ ...mesh, keepAlive: false }) : undefined;
    proxyWebSocket(req, socket, head, target, () => this.refuse(ex, socket, 'UPSTREAM_RESET'), {
      answered: (status, headers, upstream) => {
        if (ex.responseHeaderOps) applyHeaderOps(headers as OutgoingHttpHeaders, ex.responseHeaderOps);
        tunnel.responseHeaderBytes = headerBytes(headers);
        if (upstream) tunnel.carry(upstream.socket, upstream.headBytes, upstream.requestBytes);
        else ex.bytesSent = Number(headers['content-length']) || 0;
        this.answered(ex, status);
      },
      failed: (beforeAnswer, err) => {
        if (failed) return;
        failed = true;
        if (beforeAnswer) this.opts.telemetry?.attemptEnd(ex, { failure: failureKind(err), retried: false });
      },
    }, agent);
  }

  /** CONNECT to the app's `tcp` port: a TCP connection, then 200 and the bytes piped. */
  private open(ex: Exchange, socket: Duplex, head: Buffer, target: HostPort): void {
    this.attemptStart(ex, target, undefined);
    openTcpTunnel(socket, head, target, {
      connected: (upstream) => {
        ex.tunnel!.carry(upstream, 0, 0);
        this.answered(ex, 200);
      },
      failed: () => this.unreachable(ex, socket, false),
    });
  }


  /** CONNECT through the replica's sidecar: the request re-issued with its headers, the answer relayed. */
  private relay(ex: Exchange, socket: Duplex, head: Buffer, target: HostPort, mesh?: tls.ConnectionOptions): void {
    const headers = upstreamHeaders(ex.req.headers, {
      host: ex.host,
      peer: ex.peer,
      proto: ex.tls ? 'https' : 'http',
      requestId: ex.requestId,
      stripPrefixes: this.plane.table.headers.strip,
      keepTeTrailers: false,
    });
    this.attemptStart(ex, target, headers);
    relayConnect(ex.tunnel!, socket, head, target, ex.host, headers, {
      ...(mesh ? { dial: () => tls.connect({ ...mesh, host: target.host, port: target.port }) } : {}),
      answered: (answer) => {
        ex.tunnel!.responseHeaderBytes = answer.headerBytes;
        if (answer.status < 200 || answer.status > 299) ex.bytesSent = answer.bodyBytes;
        this.answered(ex, answer.status);
      },
      failed: (connected) => this.unreachable(ex, socket, connected),
    });
  }
}
