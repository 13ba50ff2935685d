/**
 * The gRPC client of a rate-limit service: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`
 * over TLS (scheme https, system roots, SNI = the address) or cleartext (scheme http). One client per
 * target, kept across reloads in the data plane's `SharedResources`. Every call is bounded: the
 * injected clock cancels it after `timeoutMs` (and the same deadline travels to the server as
 * `grpc-timeout`). A call fails with a `RateLimitCallError`: unreachable service, deadline, a non-OK
 * gRPC status, or a malformed answer; the filter decides between fail-open and fail-closed.
 */
import { filterServiceChannelOptions } from '../proxy/grpc-options.js';
import * as grpc from '@grpc/grpc-js';
import type { Clock } from '../deps.js';
import { SERVICE_NAME, serviceDefinition, type RateLimitRequest, type RateLimitResponse } from './proto.js';

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

type UnaryMethod = (
  request: RateLimitRequest,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: (error: grpc.ServiceError | null, response?: RateLimitResponse) => void,
) => grpc.ClientUnaryCall;

let ClientCtor: grpc.ServiceClientConstructor | undefined;

const CHANNEL_OPTIONS = filterServiceChannelOptions(1024 * 1024);

export function grpcRateLimitClient(target: RateLimitTarget, clock: Clock): RateLimitClient {
  ClientCtor ??= grpc.makeClientConstructor(serviceDefinition(), SERVICE_NAME);
  const host = target.host.includes(':') ? `[${target.host}]` : target.host;
  const credentials = target.tls ? grpc.credentials.createSsl() : grpc.credentials.createInsecure();
  const client = new ClientCtor(`${host}:${target.port}`, credentials, CHANNEL_OPTIONS) as unknown as grpc.Client & { ShouldRateLimit: UnaryMethod };
  return {
    shouldRateLimit(request, timeoutMs) {
      return new Promise((resolve, reject) => {
        let settled = false;
        const deadline = new Date(clock.wallNow() + timeoutMs);
        const call = client.ShouldRateLimit(request, new grpc.Metadata(), { deadline }, (error, response) => {
          if (settled) return;
          settled = true;
          clock.clearTimeout(timer);
          if (error) {
            const reason = error.code === grpc.status.DEADLINE_EXCEEDED ? 'timeout' : error.code === grpc.status.UNAVAILABLE ? 'unavailable' : 'status';
            reject(new RateLimitCallError(reason, `rate limit service: ${error.details || error.message}`, error.code));
          } else if (!response) {
            reject(new RateLimitCallError('malformed', 'rate limit service: empty answer'));
          } else {
            resolve(response);
          }
        });
        const timer = clock.setTimeout(() => {
          if (settled) return;
          settled = true;
          call.cancel();
          reject(new RateLimitCallError('timeout', `rate limit service: no answer within ${timeoutMs} ms`, grpc.status.DEADLINE_EXCEEDED));
        }, timeoutMs);
      });
    },
    close() {
      client.close();
    },
  };
}
