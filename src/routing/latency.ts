/**
 * Measured latency per location for geo routing: this router's own active probes, a TCP connect to
 * one ready replica of each location every few seconds, folded into an EWMA. A location with no
 * reachable replica keeps its last estimate; one never measured has none (geo routing ranks it after
 * measured ones). `location.status.latencyMs` in the config pins a location's latency instead.
 */
import net from 'node:net';
import type { Clock, Timer } from '../deps.js';
import type { ReplicaRegistry } from './replicas.js';

export const EWMA_ALPHA = 0.3;

export function ewma(previous: number | undefined, sample: number, alpha = EWMA_ALPHA): number {
  return previous === undefined ? sample : alpha * sample + (1 - alpha) * previous;
}

export class LatencyProber {
  private readonly estimates = new Map<string, number>();
  private timer: Timer | undefined;
  private stopped = false;

  constructor(
    private readonly registry: ReplicaRegistry,
    private readonly clock: Clock,
    private readonly intervalMs = 5000,
    private readonly connectTimeoutMs = 1000,
  ) {}

  latencyOf = (location: string): number | undefined => this.estimates.get(location);

  start(): void {
    this.stopped = false;
    void this.round();
  }

  stop(): void {
    this.stopped = true;
    this.clock.clearTimeout(this.timer);
  }

  /** One probe per location; resolves when all are done. */
  async round(): Promise<void> {
    const targets = new Map<string, { host: string; port: number }>();
    for (const r of this.registry.all()) {
      if (!r.ready || targets.has(r.location)) continue;
      const address = r.sidecar ?? r.ports.values().next().value;
      if (address) targets.set(r.location, address);
    }
    await Promise.all(
      [...targets].map(async ([location, address]) => {
        const ms = await this.connectTime(address.host, address.port);
        if (ms !== undefined) this.estimates.set(location, ewma(this.estimates.get(location), ms));
      }),
    );
    if (!this.stopped) {
      this.timer = this.clock.setTimeout(() => void this.round(), this.intervalMs);
      this.timer.unref?.();
    }
  }

  private connectTime(host: string, port: number): Promise<number | undefined> {
    const started = this.clock.now();
    return new Promise((resolve) => {
      const socket = net.connect({ host, port });
      const done = (ms: number | undefined): void => {
        socket.destroy();
        resolve(ms);
      };
      socket.setTimeout(this.connectTimeoutMs, () => done(undefined));
      socket.once('connect', () => done(this.clock.now() - started));
      socket.once('error', () => done(undefined));
    });
  }
}
