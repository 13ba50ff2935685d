/**
 * Prometheus metrics of one process (prom-client, its own registry so tests can run several data
 * planes in one process). Counters are named `svcproxy_<component>_<outcome>`. Request counting uses
 * cached label children so the hot path does no label hashing. Under `--workers` the primary sums the
 * workers' registries (prom-client's `aggregator` per metric says how: counters add up, the
 * ready-replica gauge takes the lowest worker view), and each worker adds its request count under
 * its own `worker` label.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { fastCounter, fastHistogram, isSelfRendering, ScrapedMetric, type FastCounter, type FastHistogram, type Observer } from './fast-metrics.js';

const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx'] as const;

/**
 * prom-client's default process metrics, as every svcproxy process exports them. The event-loop lag
 * histogram is fed by a timer at this precision: prom-client's default of 10 ms woke an idle sidecar
 * 100 times a second, 0.7% of a core doing nothing (~70 µs a wake-up on a small VM); at 100 ms
 * (the overload guard's own sampling interval) the lag percentiles still have ten samples a second.
 */
export function collectProcessMetrics(register: Registry): void {
  collectDefaultMetrics({ register, prefix: 'svcproxy_process_', eventLoopMonitoringPrecision: 100 });
}

export class Metrics {
  readonly registry = new Registry();
  readonly requests: ScrapedMetric<'workload' | 'location' | 'status_class'>;
  readonly upstreamLatency: FastHistogram<'workload'>;
  readonly openConnections: Gauge;
  readonly configReloads: Counter<'result'>;
  readonly replicasReady: ScrapedMetric<'workload' | 'location'>;
  /** 1 for a workload's current health in a location, 0 for the four other values (src/local/health.ts). */
  readonly workloadHealth: ScrapedMetric<'workload' | 'gvc' | 'location' | 'health'>;
  readonly ejections: Counter<'workload' | 'location'>;
  readonly retries: Counter<'workload'>;
  /** Mesh requests by caller and target (Istio's `istio_requests_total` labels are the model). */
  readonly meshRequests: FastCounter<'reporter' | 'source_workload' | 'source_gvc' | 'destination_workload' | 'destination_gvc' | 'response_code' | 'outcome'>;
  /** mTLS handshakes completed (`side` server: an mTLS listener; client: a caller's dial). */
  readonly meshHandshakes: Counter<'side'>;
  /** mTLS handshakes an mTLS listener refused, by reason. */
  readonly meshHandshakeFailures: Counter<'reason'>;
  /** Lookups of the DNS names of deployment replicas (DESIGN §8b), by outcome (answer, empty, failure). */
  readonly dnsLookups: Counter<'name' | 'outcome'>;
  /** Addresses (replicas) each such name has now: its last answer, kept through failures. */
  readonly dnsAddresses: Gauge<'name'>;
  /** Requests and tunnels through a caller's outbound listener to destinations outside the mesh. */
  readonly egressRequests: Counter<'source_workload' | 'source_gvc' | 'outcome'>;
  /**
   * Request counts per workload and location, by status class, kept as plain numbers on the hot path
   * and read only when /metrics is scraped (prom-client hashes the label set on every `inc`).
   */
  private readonly requestCounts = new Map<string, Map<string, number[]>>();
  private readonly latencyChildren = new Map<string, Observer>();

  /** One lookup of a deployment replica's DNS name and the addresses now in use for it. */
  observeDns(name: string, outcome: 'answer' | 'empty' | 'failure', addresses: number): void {
    this.dnsLookups.labels(name, outcome).inc();
    this.dnsAddresses.labels(name).set(addresses);
  }

  constructor(opts: {
    defaultMetrics?: boolean;
    connections?: () => number;
    readyReplicas?: () => Iterable<readonly [workload: string, location: string, ready: number]>;
    /** Samples of `svcproxy_workload_health`: label values (workload, gvc, location, health) and 1 or 0. */
    workloadHealth?: () => Iterable<readonly [labels: readonly string[], value: number]>;
    /** A `--workers` worker's slot: adds `svcproxy_worker_requests_total{worker}`. */
    worker?: string;
  } = {}) {
    const registers = [this.registry];
    const requestCounts = this.requestCounts;
    this.requests = this.scraped(new ScrapedMetric(
      'svcproxy_requests_total', 'Requests answered, by workload, location and status class', 'counter', ['workload', 'location', 'status_class'],
      (emit) => {
        for (const [workload, byLocation] of requestCounts) {
          for (const [location, counts] of byLocation) {
            for (let i = 0; i < STATUS_CLASSES.length; i++) if (counts[i]! > 0) emit([workload, location, STATUS_CLASSES[i]!], counts[i]!);
          }
        }
      },
    ));
    this.upstreamLatency = fastHistogram(
      this.registry, 'svcproxy_upstream_latency_seconds', 'Time from sending a request upstream to its response headers', ['workload'],
      [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    );
    const connections = opts.connections;
    this.openConnections = new Gauge({
      name: 'svcproxy_open_connections',
      help: 'Downstream connections open on every listener',
      registers,
      collect() {
        if (connections) this.set(connections());
      },
    });
    this.configReloads = new Counter({
      name: 'svcproxy_config_reloads_total',
      help: 'Configuration reloads by result (ok, rejected)',
      labelNames: ['result'],
      registers,
    });
    const readyReplicas = opts.readyReplicas;
    this.replicasReady = this.scraped(new ScrapedMetric(
      'svcproxy_replicas_ready', 'Ready replicas per workload and location', 'gauge', ['workload', 'location'],
      (emit) => {
        if (readyReplicas) for (const [workload, location, ready] of readyReplicas()) emit([workload, location], ready);
      },
      // Each worker probes on its own; across workers, the replicas every worker sees ready.
      'min',
    ));
    const workloadHealth = opts.workloadHealth;
    this.workloadHealth = this.scraped(new ScrapedMetric(
      'svcproxy_workload_health', 'Health of each workload per location: 1 for the current value (Loading, Healthy, Unhealthy, Deleting, Unknown), 0 for the others',
      'gauge', ['workload', 'gvc', 'location', 'health'],
      (emit) => {
        if (workloadHealth) for (const [labels, value] of workloadHealth()) emit(labels, value);
      },
      // Across `--workers`, a value holds only where every worker sees it.
      'min',
    ));
    this.ejections = new Counter({
      name: 'svcproxy_outlier_ejections_total',
      help: 'Replicas ejected after consecutive connect failures or 5xx answers',
      labelNames: ['workload', 'location'],
      registers,
    });
    this.retries = new Counter({
      name: 'svcproxy_upstream_retries_total',
      help: 'Upstream attempts retried',
      labelNames: ['workload'],
      registers,
    });
    this.dnsLookups = new Counter({
      name: 'svcproxy_dns_lookups_total',
      help: 'Lookups of the DNS names of deployment replicas, by name and outcome (answer, empty: the name has no address, failure: the last answer was kept)',
      labelNames: ['name', 'outcome'],
      registers,
    });
    this.dnsAddresses = new Gauge({
      name: 'svcproxy_dns_addresses',
      help: 'Addresses in the answer in use for each DNS name of deployment replicas',
      labelNames: ['name'],
      registers,
      aggregator: 'min',
    });
    // Counted on both sides of every mesh request: bound children (observation.ts keeps them), not a
    // prom-client label object hashed and validated on each increment.
    this.meshRequests = fastCounter(
      this.registry,
      'svcproxy_mesh_requests_total',
      'Mesh requests by reporter (source: the caller\'s sidecar; destination: the target\'s), caller, target, status and outcome (allowed, denied)',
      ['reporter', 'source_workload', 'source_gvc', 'destination_workload', 'destination_gvc', 'response_code', 'outcome'],
    );
    this.meshHandshakes = new Counter({
      name: 'svcproxy_mesh_tls_handshakes_total',
      help: 'mTLS handshakes completed (side: server, client)',
      labelNames: ['side'],
      registers,
    });
    this.meshHandshakeFailures = new Counter({
      name: 'svcproxy_mesh_tls_handshake_failures_total',
      help: 'mTLS handshakes refused by an mTLS listener, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.egressRequests = new Counter({
      name: 'svcproxy_egress_requests_total',
      help: 'Requests and tunnels from a workload to destinations outside the mesh, by outcome (allowed, denied)',
      labelNames: ['source_workload', 'source_gvc', 'outcome'],
      registers,
    });
    const worker = opts.worker;
    if (worker !== undefined) {
      new Counter({
        name: 'svcproxy_worker_requests_total',
        help: 'Requests answered by each worker (--workers)',
        labelNames: ['worker'],
        registers,
        collect() {
          let total = 0;
          for (const byLocation of requestCounts.values()) for (const counts of byLocation.values()) for (const n of counts) total += n;
          this.reset();
          this.inc({ worker }, total);
        },
      });
    }
    if (opts.defaultMetrics) collectProcessMetrics(this.registry);
  }

  /** Requests answered for a workload so far, every location and status (`up`'s scaler reads it). */
  requestsOf(workload: string): number {
    let total = 0;
    const byLocation = this.requestCounts.get(workload);
    if (byLocation) for (const counts of byLocation.values()) for (const n of counts) total += n;
    return total;
  }

  countRequest(workload: string, location: string, status: number, upstreamSeconds: number | undefined): void {
    let byLocation = this.requestCounts.get(workload);
    if (!byLocation) this.requestCounts.set(workload, (byLocation = new Map()));
    let counts = byLocation.get(location);
    if (!counts) byLocation.set(location, (counts = [0, 0, 0, 0, 0]));
    const cls = Math.min(Math.max(Math.floor(status / 100), 1), 5) - 1;
    counts[cls]!++;
    if (upstreamSeconds !== undefined && workload) {
      let h = this.latencyChildren.get(workload);
      if (!h) this.latencyChildren.set(workload, (h = this.upstreamLatency.labels(workload)));
      h.observe(upstreamSeconds);
    }
  }

  private scraped<M extends ScrapedMetric>(metric: M): M {
    this.registry.registerMetric(metric as never);
    return metric;
  }

  /**
   * The registry's Prometheus text (as `registry.metrics()` writes it), the metrics that write their
   * own text (fast-metrics.ts) asked for it: with ten thousand workloads a scrape is tens of
   * thousands of lines, written on the event loop that serves requests.
   */
  async text(): Promise<string> {
    const { registry } = this;
    const parts = await Promise.all(registry.getMetricsAsArray().map((m) => (isSelfRendering(m) ? m.promText() : registry.getSingleMetricAsString(m.name))));
    return `${parts.join('\n\n')}\n`;
  }
}
