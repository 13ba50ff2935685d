/**
 * The access-log service client (Envoy's `envoy.access_loggers.http_grpc`): one `AccessLogStream` per
 * compiled log, created and retired as the configuration changes, and `log()` to hand a finished
 * request to every log of its workload. Metrics: `svcproxy_accesslog_entries_sent_total`,
 * `svcproxy_accesslog_entries_dropped_total` and `svcproxy_accesslog_stream_failures_total`, each by
 * `workload` and `log`. Failures never reach the request: see `stream.ts` for the bounds.
 */
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import type { Counter, Registry } from 'prom-client';
import { sharedCounter } from '../admin/registered.js';
import type { ExchangeInfo } from '../observe/index.js';
import type { AccessLogPlan, AccessLogSpec } from './config.js';
import { buildEntry, type RequestFacts } from './entry.js';
import { AccessLogStream, type AccessLogStreamOptions } from './stream.js';

export { compileAccessLogPlan, HTTP_GRPC_LOGGER, type AccessLogPlan, type AccessLogSpec } from './config.js';
export type { RequestFacts } from './entry.js';
export type { AccessLogStreamOptions } from './stream.js';

const VERSION = (createRequire(import.meta.url)('../../package.json') as { version: string }).version;

export interface AccessLogServiceOptions {
  readonly logger: Logger;
  readonly registry: Registry;
  /** `node.id` of the streams' identifier (the sidecar's replica, or the ingress). */
  readonly nodeId: string;
  /** `node.locality.region`: the location this proxy serves, when it has one. */
  readonly location?: string;
  readonly stream?: AccessLogStreamOptions;
}

const LOG_LABELS = ['workload', 'log'] as const;

export class AccessLogService {
  private readonly streams = new Map<string, AccessLogStream>();
  private readonly log: Logger;
  private readonly sent: Counter<'workload' | 'log'>;
  private readonly dropped: Counter<'workload' | 'log'>;
  private readonly failures: Counter<'workload' | 'log'>;

  constructor(private readonly opts: AccessLogServiceOptions) {
    this.log = opts.logger.child({ component: 'accesslog' });
    this.sent = sharedCounter(opts.registry, 'svcproxy_accesslog_entries_sent_total', 'Access-log entries written to an access-log service stream', LOG_LABELS);
    this.dropped = sharedCounter(opts.registry, 'svcproxy_accesslog_entries_dropped_total', 'Access-log entries dropped: buffer full while the service was unreachable, or unsent at shutdown', LOG_LABELS);
    this.failures = sharedCounter(opts.registry, 'svcproxy_accesslog_stream_failures_total', 'Access-log streams that failed or could not be opened', LOG_LABELS);
  }

  /** Streams for every log of `plan`; streams of logs that are gone are flushed and ended. */
  apply(plan: AccessLogPlan): void {
    for (const [key, spec] of plan.specs) {
      if (this.streams.has(key)) continue;
      const labels = [spec.workload, spec.logName] as const;
      const node = {
        id: this.opts.nodeId,
        cluster: spec.workloadName,
        ...(this.opts.location ? { locality: { region: this.opts.location } } : {}),
        user_agent_name: 'svcproxy',
        user_agent_version: VERSION,
      };
      const metrics = { sent: this.sent.labels(...labels), dropped: this.dropped.labels(...labels), failures: this.failures.labels(...labels) };
      this.streams.set(key, new AccessLogStream(spec, node, metrics, this.log, this.opts.stream));
    }
    for (const [key, stream] of this.streams) {
      if (plan.specs.has(key)) continue;
      this.streams.delete(key);
      void stream.close();
    }
  }

  /** Hand a finished request to its workload's logs. */
  record(ex: ExchangeInfo, facts: RequestFacts, specs: readonly AccessLogSpec[], now: number, wallNow: number): void {
    for (const spec of specs) {
      const stream = this.streams.get(spec.key);
      if (!stream) continue;
      const { entry, size } = buildEntry(ex, facts, spec, now, wallNow);
      stream.push(entry, size);
    }
  }

  /** Write every buffered entry now (tests). */
  flush(): void {
    for (const stream of this.streams.values()) stream.flush();
  }

  stream(key: string): AccessLogStream | undefined {
    return this.streams.get(key);
  }

  async close(timeoutMs = 2000): Promise<void> {
    const all = [...this.streams.values()];
    this.streams.clear();
    await Promise.all(all.map((s) => s.close(timeoutMs)));
  }
}
