/**
 * The order in which the client prints an object's members, the platform CLI's (`k8sKeySort` of its
 * util/format.js): `kind`, `itemKind`, `name`, `description`, ... first, `version`, `id`, `spec`,
 * `status`, ... `links` last, the rest by code unit in between. `sortedCopy` is its `toSortedJson`:
 * a copy whose members are inserted in that order, so `JSON.stringify` prints them so (integer-like
 * keys still come first, as JavaScript orders them: the platform CLI's copy goes through JSON.parse,
 * which orders them the same way). Pure; `sortedCopy` drops `undefined` members as JSON does.
 */

const FIRST = ['kind', 'itemKind', 'name', 'description', 'alias', 'tags', 'origin', 'type', 'provider', 'data'];
const LAST = ['version', 'id', 'spec', 'status', 'created', 'lastModified', 'manifest', 'links'];

/** A comparator of member names: negative when `a` goes first. */
export function keyOrder(a: string, b: string): number {
  if (a === b) return 0;
  const fa = FIRST.indexOf(a);
  const fb = FIRST.indexOf(b);
  if (fa >= 0 && fb >= 0) return fa - fb;
  const la = LAST.indexOf(a);
  const lb = LAST.indexOf(b);
  if (la >= 0 && lb >= 0) return la - lb;
  if (fa < 0 && fb < 0 && la < 0 && lb < 0) return a < b ? -1 : 1;
  if (fb >= 0) return 1;
  if (fa >= 0) return -1;
  if (lb >= 0) return -1;
  return 1;
}

/** Sets a member, `__proto__` included (as JSON.parse makes it: an own member, not the prototype). */
export function setMember(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  else target[key] = value;
}

/** A deep copy of JSON data with every object's members in `keyOrder`. */
export function sortedCopy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => (v === undefined ? null : sortedCopy(v)));
  if (value === null || typeof value !== 'object') return value;
  const json = (value as { toJSON?: () => unknown }).toJSON;
  if (typeof json === 'function') return sortedCopy(json.call(value));
  const source = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(source).sort(keyOrder)) {
    const v = source[key];
    if (v === undefined || typeof v === 'function') continue;
    setMember(out, key, sortedCopy(v));
  }
  return out;
}
