/**
 * The sidecar's rate-limit filter (DESIGN §7). A workload tagged `svc/rateLimitAddress` gets one; it
 * runs after external authorization (policy.ts). Per request: excluded (`excludedRateLimit[]`) or a
 * descriptor value missing → continue unchecked; otherwise one `ShouldRateLimit` call (domain, ONE
 * descriptor, hits_addend 1), bounded by 1 s.
 *
 * - OVER_LIMIT → 429 `rate limited` with `x-envoy-ratelimited: true`, the x-ratelimit-* headers and
 *   the service's `response_headers_to_add`.
 * - OK (or UNKNOWN, as Envoy reads it) → continue; the x-ratelimit-* headers and
 *   `response_headers_to_add` go on the response, `request_headers_to_add` replace the same headers
 *   upstream (a client cannot pre-set a header the service vouches for).
 * - Service failing or late → 503 `rate limit service unavailable` (fail-closed, as the platform),
 *   or continue when `svc/rateLimitFailureAllow: true`. gRPC clients get grpc-status 14 (filter/reply.ts).
 */
import { childSpan } from '../tracing/index.js';
import type { OutgoingHttpHeaders } from 'node:http';
import type { Logger } from 'pino';
import type { GvcModel, WorkloadModel } from '../config/model.js';
import { parseBool, parsePort } from '../config/values.js';
import type { Clock } from '../deps.js';
import type { ExchangeView, Filter, FilterContext, FilterFactory, FilterResult } from '../filter/index.js';
import { grpcRateLimitClient, targetKey, type RateLimitClient, type RateLimitTarget } from './client.js';
import { buildEntries, DEFAULT_DESCRIPTORS, parseDescriptors, type DescriptorSource } from './descriptors.js';
import { compileExclusions, rawHeaderLookup, type Predicate } from '../extauth/exclusions.js';
import { headerPairs, xRateLimitHeaders } from './headers.js';
import { workloadRateLimitMetrics, type WorkloadRateLimitMetrics } from './metrics.js';
import type { RateLimitResponse } from './proto.js';

/** The bound on one check (DESIGN §7): past it the service counts as failed. */
export const CHECK_TIMEOUT_MS = 1000;
/** At most one warning per this many ms about a failing service (the rest are counted, not logged). */
const WARN_EVERY_MS = 10_000;

/** A workload's rate-limit policy, compiled from its tags and both `sidecar.envoy` blocks. */
export interface RateLimitConfig {
  readonly target: RateLimitTarget;
  readonly domain: string;
  readonly descriptors: readonly DescriptorSource[];
  /** `svc/rateLimitFailureAllow`: let requests through when the service fails (default false). */
  readonly failureAllow: boolean;
  readonly timeoutMs: number;
  /**
   * `excludedRateLimit[]` of the GVC and the workload: the same Envoy route-match subset as
   * `excludedExternalAuth[]`, so the one matcher of src/extauth/exclusions.ts serves both.
   */
  readonly excluded: Predicate | undefined;
}

/**
 * The workload's policy, or `undefined` when it has no `rateLimitAddress` tag (or an unusable one).
 * Exclusion entries that cannot be compiled are added to `problems` (they never match).
 */
export function rateLimitConfig(workload: WorkloadModel, gvc: GvcModel | undefined, vendor: string, problems: string[] = []): RateLimitConfig | undefined {
  const tag = (name: string): string | undefined => workload.tags[`${vendor}/${name}`];
  const host = tag('rateLimitAddress')?.trim();
  if (!host) return undefined;
  const parsed = parseDescriptors(tag('rateLimitDescriptors') ?? DEFAULT_DESCRIPTORS);
  if ('error' in parsed) return undefined;
  const portTag = tag('rateLimitPort');
  return Object.freeze({
    target: Object.freeze({
      host: host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host,
      port: (portTag !== undefined ? parsePort(portTag) : undefined) ?? 443,
      tls: tag('rateLimitScheme') !== 'http',
    }),
    domain: tag('rateLimitDomain')?.trim() || vendor,
    descriptors: Object.freeze(parsed.sources),
    failureAllow: parseBool(tag('rateLimitFailureAllow') ?? false) ?? false,
    timeoutMs: CHECK_TIMEOUT_MS,
    excluded: compileExclusions([gvc?.sidecarEnvoy?.excludedRateLimit, workload.sidecarEnvoy?.excludedRateLimit], problems),
  });
}

export interface RateLimitFilterDeps {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: WorkloadRateLimitMetrics;
}

export class RateLimitFilter implements Filter {
  readonly name = 'ratelimit';
  private lastWarnAt = Number.NEGATIVE_INFINITY;

  constructor(
    readonly config: RateLimitConfig,
    private readonly client: RateLimitClient,
    private readonly deps: RateLimitFilterDeps,
  ) {}

  run(ex: ExchangeView): FilterResult | Promise<FilterResult> {
    const excluded = this.config.excluded;
    if (excluded && excluded({
      path: ex.path,
      query: ex.query,
      header: rawHeaderLookup(ex.req.rawHeaders, ex.host),
      listenerPort: ex.listenerPort,
      targetPort: ex.targetPort,
    })) return undefined;
    const entries = buildEntries(this.config.descriptors, {
      host: ex.host,
      path: ex.path,
      method: ex.req.method ?? 'GET',
      clientAddress: ex.clientAddress,
      headers: ex.req.headers,
    });
    if (!entries) return undefined;
    return this.check(ex, entries);
  }

  private async check(ex: ExchangeView, entries: { key: string; value: string }[]): Promise<FilterResult> {
    const { clock, metrics } = this.deps;
    const started = clock.now();
    const span = childSpan(ex, 'ratelimit', { 'rpc.system': 'grpc', 'svc.ratelimit.domain': this.config.domain });
    let response: RateLimitResponse;
    try {
      response = await this.client.shouldRateLimit(
        { domain: this.config.domain, descriptors: [{ entries }], hits_addend: 1 },
        this.config.timeoutMs,
      );
    } catch (err) {
      span.end('error');
      metrics.count('error', (clock.now() - started) / 1000);
      this.warn(err as Error, ex);
      return this.config.failureAllow ? undefined : { code: 'RATE_LIMIT_UNAVAILABLE' };
    }
    const over = response.overall_code === 'OVER_LIMIT';
    span.end('ok', { 'svc.ratelimit.code': response.overall_code });
    metrics.count(over ? 'over_limit' : 'ok', (clock.now() - started) / 1000);
    const responseHeaders = this.responseHeaders(ex, response);
    if (over) {
      return { code: 'RATE_LIMITED', headers: { ...responseHeaders, 'x-envoy-ratelimited': 'true' } };
    }
    if (responseHeaders) ex.responseHeaders = responseHeaders;
    const upstream = headerPairs(response.request_headers_to_add);
    if (upstream.length > 0) (ex.upstreamSet ??= []).push(...upstream);
    return undefined;
  }

  /** What earlier filters added, then the x-ratelimit-* headers, then the service's own. */
  private responseHeaders(ex: ExchangeView, response: RateLimitResponse): OutgoingHttpHeaders | undefined {
    const rl = xRateLimitHeaders(response.statuses);
    const extra = headerPairs(response.response_headers_to_add);
    if (!rl && extra.length === 0) return ex.responseHeaders;
    const out: OutgoingHttpHeaders = { ...ex.responseHeaders, ...rl };
    for (const [name, value] of extra) {
      const existing = out[name];
      // Envoy appends the service's headers; several with one name become a list.
      if (existing === undefined || (rl && name in rl)) out[name] = value;
      else out[name] = Array.isArray(existing) ? [...existing, value] : [String(existing), value];
    }
    return out;
  }

  private warn(err: Error, ex: ExchangeView): void {
    const now = this.deps.clock.now();
    if (now - this.lastWarnAt < WARN_EVERY_MS) return;
    this.lastWarnAt = now;
    this.deps.logger.warn(
      { err: err.message, requestId: ex.requestId, target: targetKey(this.config.target), failureAllow: this.config.failureAllow },
      this.config.failureAllow ? 'rate limit service failed; letting requests through' : 'rate limit service failed; denying requests',
    );
  }
}

export interface RateLimitFactoryOptions {
  /** Builds the client of a target (tests inject one); default: gRPC. */
  readonly clientFor?: (target: RateLimitTarget, clock: Clock) => RateLimitClient;
}

/** The sidecar filter factory: no filter for a workload without `rateLimitAddress`. */
export function rateLimitFactory(opts: RateLimitFactoryOptions = {}): FilterFactory {
  const clientFor = opts.clientFor ?? grpcRateLimitClient;
  return (ctx: FilterContext): Filter | undefined => {
    const problems: string[] = [];
    const config = rateLimitConfig(ctx.workload, ctx.gvc, ctx.snapshot.settings.vendor, problems);
    if (!config) return undefined;
    const { clock, logger } = ctx.deps;
    for (const p of problems) logger.warn({ workload: ctx.workload.key }, `excludedRateLimit: ${p}`);
    // One channel per target for the data plane's life: reloads reuse it.
    const client = ctx.shared.get(targetKey(config.target), () => clientFor(config.target, clock));
    return new RateLimitFilter(config, client, {
      clock,
      logger: logger.child({ component: 'ratelimit', workload: ctx.workload.key }),
      metrics: workloadRateLimitMetrics(ctx.metrics.registry, ctx.workload.key),
    });
  };
}
