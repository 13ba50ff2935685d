/**
 * Workload identity as the mesh writes and reads it (DESIGN.md §9): the SPIFFE URI
 * `spiffe://ORG/gvc/GVC/workload/W`, its strict parse, the one URI SAN of a peer certificate as
 * Node's TLS reports it, and the `x-forwarded-client-cert` value given to the app. Pure string and
 * Buffer work: nothing here loads an X.509 library. Every parser fails closed: a URI or SAN list it
 * does not fully understand gives `undefined`, never a guess, because the answer is an identity the
 * internal firewall trusts.
 */
import { createHash } from 'node:crypto';

/** The org name used as SPIFFE trust domain when the configuration has no org record. */
export const DEFAULT_ORG = 'local';

/** `spiffe://ORG/gvc/GVC/workload/W` (DESIGN.md §9). Names are not checked: they come from validated config. */
export function workloadUri(org: string, gvc: string, workload: string): string {
  return `spiffe://${org}/gvc/${gvc}/workload/${workload}`;
}

export interface MeshPeer {
  readonly uri: string;
  readonly org: string;
  readonly gvc?: string;
  readonly workload?: string;
}

/** SPIFFE ID spec §2.1: a trust domain is lowercase letters, digits, `.`, `-` and `_`. */
const TRUST_DOMAIN = /^[a-z0-9._-]+$/;
/** SPIFFE ID spec §2.2: path segments are letters, digits, `.`, `-` and `_` (no percent-encoding). */
const SEGMENT = /^[A-Za-z0-9._-]+$/;
/** A platform name (config/values.ts NAME_PATTERN, at most 64 characters). */
const NAME = /^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$/;
const PREFIX = 'spiffe://';
/** Longer IDs are refused, as go-spiffe and Envoy's SPIFFE validator bound them. */
const MAX_URI = 2048;

/**
 * Strict: `spiffe://ORG/gvc/GVC/workload/W` with platform names gives all fields; any other
 * well-formed `spiffe://TD/<path>` gives {uri, org} only (a caller outside every workload, e.g. an
 * ingress); anything else (other scheme, no path, empty, `.` or `..` segments, percent-encoding,
 * port, user info, query, fragment, uppercase trust domain, trailing slash) undefined.
 */
export function parseSpiffeUri(uri: string): MeshPeer | undefined {
  if (uri.length > MAX_URI || !uri.startsWith(PREFIX)) return undefined;
  const slash = uri.indexOf('/', PREFIX.length);
  if (slash < 0) return undefined;
  const org = uri.slice(PREFIX.length, slash);
  if (!TRUST_DOMAIN.test(org)) return undefined;
  const segments = uri.slice(slash + 1).split('/');
  for (const s of segments) {
    if (!SEGMENT.test(s) || s === '.' || s === '..') return undefined;
  }
  if (segments.length === 4 && segments[0] === 'gvc' && segments[2] === 'workload') {
    const gvc = segments[1] as string;
    const workload = segments[3] as string;
    if (NAME.test(org) && NAME.test(gvc) && NAME.test(workload)) return { uri, org, gvc, workload };
  }
  return { uri, org };
}

/**
 * The entries of Node's `subjectaltname` string (`DNS:a, URI:spiffe://x/y, IP Address:1.2.3.4`).
 * Since the fix for CVE-2021-44532 Node writes a value holding characters that could be confused
 * with the list's syntax (`,`, `"`, `\`, non-ASCII...) as a JSON string literal: `URI:"a\u002cb"`.
 * Undefined when the string is not in that shape.
 */
export function parseSubjectAltName(san: string): { type: string; value: string }[] | undefined {
  const entries: { type: string; value: string }[] = [];
  let pos = 0;
  while (pos < san.length) {
    const colon = san.indexOf(':', pos);
    if (colon < 0) return undefined;
    const type = san.slice(pos, colon);
    let value: string;
    let end: number;
    if (san[colon + 1] === '"') {
      end = colon + 2;
      while (end < san.length && san[end] !== '"') end += san[end] === '\\' ? 2 : 1;
      if (end >= san.length) return undefined;
      end += 1;
      try {
        value = JSON.parse(san.slice(colon + 1, end)) as string;
      } catch {
        return undefined;
      }
    } else {
      const comma = san.indexOf(', ', colon + 1);
      end = comma < 0 ? san.length : comma;
      value = san.slice(colon + 1, end);
    }
    entries.push({ type, value });
    if (end === san.length) break;
    if (!san.startsWith(', ', end)) return undefined;
    pos = end + 2;
    if (pos === san.length) return undefined;
  }
  return entries;
}

/**
 * The one URI SAN of a peer certificate as `tls.TLSSocket.getPeerCertificate()` (or
 * `X509Certificate.subjectAltName`) reports it, or undefined when there is none, more than one, or
 * the list cannot be read.
 */
export function uriSanOf(cert: { readonly subjectaltname?: string } | undefined): string | undefined {
  const san = cert?.subjectaltname;
  if (!san) return undefined;
  const entries = parseSubjectAltName(san);
  if (!entries) return undefined;
  let uri: string | undefined;
  for (const e of entries) {
    if (e.type !== 'URI') continue;
    if (uri !== undefined) return undefined;
    uri = e.value;
  }
  return uri;
}

/** Hex SHA-256 of the DER certificate (Envoy's XFCC `Hash`). */
export function certificateHash(der: Buffer): string {
  return createHash('sha256').update(der).digest('hex');
}

/** Envoy quotes an XFCC value holding `,`, `;`, `=` or `"`, escaping `"` (and so `\`) inside. */
function xfccQuote(value: string): string {
  if (!/[,;="\\]/.test(value)) return value;
  return `"${value.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/** Envoy's SANITIZE_SET `x-forwarded-client-cert` value: `By=<by>;Hash=<hash>;URI=<uri>`. */
export function xfccValue(by: string, callerDer: Buffer, callerUri: string): string {
  return `By=${xfccQuote(by)};Hash=${certificateHash(callerDer)};URI=${xfccQuote(callerUri)}`;
}
