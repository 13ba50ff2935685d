/**
 * The primary's admin listener gives one view of all workers. `/metrics`: the primary's own
 * registry (configuration reloads, which only the primary does; the worker gauges; its process
 * metrics) plus every worker's registry, merged by prom-client's per-metric aggregators (counters
 * and histograms add up; gauges add up unless the metric says otherwise). `/config`: the one
 * snapshot, the workers (pid, ready, generation applied, restarts), and the replica table merged
 * over workers (`mergeReplicas`). A worker that does not answer in time is left out of a scrape.
 */
import { AggregatorRegistry, Counter, Gauge, Registry } from 'prom-client';
import { collectProcessMetrics } from '../admin/metrics.js';
import type { MetricsSource } from '../admin/server.js';
import type { ReplicaView } from './messages.js';

/** Metrics the primary keeps itself; the workers' copies (each counts its own adoptions) are dropped. */
const PRIMARY_ONLY = new Set(['svcproxy_config_reloads_total']);

export interface PrimaryMetrics {
  readonly registry: Registry;
  readonly configReloads: Counter<'result'>;
  readonly restarts: Counter;
}

export function primaryMetrics(count: number, ready: () => number): PrimaryMetrics {
  const registry = new Registry();
  const registers = [registry];
  const configReloads = new Counter({
    name: 'svcproxy_config_reloads_total',
    help: 'Configuration reloads by result (ok, rejected)',
    labelNames: ['result'],
    registers,
  });
  new Gauge({ name: 'svcproxy_workers', help: 'Worker processes configured (--workers)', registers }).set(count);
  new Gauge({
    name: 'svcproxy_workers_ready',
    help: 'Worker processes running and ready',
    registers,
    collect() {
      this.set(ready());
    },
  });
  const restarts = new Counter({ name: 'svcproxy_worker_restarts_total', help: 'Worker processes restarted after they exited', registers });
  collectProcessMetrics(registry);
  return { registry, configReloads, restarts };
}

/** `/metrics` of the primary: its registry and the workers' answers, aggregated. */
export function aggregatedMetrics(own: Registry, askWorkers: () => Promise<unknown[]>): MetricsSource {
  return {
    registry: { contentType: own.contentType },
    async text() {
      const [mine, theirs] = await Promise.all([own.getMetricsAsJSON(), askWorkers()]);
      // Each set is one registry's getMetricsAsJSON(); a worker's arrived over IPC as JSON.
      const sets: { name: string }[][] = [mine];
      for (const answer of theirs) {
        if (Array.isArray(answer)) sets.push((answer as { name: string }[]).filter((m) => !PRIMARY_ONLY.has(m.name)));
      }
      return AggregatorRegistry.aggregate(sets).metrics();
    },
  };
}

/**
 * The replica table over workers, each of which probes on its own: a replica is ready when every
 * worker that knows it sees it ready, and its outstanding requests are the sum.
 */
export function mergeReplicas(views: readonly (readonly ReplicaView[])[]): ReplicaView[] {
  const merged = new Map<string, ReplicaView>();
  for (const view of views) {
    for (const r of view) {
      const key = `${r.workload}\u0000${r.location}\u0000${r.name}`;
      const seen = merged.get(key);
      merged.set(key, seen ? { ...seen, ready: seen.ready && r.ready, outstanding: seen.outstanding + r.outstanding } : { ...r });
    }
  }
  return [...merged.values()];
}
