/**
 * The observer contract, apart from the proxy as the filter contract (../filter/) is, and what Envoy
 * hands its access loggers and tracers (stream info): an observer (tracing, the access-log service)
 * sees one request through `ExchangeInfo`, a read-only view of the proxy's exchange, at the hook
 * points of `RequestTelemetry`: the request entering the proxy, each upstream attempt starting
 * (headers may be changed, e.g. to inject trace context) and ending, and the request ending. Hooks
 * must not throw and must not block; a data plane without telemetry calls none of them. Per-request
 * state lives in `ExchangeInfo.telemetry`, the one member an observer writes. The proxy's Exchange
 * implements the view; observers (tracing/, accesslog/) import this module and nothing from proxy/.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Http2ServerResponse } from 'node:http2';
import type { Snapshot, WorkloadModel } from '../config/model.js';
import type { ExchangeView } from '../filter/index.js';
import type { HostPort, Replica } from '../routing/replicas.js';

export type Role = 'ingress' | 'sidecar';

/** A WebSocket upgrade or CONNECT tunnel, as observers see it (the exchange lasts as long as the connection). */
export interface TunnelInfo {
  readonly kind: 'websocket' | 'connect';
  /** Payload bytes from the client, after its request head (Envoy's request body bytes). */
  readonly bytesIn: number;
  /** Names plus values of the answer head the proxy wrote (Envoy's response header bytes). */
  readonly responseHeaderBytes: number;
}

/**
 * What an observer sees of one request: the request as filters see it, then where it went and how it
 * ended. Read while the request goes (the hooks below) and once it is over (`requestEnd`).
 */
export interface ExchangeInfo extends Pick<ExchangeView, 'req' | 'requestId' | 'path' | 'query' | 'pathWithQuery' | 'host' | 'peer' | 'clientAddress' | 'listenerKind' | 'listenerPort' | 'tls'> {
  readonly res: ServerResponse | Http2ServerResponse;
  /** Clock ms at which the request arrived. */
  readonly startedAt: number;
  readonly workload: WorkloadModel | undefined;
  readonly location: string | undefined;
  readonly replica: Replica | undefined;
  /** The status answered (0 while none, or when the client got none). */
  readonly status: number;
  /** Response body bytes written to the client: the app's answer relayed, or a local reply's body. */
  readonly bytesSent: number;
  /** Clock ms of the upstream's response headers (0: none came). */
  readonly upstreamHeadersAt: number;
  /** The proxy error code of a local reply or failed answer. */
  readonly errorCode: string | undefined;
  /** Upstream attempts made so far (`x-envoy-attempt-count`). */
  readonly attempts: number;
  readonly timedOut: boolean;
  /** The caller's mesh identity (its certificate's URI), on a sidecar's mTLS listener. */
  readonly sourcePrincipal: string | undefined;
  readonly tunnel: TunnelInfo | undefined;
  /** Set when the request asked for debug answers; `trace`: it is to be sampled (`x-svc-debug: trace`). */
  readonly debugInfo: { readonly trace: boolean } | undefined;
  /** Per-request state of the telemetry layer, opaque to the proxy. */
  telemetry: unknown;
}

export interface AttemptEnd {
  /** The upstream's status when it answered. */
  readonly status?: number;
  /** Why the attempt failed when it did not (`connect-failure`, `reset`, ...). */
  readonly failure?: string;
  /** The answer was dropped for a retry. */
  readonly retried: boolean;
}

export interface RequestTelemetry {
  /** A new configuration: tracing settings may have changed. */
  update(snapshot: Snapshot): void;
  /** The request arrived (workload not known yet). */
  requestStart(exchange: ExchangeInfo, role: Role): void;
  /** The request's workload is known (`exchange.workload` set), in the request's first tick. */
  routed?(exchange: ExchangeInfo): void;
  /** An upstream attempt is about to be sent with these headers (mutable). */
  attemptStart(exchange: ExchangeInfo, target: HostPort, headers: OutgoingHttpHeaders): void;
  attemptEnd(exchange: ExchangeInfo, end: AttemptEnd): void;
  /** The trace id of the request's server span, when its workload traces (debug answers). */
  traceIdOf?(exchange: ExchangeInfo): string | undefined;
  /** Whether requests to this workload (key `gvc/name`) are traced. */
  tracesWorkload?(workload: string): boolean;
  /** The request is over (answered, reset or abandoned); `exchange.status` is final. */
  requestEnd(exchange: ExchangeInfo): void;
  close(): Promise<void>;
}
