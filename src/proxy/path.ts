/**
 * Path normalization at the edge (DESIGN §5), done once per request; its result is the only path
 * used afterwards (routing, exclusions, authorization, rate-limit descriptors, the upstream
 * request). The query (from the first `?`, the `?` included) is kept exactly as sent. The path has
 * unreserved characters (ALPHA DIGIT `-` `.` `_` `~`) percent-decoded and every other escape's hex
 * upper-cased, `.` and `..` segments resolved (also those spelled `%2e`; `..` above the root stays
 * at the root, as Envoy does), and repeated slashes merged. The result is idempotent and never
 * contains `//`, `/./` or `/../`, nor ends in `/.` or `/..`. It fails (the caller answers 400 with
 * `reason`) on: `#`; a raw NUL or other control character anywhere in the target; `%00`; an
 * encoded slash or backslash (`%2F`, `%5C`, any case) or a raw backslash, which backends disagree
 * on; a dot segment carrying parameters (`..;x`, `.;x`, also with `%3B`), which Tomcat-style
 * backends resolve after the proxy has checked the path; a malformed escape (`%`, `%4`, `%zz`),
 * since decoding around it could mint new escapes; and a target that is neither origin-form
 * (`/…`) nor absolute-form (`http://host/…`, whose path is normalized and whose authority
 * `splitAbsoluteForm` returns). Paths without `%`, `//`, `\` or a segment starting with `.` take
 * a fast path that returns the input as is.
 */

/** Longest request target accepted (Envoy's default header limit is 60 KiB; a URL is held to 16 KiB). */
export const MAX_URL_LENGTH = 16 * 1024;

export type NormalizedPath =
  | { readonly ok: true; readonly path: string; readonly query: string }
  | { readonly ok: false; readonly reason: string };

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;
const QUESTION = 0x3f;
const HASH = 0x23;
const BACKSLASH = 0x5c;

const HEX_DIGITS = '0123456789ABCDEF';

function fail(reason: string): NormalizedPath {
  return { ok: false, reason };
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x41 + 10;
  if (c >= 0x61 && c <= 0x66) return c - 0x61 + 10;
  return -1;
}

/** RFC 3986 unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~". */
function unreserved(c: number): boolean {
  return (
    (c >= 0x61 && c <= 0x7a) ||
    (c >= 0x41 && c <= 0x5a) ||
    (c >= 0x30 && c <= 0x39) ||
    c === 0x2d ||
    c === DOT ||
    c === 0x5f ||
    c === 0x7e
  );
}

/**
 * For an absolute-form target (`http://host[:port][/path][?query]`, scheme `http` or `https`,
 * any case): the authority and the origin-form target (`/` when the path is empty). `undefined`
 * for any other form. The authority is returned as written (it may carry userinfo, which
 * `normalizePath` rejects).
 */
export function splitAbsoluteForm(raw: string): { authority: string; target: string } | undefined {
  const sep = raw.indexOf('://');
  if (sep !== 4 && sep !== 5) return undefined;
  const scheme = raw.slice(0, sep).toLowerCase();
  if (scheme !== 'http' && scheme !== 'https') return undefined;
  const start = sep + 3;
  let end = start;
  while (end < raw.length) {
    const c = raw.charCodeAt(end);
    if (c === SLASH || c === QUESTION || c === HASH) break;
    end++;
  }
  const authority = raw.slice(start, end);
  if (authority.length === 0) return undefined;
  const rest = raw.slice(end);
  const target = rest.length === 0 ? '/' : rest.charCodeAt(0) === SLASH ? rest : '/' + rest;
  return { authority, target };
}

/**
 * The authority a request is routed by: an absolute-form target's wins over `Host` (RFC 9112
 * §3.2.2), for requests and upgrades alike, so a request can never be routed by one name and checked
 * or forwarded under another. `host`: the `:authority` or `Host` the request carries.
 */
export function routingAuthority(url: string, host: string): string {
  if (url.charCodeAt(0) === SLASH) return host;
  return splitAbsoluteForm(url)?.authority ?? host;
}

export function normalizePath(rawTarget: string): NormalizedPath {
  if (rawTarget.length === 0) return fail('empty request target');
  if (rawTarget.charCodeAt(0) !== SLASH) {
    const absolute = splitAbsoluteForm(rawTarget);
    if (absolute === undefined) return fail('path does not start with "/"');
    if (absolute.authority.includes('@')) return fail('userinfo in request target');
    return normalizePath(absolute.target);
  }

  // One scan: find the query, reject what is never allowed, and note whether the path needs work.
  const n = rawTarget.length;
  let q = n;
  let slow = false;
  let prev = 0;
  for (let i = 0; i < n; i++) {
    const c = rawTarget.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) {
      return fail(c === 0 ? 'NUL in request target' : 'control character in request target');
    }
    if (c === HASH) return fail('"#" in request target');
    if (q !== n) continue;
    if (c === QUESTION) q = i;
    else if (c === BACKSLASH) return fail('backslash in path');
    else if (c === PERCENT) slow = true;
    else if ((c === SLASH || c === DOT) && prev === SLASH) slow = true;
    prev = c;
  }

  const query = q === n ? '' : rawTarget.slice(q);
  const rawPath = q === n ? rawTarget : rawTarget.slice(0, q);
  if (!slow) return { ok: true, path: rawPath, query };
  const path = normalizeSlow(rawPath);
  return typeof path === 'string' ? { ok: true, path, query } : path;
}

/** Decode one segment (no `/` inside); a failure comes back as the failed result. */
function decodeSegment(raw: string): string | NormalizedPath {
  let out = '';
  let last = 0;
  for (let i = raw.indexOf('%'); i >= 0; i = raw.indexOf('%', i)) {
    if (i + 2 >= raw.length) return fail('malformed percent-encoding in path');
    const hi = hexValue(raw.charCodeAt(i + 1));
    const lo = hexValue(raw.charCodeAt(i + 2));
    if (hi < 0 || lo < 0) return fail('malformed percent-encoding in path');
    const v = (hi << 4) | lo;
    if (v === 0) return fail('NUL (%00) in path');
    if (v === SLASH) return fail('encoded slash (%2F) in path');
    if (v === BACKSLASH) return fail('encoded backslash (%5C) in path');
    out += raw.slice(last, i);
    out += unreserved(v) ? String.fromCharCode(v) : '%' + HEX_DIGITS[hi]! + HEX_DIGITS[lo]!;
    i += 3;
    last = i;
  }
  return out + raw.slice(last);
}

/** `.x` / `..x` where x starts path parameters: `;` or its escape. */
function dotWithParameters(seg: string): boolean {
  if (seg.charCodeAt(0) !== DOT) return false;
  const at = seg.charCodeAt(1) === DOT ? 2 : 1;
  return seg.charCodeAt(at) === 0x3b /* ; */ || seg.startsWith('%3B', at);
}

/** The slow path: segment by segment (RFC 3986 remove_dot_segments, plus slash merging). */
function normalizeSlow(path: string): string | NormalizedPath {
  const segments: string[] = [];
  const n = path.length;
  let trailingSlash = false;
  // path[0] is '/'; each iteration reads the segment after a '/'.
  for (let i = 1; i <= n; ) {
    let j = path.indexOf('/', i);
    if (j < 0) j = n;
    const raw = path.slice(i, j);
    let seg: string;
    if (raw.includes('%')) {
      const decoded = decodeSegment(raw);
      if (typeof decoded !== 'string') return decoded;
      seg = decoded;
    } else seg = raw;
    const isLast = j === n;
    if (seg === '' || seg === '.') {
      // Empty (a repeated or final slash) or "current folder": contributes nothing.
      trailingSlash = isLast;
    } else if (seg === '..') {
      segments.pop(); // at the root, pop() on [] is a no-op: clamp, as Envoy does
      trailingSlash = isLast;
    } else {
      if (dotWithParameters(seg)) return fail('dot segment with parameters in path');
      segments.push(seg);
      trailingSlash = false;
    }
    i = j + 1;
  }
  if (segments.length === 0) return '/';
  const joined = '/' + segments.join('/');
  return trailingSlash ? joined + '/' : joined;
}
