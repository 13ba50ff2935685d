/**
 * Rate-limit descriptors (DESIGN §7): `svc/rateLimitDescriptors` is a comma-separated ordered list of
 * names that together form ONE descriptor; each name gives one entry, keyed by the name as written
 * (`header:NAME` gives the key NAME in lower case). Pure functions: the list is parsed once per
 * snapshot, and `buildEntries` reads one request. A request that lacks a value for any entry (a
 * listed header, `authorization`, or an empty Host) yields no descriptor, and so is not checked, as
 * Envoy skips a rate-limit action whose header is absent.
 */
import type { IncomingHttpHeaders } from 'node:http';

export type DescriptorSource =
  | { readonly kind: 'authority' | 'authorization' | 'path' | 'method' | 'remote_address'; readonly key: string }
  | { readonly kind: 'header'; readonly key: string; readonly header: string };

/** One descriptor entry as it goes on the wire. */
export interface DescriptorEntry {
  readonly key: string;
  readonly value: string;
}

/** What the entries are read from: the normalized path (no query) and the client address after trusted proxies. */
export interface DescriptorInput {
  readonly host: string;
  readonly path: string;
  readonly method: string;
  readonly clientAddress: string;
  readonly headers: IncomingHttpHeaders;
}

export const DEFAULT_DESCRIPTORS = 'authority';

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/**
 * Parse the tag value. Returns the sources, or the error for the first unknown name (config
 * validation already rejects those; this is the defensive second check).
 */
export function parseDescriptors(text: string): { sources: DescriptorSource[] } | { error: string } {
  const sources: DescriptorSource[] = [];
  for (const raw of text.split(',')) {
    const name = raw.trim();
    if (name === '') continue;
    switch (name) {
      case 'authority':
      case 'host':
        sources.push({ kind: 'authority', key: name });
        break;
      case 'authorization':
      case 'path':
      case 'method':
      case 'remote_address':
        sources.push({ kind: name, key: name });
        break;
      default: {
        const header = name.startsWith('header:') ? name.slice('header:'.length) : '';
        if (!HEADER_NAME.test(header)) return { error: `unknown descriptor ${JSON.stringify(name)}` };
        const lower = header.toLowerCase();
        sources.push({ kind: 'header', key: lower, header: lower });
      }
    }
  }
  if (sources.length === 0) return { error: 'no descriptor entries' };
  return { sources };
}

function headerValue(headers: IncomingHttpHeaders, name: string): string | undefined {
  const value = headers[name];
  if (value === undefined) return undefined;
  return Array.isArray(value) ? value.join(',') : value;
}

/** The descriptor's entries for one request, in the listed order; `undefined` when a value is missing. */
export function buildEntries(sources: readonly DescriptorSource[], input: DescriptorInput): DescriptorEntry[] | undefined {
  const entries: DescriptorEntry[] = new Array(sources.length);
  for (let i = 0; i < sources.length; i++) {
    const source = sources[i]!;
    let value: string | undefined;
    switch (source.kind) {
      case 'authority': value = input.host; break;
      case 'authorization': value = headerValue(input.headers, 'authorization'); break;
      case 'path': value = input.path; break;
      case 'method': value = input.method; break;
      case 'remote_address': value = input.clientAddress; break;
      case 'header': value = headerValue(input.headers, source.header); break;
    }
    // Envoy's descriptor entries must have a non-empty value (its proto says min_len 1).
    if (!value) return undefined;
    entries[i] = { key: source.key, value };
  }
  return entries;
}
