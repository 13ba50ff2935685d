/**
 * The last stage of every exchange, requests and tunnels alike: once it is over, the telemetry is told
 * (spans ended, access-log service entries), the request counted (`svcproxy_requests_total` and its
 * upstream time; `svcproxy_mesh_requests_total` on either side of a mesh hop) and one access-log line
 * written at info. Runs exactly once per exchange (`Exchange.finish` is idempotent); never throws.
 */
import type { Incrementer } from '../admin/fast-metrics.js';
import type { DataPlaneOptions } from './dataplane-options.js';
import type { Exchange } from './exchange.js';

/** Keys of `svcproxy_mesh_requests_total`'s children where the exchange has no object to give. */
const EGRESS = {};
const NO_TARGET = {};
const NO_SOURCE = {};

export class Observation {
  /**
   * `svcproxy_mesh_requests_total`'s bound children, by target (its workload model; models are
   * replaced on reload, so the entries go with them), caller (at the target, the identity verified
   * once per connection; at the caller's side, its listener's caller) and status with outcome: a
   * mesh request's count is three lookups, with no label object built, hashed or validated.
   */
  private readonly meshCounts = new WeakMap<object, WeakMap<object, Map<number, Incrementer>>>();

  constructor(private readonly opts: DataPlaneOptions) {}

  /** Telemetry, metrics and the access-log line of a finished exchange (requests and tunnels). */
  record(ex: Exchange): void {
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

  /** `svcproxy_mesh_requests_total`: reported by the caller's side and by the target's. */
  private countMesh(ex: Exchange, status: number): void {
    const caller = ex.meshCaller;
    const denied = ex.errorCode === 'FIREWALL_BLOCKED';
    const targetKey = ex.egress !== undefined ? EGRESS : ex.workload ?? NO_TARGET;
    const sourceKey = caller ?? ex.sourceIdentity ?? NO_SOURCE;
    let bySource = this.meshCounts.get(targetKey);
    if (bySource === undefined) this.meshCounts.set(targetKey, (bySource = new WeakMap()));
    let byStatus = bySource.get(sourceKey);
    if (byStatus === undefined) bySource.set(sourceKey, (byStatus = new Map()));
    const statusKey = denied ? -status - 1 : status;
    let child = byStatus.get(statusKey);
    if (child === undefined) byStatus.set(statusKey, (child = this.meshChild(ex, status, denied)));
    child.inc();
  }

  private meshChild(ex: Exchange, status: number, denied: boolean): Incrementer {
    const target = ex.workload;
    const caller = ex.meshCaller;
    // At the target, the verified caller; at the caller's side, itself.
    const reporter = caller === undefined ? 'destination' : 'source';
    const key = caller?.workload;
    const source = caller === undefined
      ? { workload: ex.sourceIdentity?.workload, gvc: ex.sourceIdentity?.gvc }
      : { workload: key?.slice(key.indexOf('/') + 1), gvc: caller.gvc };
    return this.opts.metrics.meshRequests.labels(
      reporter,
      source.workload ?? 'unknown',
      source.gvc ?? 'unknown',
      ex.egress !== undefined ? 'egress' : target?.name ?? 'unknown',
      ex.egress !== undefined ? 'egress' : target?.gvc ?? 'unknown',
      String(status),
      denied ? 'denied' : 'allowed',
    );
  }
}
