/**
 * Route matching inside a `domain` record's port (DESIGN §4). The model already holds the routes
 * in match order (longest prefix first, `/` last; written order as soon as one route is a regex),
 * so the first route that matches wins. Prefix matching follows Envoy's route `prefix`: a plain
 * string prefix of the normalized path, so `/api` matches `/api`, `/api/x` and also `/apix`
 * (write `/api/` to match only below the folder). A regex route must match the whole path, as
 * Envoy's `safe_regex` does. `replacePrefix` behaves as Envoy's `prefix_rewrite`: it replaces the
 * matched prefix, or the whole path for a regex route; one deviation, kept on purpose, is that the
 * seam never produces `//` (`/api` rewritten to `/` turns `/api/x` into `/x`, not `//x`). Paths
 * here carry no query; the caller re-appends it. No match gives `undefined` (404 `no route`).
 */
import type { DomainPortModel, DomainRouteModel } from '../config/model.js';

export interface DomainRouteMatch {
  readonly route: DomainRouteModel;
  /** The path to send upstream, without query. */
  readonly upstreamPath: string;
}

/**
 * Whole-path versions of route regexes, compiled once per regex object (the model is immutable,
 * so the source regex never changes). Also drops `g`/`y`, whose `lastIndex` would make matching
 * stateful.
 */
const anchored = new WeakMap<RegExp, RegExp>();

function wholePath(regex: RegExp): RegExp {
  let re = anchored.get(regex);
  if (!re) {
    re = new RegExp(`^(?:${regex.source})$`, regex.flags.replace(/[gy]/g, ''));
    anchored.set(regex, re);
  }
  return re;
}

export function matchDomainRoute(port: DomainPortModel, path: string): DomainRouteMatch | undefined {
  for (const route of port.routes) {
    if (route.regex !== undefined) {
      if (!wholePath(route.regex).test(path)) continue;
      return {
        route,
        upstreamPath: route.replacePrefix === undefined ? path : rewrite(route.replacePrefix, ''),
      };
    }
    const prefix = route.prefix ?? '/';
    if (!path.startsWith(prefix)) continue;
    return {
      route,
      upstreamPath:
        route.replacePrefix === undefined ? path : rewrite(route.replacePrefix, path.slice(prefix.length)),
    };
  }
  return undefined;
}

/** `replacement + rest`, always starting with `/` and without a doubled slash at the seam. */
function rewrite(replacement: string, rest: string): string {
  let out =
    replacement.endsWith('/') && rest.startsWith('/') ? replacement + rest.slice(1) : replacement + rest;
  if (!out.startsWith('/')) out = '/' + out;
  return out;
}
