/**
 * The HTTP transport of ext_authz (Envoy's "HTTP service" mode): the original method, the path
 * prefix + original path (with query), the original Host, `authorization`, and `content-length` of
 * the body sent; a CONNECT goes out as a CONNECT to its authority. One undici pool per authorization service, kept in SharedResources across
 * reloads. Bounded: an injected-clock timer aborts the call (headers and body) after the tag's
 * timeout, and answers above 1 MiB are refused. Transport failures resolve as error results; only
 * the caller decides what a status means (decision.ts). Nothing throws.
 * undici is loaded when the first such client is made (src/undici.ts).
 */
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { Readable } from 'node:stream';
import type { Pool } from 'undici';
import type { Clock } from '../deps.js';
import { loadUndici } from '../undici.js';

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
  /** The pool, made once undici is loaded. */
  private readonly pool: Promise<Pool>;
  /**
   * The TLS server name of every request: the service's address, never the Host header the check
   * carries (undici would take SNI from it, and reconnect whenever it changes).
   */
  private readonly servername: string;
  private readonly origin: URL;

  constructor(private readonly opts: HttpAuthClientOptions) {
    this.origin = new URL(opts.origin);
    this.servername = this.origin.hostname.replace(/^\[|\]$/g, '');
    this.pool = loadUndici().then(({ Pool, buildConnector }) => {
      const connector = buildConnector(opts.ca !== undefined ? { ca: opts.ca } : {});
      const pool = new Pool(opts.origin, {
        connections: 128,
        pipelining: 1,
        // An IP address is not a server name (RFC 6066): no SNI, and the certificate is checked for the IP.
        connect: (options, callback) => connector({ ...options, servername: isIP(options.servername ?? '') ? undefined : options.servername }, callback),
      });
      pool.on('connectionError', () => undefined);
      return pool;
    });
    // A failed import is each check's error result (fail-open or closed), never an unhandled rejection.
    this.pool.catch(() => undefined);
  }

  async check(request: HttpAuthRequest, timeoutMs: number, clock: Clock): Promise<HttpCallResult> {
    if (request.method === 'CONNECT') return this.connectCheck(request, timeoutMs, clock);
    const abort = new AbortController();
    let timedOut = false;
    const timer = clock.setTimeout(() => {
      timedOut = true;
      abort.abort(new Error('timeout'));
    }, timeoutMs);
    try {
      const res = await (await this.pool).request({
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

  /**
   * A CONNECT is checked as Envoy sends it: `CONNECT <authority>` on a connection of its own (undici
   * cannot send CONNECT), the answer's status, headers and a Content-Length body read, then the
   * connection closed. Same bounds as every other check.
   */
  private connectCheck(request: HttpAuthRequest, timeoutMs: number, clock: Clock): Promise<HttpCallResult> {
    return new Promise((resolve) => {
      let settled = false;
      const done = (result: HttpCallResult): void => {
        if (settled) return;
        settled = true;
        clock.clearTimeout(timer);
        resolve(result);
      };
      const tls = this.origin.protocol === 'https:';
      const options: https.RequestOptions = {
        host: this.servername,
        port: this.origin.port || (tls ? 443 : 80),
        method: 'CONNECT',
        path: request.path,
        headers: request.headers,
        agent: false,
        ...(tls ? { servername: isIP(this.servername) ? '' : this.servername, ...(this.opts.ca !== undefined ? { ca: this.opts.ca } : {}) } : {}),
      };
      const req = (tls ? https : http).request(options);
      const timer = clock.setTimeout(() => {
        done({ ok: false, reason: `timed out after ${timeoutMs} ms`, timeout: true });
        req.destroy();
      }, timeoutMs);
      const answer = (res: http.IncomingMessage, socket: Readable, head: Buffer): void => {
        const length = Number(res.headers['content-length']);
        const want = Number.isInteger(length) && length > 0 ? length : 0;
        if (want > MAX_RESPONSE_BYTES) {
          socket.destroy();
          return done({ ok: false, reason: `answer larger than ${MAX_RESPONSE_BYTES} bytes`, timeout: false });
        }
        const chunks: Buffer[] = head.length ? [head] : [];
        let size = head.length;
        const finish = (): void => {
          socket.destroy();
          done({ ok: true, status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).subarray(0, want) });
        };
        if (size >= want) return finish();
        socket.on('data', (chunk: Buffer) => {
          chunks.push(chunk);
          size += chunk.length;
          if (size >= want) finish();
        });
        socket.on('end', finish);
        socket.on('error', finish);
      };
      req.on('connect', answer);
      // Node hands every answer to a CONNECT to 'connect'; an ordinary response is read the same way.
      req.on('response', (res) => answer(res, res, Buffer.alloc(0)));
      req.on('error', (err: Error & { code?: string }) => done({ ok: false, reason: err.code ? `${err.code}: ${err.message}` : err.message, timeout: false }));
      req.end();
    });
  }

  close(): Promise<void> {
    return this.pool.then((pool) => pool.close(), () => undefined);
  }
}
