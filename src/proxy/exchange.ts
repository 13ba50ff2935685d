/**
 * One request's state on its way through the proxy: the normalized path, the routing decision, the
 * replica chosen, the timeout, what the filters asked to add, and the bookkeeping that ends in exactly
 * one access-log line and one metrics update. `finish()` is idempotent, so every path that ends a
 * request (answered, reset, client gone, timed out) may call it.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import type { WorkloadModel } from '../config/model.js';
import type { Replica } from '../routing/replicas.js';
import type { Clock, Timer } from '../deps.js';
import { type DownstreamRequest, type DownstreamResponse, sendLocalReply, destroyResponse } from './errors.js';
import { applyHeaderOps } from './headers.js';
import type { ExchangeView, HeaderOp, LocalReply } from '../filter/index.js';
import type { ExchangeInfo } from '../observe/index.js';
import type { Tunnel } from './tunnel.js';
import type { OutboundCaller } from './mesh-peer.js';
import type { MeshPeer } from '../mesh/index.js';
import type { DebugInfo } from './debug.js';

/** Where a response keeps its exchange, for the one listener all responses share. */
const EXCHANGE = Symbol('svcproxy.exchange');
type Watched = DownstreamResponse & { [EXCHANGE]?: Exchange };

function onResponseClose(this: Watched): void {
  const ex = this[EXCHANGE];
  if (ex !== undefined && !ex.isFinished) ex.abort(new Error('client closed'));
}

/**
 * Abort the exchange when its response closes before it finished (the client went away). One
 * function listens on every response (no closure or `once` wrapper per request).
 */
export function abortOnClientClose(ex: Exchange): void {
  (ex.res as Watched)[EXCHANGE] = ex;
  ex.res.on('close', onResponseClose);
}

export interface ExchangeObserver {
  /** Called once per request when it is over. */
  onFinish(exchange: Exchange): void;
  /** The debug headers of a request that asked for them (`debugInfo` set), as its answer leaves. */
  debugHeaders?(exchange: Exchange): OutgoingHttpHeaders | undefined;
}

/** Filters see it as ExchangeView (../filter/), observers as ExchangeInfo (../observe/). */
export class Exchange implements ExchangeView, ExchangeInfo {
  workload: WorkloadModel | undefined = undefined;
  location: string | undefined = undefined;
  replica: Replica | undefined = undefined;
  /** Client address after trusted proxies. */
  clientAddress: string;
  status = 0;
  /** Response body bytes written to the client: the app's answer relayed, or a local reply's body. */
  bytesSent = 0;
  upstreamStartedAt = 0;
  upstreamHeadersAt = 0;
  /** Set when the local reply or upstream answer carried a proxy error code. */
  errorCode: string | undefined = undefined;
  /** Headers the filters add to the response (rate limit). */
  responseHeaders: OutgoingHttpHeaders | undefined = undefined;
  /**
   * Header mutations for the response, applied last, over the app's headers or a local reply's
   * (ext_authz `response_headers_to_add`: `append` keeps the app's value and adds one).
   */
  responseHeaderOps: HeaderOp[] | undefined = undefined;
  /** Headers the filters set on the upstream request (applied last). */
  upstreamSet: [string, string][] | undefined = undefined;
  /** Headers the filters remove from the upstream request. */
  upstreamRemove: string[] | undefined = undefined;
  /** Query parameters the filters set (replacing) or remove on the upstream request (ext_authz). */
  upstreamQuerySet: [string, string][] | undefined = undefined;
  upstreamQueryRemove: string[] | undefined = undefined;
  /**
   * The request body to send upstream instead of the downstream stream: a filter that read the first
   * bytes (ext_authz with the body) puts them back in front of the rest here.
   */
  bodyOverride: Readable | undefined = undefined;
  /** The container port number the request is for (`svcPort` exclusions, `externalAuthListenPort`). */
  targetPort: number | undefined = undefined;
  /** The listener port the request arrived on. */
  listenerPort = 0;
  /** Whether the downstream connection is TLS. */
  tls = false;
  /**
   * Which listener took the request: an external one (the external firewall applies), the mesh
   * listener (internal callers: the internal firewall applies instead), or a standalone sidecar's
   * inbound listener (behind the ingress, which already applied the edge rules).
   */
  listenerKind: 'external' | 'mesh' | 'sidecar' = 'external';
  /** Who called through a mesh (outbound) listener. */
  meshCaller: OutboundCaller | undefined = undefined;
  /** The caller's mesh identity (its certificate's URI), on a sidecar's mTLS listener. */
  sourcePrincipal: string | undefined = undefined;
  /** That identity read as a workload (its GVC and name), when it is one. */
  sourceIdentity: MeshPeer | undefined = undefined;
  /** The identity the caller's sidecar required of the target, on a request it sent over mTLS. */
  destinationPrincipal: string | undefined = undefined;
  /** A request through an outbound listener to a destination outside the mesh: where it went. */
  egress: string | undefined = undefined;
  /** Set for a WebSocket upgrade or a CONNECT tunnel: the exchange lasts as long as the connection. */
  tunnel: Tunnel | undefined = undefined;
  /** Per-request state of the telemetry layer (the server span), opaque here. */
  telemetry: unknown = undefined;
  /** Upstream attempts made so far (`x-envoy-attempt-count`). */
  attempts = 0;
  /** Retry bookkeeping of the ingress (set by the data plane when the request is forwarded). */
  attemptState: unknown = undefined;
  /** Set when the request asked for debug answers and may have them (src/proxy/debug.ts). */
  debugInfo: DebugInfo | undefined = undefined;
  timedOut = false;
  private timer: Timer | undefined = undefined;
  private finished = false;
  /** Abort the upstream attempt in flight (set by the forwarder). */
  abortUpstream: ((reason: Error) => void) | undefined = undefined;

  constructor(
    readonly req: DownstreamRequest,
    readonly res: DownstreamResponse,
    readonly requestId: string,
    readonly path: string,
    readonly query: string,
    readonly host: string,
    readonly peer: string,
    readonly startedAt: number,
    private readonly clock: Clock,
    private readonly observer: ExchangeObserver,
  ) {
    this.clientAddress = peer;
  }

  get pathWithQuery(): string {
    return this.query ? this.path + this.query : this.path;
  }

  /** Answer the request from the proxy itself and end it. */
  reply(reply: LocalReply): void {
    this.errorCode = reply.code;
    if (this.responseHeaderOps) reply = { ...reply, headers: applyHeaderOps({ ...(reply.headers ?? this.responseHeaders) }, this.responseHeaderOps) };
    else if (this.responseHeaders && !reply.headers) reply = { ...reply, headers: this.responseHeaders };
    if (this.debugInfo !== undefined) {
      const debug = this.observer.debugHeaders?.(this);
      if (debug) reply = { ...reply, headers: { ...reply.headers, ...debug } };
    }
    const sent = sendLocalReply(this.req, this.res, reply, this.requestId);
    this.status = sent.status;
    this.bytesSent += sent.bodyBytes;
    this.finish();
  }

  /**
   * Start the request timeout. On expiry the upstream attempt is aborted and 504 answered, or the
   * downstream stream reset when the answer had already begun.
   */
  /** Starts the request's timeout; a second call keeps the first deadline (it covers waiting for a replica). */
  startTimeout(ms: number): void {
    if (this.timer !== undefined || this.timedOut) return;
    this.timer = this.clock.setTimeout(() => this.expire(), ms);
  }

  private expire(): void {
    this.timer = undefined;
    this.timedOut = true;
    this.abortUpstream?.(new Error('timeout'));
    if (this.finished) return;
    if (this.res.headersSent) this.abort(new Error('timeout'));
    else this.reply({ code: 'UPSTREAM_TIMEOUT' });
  }

  /** The client went away or the answer cannot continue: reset downstream, abort upstream. */
  abort(reason: Error): void {
    this.abortUpstream?.(reason);
    if (!this.res.writableEnded) destroyResponse(this.res);
    this.finish();
  }

  finish(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.timer !== undefined) {
      this.clock.clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.replica) this.replica.outstanding--;
    this.observer.onFinish(this);
  }

  get isFinished(): boolean {
    return this.finished;
  }

  get durationMs(): number {
    return this.clock.now() - this.startedAt;
  }
}
