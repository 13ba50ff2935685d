/**
 * The request `svcproxy explain` is asked about, read from its command line: an absolute `http://` or
 * `https://` URL (its authority is the Host, unless a `-H 'Host: ...'` says otherwise; its port, else
 * 80 or 443, is the listener port a domain's routes are picked by), `-H 'name: value'` headers in
 * order, `-X METHOD` and `--from IP` (the connection's peer). The path is kept exactly as written:
 * the data plane's own normalization (src/proxy/path.ts) reads it later, as it reads a request
 * target. Anything that is not such a request throws `UsageError` (exit 2); nothing is sent.
 */
import { isIP } from 'node:net';
import { UsageError } from '../flags.js';
import { parseHostHeader } from '../routing/index.js';

export interface ExplainRequest {
  readonly url: string;
  readonly tls: boolean;
  /** The Host the data plane routes by: `-H host:` when given, else the URL's authority. */
  readonly host: string;
  /** The port the request arrives on: the URL's, else the scheme's (80, 443). */
  readonly listenerPort: number;
  /** The request target as written (path and query, never a fragment). */
  readonly target: string;
  readonly method: string;
  /** Node's flat `rawHeaders` list, in the order given (`host` first, as a client sends it). */
  readonly rawHeaders: readonly string[];
  /** Node's parsed view: lower-case names, repeated values joined with ", ". */
  readonly headers: Readonly<Record<string, string>>;
  /** The connection's peer address. */
  readonly from: string;
}

export interface ExplainInput {
  readonly url: string | undefined;
  readonly header?: readonly string[];
  readonly method?: string;
  readonly from?: string;
}

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const ABSOLUTE = /^(https?):\/\/([^/?#]*)([^#]*)/i;

export const DEFAULT_FROM = '127.0.0.1';

/** One `-H 'name: value'` → [name, value]; a line without a colon or with a bad name is a usage error. */
export function parseHeaderLine(line: string): [string, string] {
  const colon = line.indexOf(':');
  const name = colon < 0 ? '' : line.slice(0, colon).trim();
  if (colon < 0 || !TOKEN.test(name)) throw new UsageError(`-H ${JSON.stringify(line)} is not 'name: value'`);
  const value = line.slice(colon + 1).trim();
  if (/[\r\n\0]/.test(value)) throw new UsageError(`-H ${JSON.stringify(line)}: a header value holds no CR, LF or NUL`);
  return [name, value];
}

export function parseExplainRequest(input: ExplainInput): ExplainRequest {
  const url = input.url;
  if (url === undefined) throw new UsageError('explain needs the URL of a request (http://HOST/PATH)');
  const m = ABSOLUTE.exec(url);
  if (!m) {
    const other = /^[a-z][a-z0-9+.-]*:/i.test(url);
    throw new UsageError(other ? `${JSON.stringify(url)}: the URL's scheme must be http or https` : `${JSON.stringify(url)} is not an absolute URL: write it with its scheme (http://${url.replace(/^\/+/, '')})`);
  }
  const tls = m[1]!.toLowerCase() === 'https';
  const authority = m[2]!;
  if (authority.includes('@')) throw new UsageError(`${JSON.stringify(url)}: a URL with user information is not a request target`);
  const parsed = parseHostHeader(authority);
  if (!parsed) throw new UsageError(`${JSON.stringify(url)}: ${JSON.stringify(authority)} is not a host[:port]`);
  const rest = m[3]!;
  const target = rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest;
  const method = input.method ?? 'GET';
  if (!TOKEN.test(method)) throw new UsageError(`-X ${JSON.stringify(method)} is not a method`);
  const from = input.from ?? DEFAULT_FROM;
  if (isIP(from) === 0) throw new UsageError(`--from ${JSON.stringify(from)} is not an IP address`);
  const pairs = (input.header ?? []).map(parseHeaderLine);
  const given = pairs.find(([name]) => name.toLowerCase() === 'host');
  const rawHeaders: string[] = given ? [] : ['host', authority];
  const headers: Record<string, string> = given ? {} : { host: authority };
  for (const [name, value] of pairs) {
    rawHeaders.push(name, value);
    const lower = name.toLowerCase();
    headers[lower] = headers[lower] === undefined ? value : `${headers[lower]}, ${value}`;
  }
  return {
    url,
    tls,
    host: given ? given[1] : authority,
    listenerPort: parsed.port ?? (tls ? 443 : 80),
    target,
    method,
    rawHeaders,
    headers,
    from,
  };
}
