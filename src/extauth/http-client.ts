/**
 * The HTTP transport of ext_authz (Envoy's "HTTP service" mode): the original method, the path
 * prefix + original path (with query), the original Host, `authorization`, and `content-length` of
 * the body sent. One undici pool per authorization service, kept in SharedResources across
 * reloads. Bounded: an injected-clock timer aborts the call (headers and body) after the tag's
 * timeout, and answers above 1 MiB are refused. Transport failures resolve as error results; only
 * the caller decides what a status means (decision.ts). Nothing throws.
 */
import { isIP } from 'node:net';
import { Pool, buildConnector } from 'undici';
import type { Clock } from '../deps.js';

export type HttpCallResult =
  | { readonly ok: true; readonly status: number; readonly headers: Record<string, string | string[] | undefined>; readonly body: Buffer }
  | { readonly ok: false; readonly reason: string; readonly timeout: boolean };

export interface HttpAuthRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer | undefined;
}

export interface HttpAuthClientOptions {
  /** `http://host:port` or `https://host:port` (the host is the TLS SNI when it is a name). */
  readonly origin: string;
  /** Extra trusted CA certificates (PEM); Node's roots otherwise. */
  readonly ca?: string | Buffer;
}

export const MAX_RESPONSE_BYTES = 1 << 20;

export class HttpAuthClient {
  private readonly pool: Pool;
  /**
   * The TLS server name of every request: the service's address, never the Host header the check
   * carries (undici would take SNI from it, and reconnect whenever it changes).
   */
  private readonly servername: string;

  constructor(opts: HttpAuthClientOptions) {
    this.servername = new URL(opts.origin).hostname.replace(/^\[|\]$/g, '');
    const connector = buildConnector(opts.ca !== undefined ? { ca: opts.ca } : {});
    this.pool = new Pool(opts.origin, {
      connections: 128,
      pipelining: 1,
      // An IP address is not a server name (RFC 6066): no SNI, and the certificate is checked for the IP.
      connect: (options, callback) => connector({ ...options, servername: isIP(options.servername ?? '') ? undefined : options.servername }, callback),
    });
    this.pool.on('connectionError', () => undefined);
  }

  async check(request: HttpAuthRequest, timeoutMs: number, clock: Clock): Promise<HttpCallResult> {
    const abort = new AbortController();
    let timedOut = false;
    const timer = clock.setTimeout(() => {
      timedOut = true;
      abort.abort(new Error('timeout'));
    }, timeoutMs);
    try {
      const res = await this.pool.request({
        method: request.method as 'GET',
        path: request.path,
        headers: request.headers,
        body: request.body ?? null,
        signal: abort.signal,
        servername: this.servername,
      } as Parameters<Pool['request']>[0]);
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        size += (chunk as Buffer).length;
        if (size > MAX_RESPONSE_BYTES) {
          res.body.destroy();
          return { ok: false, reason: `answer larger than ${MAX_RESPONSE_BYTES} bytes`, timeout: false };
        }
        chunks.push(chunk as Buffer);
      }
      return { ok: true, status: res.statusCode, headers: res.headers as Record<string, string | string[] | undefined>, body: Buffer.concat(chunks) };
    } catch (err) {
      if (timedOut) return { ok: false, reason: `timed out after ${timeoutMs} ms`, timeout: true };
      const e = err as Error & { code?: string };
      return { ok: false, reason: e.code ? `${e.code}: ${e.message}` : e.message, timeout: false };
    } finally {
      clock.clearTimeout(timer);
    }
  }

  close(): Promise<void> {
    return this.pool.close();
  }
}
