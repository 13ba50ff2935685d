/**
 * Where the dashboard reads from. One process (`up`, ingress, sidecar): its own metrics' families
 * (the request counter and the latency histogram answer from plain numbers, no label hashing), its
 * `/workloads` rows and its replica table, with each replica's ejection read from `ejectedUntil`.
 * The `--workers` primary, which serves no traffic: each worker's metrics (its registry as JSON over
 * IPC, asked only while the page is open) summed, health from the workers' health gauges (a value
 * holds where every worker sees it, as `/metrics` aggregates it), and the replica table merged over
 * workers; the workers do not report when a replica's ejection ends, so the page says it cannot
 * show ejected replicas there (the ejection counter still shows).
 */
import type { ConfigStore } from '../config/index.js';
import type { Clock } from '../deps.js';
import type { ReplicaRegistry } from '../routing/replicas.js';
import type { DashboardLocationRow, DashboardSource, DashboardView } from './dashboard.js';
import { EJECTIONS, HEALTH, LATENCY, REQUESTS, type MetricFamily } from './dashboard-series.js';
import type { Metrics } from './metrics.js';

function lastError(store: ConfigStore): DashboardView['lastError'] {
  const errors = store.lastErrors;
  return errors ? { at: (store.lastErrorAt ?? new Date()).toISOString(), errors: [...errors] } : null;
}

export interface ProcessParts {
  readonly role: string;
  readonly metrics: Metrics;
  readonly store: ConfigStore;
  readonly replicas: ReplicaRegistry;
  readonly clock: Clock;
  workloads(): readonly DashboardLocationRow[];
}

/** One process's own counters and state. */
export function processSource(p: ProcessParts): DashboardSource {
  return {
    counters: async () => {
      const families = await Promise.all([p.metrics.requests.get(), p.metrics.upstreamLatency.get(), p.metrics.ejections.get()]);
      return families as MetricFamily[];
    },
    view: () => {
      const now = p.clock.now();
      return {
        role: p.role,
        generation: p.store.current.generation,
        lastError: lastError(p.store),
        workloads: p.workloads(),
        replicas: p.replicas.all().map((r) => ({
          workload: r.workload, location: r.location, name: r.name, ready: r.ready, outstanding: r.outstanding, ejected: r.ejectedUntil > now,
        })),
      };
    },
  };
}

const WANTED = new Set([REQUESTS, LATENCY, EJECTIONS, HEALTH]);

interface ReplicaAnswer {
  readonly workload: string;
  readonly location: string;
  readonly name: string;
  readonly ready: boolean;
  readonly outstanding: number;
}

export interface PrimaryParts {
  readonly role: string;
  readonly workers: number;
  readonly store: ConfigStore;
  /** Every ready worker's registry as `getMetricsAsJSON()` (src/cluster: `ask('metrics')`). */
  askMetrics(): Promise<unknown[]>;
  /** Every ready worker's replica table (`ask('replicas')`), merged. */
  replicas(): Promise<readonly ReplicaAnswer[]>;
}

/**
 * The `--workers` primary's view: the workers' families are asked once per tick and kept for the
 * view's health rows, so one question serves both.
 */
export function primarySource(p: PrimaryParts): DashboardSource {
  let families: MetricFamily[] = [];
  let answered = 0;
  return {
    counters: async () => {
      const answers = await p.askMetrics();
      families = [];
      answered = 0;
      for (const answer of answers) {
        if (!Array.isArray(answer)) continue;
        answered++;
        for (const f of answer as MetricFamily[]) if (WANTED.has(f.name)) families.push(f);
      }
      return families;
    },
    view: async () => {
      const replicas = await p.replicas();
      return {
        role: `${p.role} (primary of ${p.workers} workers)`,
        generation: p.store.current.generation,
        lastError: lastError(p.store),
        workloads: healthRows(families, answered, replicas),
        replicas,
        note: `--workers ${p.workers}: counters summed over the ${answered} workers that answered; a replica is ready where every worker sees it ready; which replicas are ejected now is not known here (the ejection count is)`,
      };
    },
  };
}

/**
 * Health per workload and location from the workers' `svcproxy_workload_health` gauges: the value
 * every answering worker reports, else Unknown; ready and total replicas from the merged table.
 */
export function healthRows(families: readonly MetricFamily[], workers: number, replicas: readonly ReplicaAnswer[]): DashboardLocationRow[] {
  const votes = new Map<string, { gvc: string; workload: string; location: string; health: Map<string, number> }>();
  for (const f of families) {
    if (f.name !== HEALTH) continue;
    for (const v of f.values) {
      if (v.value !== 1) continue;
      const gvc = String(v.labels.gvc ?? '');
      const workload = String(v.labels.workload ?? '');
      const location = String(v.labels.location ?? '');
      const key = `${gvc}/${workload}\u0000${location}`;
      let entry = votes.get(key);
      if (!entry) votes.set(key, (entry = { gvc, workload, location, health: new Map() }));
      const h = String(v.labels.health);
      entry.health.set(h, (entry.health.get(h) ?? 0) + 1);
    }
  }
  const counts = new Map<string, { ready: number; total: number }>();
  for (const r of replicas) {
    const key = `${r.workload}\u0000${r.location}`;
    const c = counts.get(key) ?? { ready: 0, total: 0 };
    c.total++;
    if (r.ready) c.ready++;
    counts.set(key, c);
  }
  const rows: DashboardLocationRow[] = [];
  for (const [key, e] of votes) {
    const agreed = [...e.health].find(([, n]) => n >= workers)?.[0];
    const c = counts.get(key);
    rows.push({ workload: e.workload, gvc: e.gvc, location: e.location, health: agreed ?? 'Unknown', ready: c?.ready ?? 0, replicas: c?.total ?? 0 });
  }
  return rows;
}
