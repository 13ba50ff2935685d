/**
 * `svcproxy explain -o text`: the explanation as a block a person reads top to bottom, in the order
 * the data plane decides (host, route, firewall, location, replicas, filters, timeout and retries,
 * debug answers, tracing), the verdict first. `-o json` prints the Explanation object itself.
 */
import type { CandidateExplanation, Explanation } from './explain.js';
import type { FilterExplanation } from './filters.js';

export function formatText(e: Explanation): string {
  const out: string[] = [];
  const line = (label: string, text: string): void => void out.push(`${`${label}:`.padEnd(11)}${text}`);
  const v = e.verdict;
  line('verdict', v.routes ? `routes ${v.reason}` : `${v.status} ${v.code}: ${v.reason}`);
  line('request', `${e.request.method} ${e.request.url} (Host ${e.request.host}, port ${e.request.listenerPort}, from ${e.request.from})`);
  if (e.request.path !== null) line('path', `${e.request.path}${e.request.query}`);
  if (e.host) line('host', `${e.host.kind} name, ${e.host.listener} listener${e.host.note ? ` (${e.host.note})` : ''}`);
  const r = e.route;
  if (r) {
    line('workload', `${r.workload} (gvc ${r.gvc}), port ${r.port ?? 'none'} ${r.protocol}, upstream path ${r.upstreamPath}`);
    if (r.rule) {
      const match = r.rule.regex !== undefined ? `regex ${r.rule.regex}` : `prefix ${r.rule.prefix ?? '/'}`;
      const parts = [`domain ${r.rule.domain} port ${r.rule.domainPort}`, match, `workloadLink ${r.rule.workloadLink}`];
      if (r.rule.replacePrefix !== undefined) parts.push(`replacePrefix ${r.rule.replacePrefix}`);
      if (r.rule.port !== undefined) parts.push(`port ${r.rule.port}`);
      if (r.rule.replica !== undefined) parts.push(`replica ${r.rule.replica}`);
      if (r.rule.setHeaders.length > 0) parts.push(`sets ${r.rule.setHeaders.map(([n, val]) => `${n}: ${val}`).join(', ')}`);
      line('rule', parts.join('; '));
    }
  }
  const f = e.firewall;
  if (f) {
    line('firewall', `${f.kind}: ${f.allowed ? 'allows' : 'blocks'} ${f.clientAddress}${f.reason ? ` (${f.reason})` : ''}`);
    out.push(`           client address from ${f.header}; ${f.rules}`);
  }
  if (e.suspended) line('suspended', 'yes');
  const l = e.location;
  if (l) {
    const how = l.reason === 'fixed' ? 'fixed by the host name' : l.reason === 'only' ? 'the GVC\'s only location' : l.reason === 'geo' ? 'geo routing' : 'none';
    line('location', `${l.chosen ?? 'none'} (${how})`);
    if (l.candidates.length > 0) {
      out.push('           candidate          available  tier  latency        offset  tolerance  replicas');
      for (const c of l.candidates) out.push(`           ${candidateRow(c, c.name === l.chosen)}`);
      out.push(`           latencies ${l.latencies}`);
    }
  }
  if (e.replica) {
    const list = e.replicas.map((x) => `${x.name}${x.index === e.replica!.fixed ? ' (the one named)' : ''} [${x.source}${x.address ? ` ${x.address}` : ''}${x.sidecar ? `, sidecar ${x.sidecar}` : ''}, ${x.hop}${x.ready === false ? ', forced not ready' : ''}]`);
    line('replicas', list.length > 0 ? list.join(', ') : 'none listed');
    out.push(`           readiness ${e.replica.readiness}${e.replica.fixed !== null ? `; only replica ${e.replica.fixed}` : ''}`);
  }
  const fl = e.filters;
  if (fl) {
    const where = fl.runsAt === 'router' ? 'run by this router' : fl.runsAt === 'none' ? 'none: the port is kept out of the sidecar' : 'run by the replica\'s sidecar';
    line('filters', `ingress: ${fl.ingress.length > 0 ? fl.ingress.join(', ') : 'none'}; sidecar (${where})${fl.sidecar.length > 0 ? ', in order:' : ': none'}`);
    fl.sidecar.forEach((x, i) => out.push(`           ${i + 1}. ${filterLine(x)}`));
  }
  if (e.timeoutMs !== null) line('timeout', `${e.timeoutMs} ms (${e.timeoutSource ?? 'the default'})`);
  const rt = e.retry;
  if (rt) line('retries', rt.attempts > 0 ? `${rt.attempts} on ${rt.retryOn.join(', ')}; backoff below ${rt.backoffCeilingsMs.join(', ')} ms; ${rt.note}` : rt.note);
  if (e.debug) line('debug', `${e.debug.header}: ${e.debug.applies ? 'applies' : 'not given'}: ${e.debug.why}`);
  if (e.tracing) line('tracing', e.tracing.sampled);
  for (const n of e.notes) line('note', n);
  return `${out.join('\n')}\n`;
}

function candidateRow(c: CandidateExplanation, chosen: boolean): string {
  const latency = c.latencyMs === null ? 'unknown' : `${c.latencyMs} ms (${c.latencySource})`;
  return [
    `${chosen ? '* ' : '  '}${c.name}`.padEnd(19),
    (c.available ? 'yes' : c.suspended ? 'suspended' : 'no replica').padEnd(11),
    String(c.tier ?? '-').padEnd(6),
    latency.padEnd(15),
    `${c.offsetMs} ms`.padEnd(8),
    (c.toleranceMs === null ? '-' : `${c.toleranceMs} ms`).padEnd(11),
    String(c.replicas),
  ].join('');
}

function filterLine(x: FilterExplanation): string {
  if (x.name === 'ext_authz' && 'protocol' in x) {
    return `ext_authz ${x.target} (${x.protocol}, ${x.timeoutMs} ms, ${x.failureAllow ? 'fail-open' : 'fail-closed'}): ${x.action === 'checked' ? 'checked: the service\'s answer decides' : `skipped: ${x.why}`}`;
  }
  if (x.name === 'ratelimit' && 'domain' in x) {
    const d = x.descriptors ? `[${x.descriptors.map((e) => `${e.key}=${e.value}`).join(', ')}]` : '';
    return `ratelimit ${x.target} domain ${x.domain} (${x.timeoutMs} ms, ${x.failureAllow ? 'fail-open' : 'fail-closed'}): ${x.action === 'checked' ? `checked with descriptor ${d}` : `skipped: ${x.why}`}`;
  }
  return `${x.name}: runs`;
}
