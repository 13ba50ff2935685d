/**
 * Reads the head of an HTTP/1.1 request from a client when it has the common, unremarkable shape: a
 * known method, an origin-form target of visible ASCII (or `*`, or an `http(s)://host[:port]` absolute
 * form), `HTTP/1.1`, and fields that are plain tokens with printable values, each name once, no body
 * or one framed by a plain `Content-Length`, and a `Connection` of keep-alive or close alone (close:
 * the client's last request; its answer says so and ends the connection, as from Node's server).
 * Anything else (`Transfer-Encoding`, a length spelled any other way, any other `Connection` (so
 * an upgrade, which lists `upgrade` there: an `Upgrade` field without it is only informational,
 * RFC 9110 §7.8, and llhttp reads such a request as an ordinary one too), `Expect`, HTTP/1.0,
 * obs-fold, a bare CR or LF, a duplicate field, a control character, an unknown method, a head not
 * yet complete or over the size limit) is declined with `undefined`, and the caller hands the
 * connection to Node's HTTP/1.1 server, which then answers exactly as it always does, errors
 * included. So this reader never decides a request is bad; it only decides a request is ordinary.
 */
import { fieldName } from './fields.js';

/** A request head the quick path serves. */
export interface PlainRequestHead {
  readonly method: string;
  readonly url: string;
  /** Lower-cased names; each value trimmed of surrounding blanks, as Node's parser gives them. */
  readonly headers: Record<string, string>;
  /** Names as sent, values trimmed: `[name, value, name, value, ...]`. */
  readonly rawHeaders: string[];
  /** Offset just past the head's empty line. */
  readonly end: number;
  /** Body bytes that follow (`Content-Length`; 0 without one). */
  readonly bodyLength: number;
  /** `Connection: close`: the client's last request on the connection. */
  readonly close: boolean;
}

/** Methods served on the quick path (interned: the head's text maps to these constants). */
const METHODS = new Map(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH'].map((m) => [m, m]));
/** Anything but HTAB, CR, LF, printable ASCII and obs-text; or a CR not before LF; or an LF not after CR. */
const BAD_BYTES = /[^\t\r\n\x20-\x7e\x80-\xff]|\r(?!\n)|(?<!\r)\n/;
const TARGET = /^[\x21-\x7e]+$/;
/**
 * An absolute-form target the quick path serves: `http` or `https`, a plain host name or address and
 * port, no userinfo. Any other target that is not origin-form (`/...`) or `*` is declined: llhttp
 * refuses `x`, `x.example:443` (authority form outside CONNECT) and `http//x`, and the quick path
 * must never serve what Node's server would answer with an error.
 */
const ABSOLUTE = /^https?:\/\/[A-Za-z0-9.-]+(?::\d{1,5})?(?:[/?][\x21-\x7e]*)?$/i;
/** More fields than this: declined (Node's own server decides). */
const MAX_FIELDS = 128;
const HEAD_END = Buffer.from('\r\n\r\n', 'latin1');
/** A length as a number is written: no sign, no leading zero, no list (Node's server has the rest). */
const LENGTH = /^(?:0|[1-9]\d{0,14})$/;

/**
 * Fields whose presence sends the request to Node's server: they frame a body another way, change
 * the connection, or ask for an interim answer. A plain `content-length` and a `connection` of
 * `keep-alive` or `close` alone are kept, and so is `upgrade`: with no `Connection: upgrade` beside it
 * (the only `Connection` values kept are those two) it asks for nothing, and the data plane does not
 * forward it.
 */
function declinedField(lower: string, value: string): boolean {
  switch (lower) {
    case 'content-length':
      return !LENGTH.test(value);
    case 'connection': {
      const v = value.toLowerCase();
      return v !== 'keep-alive' && v !== 'close';
    }
    case 'transfer-encoding':
    case 'expect':
    case 'http2-settings':
    case 'set-cookie':
      return true;
    default:
      return false;
  }
}

/**
 * The head at the start of `buf`, or `undefined` when the quick path should not serve it (see the
 * module comment; an incomplete head is declined too).
 */
export function readPlainRequestHead(buf: Buffer, maxHeadBytes: number): PlainRequestHead | undefined {
  const blank = buf.indexOf(HEAD_END);
  if (blank === -1 || blank + 4 > maxHeadBytes) return undefined;
  // Through the last field line's CRLF; latin1 keeps one character per byte.
  const text = buf.toString('latin1', 0, blank + 2);
  if (BAD_BYTES.test(text)) return undefined;
  let lineEnd = text.indexOf('\r\n');
  const sp1 = text.indexOf(' ');
  if (sp1 <= 0 || sp1 > lineEnd) return undefined;
  const method = METHODS.get(text.slice(0, sp1));
  if (method === undefined) return undefined;
  const sp2 = text.indexOf(' ', sp1 + 1);
  if (sp2 === -1 || lineEnd - sp2 !== 9 || !text.startsWith('HTTP/1.1', sp2 + 1)) return undefined;
  const url = text.slice(sp1 + 1, sp2);
  if (!TARGET.test(url)) return undefined;
  if (url.charCodeAt(0) !== 47 /* / */ && url !== '*' && !ABSOLUTE.test(url)) return undefined;
  const headers: Record<string, string> = {};
  const rawHeaders: string[] = [];
  let pos = lineEnd + 2;
  while (pos < text.length) {
    lineEnd = text.indexOf('\r\n', pos);
    const colon = text.indexOf(':', pos);
    if (colon <= pos || colon > lineEnd) return undefined;
    const name = text.slice(pos, colon);
    const lower = fieldName(name);
    if (lower === undefined) return undefined;
    let from = colon + 1;
    let to = lineEnd;
    while (from < to && isBlank(text.charCodeAt(from))) from++;
    while (to > from && isBlank(text.charCodeAt(to - 1))) to--;
    const value = text.slice(from, to);
    // A name seen twice, or one an object already answers (`constructor`, `__proto__`): Node's
    // server has the rules for those.
    if (headers[lower] !== undefined || declinedField(lower, value)) return undefined;
    headers[lower] = value;
    rawHeaders.push(name, value);
    if (rawHeaders.length > 2 * MAX_FIELDS) return undefined;
    pos = lineEnd + 2;
  }
  const length = headers['content-length'];
  const connection = headers.connection;
  return {
    method, url, headers, rawHeaders, end: blank + 4, bodyLength: length === undefined ? 0 : Number(length),
    close: connection !== undefined && connection.length === 5 && connection.toLowerCase() === 'close',
  };
}

function isBlank(code: number): boolean {
  return code === 32 || code === 9;
}
