/**
 * The answers the proxy makes itself (DESIGN §6), as filters and the proxy name them: a stable code
 * that maps to an HTTP status, a message and a gRPC status, in this one table, and the `LocalReply` a
 * filter (or the proxy) answers a request with, and the body every such answer carries (`errorBody`).
 * proxy/errors.ts writes a reply to the wire; a filter only returns one. Nothing here fails.
 */
import type { OutgoingHttpHeaders } from 'node:http2';

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

/** The body of an answer the proxy makes itself: the platform's error shape `{status, message, code, details, id}`. */
export function errorBody(status: number, message: string, code: string, id: string, details?: Record<string, unknown>): string {
  return JSON.stringify({ status, message, code, details: details ?? {}, id });
}
