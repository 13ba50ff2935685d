/**
 * Canonical JSON: members in sorted order, so two values that differ only in key order give the
 * same text (and hash). `skip` leaves members out by their path from the root (`['spec',
 * 'defaultOptions', 'autoscaling']`). Pure; never throws (an `undefined` or a function is `null`).
 */
export function canonicalJson(value: unknown, skip?: (path: readonly string[]) => boolean, path: readonly string[] = []): string {
  if (Array.isArray(value)) return `[${value.map((v, i) => canonicalJson(v, skip, [...path, String(i)])).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    const entries = Object.keys(record)
      .filter((k) => !(skip?.([...path, k]) ?? false))
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k], skip, [...path, k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
