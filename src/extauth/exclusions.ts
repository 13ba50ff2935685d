/**
 * `excludedExternalAuth[]` (from the GVC's and the workload's `spec.sidecar.envoy`): requests that
 * skip external authorization. Each entry's `match` is the subset of Envoy's `RouteMatch` that
 * sidecar configs use — `prefix`, `path`, `safe_regex.regex`, `headers[]`, `query_parameters[]`,
 * `case_sensitive` — with Envoy's semantics; `port` compares the listener port the request arrived
 * on, `svcPort` the container port it is for. Every member given must match (AND); any entry
 * matching excludes the request (OR). The path is always the one normalized path (never the raw
 * target), without the query. Compiled once per snapshot; a rule that cannot compile (a bad regex)
 * never matches, so the request is checked: a broken exclusion fails closed.
 */
import { wireString } from './utf8.js';

/** What a rule looks at. `header()` answers Envoy's view: repeated headers joined with ",". */
export interface MatchInput {
  readonly path: string;
  /** '' or the query as sent, from its `?`. */
  readonly query: string;
  header(name: string): string | undefined;
  readonly listenerPort: number;
  readonly targetPort: number | undefined;
}

export type Predicate = (input: MatchInput) => boolean;

/** A compiled regex that must match the whole input, as RE2's full match in Envoy's `safe_regex`. */
export function compileFullRegex(source: string): RegExp {
  let flags = '';
  let body = source;
  // RE2's leading inline flags; JavaScript (Node 20) has no inline modifiers.
  const inline = /^\(\?([ims]+)\)/.exec(body);
  if (inline) {
    flags = [...new Set(inline[1]!.split(''))].join('');
    body = body.slice(inline[0].length);
  }
  return new RegExp(`^(?:${body})$`, flags);
}

type StringMatch = (value: string) => boolean;

/** Envoy's `StringMatcher`: exact, prefix, suffix, contains (with `ignore_case`), safe_regex. */
export function compileStringMatcher(m: Record<string, unknown>): StringMatch {
  const ignoreCase = m.ignore_case === true;
  const norm = (s: string): string => (ignoreCase ? s.toLowerCase() : s);
  if (typeof m.exact === 'string') {
    const want = norm(m.exact);
    return (v) => norm(v) === want;
  }
  if (typeof m.prefix === 'string') {
    const want = norm(m.prefix);
    return (v) => norm(v).startsWith(want);
  }
  if (typeof m.suffix === 'string') {
    const want = norm(m.suffix);
    return (v) => norm(v).endsWith(want);
  }
  if (typeof m.contains === 'string') {
    const want = norm(m.contains);
    return (v) => norm(v).includes(want);
  }
  const regex = (m.safe_regex as { regex?: unknown } | undefined)?.regex;
  if (typeof regex === 'string') {
    const re = compileFullRegex(regex);
    return (v) => re.test(v);
  }
  throw new Error('string_match needs one of exact, prefix, suffix, contains, safe_regex');
}

/**
 * Envoy's `HeaderMatcher` (route-level): a missing header matches only `present_match: false`
 * (or, inverted, only `present_match: true`); otherwise the value matcher's answer, flipped by
 * `invert_match`. The legacy `exact_match`/`prefix_match`/`suffix_match`/`contains_match` are
 * case-sensitive; `string_match` may ignore case.
 */
export function compileHeaderMatcher(h: Record<string, unknown>): Predicate {
  if (typeof h.name !== 'string' || h.name === '') throw new Error('header matcher needs a name');
  const name = h.name.toLowerCase();
  const invert = h.invert_match === true;
  const missingAsEmpty = h.treat_missing_header_as_empty === true;
  let present: boolean | undefined;
  let valueMatch: StringMatch | undefined;
  if (typeof h.present_match === 'boolean') present = h.present_match;
  else if (typeof h.exact_match === 'string') valueMatch = compileStringMatcher({ exact: h.exact_match });
  else if (typeof h.prefix_match === 'string') valueMatch = compileStringMatcher({ prefix: h.prefix_match });
  else if (typeof h.suffix_match === 'string') valueMatch = compileStringMatcher({ suffix: h.suffix_match });
  else if (typeof h.contains_match === 'string') valueMatch = compileStringMatcher({ contains: h.contains_match });
  else if (isRecord(h.safe_regex_match) && typeof h.safe_regex_match.regex === 'string') {
    valueMatch = compileStringMatcher({ safe_regex: h.safe_regex_match });
  } else if (isRecord(h.string_match)) valueMatch = compileStringMatcher(h.string_match);
  else present = true; // Envoy: a matcher with no specifier matches when the header is present.
  return (input) => {
    let value = input.header(name);
    if (value === undefined) {
      if (!missingAsEmpty) return invert ? present === true : present === false;
      value = '';
    }
    const match = valueMatch ? valueMatch(value) : present === true;
    return match !== invert;
  };
}

/** Envoy's `QueryParameterMatcher`: the first value of the parameter, decoded. */
export function compileQueryMatcher(q: Record<string, unknown>): Predicate {
  if (typeof q.name !== 'string' || q.name === '') throw new Error('query parameter matcher needs a name');
  const name = q.name;
  const valueMatch = isRecord(q.string_match) && q.present_match !== true ? compileStringMatcher(q.string_match) : undefined;
  return (input) => {
    const value = firstQueryValue(input.query, name);
    if (value === undefined) return false;
    return valueMatch ? valueMatch(value) : true;
  };
}

/** The first value of `name` in `?a=1&b=2` (percent-decoded; `+` kept, as Envoy does). */
export function firstQueryValue(query: string, name: string): string | undefined {
  if (query.length <= 1) return undefined;
  for (const part of query.slice(1).split('&')) {
    const eq = part.indexOf('=');
    const key = decode(eq < 0 ? part : part.slice(0, eq));
    if (key === name) return eq < 0 ? '' : decode(part.slice(eq + 1));
  }
  return undefined;
}

function decode(s: string): string {
  if (!s.includes('%')) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const NEVER: Predicate = () => false;

/** One `RouteMatch`: a path rule (prefix / path / safe_regex) plus headers and query parameters. */
export function compileRouteMatch(match: Record<string, unknown>): Predicate {
  const caseSensitive = match.case_sensitive !== false;
  const checks: Predicate[] = [];
  if (typeof match.prefix === 'string') {
    const prefix = match.prefix;
    if (caseSensitive) checks.push((i) => i.path.startsWith(prefix));
    else {
      const lower = prefix.toLowerCase();
      checks.push((i) => i.path.toLowerCase().startsWith(lower));
    }
  } else if (typeof match.path === 'string') {
    const path = match.path;
    if (caseSensitive) checks.push((i) => i.path === path);
    else {
      const lower = path.toLowerCase();
      checks.push((i) => i.path.toLowerCase() === lower);
    }
  } else if (isRecord(match.safe_regex)) {
    if (typeof match.safe_regex.regex !== 'string') throw new Error('safe_regex needs regex');
    // Envoy: `case_sensitive` does not apply to regex rules.
    const re = compileFullRegex(match.safe_regex.regex);
    checks.push((i) => re.test(i.path));
  }
  if (Array.isArray(match.headers)) {
    for (const h of match.headers) {
      if (!isRecord(h)) throw new Error('headers[] entries must be objects');
      checks.push(compileHeaderMatcher(h));
    }
  }
  if (Array.isArray(match.query_parameters)) {
    for (const q of match.query_parameters) {
      if (!isRecord(q)) throw new Error('query_parameters[] entries must be objects');
      checks.push(compileQueryMatcher(q));
    }
  }
  return all(checks);
}

function all(checks: readonly Predicate[]): Predicate {
  if (checks.length === 0) return () => true;
  if (checks.length === 1) return checks[0]!;
  return (input) => {
    for (const c of checks) if (!c(input)) return false;
    return true;
  };
}

/** One `excludedExternalAuth[]` entry: `match`, `port` (listener port), `svcPort` (container port). */
export function compileExclusion(entry: unknown): Predicate {
  if (!isRecord(entry)) throw new Error('must be an object');
  const checks: Predicate[] = [];
  if (isRecord(entry.match)) checks.push(compileRouteMatch(entry.match));
  if (typeof entry.port === 'number') {
    const port = entry.port;
    checks.push((i) => i.listenerPort === port);
  }
  if (typeof entry.svcPort === 'number') {
    const svcPort = entry.svcPort;
    checks.push((i) => i.targetPort === svcPort);
  }
  // An empty entry would exclude everything; validation rejects it, and here it excludes nothing.
  if (checks.length === 0) return NEVER;
  return all(checks);
}

/**
 * Every entry of the given lists (GVC first, then workload) as one predicate, or `undefined` when
 * there are none. Entries that do not compile are reported in `problems` and never match.
 */
export function compileExclusions(lists: readonly unknown[], problems: string[]): Predicate | undefined {
  const rules: Predicate[] = [];
  lists.forEach((list, l) => {
    if (list === undefined || list === null) return;
    if (!Array.isArray(list)) {
      problems.push(`excludedExternalAuth (${l === 0 ? 'gvc' : 'workload'}) is not a list`);
      return;
    }
    list.forEach((entry, i) => {
      try {
        rules.push(compileExclusion(entry));
      } catch (err) {
        problems.push(`excludedExternalAuth[${i}] (${l === 0 ? 'gvc' : 'workload'}): ${(err as Error).message}; it never matches`);
      }
    });
  });
  if (rules.length === 0) return undefined;
  return (input) => {
    for (const r of rules) if (r(input)) return true;
    return false;
  };
}

/**
 * A header lookup over Node's raw header list, joining repeated headers with "," as Envoy does
 * (Node's parsed `headers` drops duplicates of some names and joins others with ", ").
 * `host`/`:authority` answer the request's host.
 */
export function rawHeaderLookup(rawHeaders: readonly string[], host: string, extra?: Readonly<Record<string, string>>): (name: string) => string | undefined {
  return (name) => {
    if (extra && name in extra) return extra[name];
    if (name === 'host' || name === ':authority') return host;
    let out: string | undefined;
    for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
      if (rawHeaders[i]!.toLowerCase() !== name) continue;
      const v = wireString(rawHeaders[i + 1]!);
      out = out === undefined ? v : `${out}${name === 'cookie' ? '; ' : ','}${v}`;
    }
    return out;
  };
}
