/**
 * The gRPC transport of ext_authz: `envoy.service.auth.v3.Authorization/Check` over one long-lived
 * HTTP/2 session per authorization service (the client is kept in the data plane's SharedResources,
 * so reloads do not reconnect), through the lean unary client in src/grpc/unary.ts. Bounded: each
 * call is cancelled by an injected-clock timer after the tag's timeout, answers above 1 MiB are
 * refused, calls are never retried (one round trip per request), and a service that cannot be
 * reached fails calls at once instead of queueing them.
 * Every failure — connect, timeout, non-OK RPC status, undecodable answer — resolves as an error
 * result for the failure mode; nothing throws.
 */
import type { Clock } from '../deps.js';
import { encodeCheckRequest } from './encode.js';
import type { CheckRequestObject } from './attributes.js';
import { GRPC_PREFIX, prefixInPlace, statusName, UnaryChannel } from '../grpc/unary.js';
import type { CheckResponseObject } from './proto.js';
import { CHECK_PATH, decodeCheckResponse } from './decode.js';

export type GrpcCallResult =
  | { readonly ok: true; readonly response: CheckResponseObject }
  | { readonly ok: false; readonly reason: string; readonly timeout: boolean };

export interface GrpcAuthClientOptions {
  readonly host: string;
  readonly port: number;
  readonly tls: boolean;
  /** Extra trusted CA certificates (PEM) for the authorization service, added to Node's roots. */
  readonly ca?: string | Buffer;
  readonly clock: Clock;
}

/** Answers larger than this are refused (a CheckResponse is headers and a denial page). */
export const MAX_RESPONSE_BYTES = 1 << 20;

export class GrpcAuthClient {
  private readonly channel: UnaryChannel;

  constructor(opts: GrpcAuthClientOptions) {
    this.channel = new UnaryChannel({
      host: opts.host,
      port: opts.port,
      tls: opts.tls,
      ...(opts.ca !== undefined ? { ca: opts.ca } : {}),
      maxResponseBytes: MAX_RESPONSE_BYTES,
      clock: opts.clock,
    });
  }

  async check(request: CheckRequestObject, timeoutMs: number): Promise<GrpcCallResult> {
    let frame: Buffer;
    try {
      frame = prefixInPlace(encodeCheckRequest(request, GRPC_PREFIX));
    } catch (err) {
      return { ok: false, reason: `request not encoded: ${(err as Error).message}`, timeout: false };
    }
    const result = await this.channel.callFramed(CHECK_PATH, frame, timeoutMs);
    if (!result.ok) {
      return { ok: false, reason: result.timeout ? result.message : `${statusName(result.code)}: ${result.message}`, timeout: result.timeout };
    }
    try {
      return { ok: true, response: decodeCheckResponse(result.message) };
    } catch (err) {
      return { ok: false, reason: `undecodable answer: ${(err as Error).message}`, timeout: false };
    }
  }

  close(): void {
    this.channel.close();
  }
}
