/**
 * Deep-frozen copies for the snapshot: what a snapshot hands out (raw sub-objects, records) can be
 * read by every request but changed by none, and freezing a copy leaves the caller's objects alone
 * (inline records passed in memory stay theirs). Values must be structured-cloneable (parsed YAML
 * and JSON always are); `structuredClone` throws otherwise.
 */
export function frozen<T>(value: T): T {
  return deepFreeze(structuredClone(value));
}

/** Freezes `value` and everything reachable from it, in place. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const v of Object.values(value)) deepFreeze(v);
  }
  return value;
}
