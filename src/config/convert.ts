/**
 * Records read as the platform's API reads them (DESIGN §3; Joi's `convert`, which the platform's
 * servers apply): a string that reads as a number, for a member typed number, and `"true"`/`"false"`,
 * for a member typed boolean, are taken as that value. `cpln workload update --set` sends every value
 * as a string (`{minScale: "2"}`), and a file `cpln apply` sends may hold `timeoutSeconds: '5'`: both
 * are numbers there, so they are here, for the API's writes and for files alike. Which members are
 * numbers and booleans is what the validator's shape tables say (schema.ts `int`, `num`, `bool`): one
 * rule, no second table of types. Anything that does not convert is left for validation to report.
 * Pure; never throws.
 */
import { INLINE } from './findings.js';
import { deepFreeze } from './frozen.js';
import { parsePath } from './locate.js';
import type { Settings } from './model.js';
import type { RawRecord, SourcedRecord } from './records.js';
import { isObject } from './schema.js';
import { ValidationMemo, validate, type ValidationResult } from './validate.js';

type Conversion = readonly [at: string, value: number | boolean];

/** A copy of `record` with each value at `at` replaced (frozen when `record` was). */
function converted(record: RawRecord, found: readonly Conversion[]): RawRecord {
  const copy = structuredClone(record) as Record<string, unknown>;
  for (const [at, value] of found) {
    const steps = parsePath(at);
    let parent: unknown = copy;
    for (const step of steps.slice(0, -1)) parent = (parent as Record<string | number, unknown> | undefined)?.[step];
    const last = steps[steps.length - 1];
    if (last !== undefined && (isObject(parent) || Array.isArray(parent))) (parent as Record<string | number, unknown>)[last] = value;
  }
  return Object.isFrozen(record) ? deepFreeze(copy) : copy;
}

/** `record` with its convertible strings converted (the same object when there are none). */
export function convertScalars(record: RawRecord, settings: Settings): { record: RawRecord; converted: string[] } {
  const found: Conversion[] = [];
  validate([{ record, source: INLINE }], settings, (_, at, value) => found.push([at, value]));
  if (found.length === 0) return { record, converted: [] };
  return { record: converted(record, found), converted: found.map(([at]) => at) };
}

/** The memos (validate.ts) of both validations `validateConverted` may make: the records as read, and as converted. */
export class ConvertedMemo {
  readonly read = new ValidationMemo();
  readonly converted = new ValidationMemo();
}

/**
 * Validates `records` as the platform's API reads them: the records with their convertible strings
 * converted (those without any are the same objects; when none has one, the same list), and their
 * validation. A list with conversions is validated again as converted, so that every rule, the
 * cross-record ones included, judges the values compilation will read. `memo`, when given, makes
 * each validation check only what changed since the last one given it (validate.ts).
 */
export function validateConverted(records: readonly SourcedRecord[], settings: Settings, memo?: ConvertedMemo): { records: readonly SourcedRecord[]; result: ValidationResult } {
  const found = new Map<SourcedRecord, Conversion[]>();
  const first = validate(records, settings, (sourced, at, value) => {
    let list = found.get(sourced);
    if (!list) found.set(sourced, (list = []));
    list.push([at, value]);
  }, memo?.read);
  if (found.size === 0) return { records, result: first };
  const out = records.map((s) => {
    const list = found.get(s);
    return list === undefined ? s : { ...s, record: converted(s.record, list) };
  });
  return { records: out, result: validate(out, settings, undefined, memo?.converted) };
}
