/**
 * The ext_authz sidecar filter: every request to a workload with `svc/externalAuthAddress` is
 * checked by the authorization service before the app sees it, unless `svc/externalAuthListenPort`
 * names another container port or an `excludedExternalAuth` rule matches the normalized path. The
 * check is one call (gRPC `Check`, or an HTTP request) bounded by the tag's timeout; its answer
 * allows (mutations applied to the upstream request and the response), denies (the server's
 * status, headers and body, 403 by default), or fails — then the failure mode decides, as Envoy's
 * `failure_mode_allow`: fail-open continues with `x-envoy-auth-failure-mode-allowed: true` on the
 * upstream request; fail-closed answers 403 `external authorization failed`.
 * Runs first in the sidecar chain, so a denied request never spends rate-limit quota.
 */
import { childSpan } from '../tracing/index.js';
import { createHash } from 'node:crypto';
import { rootCertificates } from 'node:tls';
import type { Logger } from 'pino';
import type { Clock } from '../deps.js';
import { hasBody, vendorHeaders, type ExchangeView, type Filter, type FilterContext, type FilterFactory, type FilterResult } from '../filter/index.js';
import { buildCheckRequest, checkView, type CheckBody } from './attributes.js';
import { readBodyPrefix } from './body.js';
import { fromCheckResponse, fromHttpResponse, type Decision, type OkMutations } from './decision.js';
import { compileExclusions, rawHeaderLookup, type Predicate } from './exclusions.js';
import { GrpcAuthClient } from './grpc-client.js';
import { HttpAuthClient } from './http-client.js';
import { extAuthMetrics, type ExtAuthMetrics } from './metrics.js';
import { STATUS_CODES } from './decode.js';
import { authority, compileExtAuthTags, type ExtAuthConfig } from './tags.js';

/** Envoy's `with_request_body.max_request_bytes` as the platform sets it. */
export const BODY_LIMIT = 8192;

export const FAILURE_MODE_ALLOWED_HEADER = 'x-envoy-auth-failure-mode-allowed';

/** A body of unknown length stops being waited for after this long without a byte (body.ts). */
export const BODY_IDLE_MS = 100;

export interface ExtAuthOptions {
  /**
   * Extra CA certificates (PEM) trusted for `https` authorization services, on top of Node's bundled
   * roots (`--extauth-ca FILE` / `SVCPROXY_EXTAUTH_CA`). grpc-js ignores `NODE_EXTRA_CA_CERTS`.
   */
  readonly ca?: string | Buffer;
}

/** The factory for `defaultFactories().sidecar`: no filter for workloads without the address tag. */
export function extAuthFactory(options: ExtAuthOptions = {}): FilterFactory {
  const caKey = options.ca === undefined ? '' : `#${createHash('sha256').update(options.ca).digest('hex').slice(0, 16)}`;
  // Added to Node's bundled roots, not instead of them (a TLS `ca` option replaces the defaults).
  const ca = options.ca === undefined ? undefined : `${rootCertificates.join('\n')}\n${options.ca.toString()}`;
  return (ctx: FilterContext): Filter | undefined => {
    const { config, problems } = compileExtAuthTags(ctx.workload.tags, ctx.snapshot.settings.vendor);
    if (!config) return undefined;
    const all = [...problems];
    const excluded = compileExclusions(
      [ctx.gvc?.sidecarEnvoy?.excludedExternalAuth, ctx.workload.sidecarEnvoy?.excludedExternalAuth],
      all,
    );
    const logger = ctx.deps.logger.child({ component: 'extauth', workload: ctx.workload.key });
    for (const p of all) logger.warn(p);
    const target = authority(config);
    const key = `extauth:${config.protocol}:${config.scheme}://${target}${caKey}`;
    const transport: Transport =
      config.protocol === 'grpc'
        ? { kind: 'grpc', client: ctx.shared.get(key, () => new GrpcAuthClient({ host: config.address, port: config.port, tls: config.scheme === 'https', clock: ctx.deps.clock, ...(ca !== undefined ? { ca } : {}) })) }
        : { kind: 'http', client: ctx.shared.get(key, () => new HttpAuthClient({ origin: `${config.scheme}://${target}`, ...(ca !== undefined ? { ca } : {}) })) };
    return new ExtAuthFilter(config, excluded, transport, {
      clock: ctx.deps.clock,
      logger,
      metrics: extAuthMetrics(ctx.metrics.registry, ctx.workload.key),
      stripPrefixes: vendorHeaders(ctx.snapshot.settings.vendor).strip,
    });
  };
}

type Transport = { kind: 'grpc'; client: GrpcAuthClient } | { kind: 'http'; client: HttpAuthClient };

interface FilterEnv {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly metrics: ExtAuthMetrics;
  readonly stripPrefixes: readonly string[];
}

/** Errors are logged at warn at most this often per workload; the rest at debug. */
const WARN_EVERY_MS = 5000;

export class ExtAuthFilter implements Filter {
  readonly name = 'ext_authz';
  private lastWarnAt = -Infinity;

  constructor(
    readonly config: ExtAuthConfig,
    /** The compiled `excludedExternalAuth` rules (read by `svcproxy explain`, so it judges as the filter does). */
    readonly excluded: Predicate | undefined,
    private readonly transport: Transport,
    private readonly env: FilterEnv,
  ) {}

  run(ex: ExchangeView): FilterResult | Promise<FilterResult> {
    const { listenPort } = this.config;
    if (listenPort !== undefined && ex.targetPort !== undefined && ex.targetPort !== listenPort) return undefined;
    if (this.excluded && this.excluded(matchInput(ex))) return undefined;
    return this.check(ex);
  }

  private async check(ex: ExchangeView): Promise<FilterResult> {
    const { config, env } = this;
    let body: CheckBody | undefined;
    if (!config.removeRequestBody && hasBody(ex)) {
      const lengthKnown = ex.req.headers['content-length'] !== undefined;
      const prefix = await readBodyPrefix(ex.bodyOverride ?? ex.req, BODY_LIMIT, lengthKnown ? undefined : { ms: BODY_IDLE_MS, clock: env.clock });
      ex.bodyOverride = prefix.replay;
      if (ex.isFinished) return undefined;
      if (prefix.bytes.length > 0) body = prefix;
    }
    const view = checkView(ex, env.stripPrefixes);
    const started = env.clock.now();
    const span = childSpan(ex, 'ext_authz', { 'rpc.system': this.transport.kind === 'grpc' ? 'grpc' : 'http', 'server.address': this.config.address });
    let decision: Decision;
    if (this.transport.kind === 'grpc') {
      const request = buildCheckRequest(ex, view, {
        includePeerCert: config.includePeerCert,
        packAsBytes: config.packAsBytes,
        stripPrefixes: env.stripPrefixes,
        now: env.clock.wallNow(),
      }, body);
      const result = await this.transport.client.check(request, config.timeoutMs);
      decision = result.ok ? fromCheckResponse(result.response, view.headers, STATUS_CODES) : { kind: 'error', reason: result.reason };
    } else {
      const headers: Record<string, string> = { host: ex.host, 'content-length': String(body?.bytes.length ?? 0) };
      const auth = ex.req.headers.authorization;
      if (typeof auth === 'string') headers.authorization = auth;
      const method = ex.req.method ?? 'GET';
      // A CONNECT's target is its authority (no path, so no prefix), as Envoy sends it on.
      const path = method === 'CONNECT' ? ex.host : config.pathPrefix + ex.pathWithQuery;
      const result = await this.transport.client.check(
        { method, path, headers, body: body?.bytes },
        config.timeoutMs,
        env.clock,
      );
      decision = result.ok ? fromHttpResponse(result.status, result.headers, result.body, config.upstreamHeaderPrefixes) : { kind: 'error', reason: result.reason };
    }
    env.metrics.duration.observe((env.clock.now() - started) / 1000);
    span.end(decision.kind === 'error' ? 'error' : 'ok', { 'svc.ext_authz.decision': decision.kind });
    return this.apply(ex, decision);
  }

  private apply(ex: ExchangeView, decision: Decision): FilterResult {
    const { metrics } = this.env;
    switch (decision.kind) {
      case 'ok':
        metrics.ok.inc();
        if (decision.mutations) applyOk(ex, decision.mutations);
        return undefined;
      case 'denied':
        metrics.denied.inc();
        return { code: 'AUTH_DENIED', status: decision.status, headers: decision.headers, ...(decision.body.length > 0 ? { body: decision.body } : {}) };
      case 'error':
        metrics.error.inc();
        this.logError(ex, decision.reason);
        if (!this.config.failureAllow) return { code: 'AUTH_FAILED' };
        metrics.failureModeAllowed.inc();
        (ex.upstreamSet ??= []).push([FAILURE_MODE_ALLOWED_HEADER, 'true']);
        return undefined;
    }
  }

  private logError(ex: ExchangeView, reason: string): void {
    const now = this.env.clock.now();
    const level = now - this.lastWarnAt >= WARN_EVERY_MS ? 'warn' : 'debug';
    if (level === 'warn') this.lastWarnAt = now;
    if (!this.env.logger.isLevelEnabled(level)) return;
    this.env.logger[level](
      { requestId: ex.requestId, reason, failureAllow: this.config.failureAllow, target: `${this.config.scheme}://${authority(this.config)}` },
      'external authorization failed',
    );
  }
}

function matchInput(ex: ExchangeView): Parameters<Predicate>[0] {
  return {
    path: ex.path,
    query: ex.query,
    header: rawHeaderLookup(ex.req.rawHeaders, ex.host, { ':method': ex.req.method ?? 'GET', ':path': ex.pathWithQuery }),
    listenerPort: ex.listenerPort,
    targetPort: ex.targetPort,
  };
}

/** Hand the allowed request's mutations to the data plane (applied when it forwards). */
export function applyOk(ex: ExchangeView, m: OkMutations): void {
  if (m.upstreamSet.length > 0) (ex.upstreamSet ??= []).push(...m.upstreamSet);
  if (m.upstreamRemove.length > 0) (ex.upstreamRemove ??= []).push(...m.upstreamRemove);
  if (m.querySet.length > 0) (ex.upstreamQuerySet ??= []).push(...m.querySet);
  if (m.queryRemove.length > 0) (ex.upstreamQueryRemove ??= []).push(...m.queryRemove);
  if (m.responseHeaders) (ex.responseHeaderOps ??= []).push(...m.responseHeaders);
}
