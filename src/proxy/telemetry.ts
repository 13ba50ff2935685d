/**
 * The hook points the data plane offers observability layers (tracing, access-log services): the
 * request entering the proxy, each upstream attempt starting (headers may be changed, e.g. to inject
 * trace context) and ending, and the request ending. Hooks must not throw and must not block; a data
 * plane without telemetry calls none of them. Per-request state lives in `Exchange.telemetry`.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Snapshot } from '../config/model.js';
import type { HostPort } from '../routing/replicas.js';
import type { Exchange } from './exchange.js';

export type Role = 'ingress' | 'sidecar';

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
  requestStart(exchange: Exchange, role: Role): void;
  /** The request's workload is known (`exchange.workload` set), in the request's first tick. */
  routed?(exchange: Exchange): void;
  /** An upstream attempt is about to be sent with these headers (mutable). */
  attemptStart(exchange: Exchange, target: HostPort, headers: OutgoingHttpHeaders): void;
  attemptEnd(exchange: Exchange, end: AttemptEnd): void;
  /** The trace id of the request's server span, when its workload traces (debug answers). */
  traceIdOf?(exchange: Exchange): string | undefined;
  /** Whether requests to this workload (key `gvc/name`) are traced. */
  tracesWorkload?(workload: string): boolean;
  /** The request is over (answered, reset or abandoned); `exchange.status` is final. */
  requestEnd(exchange: Exchange): void;
  close(): Promise<void>;
}
