/**
 * The head of a request to an HTTP/1.1 upstream: request line, fields, and the framing of its body
 * (RFC 9112 §6): `Content-Length` when the length is known, `chunked` when it is not, and
 * `content-length: 0` for a method that defines a body but has none. Every name and value is checked
 * before a byte is written, so nothing a filter or a client put in a header can split the request.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import { BAD_VALUE, TOKEN, contentLengthValue } from './fields.js';

export class UpstreamRequestError extends Error {
  override name = 'UpstreamRequestError';
  readonly code = 'UPSTREAM_REQUEST_INVALID';
}

/** How the body is framed on the wire. */
export type BodyFraming = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' };

const NONE: BodyFraming = { kind: 'none' };
const CHUNKED: BodyFraming = { kind: 'chunked' };

/** A request target: origin-form or `*`, visible ASCII and obs-text only. */
const BAD_TARGET = /[^\x21-\x7e\x80-\xff]/;
/** Methods whose body has a defined meaning: an empty one is sent as `content-length: 0` (as undici does). */
const PAYLOAD_METHODS = new Set(['POST', 'PUT', 'PATCH', 'QUERY']);
/** Set by the framing here, never copied from the caller's fields. */
const FRAMING_FIELDS = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive']);

export interface RequestHead {
  readonly head: string;
  readonly framing: BodyFraming;
}

/**
 * Serialize a request head. `hasBody`: a body stream follows. Throws `UpstreamRequestError` for a
 * field or target that cannot be sent as it is.
 */
export function requestHead(method: string, target: string, headers: OutgoingHttpHeaders, hasBody: boolean, defaultHost: string): RequestHead {
  if (!TOKEN.test(method)) throw new UpstreamRequestError(`invalid method ${JSON.stringify(method.slice(0, 32))}`);
  if (target.length === 0 || BAD_TARGET.test(target)) throw new UpstreamRequestError('invalid request target');
  let head = `${method} ${target} HTTP/1.1\r\n`;
  let hasHost = false;
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined) continue;
    if (FRAMING_FIELDS.has(name)) continue;
    if (!TOKEN.test(name)) throw new UpstreamRequestError(`invalid field name ${JSON.stringify(name.slice(0, 64))}`);
    if (name === 'host') hasHost = true;
    if (Array.isArray(value)) {
      for (const v of value) head += field(name, v);
    } else {
      head += field(name, typeof value === 'string' ? value : String(value));
    }
  }
  if (!hasHost) head += `host: ${defaultHost}\r\n`;
  const framing = framingOf(method, headers['content-length'], hasBody);
  if (framing.kind === 'length') head += `content-length: ${framing.length}\r\n`;
  else if (framing.kind === 'chunked') head += 'transfer-encoding: chunked\r\n';
  else if (PAYLOAD_METHODS.has(method)) head += 'content-length: 0\r\n';
  return { head: head + '\r\n', framing };
}

function field(name: string, value: string): string {
  if (BAD_VALUE.test(value)) throw new UpstreamRequestError(`invalid value in field ${name}`);
  return `${name}: ${value}\r\n`;
}

function framingOf(method: string, contentLength: OutgoingHttpHeaders[string], hasBody: boolean): BodyFraming {
  if (contentLength === undefined) return hasBody ? CHUNKED : NONE;
  const text = Array.isArray(contentLength) ? contentLength.join(',') : String(contentLength);
  const length = contentLengthValue(text);
  if (length === 'invalid') throw new UpstreamRequestError(`invalid content-length ${JSON.stringify(text.slice(0, 32))}`);
  if (length === 'differing') throw new UpstreamRequestError('differing content-length values');
  if (!hasBody) {
    if (length !== 0) throw new UpstreamRequestError(`content-length ${length} for a request without a body`);
    return PAYLOAD_METHODS.has(method) ? NONE : { kind: 'length', length: 0 };
  }
  return { kind: 'length', length };
}
