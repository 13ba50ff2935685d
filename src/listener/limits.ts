/**
 * What one listening port lets a client do (`ListenerLimits`, each with a production default:
 * `DEFAULT_LIMITS`; the flags of the proxy commands set them), and the sizes both sides of the proxy
 * share: the largest request head, and HTTP/2's flow-control windows (the listeners' and the
 * upstream pools' alike, src/proxy/upstreams.ts). Data only; nothing here runs.
 */

/** Per-listener protection limits; an absent member takes its default (`DEFAULT_LIMITS`). */
export interface ListenerLimits {
  /**
   * Time a client has, from connecting (or from the end of its previous request), to send a whole
   * HTTP/1.1 request head, and to send enough bytes to pick a protocol. Past it: 408 and close.
   */
  readonly headersTimeoutMs?: number;
  /**
   * A connection with no request in flight this long is closed: HTTP/1.1 keep-alive connections
   * between requests, HTTP/2 sessions with no open stream (GOAWAY, then close).
   */
  readonly idleTimeoutMs?: number;
  /** Connections open at once; 0: unlimited. Beyond it new connections are closed on accept. */
  readonly maxConnections?: number;
  /** HTTP/1.1 requests served on one connection (the last answer says `Connection: close`); 0: unlimited. */
  readonly maxRequestsPerConnection?: number;
  /** HTTP/2 streams open at once in one session (SETTINGS_MAX_CONCURRENT_STREAMS). */
  readonly maxConcurrentStreams?: number;
  /** HTTP/2 streams one session may see aborted (client resets) in one second before it is closed. */
  readonly maxStreamResetsPerSecond?: number;
}

export const DEFAULT_LIMITS: Required<ListenerLimits> = Object.freeze({
  headersTimeoutMs: 66_000,
  idleTimeoutMs: 65_000,
  maxConnections: 16_384,
  maxRequestsPerConnection: 0,
  maxConcurrentStreams: 1000,
  maxStreamResetsPerSecond: 200,
});

/**
 * The largest request head a listener takes; the upstream pools take as much, so a request the proxy
 * accepted is never refused by its own pool.
 */
export const MAX_HEADER_SIZE = 64 * 1024;

/**
 * HTTP/2 flow-control windows: per stream, and for a whole session, larger than the 64 KiB default
 * (one round trip would otherwise carry 64 KiB of a body) and granted only as data is read.
 */
export const STREAM_WINDOW = 1024 * 1024;
export const SESSION_WINDOW = 16 * 1024 * 1024;
