/**
 * The ext_authz metrics, registered once per registry (a factory runs on every reload, so they are
 * looked up by name first): `svcproxy_extauth_checks_total{workload,result}` with result `ok`,
 * `denied`, `error`, `failure_mode_allowed` (an error that let the request through counts as both
 * `error` and `failure_mode_allowed`, as Envoy's `ext_authz.error` / `ext_authz.failure_mode_allowed`
 * stats do), and `svcproxy_extauth_duration_seconds{workload}`, the time of the check itself.
 * Label children are bound once per filter (admin/fast-metrics.ts), so a request does no label hashing.
 */
import type { Registry } from 'prom-client';
import { fastCounter, fastHistogram, type Incrementer, type Observer } from '../admin/fast-metrics.js';

export interface ExtAuthMetrics {
  readonly ok: Incrementer;
  readonly denied: Incrementer;
  readonly error: Incrementer;
  readonly failureModeAllowed: Incrementer;
  readonly duration: Observer;
}

const CHECKS = 'svcproxy_extauth_checks_total';
const DURATION = 'svcproxy_extauth_duration_seconds';

export function extAuthMetrics(registry: Registry, workload: string): ExtAuthMetrics {
  const checks = fastCounter(registry, CHECKS, 'External authorization checks by workload and result (ok, denied, error, failure_mode_allowed)', ['workload', 'result']);
  const duration = fastHistogram(
    registry, DURATION, 'Time of one external authorization check (the call, after the body prefix was read)', ['workload'],
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  );
  return {
    ok: checks.labels(workload, 'ok'),
    denied: checks.labels(workload, 'denied'),
    error: checks.labels(workload, 'error'),
    failureModeAllowed: checks.labels(workload, 'failure_mode_allowed'),
    duration: duration.labels(workload),
  };
}
