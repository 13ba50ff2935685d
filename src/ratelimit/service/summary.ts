/**
 * The start-up summary of `svcproxy ratelimit` (said by src/summary.ts): the gRPC listener, admin,
 * status and metrics, the rules' paths, domains and rule count, and the counter store (memory, or
 * the Redis URL with its password hidden).
 */
import { formatHostPort } from '../../address.js';
import { count, probeRows, type StartSummary } from '../../summary.js';
import type { RateLimitApp } from './app.js';
import type { RuleNode } from './rules.js';
import { redactRedisUrl } from './store-redis.js';

/** Descriptors with a limit under `node` (a rule of the rules file). */
function rulesUnder(node: RuleNode): number {
  let n = node.limit ? 1 : 0;
  for (const child of node.exact.values()) n += rulesUnder(child);
  for (const p of node.prefixes) n += rulesUnder(p.node);
  for (const child of node.any.values()) n += rulesUnder(child);
  return n;
}

export function rateLimitSummary(app: RateLimitApp, paths: readonly string[], redis: string | undefined, tls: boolean): StartSummary {
  const domains = [...app.rules.domains.values()];
  const rules = domains.reduce((n, d) => n + rulesUnder(d.root), 0);
  const store = redis !== undefined ? redactRedisUrl(redis) : 'memory';
  const listen = formatHostPort(app.address);
  const admin = app.admin ? formatHostPort(app.admin.address) : undefined;
  const status = app.statusListener ? formatHostPort(app.statusListener.address) : undefined;
  const metrics = app.metricsListener ? formatHostPort(app.metricsListener.address) : undefined;
  const rows: [string, string][] = [
    ['listening', `grpc${tls ? 's' : ''}://${listen}  (Envoy RLS v3)`],
    ...(admin !== undefined ? [['admin', `http://${admin}  (/healthz /ready /metrics /config)`] as [string, string]] : []),
    ...probeRows(status, metrics),
    ['rules', `${paths.join(', ')}  (${count(domains.length, 'domain')}: ${domains.map((d) => d.name).join(', ') || '-'}; ${count(rules, 'rule')})`],
    ['store', store === 'memory' ? 'memory  (counters in this process)' : store],
  ];
  return {
    role: 'ratelimit',
    rows,
    fields: {
      role: 'ratelimit',
      listen,
      tls,
      ...(admin !== undefined ? { admin } : {}),
      ...(status !== undefined ? { status } : {}),
      ...(metrics !== undefined ? { metrics } : {}),
      rules: { paths, files: app.rules.files.length, domains: domains.map((d) => d.name), rules },
      store,
    },
  };
}
