/**
 * The filter contract (STYLE §2), apart from the proxy that runs it, as Envoy's filter interface
 * stands apart from its connection manager: a filter looks at a request through `ExchangeView` and
 * either lets it continue (`undefined`) or answers it (a `LocalReply`, ./reply.ts); the chain stops at
 * the first answer. A `FilterFactory` builds a workload's filter from its policy once per
 * configuration snapshot (no filter when the policy does not use it), given a `FilterContext`. The
 * proxy's Exchange implements the view and src/proxy/filters.ts runs the chains; filters
 * (extauth/, ratelimit/, firewall/) import this module and nothing from proxy/. A filter that throws
 * or rejects is answered 500 by the chain runner.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type http2 from 'node:http2';
import type { Readable } from 'node:stream';
import type { GvcModel, Snapshot, WorkloadModel } from '../config/model.js';
import type { Deps } from '../deps.js';
import type { Metrics } from '../admin/metrics.js';
import type { HeaderOp } from './headers.js';
import type { LocalReply } from './reply.js';

/**
 * What a filter sees of one request on its way through the proxy (the members of the proxy's
 * Exchange that filters read), and what it may ask of the rest of the way (the mutable ones, applied
 * by the proxy when it forwards or answers).
 */
export interface ExchangeView {
  readonly req: IncomingMessage | http2.Http2ServerRequest;
  readonly requestId: string;
  /** The normalized path, without the query. */
  readonly path: string;
  /** The query, with its `?` (empty when none). */
  readonly query: string;
  readonly pathWithQuery: string;
  readonly host: string;
  /** The downstream connection's peer address. */
  readonly peer: string;
  /** Client address after trusted proxies. */
  readonly clientAddress: string;
  /**
   * Which listener took the request: an external one (the external firewall applies), the mesh
   * listener (internal callers: the internal firewall applies instead), or a standalone sidecar's
   * inbound listener (behind the ingress, which already applied the edge rules).
   */
  readonly listenerKind: 'external' | 'mesh' | 'sidecar';
  /** The listener port the request arrived on. */
  readonly listenerPort: number;
  /** The container port number the request is for (`svcPort` exclusions, `externalAuthListenPort`). */
  readonly targetPort: number | undefined;
  /** Whether the downstream connection is TLS. */
  readonly tls: boolean;
  /** The request is over (answered, reset, client gone): a filter that waited stops here. */
  readonly isFinished: boolean;
  /** Per-request state of the telemetry layer, opaque here (tracing's childSpan reads it). */
  readonly telemetry: unknown;
  /** Headers the filters add to the response (rate limit). */
  responseHeaders: OutgoingHttpHeaders | undefined;
  /**
   * Header mutations for the response, applied last, over the app's headers or a local reply's
   * (ext_authz `response_headers_to_add`: `append` keeps the app's value and adds one).
   */
  responseHeaderOps: HeaderOp[] | undefined;
  /** Headers the filters set on the upstream request (applied last). */
  upstreamSet: [string, string][] | undefined;
  /** Headers the filters remove from the upstream request. */
  upstreamRemove: string[] | undefined;
  /** Query parameters the filters set (replacing) or remove on the upstream request (ext_authz). */
  upstreamQuerySet: [string, string][] | undefined;
  upstreamQueryRemove: string[] | undefined;
  /**
   * The request body to send upstream instead of the downstream stream: a filter that read the first
   * bytes (ext_authz with the body) puts them back in front of the rest here.
   */
  bodyOverride: Readable | undefined;
}

export type FilterResult = LocalReply | undefined;

export interface Filter {
  readonly name: string;
  run(exchange: ExchangeView): FilterResult | Promise<FilterResult>;
}

export interface FilterContext {
  readonly snapshot: Snapshot;
  readonly workload: WorkloadModel;
  readonly gvc: GvcModel | undefined;
  readonly deps: Deps;
  readonly metrics: Metrics;
  /** Clients that outlive one snapshot (gRPC channels to an auth or rate-limit service). */
  readonly shared: SharedResources;
}

/**
 * Long-lived objects keyed by what they connect to, created on first use and kept across reloads
 * for the data plane's lifetime; `close()` on each when the data plane closes.
 */
export class SharedResources {
  private readonly items = new Map<string, { close?(): unknown }>();

  get<T extends { close?(): unknown }>(key: string, create: () => T): T {
    let item = this.items.get(key) as T | undefined;
    if (!item) {
      item = create();
      this.items.set(key, item);
    }
    return item;
  }

  async close(): Promise<void> {
    const items = [...this.items.values()];
    this.items.clear();
    await Promise.all(items.map(async (item) => item.close?.()));
  }
}

/** Builds a workload's filter, or `undefined` when the workload's policy does not use it. */
export type FilterFactory = (ctx: FilterContext) => Filter | undefined;

/** Does the downstream request carry a body? */
export function hasBody(exchange: ExchangeView): boolean {
  const req = exchange.req;
  const headers = req.headers;
  if (headers['transfer-encoding'] !== undefined) return true;
  const cl = headers['content-length'];
  if (cl !== undefined) return cl !== '0';
  // HTTP/2: a body follows unless the HEADERS frame ended the stream.
  const stream = (req as { stream?: http2.ServerHttp2Stream }).stream;
  if (stream) return !stream.endAfterHeaders && !stream.readableEnded;
  return false;
}
