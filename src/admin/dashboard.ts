/**
 * The admin dashboard's sampler and its server-sent events (DESIGN §11: `/` and `/events`). Once a
 * second it reads what the metrics already count (request counters by status class, the upstream
 * latency histogram, ejections) and the process's view (workloads, replicas, configuration), turns
 * the differences into requests per second, 5xx share and p50/p99 latency per workload, keeps the
 * last five minutes of them in bounded rings, and sends one `tick` event to every open page.
 *
 * It costs the request path nothing: the counters are plain numbers the proxy keeps anyway, read
 * here only on the tick. It costs nothing at all until someone opens the page: sampling starts at
 * the first `/` or `/events` request and stops (rings dropped) after ten minutes without a page
 * open. With a large configuration a tick is not free (10,000 workloads: ~0.1-0.3 s to read the
 * counters' families on a busy 2-core machine), so a slow tick spaces the next to keep the sampler
 * under a tenth of the event loop, and a tick carries the 200 busiest workloads only (42 KiB, not
 * 2 MiB), both said on the page. At most `maxClients` pages are served at once (the rest get 503); a page that goes away, or
 * one that reads so slowly that a megabyte waits for it, is dropped. A failing read (a `--workers`
 * worker that does not answer) is shown on the page, never thrown.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { systemClock, type Clock, type Timer } from '../deps.js';
import { cumulate, deltas, histogramQuantile, pairKey, readCounters, Ring, type Counters, type MetricFamily } from './dashboard-series.js';

/** One row of `/workloads`: a workload's health in one location. */
export interface DashboardLocationRow {
  readonly workload: string;
  readonly gvc: string;
  readonly location: string;
  readonly health: string;
  readonly ready: number;
  readonly replicas: number;
}

export interface DashboardReplica {
  /** Workload key `gvc/name`. */
  readonly workload: string;
  readonly location: string;
  readonly name: string;
  readonly ready: boolean;
  readonly outstanding: number;
  /** Taken out of rotation by outlier ejection now (undefined: not known, e.g. under `--workers`). */
  readonly ejected?: boolean;
}

/** What the process knows besides counters, read once a tick. */
export interface DashboardView {
  readonly role: string;
  readonly generation: number;
  readonly lastError: { readonly at: string; readonly errors: readonly string[] } | null;
  readonly workloads: readonly DashboardLocationRow[];
  readonly replicas: readonly DashboardReplica[];
  /** A line the page shows above the tables (what this view cannot know). */
  readonly note?: string;
}

export interface DashboardSource {
  /** Metric families (prom-client's `get()` shape); several workers' may be passed together (summed). */
  counters(): Promise<readonly MetricFamily[]>;
  view(): DashboardView | Promise<DashboardView>;
}

export interface DashboardOptions {
  readonly clock?: Clock;
  /** Sampling period; default 1 s. */
  readonly intervalMs?: number;
  /** Samples kept per series; default 300 (five minutes at 1 s). */
  readonly history?: number;
  /** Pages served at once; default 16. */
  readonly maxClients?: number;
  /** Workloads whose series are kept; default 500 (beyond: current values only). */
  readonly maxSeries?: number;
  /** Workloads in one tick, the busiest first; default 200. */
  readonly maxRows?: number;
  /** Sampling stops after this long without a page; default 10 min. */
  readonly idleStopMs?: number;
}

const HEARTBEAT_MS = 15_000;
const RETRY_MS = 2_000;
/** A page this far behind is dropped rather than buffered for. */
const MAX_BUFFERED = 1 << 20;

interface Series {
  readonly rps: Ring;
  readonly err: Ring;
  readonly p50: Ring;
  readonly p99: Ring;
  /** The tick at which the workload was last configured or had requests. */
  seenAt: number;
}

/** One workload's state in a `tick` event; NaN values are sent as null. */
export interface WorkloadTick {
  readonly key: string;
  readonly gvc: string;
  readonly name: string;
  readonly rps: number;
  readonly err: number | null;
  readonly p50: number | null;
  readonly p99: number | null;
  /** Ejections since sampling started, every location. */
  readonly ejections: number;
  readonly locations: readonly { location: string; health: string; ready: number; replicas: number; rps: number; err: number | null }[];
  readonly replicas: readonly { location: string; name: string; ready: boolean; outstanding: number; ejected: boolean | null }[];
}

export interface Tick {
  /** The sample's number: a page appends a tick only when it is newer than its history. */
  readonly seq: number;
  readonly at: number;
  readonly role: string;
  readonly generation: number;
  readonly lastError: DashboardView['lastError'];
  readonly note: string | null;
  readonly sampling: string | null;
  readonly workloads: readonly WorkloadTick[];
}

function orNull(n: number): number | null {
  return Number.isFinite(n) ? n : null;
}

function splitKey(key: string): [gvc: string, name: string] {
  const slash = key.indexOf('/');
  return slash < 0 ? ['', key] : [key.slice(0, slash), key.slice(slash + 1)];
}

/** One server-sent event, framed: `event:` then one `data:` line (JSON has no raw newline). */
export function sseEvent(name: string, data: unknown): string {
  return `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;
}

export class Dashboard {
  private readonly clock: Clock;
  private readonly intervalMs: number;
  private readonly history: number;
  private readonly maxClients: number;
  private readonly maxSeries: number;
  private readonly idleStopMs: number;
  private readonly maxRows: number;
  private readonly clients = new Set<ServerResponse>();
  private readonly series = new Map<string, Series>();
  private timer: Timer | undefined;
  private running = false;
  private closed = false;
  private prev: Counters | undefined;
  private prevAt = 0;
  private ticks = 0;
  private ejectionsAtStart = new Map<string, number>();
  private lastTouch = 0;
  private lastHeartbeat = 0;
  private latest: Tick | undefined;
  /** The delay before the next tick (longer than the interval when ticks are costly). */
  private delayMs = 0;

  constructor(private readonly source: DashboardSource, opts: DashboardOptions = {}) {
    this.clock = opts.clock ?? systemClock;
    this.intervalMs = opts.intervalMs ?? 1000;
    this.history = opts.history ?? 300;
    this.maxClients = opts.maxClients ?? 16;
    this.maxSeries = opts.maxSeries ?? 500;
    this.idleStopMs = opts.idleStopMs ?? 600_000;
    this.maxRows = opts.maxRows ?? 200;
  }

  /** Whether the sampler runs (it starts at the first page request). */
  get sampling(): boolean {
    return this.running;
  }

  get clientCount(): number {
    return this.clients.size;
  }

  /** A page was asked for: start sampling if it is not running. */
  touch(): void {
    this.lastTouch = this.clock.now();
    if (this.running || this.closed) return;
    this.running = true;
    this.lastHeartbeat = this.lastTouch;
    void this.tick();
  }

  /** `/events`: serve the stream, or answer 503 when `maxClients` pages are open. */
  attach(req: IncomingMessage, res: ServerResponse): void {
    this.touch();
    if (this.clients.size >= this.maxClients || this.closed) {
      const body = `at most ${this.maxClients} dashboard pages at once\n`;
      res.writeHead(503, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body), 'retry-after': '10', 'cache-control': 'no-store' });
      res.end(body);
      return;
    }
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      'x-content-type-options': 'nosniff',
      // A proxy in front must not hold events back to fill a buffer.
      'x-accel-buffering': 'no',
    });
    res.write(`retry: ${RETRY_MS}\n\n`);
    res.write(sseEvent('history', this.historyEvent()));
    if (this.latest) res.write(sseEvent('tick', this.latest));
    this.clients.add(res);
    const drop = (): void => void this.clients.delete(res);
    req.once('close', drop);
    res.once('close', drop);
    res.once('error', drop);
  }

  /** Every series kept, oldest first: what a page draws before the first tick reaches it. */
  historyEvent(): { seq: number; intervalMs: number; capacity: number; series: Record<string, { rps: (number | null)[]; err: (number | null)[]; p50: (number | null)[]; p99: (number | null)[] }> } {
    const series: Record<string, { rps: (number | null)[]; err: (number | null)[]; p50: (number | null)[]; p99: (number | null)[] }> = {};
    for (const [key, s] of this.series) series[key] = { rps: s.rps.values(), err: s.err.values(), p50: s.p50.values(), p99: s.p99.values() };
    return { seq: this.latest?.seq ?? 0, intervalMs: this.intervalMs, capacity: this.history, series };
  }

  /** The latest tick (undefined before the second sample). */
  get current(): Tick | undefined {
    return this.latest;
  }

  close(): void {
    this.closed = true;
    this.stop();
    for (const res of this.clients) res.destroy();
    this.clients.clear();
  }

  private stop(): void {
    this.running = false;
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.prev = undefined;
    this.latest = undefined;
    this.series.clear();
  }

  private schedule(costMs: number): void {
    if (!this.running) return;
    // The sampler shares the event loop with the requests: a tick that took long (ten thousand
    // workloads: ~0.2 s on a busy 2-core machine) spaces the next so it stays under a tenth of it.
    this.delayMs = Math.max(this.intervalMs, Math.ceil(costMs * 10));
    this.timer = this.clock.setTimeout(() => void this.tick(), this.delayMs);
    this.timer.unref?.();
  }

  /** One sample; the next is scheduled when this one is done, so slow reads never overlap. */
  private async tick(): Promise<void> {
    const now = this.clock.now();
    if (this.clients.size === 0 && now - this.lastTouch >= this.idleStopMs) return this.stop();
    let counters: Counters | undefined;
    let view: DashboardView | undefined;
    let failure: string | null = null;
    try {
      [counters, view] = await Promise.all([this.source.counters().then(readCounters), this.source.view()]);
    } catch (err) {
      failure = `sampling failed: ${(err as Error).message}`;
    }
    if (!this.running) return;
    if (counters && view) this.sample(counters, view, now);
    else if (failure !== null && this.latest) this.latest = { ...this.latest, sampling: failure };
    if (this.latest) this.broadcast(sseEvent('tick', this.latest));
    if (now - this.lastHeartbeat >= HEARTBEAT_MS) {
      this.lastHeartbeat = now;
      this.broadcast(': heartbeat\n\n');
    }
    this.schedule(this.clock.now() - now);
  }

  private sample(counters: Counters, view: DashboardView, now: number): void {
    const prev = this.prev;
    const seconds = (now - this.prevAt) / 1000;
    this.prev = counters;
    this.prevAt = now;
    if (prev === undefined) {
      // The first read is the baseline: counts before the page was opened are not a rate.
      this.ejectionsAtStart = new Map(counters.ejections);
      return;
    }
    this.ticks++;
    const perWorkload = new Map<string, { total: number; errors: number; locations: Map<string, { total: number; errors: number }> }>();
    for (const [key, counts] of counters.requests) {
      const [workload, location] = key.split('\u0000') as [string, string];
      if (workload === '') continue; // requests that matched no workload
      const d = deltas(counts, prev.requests.get(key));
      let w = perWorkload.get(workload);
      if (!w) perWorkload.set(workload, (w = { total: 0, errors: 0, locations: new Map() }));
      const total = d.reduce((a, b) => a + b, 0);
      w.total += total;
      w.errors += d[4]!;
      w.locations.set(location, { total, errors: d[4]! });
    }
    const rowsOf = new Map<string, DashboardLocationRow[]>();
    for (const row of view.workloads) {
      const key = `${row.gvc}/${row.workload}`;
      const rows = rowsOf.get(key);
      if (rows) rows.push(row);
      else rowsOf.set(key, [row]);
    }
    const replicasOf = new Map<string, DashboardReplica[]>();
    for (const r of view.replicas) {
      const list = replicasOf.get(r.workload);
      if (list) list.push(r);
      else replicasOf.set(r.workload, [r]);
    }
    const keys = new Set<string>([...rowsOf.keys(), ...[...perWorkload].filter(([, w]) => w.total > 0).map(([k]) => k), ...replicasOf.keys()]);
    for (const [key, s] of this.series) {
      // A workload gone from the configuration keeps its sparklines until they have scrolled away.
      if (!keys.has(key) && this.ticks - s.seenAt < this.history) keys.add(key);
      else if (!keys.has(key)) this.series.delete(key);
    }
    const workloads: WorkloadTick[] = [];
    for (const key of [...keys].sort()) {
      const w = perWorkload.get(key);
      const rps = seconds > 0 ? (w?.total ?? 0) / seconds : 0;
      const err = w && w.total > 0 ? w.errors / w.total : NaN;
      let p50 = NaN;
      let p99 = NaN;
      const latency = counters.latency.get(key);
      if (latency) {
        const interval = cumulate(deltas(latencyBuckets(latency), latencyBuckets(prev.latency.get(key))));
        // Seconds in the histogram, milliseconds on the page.
        p50 = histogramQuantile(0.5, counters.bounds, interval) * 1000;
        p99 = histogramQuantile(0.99, counters.bounds, interval) * 1000;
      }
      let s = this.series.get(key);
      if (!s && this.series.size < this.maxSeries) {
        s = { rps: new Ring(this.history), err: new Ring(this.history), p50: new Ring(this.history), p99: new Ring(this.history), seenAt: this.ticks };
        this.series.set(key, s);
      }
      if (s) {
        s.rps.push(rps);
        s.err.push(err);
        s.p50.push(p50);
        s.p99.push(p99);
        if (rowsOf.has(key) || (w?.total ?? 0) > 0) s.seenAt = this.ticks;
      }
      const [gvc, name] = splitKey(key);
      const rows = rowsOf.get(key) ?? [];
      const locationNames = new Set<string>([...rows.map((r) => r.location), ...(w ? [...w.locations.keys()].filter((l) => l !== '') : [])]);
      workloads.push({
        key, gvc, name,
        rps,
        err: orNull(err),
        p50: orNull(p50),
        p99: orNull(p99),
        ejections: Math.max(0, (counters.ejections.get(key) ?? 0) - (this.ejectionsAtStart.get(key) ?? 0)),
        locations: [...locationNames].sort().map((location) => {
          const row = rows.find((r) => r.location === location);
          const l = w?.locations.get(location);
          return {
            location,
            health: row?.health ?? 'Unknown',
            ready: row?.ready ?? 0,
            replicas: row?.replicas ?? 0,
            rps: seconds > 0 ? (l?.total ?? 0) / seconds : 0,
            err: l && l.total > 0 ? l.errors / l.total : null,
          };
        }),
        replicas: (replicasOf.get(key) ?? []).map((r) => ({ location: r.location, name: r.name, ready: r.ready, outstanding: r.outstanding, ejected: r.ejected ?? null })),
      });
    }
    // A page of ten thousand rows helps no one and costs megabytes a second: the busiest are sent.
    const shown = workloads.length > this.maxRows
      ? [...workloads].sort((a, b) => b.rps - a.rps || (a.key < b.key ? -1 : 1)).slice(0, this.maxRows).sort((a, b) => (a.key < b.key ? -1 : 1))
      : workloads;
    const limits = [
      ...(shown.length < workloads.length ? [`the ${this.maxRows} busiest of ${workloads.length} workloads shown`] : []),
      ...(this.series.size >= this.maxSeries && keys.size > this.maxSeries ? [`sparklines for ${this.maxSeries} workloads only`] : []),
      ...(this.delayMs > this.intervalMs ? [`sampled every ${(this.delayMs / 1000).toFixed(1)} s (a sample takes ${(this.delayMs / 10).toFixed(0)} ms here)`] : []),
    ];
    this.latest = {
      seq: this.ticks,
      at: this.clock.wallNow(),
      role: view.role,
      generation: view.generation,
      lastError: view.lastError,
      note: [view.note, ...limits].filter((x) => x).join('; ') || null,
      sampling: null,
      workloads: shown,
    };
  }

  private broadcast(text: string): void {
    for (const res of this.clients) {
      if (res.writableLength > MAX_BUFFERED) {
        this.clients.delete(res);
        res.destroy();
        continue;
      }
      res.write(text);
    }
  }
}

/** A workload's cumulative histogram buckets back to per-bucket counts (deltas need the cumulative form undone per read). */
function latencyBuckets(cumulative: readonly number[] | undefined): number[] {
  if (!cumulative) return [];
  return cumulative.map((c, i) => c - (i === 0 ? 0 : cumulative[i - 1]!));
}
