/**
 * The answers the proxy makes itself (DESIGN §6), in one table: a stable code maps to an HTTP status,
 * a message and a gRPC status. `sendLocalReply` writes one: a JSON body in the platform's error shape
 * `{status, message, code, details, id}` for HTTP clients, a trailers-only answer with `grpc-status`
 * for gRPC clients. It never throws: a reply to a client that has gone away is dropped.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Http2ServerRequest, Http2ServerResponse, OutgoingHttpHeaders } from 'node:http2';
import { grpcMessage } from '../grpc/message.js';

export type DownstreamRequest = IncomingMessage | Http2ServerRequest;
export type DownstreamResponse = ServerResponse | Http2ServerResponse;

export const ERRORS = {
  NO_ROUTE: { status: 404, message: 'no route', grpc: 12 /* UNIMPLEMENTED */ },
  SUSPENDED: { status: 503, message: 'workload suspended', grpc: 14 },
  NO_HEALTHY_UPSTREAM: { status: 503, message: 'no healthy upstream', grpc: 14 },
  UPSTREAM_RESET: {
    status: 503,
    message: 'upstream connect error or disconnect/reset before headers',
    grpc: 14,
  },
  // Envoy's answer when the upstream's bytes break the protocol (`UPE`, reset reason protocol_error).
  UPSTREAM_PROTOCOL_ERROR: { status: 502, message: 'upstream protocol error', grpc: 14 },
  UPSTREAM_TIMEOUT: { status: 504, message: 'upstream request timeout', grpc: 4 /* DEADLINE_EXCEEDED */ },
  AUTH_DENIED: { status: 403, message: 'denied by external authorization', grpc: 7 },
  AUTH_FAILED: { status: 403, message: 'external authorization failed', grpc: 7 },
  RATE_LIMITED: { status: 429, message: 'rate limited', grpc: 14 },
  RATE_LIMIT_UNAVAILABLE: { status: 503, message: 'rate limit service unavailable', grpc: 14 },
  FIREWALL_BLOCKED: { status: 403, message: 'blocked by firewall', grpc: 7 },
  BAD_REQUEST: { status: 400, message: 'bad request', grpc: 13 /* INTERNAL */ },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'payload too large', grpc: 8 },
  URI_TOO_LONG: { status: 414, message: 'uri too long', grpc: 13 },
  HEADERS_TOO_LARGE: { status: 431, message: 'request header fields too large', grpc: 13 },
  OVERLOADED: { status: 503, message: 'overloaded', grpc: 14 },
  NOT_IMPLEMENTED: { status: 501, message: 'not implemented', grpc: 12 /* UNIMPLEMENTED */ },
  HTTP_VERSION_NOT_SUPPORTED: { status: 505, message: 'http version not supported', grpc: 13 },
} as const satisfies Record<string, { status: number; message: string; grpc: number }>;

export type ErrorCode = keyof typeof ERRORS;

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

export interface LocalReply {
  code: ErrorCode;
  /** Overrides the table's message (400s say what was wrong). */
  message?: string;
  /** Overrides the table's status (an authorization server's denial status). */
  status?: number;
  headers?: OutgoingHttpHeaders;
  /** A body given verbatim (an authorization server's denial body); the JSON shape otherwise. */
  body?: string | Buffer;
  details?: Record<string, unknown>;
}

export function isGrpcRequest(req: DownstreamRequest): boolean {
  const ct = req.headers['content-type'];
  return typeof ct === 'string' && ct.startsWith('application/grpc');
}

export function errorBody(status: number, message: string, code: string, id: string, details?: Record<string, unknown>): string {
  return JSON.stringify({ status, message, code, details: details ?? {}, id });
}

/** Write a local reply. Returns the status sent (0 when nothing could be sent). */
export function sendLocalReply(req: DownstreamRequest, res: DownstreamResponse, reply: LocalReply, requestId: string): number {
  const entry = ERRORS[reply.code];
  const status = reply.status ?? entry.status;
  const message = reply.message ?? entry.message;
  if (res.headersSent || res.destroyed || res.writableEnded) {
    destroyResponse(res);
    return 0;
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
    return 200;
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
  const headers: OutgoingHttpHeaders = {
    ...reply.headers,
    'content-type': contentType,
    'content-length': Buffer.byteLength(body),
  };
  try {
    res.writeHead(status, headers as Record<string, string>);
    if (req.method === 'HEAD') res.end();
    else (res as ServerResponse).end(body);
  } catch {
    destroyResponse(res);
    return 0;
  }
  return status;
}

/** Reset the downstream stream or connection (after headers went out, there is no other answer). */
export function destroyResponse(res: DownstreamResponse): void {
  const stream = (res as Http2ServerResponse).stream;
  if (stream) {
    if (!stream.destroyed) stream.close(2 /* INTERNAL_ERROR */);
    return;
  }
  (res as ServerResponse).socket?.destroy();
}
