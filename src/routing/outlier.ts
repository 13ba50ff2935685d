/**
 * Outlier ejection (Envoy's `consecutive_5xx` / `consecutive_gateway_failure`): a replica with 5
 * consecutive connect failures or 5xx answers is ejected for 30 s, doubling with each repeat up to
 * 5 minutes; never more than half of a location's replicas are ejected at once (a lone replica never
 * is). Time brings an ejected replica back (`ejectedUntil`, read by the balancer), and so does a
 * readiness probe that sees it become ready again after it was not (it restarted). Ejections are
 * logged and counted.
 */
import type { Logger } from 'pino';
import type { Clock } from '../deps.js';
import type { Replica, ReplicaRegistry } from './replicas.js';

export const CONSECUTIVE_FAILURES = 5;
export const BASE_EJECTION_MS = 30_000;
export const MAX_EJECTION_MS = 300_000;

interface OutlierState {
  consecutive: number;
  ejections: number;
}

export interface OutlierEvents {
  onEject?(replica: Replica, durationMs: number): void;
}

export class OutlierDetector {
  private readonly state = new WeakMap<Replica, OutlierState>();

  constructor(
    private readonly registry: ReplicaRegistry,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly events: OutlierEvents = {},
  ) {
    registry.on('ready', (replica: Replica) => {
      if (replica.ready && replica.ejectedUntil > 0) replica.ejectedUntil = 0;
    });
  }

  private of(replica: Replica): OutlierState {
    let s = this.state.get(replica);
    if (!s) this.state.set(replica, (s = { consecutive: 0, ejections: 0 }));
    return s;
  }

  success(replica: Replica): void {
    const s = this.state.get(replica);
    if (s) s.consecutive = 0;
  }

  /** A connect failure or a 5xx answer. */
  failure(replica: Replica): void {
    const s = this.of(replica);
    s.consecutive++;
    if (s.consecutive < CONSECUTIVE_FAILURES) return;
    const now = this.clock.now();
    if (replica.ejectedUntil > now) return;
    const peers = this.registry.list(replica.workload, replica.location);
    let ejected = 0;
    for (const p of peers) if (p.ejectedUntil > now) ejected++;
    if ((ejected + 1) * 2 > peers.length) return; // never more than half
    s.ejections++;
    s.consecutive = 0;
    const duration = Math.min(MAX_EJECTION_MS, BASE_EJECTION_MS * 2 ** (s.ejections - 1));
    replica.ejectedUntil = now + duration;
    this.logger.warn(
      { workload: replica.workload, location: replica.location, replica: replica.name, durationMs: duration, ejections: s.ejections },
      'replica ejected after consecutive failures',
    );
    this.events.onEject?.(replica, duration);
  }
}
