/**
 * The proxy-side rate-limit metrics: `svcproxy_ratelimit_checks_total{workload,result}` (result `ok`,
 * `over_limit`, `error`) and `svcproxy_ratelimit_check_duration_seconds{workload}`. Filter factories run
 * on every reload, so each metric is registered once per registry (admin/registered.ts); label
 * children are bound per workload (admin/fast-metrics.ts) so the hot path does no label hashing.
 */
import type { Registry } from 'prom-client';
import { fastCounter, fastHistogram } from '../admin/fast-metrics.js';

export type CheckResult = 'ok' | 'over_limit' | 'error';

export interface WorkloadRateLimitMetrics {
  count(result: CheckResult, seconds: number): void;
}

const CHECKS = 'svcproxy_ratelimit_checks_total';
const DURATION = 'svcproxy_ratelimit_check_duration_seconds';

export function workloadRateLimitMetrics(registry: Registry, workload: string): WorkloadRateLimitMetrics {
  const checks = fastCounter(registry, CHECKS, 'Rate-limit checks by workload and result (ok, over_limit, error)', ['workload', 'result']);
  const duration = fastHistogram(
    registry, DURATION, 'Time a rate-limit check took, answered or failed', ['workload'],
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
  ).labels(workload);
  const children = {
    ok: checks.labels(workload, 'ok'),
    over_limit: checks.labels(workload, 'over_limit'),
    error: checks.labels(workload, 'error'),
  };
  return {
    count(result, seconds) {
      children[result].inc();
      duration.observe(seconds);
    },
  };
}
