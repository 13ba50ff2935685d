/**
 * A small declarative checker for record shapes: combinators (`str`, `int`, `oneOf`, `obj`, ...)
 * build a `Check` that walks a parsed value and reports every problem it finds, each at its JSON
 * path (`spec.containers[0].ports[1].number`), through a `Report` bound to one record. Checks never
 * throw and never stop at the first problem; `null` counts as absent, as YAML writes an empty value.
 * The per-kind tables (`validate-*.ts`) are written with these.
 */
import { didYouMean } from './suggest.js';

/** Collects findings of one record as `kind/name: path: message` lines. */
export interface Report {
  error(at: string, message: string): void;
  warn(at: string, message: string): void;
  /**
   * Present while converting (convert.ts): a string at `at` that reads as the number or boolean
   * the member takes is reported here as that value, instead of as an error.
   */
  convert?(at: string, value: number | boolean): void;
}

/** A decimal numeral with optional sign, fraction and exponent, spaces around it allowed. */
const NUMBER_TEXT = /^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$/;

/** The numeral's significant digits: no sign, dot, exponent, leading or trailing zeros. */
function significant(text: string): string {
  return text.replace(/[eE][-+]?\d+$/, '').replace('.', '').replace(/0+$/, '').replace(/^[-+]?0*/, '');
}

/** A plain decimal numeral as a number prints: no `+`, no leading or trailing zeros, `0.5` for `.5`. */
function plainDecimal(text: string): string {
  let out = text.replace(/^\+/, '').replace(/\.0*$/, '').replace(/^(-?)\.([^.]*)$/, '$10.$2').replace(/^(-?)0+(\d)/, '$1$2');
  if (out.includes('.')) out = out.replace(/0+$/, '');
  return out === '-0' ? '0' : out;
}

/**
 * A string that reads as a number, as the platform's API converts it (Joi's number conversion, the
 * reference test/config/convert.test.ts compares with): a decimal numeral, spaces around it allowed,
 * whose value a double holds exactly as written (`'0.1000000000000000001'` and `'9007199254740993'`
 * do not) and within ±(2^53 − 1); `-0` reads as 0. Undefined otherwise.
 */
export function numberText(v: unknown): number | undefined {
  if (typeof v !== 'string' || !NUMBER_TEXT.test(v)) return undefined;
  const text = v.trim();
  const n = Number(text);
  if (!Number.isFinite(n) || Math.abs(n) > Number.MAX_SAFE_INTEGER) return undefined;
  const printed = String(n);
  if (/e/i.test(text)) {
    if (significant(text) !== significant(printed)) return undefined;
  } else if (!/e/i.test(printed) && printed !== plainDecimal(text)) {
    return undefined;
  }
  return n === 0 ? 0 : n;
}

/** `"true"` / `"false"` (any case, nothing around them) as the boolean; undefined otherwise. */
export function booleanText(v: unknown): boolean | undefined {
  if (typeof v !== 'string') return undefined;
  const t = v.toLowerCase();
  return t === 'true' ? true : t === 'false' ? false : undefined;
}

export type Check = (value: unknown, at: string, report: Report) => void;

export function reporter(prefix: string, errors: string[], warnings: string[]): Report {
  return {
    error: (at, message) => errors.push(`${prefix}: ${at}: ${message}`),
    warn: (at, message) => warnings.push(`${prefix}: ${at}: ${message}`),
  };
}

const PLAIN_KEY = /^[A-Za-z_$][\w$/-]*$/;

/** `spec` + `tracing` → `spec.tracing`; keys that are not plain (dots, spaces) are bracketed. */
export function member(at: string, key: string): string {
  if (!PLAIN_KEY.test(key)) return `${at}[${JSON.stringify(key)}]`;
  return at === '' ? key : `${at}.${key}`;
}

export function item(at: string, index: number): string {
  return `${at}[${index}]`;
}

export function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The value at `keys` under `v`, through objects only; `undefined` when a step is missing. */
export function valueAt(v: unknown, ...keys: readonly string[]): unknown {
  let out = v;
  for (const key of keys) out = isObject(out) ? out[key] : undefined;
  return out;
}

/** The object at `keys` under `v`, or an empty one: for reading records not yet known to be valid. */
export function objectAt(v: unknown, ...keys: readonly string[]): Record<string, unknown> {
  const out = valueAt(v, ...keys);
  return isObject(out) ? out : {};
}

/** Absent for the checks: `undefined`, or `null` (an empty YAML value). */
export function isAbsent(v: unknown): v is undefined | null {
  return v === undefined || v === null;
}

function range(min: number | undefined, max: number | undefined): string {
  if (min !== undefined && max !== undefined) return ` from ${min} to ${max}`;
  if (min !== undefined) return ` of at least ${min}`;
  if (max !== undefined) return ` of at most ${max}`;
  return '';
}

export function int(min?: number, max?: number): Check {
  const ok = (v: unknown): boolean => typeof v === 'number' && Number.isInteger(v) && (min === undefined || v >= min) && (max === undefined || v <= max);
  return (v, at, r) => {
    if (ok(v)) return;
    const n = r.convert && numberText(v);
    if (n !== undefined && ok(n)) r.convert!(at, n);
    else r.error(at, `must be an integer${range(min, max)}`);
  };
}

export function num(min?: number, max?: number): Check {
  const ok = (v: unknown): boolean => typeof v === 'number' && Number.isFinite(v) && (min === undefined || v >= min) && (max === undefined || v <= max);
  return (v, at, r) => {
    if (ok(v)) return;
    const n = r.convert && numberText(v);
    if (n !== undefined && ok(n)) r.convert!(at, n);
    else r.error(at, `must be a number${range(min, max)}`);
  };
}

export const bool: Check = (v, at, r) => {
  if (typeof v === 'boolean') return;
  const b = r.convert && booleanText(v);
  if (b !== undefined) r.convert!(at, b);
  else r.error(at, 'must be true or false');
};

export interface StrOptions {
  readonly max?: number;
  readonly nonEmpty?: boolean;
  /** A test on the string, with the message when it fails. */
  readonly test?: readonly [(s: string) => boolean, string];
}

export function str(opts: StrOptions = {}): Check {
  return (v, at, r) => {
    if (typeof v !== 'string') return r.error(at, 'must be a string');
    if (opts.nonEmpty && v === '') return r.error(at, 'must not be empty');
    if (opts.max !== undefined && v.length > opts.max) return r.error(at, `must be at most ${opts.max} characters`);
    if (opts.test && !opts.test[0](v)) r.error(at, opts.test[1]);
  };
}

export function oneOf(values: readonly (string | number | boolean)[]): Check {
  return (v, at, r) => {
    if (!values.includes(v as string)) r.error(at, `must be one of ${values.join(', ')}`);
  };
}

export function arr(each?: Check): Check {
  return (v, at, r) => {
    if (!Array.isArray(v)) return r.error(at, 'must be an array');
    if (each) for (let i = 0; i < v.length; i++) each(v[i], item(at, i), r);
  };
}

/** Any value passes: members the platform types as free objects. */
export const anything: Check = () => undefined;

export const anyObject: Check = (v, at, r) => {
  if (!isObject(v)) r.error(at, 'must be an object');
};

/** A map with free keys (`tags`, `customTags`, ...), every value checked by `each`. */
export function mapOf(each: Check): Check {
  return (v, at, r) => {
    if (!isObject(v)) return r.error(at, 'must be an object');
    for (const [k, x] of Object.entries(v)) each(x, member(at, k), r);
  };
}

/** Runs every check in order (all of them report). */
export function all(...checks: Check[]): Check {
  return (v, at, r) => {
    for (const check of checks) check(v, at, r);
  };
}

export type Fields = Readonly<Record<string, Check>>;

export interface ObjOptions {
  /** The spec says "no other members": anything not in `fields` is an error. */
  readonly closed?: boolean;
  readonly required?: readonly string[];
  /** Cross-member rules, run on the object after its members were checked. */
  readonly refine?: (o: Record<string, unknown>, at: string, r: Report) => void;
}

export function obj(fields: Fields, opts: ObjOptions = {}): Check {
  const names = Object.keys(fields);
  const allowed = names.join(', ');
  // Looked up in a Map, and the members' paths made without a regex test: a 10,000-workload
  // configuration passes through here about a million times.
  const checks = new Map(Object.entries(fields).map(([k, check]) => [k, { check, plain: PLAIN_KEY.test(k) }]));
  const required = opts.required ?? [];
  return (v, at, r) => {
    if (!isObject(v)) return r.error(at, 'must be an object');
    for (const name of required) {
      if (isAbsent(v[name])) r.error(member(at, name), 'is required');
    }
    for (const k in v) {
      if (!Object.hasOwn(v, k)) continue;
      const field = checks.get(k);
      if (field) {
        const x = v[k];
        if (!isAbsent(x)) field.check(x, field.plain ? (at === '' ? k : `${at}.${k}`) : member(at, k), r);
      } else if (opts.closed) {
        const hint = didYouMean(k, names);
        r.error(member(at, k), `unknown member (${hint === '' ? '' : `${hint} `}allowed: ${allowed})`);
      }
    }
    opts.refine?.(v, at, r);
  };
}

/** Reports at `at` unless exactly one of `keys` is present in `o` (naming those found). */
export function exactlyOne(o: Record<string, unknown>, keys: readonly string[], at: string, r: Report): void {
  const given = keys.filter((k) => !isAbsent(o[k]));
  if (given.length !== 1) r.error(at, `must have exactly one of ${keys.join(', ')}${given.length > 1 ? ` (found ${given.join(', ')})` : ''}`);
}

/** Runs `check` on a member when it is present (for hand-written rules). */
export function checkMember(o: Record<string, unknown>, key: string, at: string, r: Report, check: Check): void {
  const v = o[key];
  if (!isAbsent(v)) check(v, member(at, key), r);
}
