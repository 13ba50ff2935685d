/**
 * Parsers and predicates for the scalar values records carry: Go durations, CIDR ranges, host
 * names, `host:port` addresses, names, tag values. Each is pure and total: it answers `undefined`
 * or `false` for a value it does not accept, never throws. Validation and compilation share them,
 * so what validates is exactly what compiles.
 */
import { isIP } from 'node:net';

/** A tag value as written: YAML and JSON give strings, numbers or booleans. */
export type Scalar = string | number | boolean;

export function isScalar(v: unknown): v is Scalar {
  return typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));
}

/** Tag values are compared as strings: `true` and `"true"` agree, `8080` and `"8080"` too. */
export function scalarText(v: Scalar): string {
  return String(v);
}

const UNIT_MS: Readonly<Record<string, number>> = {
  ns: 1e-6,
  us: 1e-3,
  'µs': 1e-3,
  'μs': 1e-3,
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
};
const DURATION = /^[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+$/;
const DURATION_PART = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)/g;
const BARE_SECONDS = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$/;

/**
 * A duration in milliseconds, from Go's syntax (`200ms`, `1.5s`, `1h2m`, units ns/us/µs/ms/s/m/h,
 * an optional sign) or a bare number of seconds (`2`, `"0.5"`). `undefined` when it is neither.
 */
export function parseDuration(value: string | number): number | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? value * 1000 : undefined;
  const s = value.trim();
  if (BARE_SECONDS.test(s)) return Number(s) * 1000;
  if (!DURATION.test(s)) return undefined;
  let ms = 0;
  for (const [, amount, unit] of s.matchAll(DURATION_PART)) ms += Number(amount) * (UNIT_MS[unit as string] as number);
  return s.startsWith('-') ? -ms : ms;
}

/** An IPv4 or IPv6 address, or a CIDR range of one (`10.0.0.0/8`, `2001:db8::/32`). */
export function isAddressOrCidr(s: string): boolean {
  const slash = s.indexOf('/');
  if (slash < 0) return isIP(s) !== 0;
  const family = isIP(s.slice(0, slash));
  const bits = s.slice(slash + 1);
  if (family === 0 || !/^\d{1,3}$/.test(bits)) return false;
  return Number(bits) <= (family === 4 ? 32 : 128);
}

const LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/i;

/** A DNS host name (letters, digits, hyphens; dot-separated labels), case-insensitive, optional trailing dot. */
export function isHostName(s: string): boolean {
  const host = s.endsWith('.') ? s.slice(0, -1) : s;
  if (host.length === 0 || host.length > 253) return false;
  return host.split('.').every((label) => label.length <= 63 && LABEL.test(label));
}

/** A host name or an IP address (an IPv6 address without brackets). */
export function isHostOrIp(s: string): boolean {
  return isIP(s) !== 0 || isHostName(s);
}

export function isPortNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= 1 && v <= 65535;
}

/** A port written as a tag value: `8080` or `"8080"`. */
export function parsePort(v: Scalar): number | undefined {
  const s = scalarText(v);
  if (!/^\d{1,5}$/.test(s)) return undefined;
  const n = Number(s);
  return isPortNumber(n) ? n : undefined;
}

/** `host:port`, `1.2.3.4:port` or `[::1]:port`. */
export function parseHostPort(s: string): { host: string; port: number } | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(s);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (!isPortNumber(port)) return undefined;
  if (m[1] !== undefined) return isIP(m[1]) === 6 ? { host: m[1], port } : undefined;
  const host = m[2] as string;
  return isHostOrIp(host) ? { host, port } : undefined;
}

/**
 * Names of records other than domains: 1–64 lowercase letters, digits and hyphens, starting and
 * ending with a letter or digit (an RFC 1123 label, allowed up to 64 as the platform allows).
 */
export const NAME_PATTERN = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;
export const NAME_RULE = 'must be lowercase letters, digits and hyphens, starting and ending with a letter or digit';
export const NAME_MAX = 64;
export const DESCRIPTION_MAX = 250;

/** A boolean tag: `true`/`false`, as booleans or strings. */
export function parseBool(v: Scalar): boolean | undefined {
  const s = scalarText(v);
  return s === 'true' ? true : s === 'false' ? false : undefined;
}

/** A number of seconds written as a number or a decimal string. */
export function parseSeconds(v: Scalar): number | undefined {
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v !== 'string' || !/^\d+(?:\.\d+)?$/.test(v.trim())) return undefined;
  return Number(v);
}

/**
 * A string of ASCII decimal digits, read as the integer it writes (`'1'` → 1, `'007'` → 7): how the
 * platform writes counts it types as strings. Anything else is not one: a sign, a space, a dot, an
 * exponent, digits of other scripts, the empty string, or a value past 2^53 − 1 (`undefined`).
 */
export function parseDigits(text: string): number | undefined {
  if (text.length === 0) return undefined;
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const digit = text.charCodeAt(i) - 48;
    if (digit < 0 || digit > 9) return undefined;
    // Only grows: once past the safe range it stays past it.
    n = n * 10 + digit;
  }
  return Number.isSafeInteger(n) ? n : undefined;
}

export type ReplicaAmount = number | `${number}%`;

/**
 * `rolloutOptions.maxSurgeReplicas` and `maxUnavailableReplicas` as the platform takes them: a count
 * (an integer of at least 0, or a string of digits, as the platform's own types and files write it:
 * `'1'`) or a percentage (`'25%'`). The count as a number, a percentage as written; else `undefined`.
 */
export function parseReplicaAmount(v: unknown): ReplicaAmount | undefined {
  if (typeof v === 'number') return Number.isSafeInteger(v) && v >= 0 ? v : undefined;
  if (typeof v !== 'string') return undefined;
  if (v.endsWith('%')) return parseDigits(v.slice(0, -1)) === undefined ? undefined : (v as `${number}%`);
  return parseDigits(v);
}

/** Lower-cased host without a trailing dot: the form hosts are compared in. */
export function canonicalHostName(s: string): string {
  const lower = s.toLowerCase();
  return lower.endsWith('.') ? lower.slice(0, -1) : lower;
}

/** Compiles `source` as a JavaScript regular expression; the error message when it does not compile. */
export function regexError(source: string): string | undefined {
  try {
    new RegExp(source);
    return undefined;
  } catch (e) {
    return (e as Error).message;
  }
}
