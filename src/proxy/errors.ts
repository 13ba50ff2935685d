/**
 * The answers the proxy makes itself (DESIGN §6) on the wire; their table (a stable code maps to an
 * HTTP status, a message and a gRPC status) is filter/reply.ts's. `sendLocalReply` writes one: a JSON body in the platform's error shape
 * `{status, message, code, details, id}` for HTTP clients, a trailers-only answer with `grpc-status`
 * for gRPC clients. It never throws: a reply to a client that has gone away is dropped.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse, OutgoingHttpHeaders } from 'node:http2';
import { grpcMessage } from '../grpc/message.js';
import { ERRORS, errorBody, type LocalReply } from '../filter/index.js';

export type DownstreamRequest = IncomingMessage | Http2ServerRequest;
export type DownstreamResponse = ServerResponse | Http2ServerResponse;

/** gRPC status for an HTTP status, as Envoy maps them for a non-gRPC upstream answer. */
export function grpcStatusForHttp(status: number): number {
  switch (status) {
    case 400: return 13;
    case 401: return 16;
    case 403: return 7;
    case 404: return 12;
    case 429: case 502: case 503: case 504: return 14;
    default: return 2;
  }
}

export function isGrpcRequest(req: DownstreamRequest): boolean {
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.startsWith('application/grpc');
}

/** What a local reply wrote: its status (0 when nothing could be sent) and its body's bytes. */
export interface SentReply {
  readonly status: number;
  /** Body bytes written (0 for HEAD and for a gRPC trailers-only answer), as Envoy's %BYTES_SENT% counts a local reply's. */
  readonly bodyBytes: number;
}

const NOTHING_SENT: SentReply = { status: 0, bodyBytes: 0 };

/** Write a local reply. */
export function sendLocalReply(req: DownstreamRequest, res: DownstreamResponse, reply: LocalReply, requestId: string): SentReply {
  const entry = ERRORS[reply.code];
  const status = reply.status ?? entry.status;
  const message = reply.message ?? entry.message;
  if (res.headersSent || res.destroyed || res.writableEnded) {
    destroyResponse(res);
    return NOTHING_SENT;
  }
  if (isGrpcRequest(req)) {
    const headers: OutgoingHttpHeaders = {
      ...reply.headers,
      'content-type': 'application/grpc',
      'grpc-status': String(reply.code === 'AUTH_DENIED' && reply.status ? grpcStatusForHttp(status) : entry.grpc),
      'grpc-message': grpcMessage(message),
      'x-request-id': requestId,
    };
    const stream = (res as Http2ServerResponse).stream;
    if (stream && !stream.headersSent) {
      // Trailers-only: one HEADERS frame with END_STREAM, as gRPC servers answer errors.
      stream.respond({ ':status': 200, ...headers }, { endStream: true });
    } else {
      res.writeHead(200, headers as Record<string, string>);
      res.end();
    }
    return { status: 200, bodyBytes: 0 };
  }
  let body: string | Buffer;
  let contentType: string;
  if (reply.body !== undefined && reply.body.length > 0) {
    body = reply.body;
    contentType = (reply.headers?.['content-type'] as string | undefined) ?? 'text/plain';
  } else {
    body = errorBody(status, message, reply.code, requestId, reply.details);
    contentType = 'application/json';
  }
  const length = Buffer.byteLength(body);
  const headers: OutgoingHttpHeaders = {
    ...reply.headers,
    'content-type': contentType,
    'content-length': length,
  };
  const head = req.method === 'HEAD';
  try {
    res.writeHead(status, headers as Record<string, string>);
    if (head) res.end();
    else (res as ServerResponse).end(body);
  } catch {
    destroyResponse(res);
    return NOTHING_SENT;
  }
  return { status, bodyBytes: head ? 0 : length };
}

/** Why a downstream HTTP/2 stream was reset: its answer could not be completed. */
const CUT_SHORT = Object.assign(new Error('the answer was cut short'), { code: 'ANSWER_CUT_SHORT' });

/**
 * Reset the downstream stream or connection (after headers went out, there is no other answer). An
 * HTTP/2 stream gets RST_STREAM INTERNAL_ERROR at once: `close(code)` would first end its writable
 * side, and an answer that does not wait for trailers would then go out with END_STREAM, a
 * cut-short body looking complete to the client.
 */
export function destroyResponse(res: DownstreamResponse): void {
  const stream = (res as Http2ServerResponse).stream;
  if (stream) {
    if (!stream.destroyed) stream.destroy(CUT_SHORT);
    return;
  }
  (res as ServerResponse).socket?.destroy();
}
