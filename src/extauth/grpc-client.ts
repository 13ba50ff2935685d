/**
 * The gRPC transport of ext_authz: `envoy.service.auth.v3.Authorization/Check` over one long-lived
 * channel per authorization service (kept in the data plane's SharedResources, so reloads do not
 * reconnect). Bounded: each call is cancelled by an injected-clock timer after the tag's timeout,
 * answers above 1 MiB are refused, calls are never retried (one round trip per request), and a
 * channel that cannot connect fails calls at once instead of queueing them (no wait-for-ready).
 * Every failure — connect, timeout, non-OK RPC status, undecodable answer — resolves as an error
 * result for the failure mode; nothing throws.
 */
import { filterServiceChannelOptions } from '../proxy/grpc-options.js';
import * as grpc from '@grpc/grpc-js';
import type { Clock } from '../deps.js';
import { authWire, type CheckResponseObject } from './proto.js';

export type GrpcCallResult =
  | { readonly ok: true; readonly response: CheckResponseObject }
  | { readonly ok: false; readonly reason: string; readonly timeout: boolean };

export interface GrpcAuthClientOptions {
  /** `host:port`. */
  readonly target: string;
  readonly tls: boolean;
  /** Extra trusted CA certificates (PEM) for the authorization service; Node's roots otherwise. */
  readonly ca?: string | Buffer;
}

/** Answers larger than this are refused (a CheckResponse is headers and a denial page). */
export const MAX_RESPONSE_BYTES = 1 << 20;

export class GrpcAuthClient {
  private readonly client: grpc.Client;
  private readonly method = authWire().check;

  constructor(opts: GrpcAuthClientOptions) {
    const credentials = opts.tls
      ? grpc.credentials.createSsl(opts.ca === undefined ? null : Buffer.from(opts.ca))
      : grpc.credentials.createInsecure();
    // One check, one round trip: no transparent or configured retries.
    this.client = new grpc.Client(opts.target, credentials, filterServiceChannelOptions(MAX_RESPONSE_BYTES));
  }

  check(request: object, timeoutMs: number, clock: Clock): Promise<GrpcCallResult> {
    return new Promise((resolve) => {
      let settled = false;
      let call: grpc.ClientUnaryCall | undefined;
      const finish = (result: GrpcCallResult): void => {
        if (settled) return;
        settled = true;
        clock.clearTimeout(timer);
        resolve(result);
      };
      const timer = clock.setTimeout(() => {
        finish({ ok: false, reason: `timed out after ${timeoutMs} ms`, timeout: true });
        call?.cancel();
      }, timeoutMs);
      try {
        call = this.client.makeUnaryRequest<object, CheckResponseObject>(
          this.method.path,
          this.method.requestSerialize as (value: object) => Buffer,
          this.method.responseDeserialize as (value: Buffer) => CheckResponseObject,
          request,
          new grpc.Metadata(),
          {},
          (err, response) => {
            if (err) finish({ ok: false, reason: `${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`, timeout: false });
            else if (!response) finish({ ok: false, reason: 'empty response', timeout: false });
            else finish({ ok: true, response });
          },
        );
      } catch (err) {
        finish({ ok: false, reason: `request not sent: ${(err as Error).message}`, timeout: false });
      }
    });
  }

  close(): void {
    this.client.close();
  }
}
