/**
 * One running rate-limit service: rules loaded (and hot-reloaded), a counter store (memory, or Redis
 * shared between instances), the gRPC listener, and optionally the admin listener (`/healthz`,
 * `/ready`, `/metrics`, `/config`) and the status (`/healthz`, `/ready`) and metrics (`/metrics`) ones. Reload: the folders of the rules paths are watched (so a file
 * replaced by rename is seen; events debounced 100 ms on the injected clock) and `reload()` is called
 * on SIGHUP by the CLI; an invalid reload keeps the rules in force, logs every error and shows them
 * under `/config`. `/ready` is 503 while the store cannot answer (Redis down). `start` rejects with a
 * `RulesError` (every error) or an `Error` naming what failed (Redis unreachable, address in use).
 */
import { readFileSync, type FSWatcher } from 'node:fs';
import type { Logger } from 'pino';
import { Counter } from 'prom-client';
import { Metrics } from '../../admin/metrics.js';
import { startAdminListeners, type AdminListeners, type AdminServer } from '../../admin/server.js';
import { watchConfigPaths } from '../../config/watch.js';
import { systemClock, type Clock, type Timer } from '../../deps.js';
import { loadRules, type RuleSet } from './rules.js';
import { RateLimitService, serviceMetrics, startRateLimitServer, type RateLimitServer } from './server.js';
import { MemoryStore } from './store-memory.js';
import { redactRedisUrl, RedisStore } from './store-redis.js';
import type { Store } from './store.js';

export class RulesError extends Error {
  constructor(readonly errors: readonly string[]) {
    super(`rules invalid (${errors.length} error${errors.length === 1 ? '' : 's'})`);
    this.name = 'RulesError';
  }
}

export interface RateLimitAppOptions {
  /** Rules files or folders. */
  readonly rules: readonly string[];
  /** `redis://…`; absent: in-memory counters. */
  readonly redis?: string;
  readonly listen: { readonly host: string; readonly port: number };
  readonly admin?: { readonly host: string; readonly port: number };
  /** `--status`: `/healthz` and `/ready` only. */
  readonly status?: { readonly host: string; readonly port: number };
  /** `--metrics`: `/metrics` only. */
  readonly metrics?: { readonly host: string; readonly port: number };
  readonly tls?: { readonly certFile: string; readonly keyFile: string };
  readonly logger: Logger;
  readonly clock?: Clock;
  /** Watch the rules folders (default true). */
  readonly watch?: boolean;
  /** Bound on one store round trip (default 500 ms). */
  readonly storeTimeoutMs?: number;
  /** Another store (tests). */
  readonly store?: Store;
}

export class RateLimitApp {
  private current: RuleSet;
  private lastErrors: readonly string[] | undefined;
  private watchers: FSWatcher[] = [];
  private debounce: Timer | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    private readonly opts: RateLimitAppOptions,
    first: RuleSet,
    readonly store: Store,
    readonly metrics: Metrics,
    private readonly reloads: Counter<'result'>,
    readonly server: RateLimitServer,
    private readonly adminListeners: AdminListeners,
    private readonly clock: Clock,
  ) {
    this.current = first;
  }

  /** The admin listener, when `admin` was given. */
  get admin(): AdminServer | undefined {
    return this.adminListeners.admin;
  }

  /** The status listener (`/healthz`, `/ready`), when `status` was given. */
  get statusListener(): AdminServer | undefined {
    return this.adminListeners.status;
  }

  /** The metrics listener (`/metrics`), when `metrics` was given. */
  get metricsListener(): AdminServer | undefined {
    return this.adminListeners.metrics;
  }

  static async start(opts: RateLimitAppOptions): Promise<RateLimitApp> {
    const logger = opts.logger;
    const clock = opts.clock ?? systemClock;
    const loaded = await loadRules(opts.rules);
    if (!loaded.ok) throw new RulesError(loaded.errors);
    const metrics = new Metrics({ defaultMetrics: true });
    const svcMetrics = serviceMetrics(metrics.registry);
    const reloads = new Counter({
      name: 'svcproxy_ratelimit_service_rules_reloads_total',
      help: 'Rules reloads by result (ok, rejected)',
      labelNames: ['result'],
      registers: [metrics.registry],
    });
    const store = opts.store ?? (opts.redis
      ? await RedisStore.connect(opts.redis, { logger: logger.child({ component: 'redis' }) })
      : new MemoryStore());
    let app: RateLimitApp | undefined;
    const service = new RateLimitService({
      rules: () => app!.rules,
      store,
      clock,
      logger: logger.child({ component: 'ratelimit' }),
      metrics: svcMetrics,
      ...(opts.storeTimeoutMs !== undefined ? { storeTimeoutMs: opts.storeTimeoutMs } : {}),
    });
    let server: RateLimitServer | undefined;
    let admin: AdminListeners;
    try {
      const tls = opts.tls ? { cert: readFileSync(opts.tls.certFile), key: readFileSync(opts.tls.keyFile) } : undefined;
      server = await startRateLimitServer(service, opts.listen.host, opts.listen.port, logger, tls);
      admin = await startAdminListeners({ admin: opts.admin, status: opts.status, metrics: opts.metrics }, metrics, {
        ready: () => app !== undefined && !app.closed && store.ready(),
        config: () => app?.describe(),
      });
    } catch (err) {
      await server?.close(0);
      await store.close();
      throw err;
    }
    app = new RateLimitApp(opts, loaded.rules, store, metrics, reloads, server, admin, clock);
    app.logRules();
    if (opts.watch !== false) app.watch();
    return app;
  }

  get rules(): RuleSet {
    return this.current;
  }

  get address(): { host: string; port: number } {
    return this.server.address;
  }

  /** Load the rules again; `true` when the new rules are in force. Reloads run one at a time. */
  reload(): Promise<boolean> {
    const run = this.queue.then(() => this.reloadNow());
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async reloadNow(): Promise<boolean> {
    if (this.closed) return false;
    const { logger } = this.opts;
    const loaded = await loadRules(this.opts.rules);
    if (!loaded.ok) {
      this.lastErrors = Object.freeze([...loaded.errors]);
      this.reloads.labels('rejected').inc();
      for (const line of loaded.errors) logger.error(`rules rejected: ${line}`);
      logger.error({ errors: loaded.errors.length }, 'rules rejected: keeping the rules in force');
      return false;
    }
    this.current = loaded.rules;
    this.lastErrors = undefined;
    this.reloads.labels('ok').inc();
    this.logRules();
    return true;
  }

  private logRules(): void {
    this.opts.logger.info({ domains: [...this.current.domains.keys()], files: this.current.files.length }, 'rate-limit rules loaded');
  }

  /** What `/config` shows. */
  describe(): unknown {
    return {
      domains: [...this.current.domains.values()].map((d) => ({ domain: d.name, file: d.file, algorithm: d.algorithm })),
      store: this.store.kind,
      ...(this.opts.redis ? { redis: redactRedisUrl(this.opts.redis) } : {}),
      ...(this.lastErrors ? { lastErrors: this.lastErrors } : {}),
    };
  }

  private watch(): void {
    this.watchers = watchConfigPaths(this.opts.rules, () => this.schedule(), this.opts.logger, 'rules');
  }

  private schedule(): void {
    if (this.debounce !== undefined) this.clock.clearTimeout(this.debounce);
    this.debounce = this.clock.setTimeout(() => {
      this.debounce = undefined;
      void this.reload();
    }, 100);
  }

  async close(graceMs = 5000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const w of this.watchers) w.close();
    this.watchers = [];
    if (this.debounce !== undefined) this.clock.clearTimeout(this.debounce);
    await this.server.close(graceMs);
    await Promise.all([this.adminListeners.close(), this.store.close()]);
  }
}
