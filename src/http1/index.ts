/**
 * HTTP/1.1 to upstreams: a keep-alive connection pool per `host:port` and a strict response parser;
 * and from clients: the quick path for ordinary requests (`serveHttp1`).
 */
export { Http1Pool, type PoolOptions, type UpstreamController, type UpstreamHandler, type UpstreamRequest } from './pool.js';
export { LENT_CHUNK_BYTES } from './connection.js';
export { ResponseParser, UpstreamProtocolError, type HeaderMap, type ResponseSink } from './response-parser.js';
export { requestHead, UpstreamRequestError, type BodyFraming } from './request-head.js';
export { serveHttp1, type DownstreamOptions } from './downstream.js';
export { lingeringClose, LINGER_MS } from './linger.js';
