/**
 * Response headers of a rate-limit answer, as Envoy writes them with
 * `enable_x_ratelimit_headers: DRAFT_VERSION_03` (draft-polli-ratelimit-headers-03): from the
 * descriptor status with the least `limit_remaining` among those that carry a limit,
 * `x-ratelimit-limit: N, N;w=WINDOW[;name="NAME"]...` (its limit, then one quota policy per limited
 * status), `x-ratelimit-remaining`, and `x-ratelimit-reset` (whole seconds of `duration_until_reset`).
 * No header when no status carries a limit. Pure functions.
 */
import type { DescriptorStatus, HeaderValue, Unit } from './proto.js';
import { headerText } from './proto.js';

/** Window seconds per unit, as Envoy converts them (a month is 30 days, a year 365). */
export function unitSeconds(unit: Unit | string): number {
  switch (unit) {
    case 'SECOND': return 1;
    case 'MINUTE': return 60;
    case 'HOUR': return 3600;
    case 'DAY': return 86400;
    case 'MONTH': return 86400 * 30;
    case 'YEAR': return 86400 * 365;
    default: return 0;
  }
}

export const X_RATELIMIT_LIMIT = 'x-ratelimit-limit';
export const X_RATELIMIT_REMAINING = 'x-ratelimit-remaining';
export const X_RATELIMIT_RESET = 'x-ratelimit-reset';

export function xRateLimitHeaders(statuses: readonly DescriptorStatus[] | undefined): Record<string, string> | undefined {
  if (!statuses) return undefined;
  let min: DescriptorStatus | undefined;
  let policy = '';
  for (const status of statuses) {
    const limit = status.current_limit;
    if (!limit) continue;
    if (!min || (status.limit_remaining ?? 0) < (min.limit_remaining ?? 0)) min = status;
    const window = unitSeconds(limit.unit);
    if (window) {
      policy += `, ${limit.requests_per_unit ?? 0};w=${window}`;
      if (limit.name) policy += `;name="${limit.name}"`;
    }
  }
  if (!min) return undefined;
  const reset = Number(min.duration_until_reset?.seconds ?? 0);
  return {
    [X_RATELIMIT_LIMIT]: `${min.current_limit!.requests_per_unit ?? 0}${policy}`,
    [X_RATELIMIT_REMAINING]: String(min.limit_remaining ?? 0),
    [X_RATELIMIT_RESET]: String(Number.isFinite(reset) ? Math.max(0, Math.trunc(reset)) : 0),
  };
}

/** Header names that a rate-limit service may not set: hop-by-hop and pseudo headers. */
const FORBIDDEN = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'te', 'trailer', 'proxy-connection', 'content-length', 'host']);

/** `response_headers_to_add` / `request_headers_to_add` as lower-cased pairs, unsafe names dropped. */
export function headerPairs(list: readonly HeaderValue[] | undefined): [string, string][] {
  const out: [string, string][] = [];
  if (!list) return out;
  for (const h of list) {
    const name = (h.key ?? '').toLowerCase();
    if (!name || name.startsWith(':') || FORBIDDEN.has(name)) continue;
    const value = headerText(h);
    // A header value may not carry CR, LF or NUL (Node would throw when writing it).
    if (/[\r\n\0]/.test(value)) continue;
    out.push([name, value]);
  }
  return out;
}
