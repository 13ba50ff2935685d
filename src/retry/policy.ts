/**
 * `spec.requestRetryPolicy` compiled into a classifier with Envoy's `retry_on` semantics. Each attempt
 * ends in an outcome (a response's status and headers, or a failure of a known kind); `shouldRetry`
 * says whether the policy retries it. gRPC conditions read `grpc-status` from the response headers,
 * as Envoy does (a trailers-only answer carries it there; a status sent in trailers comes after the
 * answer started and can no longer be retried). Unknown condition names were rejected by validation.
 */
import type { RetryPolicyModel } from '../config/model.js';

/** Why an attempt failed before the upstream answered. */
export type FailureKind =
  /** The connection could not be made (refused, unreachable, connect timeout). */
  | 'connect-failure'
  /** The upstream reset or closed the connection/stream after it was made. */
  | 'reset'
  /** Reset before any byte of the request was sent. */
  | 'reset-before-request'
  /** HTTP/2 REFUSED_STREAM: the upstream did not process the request. */
  | 'refused-stream';

export type AttemptOutcome =
  | { readonly kind: 'response'; readonly status: number; readonly headers: Readonly<Record<string, string | string[] | undefined>> }
  | { readonly kind: 'failure'; readonly failure: FailureKind };

const GRPC_CODES: Readonly<Record<string, number>> = {
  cancelled: 1,
  'deadline-exceeded': 4,
  'resource-exhausted': 8,
  internal: 13,
  unavailable: 14,
};

export interface RetryPolicy {
  /** Retries after the first attempt (0: never retry). */
  readonly retries: number;
  shouldRetry(outcome: AttemptOutcome): boolean;
}

const NEVER: RetryPolicy = { retries: 0, shouldRetry: () => false };

function headerValue(headers: Readonly<Record<string, string | string[] | undefined>>, name: string): string | undefined {
  const v = headers[name];
  return Array.isArray(v) ? v[0] : v;
}

/**
 * Compiled policies by model: every workload without `requestRetryPolicy` shares the default model
 * object, so ten thousand of them share one compiled policy instead of holding a copy each.
 */
const compiled = new WeakMap<RetryPolicyModel, RetryPolicy>();

export function compileRetryPolicy(model: RetryPolicyModel): RetryPolicy {
  let policy = compiled.get(model);
  if (!policy) compiled.set(model, (policy = compileModel(model)));
  return policy;
}

function compileModel(model: RetryPolicyModel): RetryPolicy {
  if (model.attempts <= 0) return NEVER;
  const on = new Set(model.retryOn.map((c) => c.trim().toLowerCase()));
  const statusCodes = new Set<number>();
  for (const c of on) if (/^\d{3}$/.test(c)) statusCodes.add(Number(c));
  // Numeric entries are the retriable status codes; naming them implies `retriable-status-codes`.
  const retriableStatus = on.has('retriable-status-codes') || statusCodes.size > 0;
  const grpcCodes = new Set<number>();
  for (const [name, code] of Object.entries(GRPC_CODES)) if (on.has(name)) grpcCodes.add(code);
  const any5xx = on.has('5xx');
  const gateway = on.has('gateway-error');
  const reset = on.has('reset');
  const resetBefore = on.has('reset-before-request');
  const connect = on.has('connect-failure');
  const refused = on.has('refused-stream');
  const conflict = on.has('retriable-4xx');
  const rateLimited = on.has('envoy-ratelimited');

  function failure(kind: FailureKind): boolean {
    // 5xx, gateway-error and reset cover every failure to get an answer (Envoy turns them into 503s).
    if (any5xx || gateway || reset) return true;
    switch (kind) {
      case 'connect-failure':
        return connect || resetBefore;
      case 'reset-before-request':
        return resetBefore;
      case 'refused-stream':
        return refused || resetBefore;
      case 'reset':
        return false;
    }
  }

  function response(status: number, headers: Readonly<Record<string, string | string[] | undefined>>): boolean {
    if (any5xx && status >= 500) return true;
    if (gateway && (status === 502 || status === 503 || status === 504)) return true;
    if (conflict && status === 409) return true;
    if (retriableStatus && statusCodes.has(status)) return true;
    if (rateLimited && headerValue(headers, 'x-envoy-ratelimited') !== undefined) return true;
    if (grpcCodes.size > 0) {
      const grpc = headerValue(headers, 'grpc-status');
      if (grpc !== undefined && grpcCodes.has(Number(grpc))) return true;
    }
    return false;
  }

  return {
    retries: model.attempts,
    shouldRetry: (outcome) => (outcome.kind === 'failure' ? failure(outcome.failure) : response(outcome.status, outcome.headers)),
  };
}
