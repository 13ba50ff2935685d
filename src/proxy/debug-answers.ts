/**
 * Debug answers (DESIGN §11) as the pipeline gives them: whether a request asked for them and may
 * have them (`x-svc-debug: true` or `trace` on a canonical or alias name of a workload with debug
 * on), the headers added to its answer, upstream or the proxy's own (debug.ts says what they hold),
 * and for `trace` a trace id the app's logs can be found by. A request that did not ask pays one
 * property check where each is called.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { Clock } from '../deps.js';
import type { VendorHeaders } from '../filter/index.js';
import type { RequestTelemetry } from '../observe/index.js';
import type { HostTarget } from '../routing/index.js';
import { DebugInfo, freshTraceparent, traceIdFor } from './debug.js';
import type { Exchange } from './exchange.js';
import { debugAsked, type Route } from './routes.js';

/** `x-svc-debug: true` or `trace` on a canonical or alias name of a workload with debug on (DESIGN §11). */
export function askedForDebug(ex: Exchange, target: HostTarget, route: Route, names: VendorHeaders): void {
  const asked = debugAsked(route, ex.req.headers[names.debug]);
  if (asked === undefined) return;
  const w = route.workload;
  ex.debugInfo = new DebugInfo(asked === 'trace', `${target.kind}; gvc=${w.gvc}; workload=${w.name}${route.port ? `; port=${route.port.number}` : ''}`);
}

/** Debug answers (src/proxy/debug.ts): on upstream answers and on the proxy's own replies. */
export function debugHeaders(ex: Exchange, names: VendorHeaders, clock: Clock, telemetry: RequestTelemetry | undefined): OutgoingHttpHeaders | undefined {
  const info = ex.debugInfo;
  if (info === undefined) return undefined;
  const now = clock.now();
  // An attempt still open when the proxy answers itself ended that way (a timeout, the retries spent).
  info.attemptEnded(ex.timedOut ? 'timeout' : ex.errorCode ?? 'failed', false, now);
  if (info.trace && info.traceId === undefined) info.traceId = telemetry?.traceIdOf?.(ex);
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
export function traceForDebug(ex: Exchange, headers: OutgoingHttpHeaders, telemetry: RequestTelemetry | undefined): void {
  if (telemetry?.tracesWorkload?.(ex.workload!.key)) return;
  const { id, fresh } = traceIdFor(ex.req.headers.traceparent);
  ex.debugInfo!.traceId = id;
  if (fresh) headers.traceparent = freshTraceparent(id);
}
