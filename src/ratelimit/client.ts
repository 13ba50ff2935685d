/**
 * The gRPC client of a rate-limit service: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
 * over TLS (scheme https: Node's roots plus NODE_EXTRA_CA_CERTS, SNI = the address) or cleartext (scheme
 * http), through the lean unary client in src/grpc/unary.ts. One client per target, kept across
 * reloads in the data plane's `SharedResources`. Every call is bounded: the
 * injected clock cancels it after `timeoutMs` (and the same deadline travels to the server as
 * `grpc-timeout`). A call fails with a `RateLimitCallError`: unreachable service, deadline, a non-OK
 * gRPC status, or a malformed answer; the filter decides between fail-open and fail-closed.
 */
import type { Clock } from '../deps.js';
import { decodeRateLimitResponse, encodeRateLimitRequest } from './wire.js';
import { GRPC_PREFIX, prefixInPlace, Status, UnaryChannel } from '../grpc/unary.js';
import { SHOULD_RATE_LIMIT_PATH, type RateLimitRequest, type RateLimitResponse } from './proto.js';

export interface RateLimitTarget {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
}

export interface RateLimitClient {
  shouldRateLimit(request: RateLimitRequest, timeoutMs: number): Promise<RateLimitResponse>;
  close(): void;
}

export class RateLimitCallError extends Error {
  constructor(readonly reason: 'timeout' | 'unavailable' | 'status' | 'malformed', message: string, readonly grpcCode?: number) {
    super(message);
    this.name = 'RateLimitCallError';
  }
}

export function targetKey(target: RateLimitTarget): string {
  return `ratelimit:${target.tls ? 'https' : 'http'}://${target.host.includes(':') ? `[${target.host}]` : target.host}:${target.port}`;
}

export function grpcRateLimitClient(target: RateLimitTarget, clock: Clock): RateLimitClient {
  const channel = new UnaryChannel({ host: target.host, port: target.port, tls: target.tls, maxResponseBytes: 1024 * 1024, clock });
  return {
    async shouldRateLimit(request, timeoutMs) {
      const result = await channel.callFramed(SHOULD_RATE_LIMIT_PATH, prefixInPlace(encodeRateLimitRequest(request, GRPC_PREFIX)), timeoutMs);
      if (!result.ok) {
        if (result.timeout) throw new RateLimitCallError('timeout', `rate limit service: no answer within ${timeoutMs} ms`, Status.DEADLINE_EXCEEDED);
        const reason = result.code === Status.DEADLINE_EXCEEDED ? 'timeout' : result.code === Status.UNAVAILABLE ? 'unavailable' : 'status';
        throw new RateLimitCallError(reason, `rate limit service: ${result.message}`, result.code);
      }
      try {
        return decodeRateLimitResponse(result.message);
      } catch (err) {
        throw new RateLimitCallError('malformed', `rate limit service: undecodable answer: ${(err as Error).message}`);
      }
    },
    close() {
      channel.close();
    },
  };
}
