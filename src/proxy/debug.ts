/**
 * What `x-svc-debug: true` (or `trace`) adds to an answer of a workload with debug on, on its canonical
 * or alias endpoint (DESIGN §11): where the time went (`server-timing`, W3C Server Timing, which
 * browsers' developer tools draw: `extauth`, `ratelimit`, `queue`, one `upstream` per attempt,
 * `total`), the route taken (`x-svc-route`), the attempts and why each retry happened
 * (`x-svc-attempts`), Envoy's `x-envoy-upstream-service-time`, and with `trace` the trace id.
 *
 * A request without the header carries no `DebugInfo` (`Exchange.debugInfo` stays undefined) and pays
 * one property check at each mark below; the marks are taken only for requests that asked.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { randomBytes } from 'node:crypto';

/** Server-Timing metric names of the filters (anything else: its own name). */
const TIMING_NAMES: Readonly<Record<string, string>> = { ext_authz: 'extauth', ratelimit: 'ratelimit', external_firewall: 'firewall' };

export interface DebugAttempt {
  /** The replica's name and location. */
  readonly replica: string;
  readonly location: string;
  readonly startedAt: number;
  endedAt: number;
  /** The upstream's status, or why the attempt failed (`connect-failure`, `reset`, `timeout`...). */
  outcome: string;
  /** Dropped for a retry. */
  retried: boolean;
}

export class DebugInfo {
  /** Time spent in each filter that ran, in order (ms). */
  readonly filters: [name: string, ms: number][] = [];
  /** Time waiting for a replica (starting, woken from zero, at its concurrency cap, first checks). */
  queueMs = 0;
  private queuedAt = -1;
  readonly attempts: DebugAttempt[] = [];
  /** The trace id answered with `trace` (set by the tracing layer, or made here when nothing traces). */
  traceId: string | undefined;

  constructor(
    /** `x-svc-debug: trace`: the request is sampled and the trace id answered. */
    readonly trace: boolean,
    /** `x-svc-route`: the host kind and what it named. */
    readonly route: string,
  ) {}

  filterRan(name: string, ms: number): void {
    this.filters.push([TIMING_NAMES[name] ?? name, ms]);
  }

  queued(now: number): void {
    if (this.queuedAt < 0) this.queuedAt = now;
  }

  dequeued(now: number): void {
    if (this.queuedAt < 0) return;
    this.queueMs += now - this.queuedAt;
    this.queuedAt = -1;
  }

  attemptStarted(replica: string, location: string, now: number): void {
    this.attempts.push({ replica, location, startedAt: now, endedAt: -1, outcome: '', retried: false });
  }

  attemptEnded(outcome: string, retried: boolean, now: number): void {
    const last = this.attempts[this.attempts.length - 1];
    if (!last || last.endedAt >= 0) return;
    last.endedAt = now;
    last.outcome = outcome;
    last.retried = retried;
  }

  /**
   * The headers, as the answer leaves (`now`; `startedAt`: when the request arrived). `upstreamMs`:
   * the last attempt's time to its response headers, when an upstream answered.
   */
  headers(names: { route: string; attempts: string; traceId: string }, startedAt: number, now: number, upstreamMs: number | undefined): OutgoingHttpHeaders {
    this.dequeued(now);
    const timing: string[] = [];
    const ms = (v: number): string => (Math.round(v * 100) / 100).toString();
    for (const [name, d] of this.filters) timing.push(`${name};dur=${ms(d)}`);
    if (this.queueMs > 0) timing.push(`queue;dur=${ms(this.queueMs)}`);
    this.attempts.forEach((a, i) => {
      const end = a.endedAt >= 0 ? a.endedAt : now;
      timing.push(`upstream;dur=${ms(end - a.startedAt)};desc="attempt ${i + 1} ${a.replica} ${a.outcome || 'answering'}"`);
    });
    timing.push(`total;dur=${ms(now - startedAt)}`);
    const out: OutgoingHttpHeaders = {
      'server-timing': timing.join(', '),
      [names.route]: this.route,
      [names.attempts]: attemptsValue(this.attempts),
    };
    if (upstreamMs !== undefined) out['x-envoy-upstream-service-time'] = String(Math.max(0, Math.round(upstreamMs)));
    if (this.trace && this.traceId !== undefined) out[names.traceId] = this.traceId;
    return out;
  }
}

/**
 * `x-svc-attempts`: the count, then each attempt: `2; 1=api-0@aws-us-east-2 503 retried, 2=api-1@aws-us-east-2 200`.
 * An attempt's outcome is the status it answered or why it failed; `retried` says a retry followed it.
 */
export function attemptsValue(attempts: readonly DebugAttempt[]): string {
  if (attempts.length === 0) return '0';
  const each = attempts.map((a, i) => `${i + 1}=${a.replica}@${a.location} ${a.outcome || 'answering'}${a.retried ? ' retried' : ''}`);
  return `${attempts.length}; ${each.join(', ')}`;
}

/** A W3C trace id for a request that asked for `trace` when its workload does not trace: the caller's, else a new one. */
export function traceIdFor(traceparent: string | string[] | undefined): { id: string; fresh: boolean } {
  const m = typeof traceparent === 'string' ? /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/.exec(traceparent.trim()) : null;
  if (m && !/^0+$/.test(m[1]!)) return { id: m[1]!, fresh: false };
  return { id: randomBytes(16).toString('hex'), fresh: true };
}

/** The `traceparent` that carries a fresh trace id upstream (sampled: the request asked to be traced). */
export function freshTraceparent(traceId: string): string {
  return `00-${traceId}-${randomBytes(8).toString('hex')}-01`;
}
