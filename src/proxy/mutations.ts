/**
 * The upstream request as the filters asked to change it: header sets and removals, and query
 * parameters set or removed (ext_authz's `headers_to_set`, `query_parameters_to_set/remove`),
 * applied once the sidecar filters let the request go. Pure apart from the headers object it is
 * handed, which it changes in place.
 */
import type { OutgoingHttpHeaders } from 'node:http';
import type { ExchangeView } from '../filter/index.js';

/** Apply the query-parameter mutations the filters asked for (ext_authz `query_parameters_to_set/remove`). */
export function withQueryMutations(ex: ExchangeView, pathWithQuery: string): string {
  if (!ex.upstreamQuerySet && !ex.upstreamQueryRemove) return pathWithQuery;
  const q = pathWithQuery.indexOf('?');
  const path = q < 0 ? pathWithQuery : pathWithQuery.slice(0, q);
  // Parameters not touched keep their bytes exactly as the client sent them.
  const drop = new Set<string>([...(ex.upstreamQueryRemove ?? []), ...(ex.upstreamQuerySet ?? []).map(([name]) => name)]);
  const kept = (q < 0 ? '' : pathWithQuery.slice(q + 1)).split('&').filter((pair) => {
    if (pair === '') return false;
    const eq = pair.indexOf('=');
    const raw = eq < 0 ? pair : pair.slice(0, eq);
    let name: string;
    try {
      name = decodeURIComponent(raw.replace(/\+/g, ' '));
    } catch {
      name = raw;
    }
    return !drop.has(name);
  });
  // Removals apply after sets, as Envoy's ext_authz does: a parameter both set and removed is gone.
  const removed = new Set(ex.upstreamQueryRemove ?? []);
  if (ex.upstreamQuerySet) {
    for (const [name, value] of ex.upstreamQuerySet) if (!removed.has(name)) kept.push(`${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
  }
  return kept.length > 0 ? `${path}?${kept.join('&')}` : path;
}

/** Apply the upstream header mutations the filters asked for. */
export function applyMutations(ex: ExchangeView, headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  if (ex.upstreamRemove) for (const name of ex.upstreamRemove) delete headers[name];
  if (ex.upstreamSet) for (const [name, value] of ex.upstreamSet) headers[name] = value;
  return headers;
}
