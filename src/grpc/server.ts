/**
 * A lean unary gRPC server on `node:http2`, for the rate-limit service: each method takes the
 * request message's bytes and answers the response's bytes, or fails with a gRPC status. It replaces
 * the @grpc/grpc-js server on this path because grpc-js spends several times more per call than the
 * check itself (call objects, metadata, a deadline timer and stream wrappers per call).
 *
 * The wire as the gRPC spec (PROTOCOL-HTTP2.md) has it, and as grpc-js answers:
 * - POST only (else HTTP 405), `content-type: application/grpc[+proto|;…]` (else HTTP 415);
 * - an unknown path is trailers-only UNIMPLEMENTED;
 * - exactly one length-prefixed message, at most `maxMessageBytes` (else RESOURCE_EXHAUSTED);
 *   a compressed one (flag 1) is INTERNAL, as we offer no `grpc-accept-encoding`;
 * - OK answers carry the message in DATA and `grpc-status: 0` in trailers; failures are trailers-only
 *   with `grpc-status` and a percent-encoded `grpc-message`;
 * - a call the client cancelled (RST_STREAM) or whose connection went is not answered.
 * The client's `grpc-timeout` is not enforced here: methods bound their own work (the rate-limit
 * store's round trip is), and the client gives up at its deadline anyway.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { grpcMessage } from '../proxy/errors.js';
import { grpcFrame, MessageBody, Status } from './unary.js';

/** A gRPC failure a method raises on purpose (its code is the answer's `grpc-status`). */
export class RpcError extends Error {
  constructor(readonly code: number, message: string) {
    super(message);
    this.name = 'RpcError';
  }
}

export type UnaryMethod = (request: Buffer) => Promise<Buffer>;

export interface UnaryServerOptions {
  readonly host: string;
  readonly port: number;
  /** `/package.Service/Method` → handler. */
  readonly methods: ReadonlyMap<string, UnaryMethod>;
  readonly maxMessageBytes: number;
  readonly tls?: { readonly cert: Buffer; readonly key: Buffer };
  /** A method that threw something other than RpcError (answered INTERNAL). */
  readonly onError?: (path: string, err: Error) => void;
}

export interface UnaryServer {
  readonly address: { host: string; port: number };
  /** Stop accepting; calls in flight finish (at most `graceMs`), then every connection closes. */
  close(graceMs?: number): Promise<void>;
}

const OK_HEADERS = { ':status': 200, 'content-type': 'application/grpc' };
const OK_TRAILERS = { 'grpc-status': '0' };

function failure(stream: http2.ServerHttp2Stream, code: number, message: string): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': String(code), 'grpc-message': grpcMessage(message) }, { endStream: true });
}

function answer(stream: http2.ServerHttp2Stream, message: Buffer): void {
  if (stream.destroyed || stream.headersSent) return;
  stream.respond(OK_HEADERS, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(OK_TRAILERS));
  stream.end(grpcFrame(message));
}

function serve(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, opts: UnaryServerOptions): void {
  stream.on('error', () => undefined);
  if (headers[':method'] !== 'POST') {
    stream.respond({ ':status': 405, allow: 'POST' }, { endStream: true });
    return;
  }
  const type = headers['content-type'] ?? '';
  if (!/^application\/grpc(?:$|[+;])/.test(type)) {
    stream.respond({ ':status': 415, 'content-type': 'text/plain' }, { endStream: true });
    return;
  }
  const path = headers[':path'] ?? '';
  const method = opts.methods.get(path);
  if (!method) {
    failure(stream, Status.UNIMPLEMENTED, `unknown method ${path}`);
    return;
  }
  const body = new MessageBody(opts.maxMessageBytes);
  let refused = false;
  stream.on('data', (chunk: Buffer) => {
    if (refused) return;
    if (!body.add(chunk)) {
      refused = true;
      failure(stream, Status.RESOURCE_EXHAUSTED, `request message larger than ${opts.maxMessageBytes} bytes`);
    }
  });
  stream.on('end', () => {
    if (refused) return;
    const message = body.message('request', 'request without a message');
    if (typeof message === 'string') return failure(stream, Status.INTERNAL, message);
    method(message).then(
      (reply) => answer(stream, reply),
      (err: Error) => {
        if (err instanceof RpcError) return failure(stream, err.code, err.message);
        opts.onError?.(path, err);
        failure(stream, Status.INTERNAL, err.message);
      },
    );
  });
}

/** Listen on host:port (0 picks one); cleartext h2c, or TLS (ALPN h2) with a certificate. */
export async function startUnaryServer(opts: UnaryServerOptions): Promise<UnaryServer> {
  const settings = { maxConcurrentStreams: 1000, initialWindowSize: 1 << 20 };
  const server = opts.tls
    ? http2.createSecureServer({ cert: opts.tls.cert, key: opts.tls.key, settings, allowHTTP1: false })
    : http2.createServer({ settings });
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    session.on('error', () => undefined);
  });
  server.on('stream', (stream, headers) => serve(stream, headers, opts));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    address: { host: opts.host, port },
    close: (graceMs = 5000) =>
      new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          for (const s of sessions) s.destroy();
        }, graceMs);
        timer.unref();
        server.close(() => {
          clearTimeout(timer);
          resolve();
        });
        // GOAWAY now; each session ends once its streams are done.
        for (const s of sessions) s.close();
      }),
  };
}
