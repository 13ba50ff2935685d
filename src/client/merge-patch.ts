/**
 * The JSON merge patch (RFC 7386) that turns one resource into another: members added or changed
 * with their new value, members removed as `null`, objects compared member by member, arrays and
 * scalars replaced whole. What `rest edit` sends, so a PATCH carries what the user changed and nothing
 * else. Pure. (A member whose new value is `null` cannot be expressed: RFC 7386 reads it as removal.)
 */

function isObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

/** Deep equality of JSON values (member order ignored). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    if (ka.length !== Object.keys(b).length) return false;
    return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && sameJson(a[k], b[k]));
  }
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  return false;
}

/** The merge patch from `before` to `after` (both objects); `{}` when they are the same. */
export function mergePatch(before: Record<string, unknown>, after: Record<string, unknown>): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  const set = (key: string, value: unknown): void => {
    Object.defineProperty(patch, key, { value, enumerable: true, writable: true, configurable: true });
  };
  for (const key of Object.keys(before)) {
    if (!Object.prototype.hasOwnProperty.call(after, key)) set(key, null);
  }
  for (const key of Object.keys(after)) {
    const was = Object.prototype.hasOwnProperty.call(before, key) ? before[key] : undefined;
    const now = after[key];
    if (was !== undefined && sameJson(was, now)) continue;
    if (isObject(was) && isObject(now)) set(key, mergePatch(was, now));
    else set(key, now);
  }
  return patch;
}
