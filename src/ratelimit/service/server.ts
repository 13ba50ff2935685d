/**
 * The rate-limit service: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, answering as
 * the reference Envoy rate-limit server does. Per descriptor: find the rule (match.ts), count it
 * (store.ts), and answer a status with the limit, the remaining quota and the time to reset; an
 * unmatched or `unlimited` descriptor is OK without a limit; a `shadow_mode` rule is counted and
 * reported but never OVER_LIMIT. The overall code is OVER_LIMIT when any status is.
 *
 * Failure: a request without a domain or descriptors is INVALID_ARGUMENT. A store that fails, or does
 * not answer within `storeTimeoutMs` (injected clock), makes the RPC UNAVAILABLE at once, well within
 * any client's deadline; the client's failure mode decides. Rules are read through `rules()` on every
 * request, so a reload applies to the next one.
 */
import type { Logger } from 'pino';
import { Counter, type Registry } from 'prom-client';
import { fastCounter, fastHistogram, type FastCounter, type FastHistogram } from '../../admin/fast-metrics.js';
import { registered } from '../../admin/registered.js';
import { RpcError, startUnaryServer } from '../../grpc/server.js';
import { Status } from '../../grpc/unary.js';
import type { Clock } from '../../deps.js';
import { SHOULD_RATE_LIMIT_PATH, type DescriptorStatus, type RateLimitRequest, type RateLimitResponse } from '../proto.js';
import { decodeRateLimitRequest, encodeRateLimitResponse } from '../wire.js';
import { applyReplaces, findLimit, overrideLimit } from './match.js';
import type { Limit, RuleSet } from './rules.js';
import { descriptorKey, StoreError, type CounterCheck, type Store } from './store.js';

export interface ServiceMetrics {
  readonly checks: FastCounter<'domain' | 'code'>;
  readonly shadowOverLimit: Counter<'domain'>;
  readonly redisErrors: Counter;
  readonly duration: FastHistogram<'code'>;
}

/** The service's metrics, registered once per registry. */
export function serviceMetrics(registry: Registry): ServiceMetrics {
  const registers = [registry];
  return {
    checks: fastCounter(
      registry, 'svcproxy_ratelimit_service_checks_total',
      'ShouldRateLimit calls by domain (a domain without rules counts as "unknown") and code (ok, over_limit, error)', ['domain', 'code'],
    ),
    shadowOverLimit: registered(registry, 'svcproxy_ratelimit_service_shadow_over_limit_total', () => new Counter({
      name: 'svcproxy_ratelimit_service_shadow_over_limit_total',
      help: 'Descriptors over a shadow_mode limit (answered OK), by domain',
      labelNames: ['domain'],
      registers,
    })),
    redisErrors: registered(registry, 'svcproxy_ratelimit_service_redis_errors_total', () => new Counter({
      name: 'svcproxy_ratelimit_service_redis_errors_total',
      help: 'Checks Redis failed or did not answer in time (each answered UNAVAILABLE)',
      registers,
    })),
    duration: fastHistogram(
      registry, 'svcproxy_ratelimit_service_check_duration_seconds', 'Time to answer ShouldRateLimit, by code', ['code'],
      [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5],
    ),
  };
}

export interface RateLimitServiceDeps {
  /** The rules in force (swapped on reload). */
  readonly rules: () => RuleSet;
  readonly store: Store;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: ServiceMetrics;
  /** Bound on one store round trip (default 500 ms). */
  readonly storeTimeoutMs?: number;
}

export { RpcError };

const UNKNOWN_DOMAIN = 'unknown';

export class RateLimitService {
  constructor(private readonly deps: RateLimitServiceDeps) {}

  /** Answer one request; rejects with `RpcError`. */
  async shouldRateLimit(request: RateLimitRequest): Promise<RateLimitResponse> {
    const { clock, metrics } = this.deps;
    const started = clock.now();
    const domainName = request.domain ?? '';
    const rules = this.deps.rules();
    const domain = rules.domains.get(domainName);
    const label = domain ? domainName : UNKNOWN_DOMAIN;
    try {
      const response = await this.answer(request, domain);
      const code = response.overall_code === 'OVER_LIMIT' ? 'over_limit' : 'ok';
      metrics.checks.labels(label, code).inc();
      metrics.duration.labels(code).observe((clock.now() - started) / 1000);
      return response;
    } catch (err) {
      metrics.checks.labels(label, 'error').inc();
      metrics.duration.labels('error').observe((clock.now() - started) / 1000);
      throw err;
    }
  }

  private async answer(request: RateLimitRequest, domain: ReturnType<RuleSet['domains']['get']>): Promise<RateLimitResponse> {
    if (!request.domain) throw new RpcError(Status.INVALID_ARGUMENT, 'rate limit domain must not be empty');
    const descriptors = request.descriptors ?? [];
    if (descriptors.length === 0) throw new RpcError(Status.INVALID_ARGUMENT, 'rate limit descriptor list must not be empty');
    const hits = Math.max(1, request.hits_addend ?? 0);
    let limits: (Limit | undefined)[] = descriptors.map((d) => {
      if (!domain) return undefined;
      const entries = d.entries ?? [];
      if (d.limit && d.limit.requests_per_unit !== undefined && d.limit.unit && d.limit.unit !== 'UNKNOWN') return overrideLimit(domain, entries, d.limit);
      return findLimit(domain, entries);
    });
    limits = applyReplaces(limits);
    // Unlimited and unmatched descriptors are answered OK without touching the store.
    const checks: CounterCheck[] = [];
    const index: number[] = [];
    limits.forEach((l, i) => {
      if (!l || l.unlimited) return;
      checks.push({ key: descriptorKey(request.domain, descriptors[i]!.entries ?? []), limit: l.requestsPerUnit, windowSeconds: l.windowSeconds, algorithm: l.algorithm });
      index.push(i);
    });
    const statuses: DescriptorStatus[] = descriptors.map(() => ({ code: 'OK' }));
    if (checks.length > 0) {
      const results = await this.count(checks, hits);
      results.forEach((r, j) => {
        const i = index[j]!;
        const limit = limits[i]!;
        let over = r.over;
        if (over && limit.shadowMode) {
          this.deps.metrics.shadowOverLimit.labels(request.domain).inc();
          this.deps.logger.debug({ limit: limit.fullKey }, 'over a shadow_mode limit: answered OK');
          over = false;
        }
        statuses[i] = {
          code: over ? 'OVER_LIMIT' : 'OK',
          current_limit: { requests_per_unit: limit.requestsPerUnit, unit: limit.unit, ...(limit.name ? { name: limit.name } : {}) },
          limit_remaining: r.remaining,
          duration_until_reset: { seconds: r.resetSeconds, nanos: 0 },
        };
      });
    }
    return {
      overall_code: statuses.some((s) => s.code === 'OVER_LIMIT') ? 'OVER_LIMIT' : 'OK',
      statuses,
    };
  }

  /** The store's answer, or UNAVAILABLE when it fails or is slower than the bound. */
  private count(checks: CounterCheck[], hits: number): ReturnType<Store['check']> {
    const { store, clock } = this.deps;
    // In-memory counters answer at once: a timer per check would only cost (a Timeout, a timer-list
    // insert and removal). A store across the network is bounded by storeTimeoutMs.
    if (store.kind === 'memory') {
      return store.check(checks, hits, clock.wallNow()).catch((err: Error) => {
        throw new RpcError(Status.UNAVAILABLE, `rate limit store failed: ${err.message}`);
      });
    }
    const bound = this.deps.storeTimeoutMs ?? 500;
    return new Promise((resolve, reject) => {
      let done = false;
      const fail = (message: string): void => {
        if (done) return;
        done = true;
        clock.clearTimeout(timer);
        if (store.kind === 'redis') this.deps.metrics.redisErrors.inc();
        reject(new RpcError(Status.UNAVAILABLE, message));
      };
      const timer = clock.setTimeout(() => fail(`rate limit store (${store.kind}) did not answer within ${bound} ms`), bound);
      store.check(checks, hits, clock.wallNow()).then(
        (results) => {
          if (done) return;
          done = true;
          clock.clearTimeout(timer);
          resolve(results);
        },
        (err: Error) => fail(err instanceof StoreError ? `rate limit store unavailable: ${err.message}` : `rate limit store failed: ${err.message}`),
      );
    });
  }
}

export interface RateLimitServer {
  readonly address: { host: string; port: number };
  /** Stop accepting, let calls in flight finish (at most `graceMs`), then close. */
  close(graceMs?: number): Promise<void>;
}

export interface ServerTls {
  readonly cert: Buffer;
  readonly key: Buffer;
}

/** Serve `service` over gRPC on host:port (0 picks one): TLS when given a certificate, else cleartext. */
export async function startRateLimitServer(service: RateLimitService, host: string, port: number, logger: Logger, tls?: ServerTls): Promise<RateLimitServer> {
  const shouldRateLimit = async (message: Buffer): Promise<Buffer> => {
    let request: RateLimitRequest;
    try {
      request = decodeRateLimitRequest(message);
    } catch (err) {
      throw new RpcError(Status.INTERNAL, `request message does not parse: ${(err as Error).message}`);
    }
    return encodeRateLimitResponse(await service.shouldRateLimit(request));
  };
  return startUnaryServer({
    host,
    port,
    methods: new Map([[SHOULD_RATE_LIMIT_PATH, shouldRateLimit]]),
    maxMessageBytes: 1024 * 1024,
    ...(tls ? { tls } : {}),
    onError: (_path, err) => logger.error({ err }, 'ShouldRateLimit failed'),
  });
}
