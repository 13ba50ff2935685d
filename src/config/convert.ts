/**
 * The platform API's conversion of written records (Joi's `convert`, which the platform's servers
 * apply): a string that reads as a number, for a member typed number, and `"true"`/`"false"`, for a
 * member typed boolean, are taken as that value. `cpln workload update --set` sends every value as a
 * string (`{minScale: "2"}`). Which members are numbers and booleans is what the validator's shape
 * tables say (schema.ts `int`, `num`, `bool`): one rule, no second table of types. Anything that
 * does not convert is left for validation to report. Pure; never throws.
 */
import { INLINE } from './findings.js';
import { parsePath } from './locate.js';
import type { Settings } from './model.js';
import type { RawRecord } from './records.js';
import { isObject } from './schema.js';
import { validate } from './validate.js';

/** `record` with its convertible strings converted (the same object when there are none). */
export function convertScalars(record: RawRecord, settings: Settings): { record: RawRecord; converted: string[] } {
  const found: [string, number | boolean][] = [];
  validate([{ record, source: INLINE }], settings, (_, at, value) => found.push([at, value]));
  if (found.length === 0) return { record, converted: [] };
  const copy = structuredClone(record) as Record<string, unknown>;
  for (const [at, value] of found) {
    const steps = parsePath(at);
    let parent: unknown = copy;
    for (const step of steps.slice(0, -1)) parent = (parent as Record<string | number, unknown> | undefined)?.[step];
    const last = steps[steps.length - 1];
    if (last !== undefined && (isObject(parent) || Array.isArray(parent))) (parent as Record<string | number, unknown>)[last] = value;
  }
  return { record: copy, converted: found.map(([at]) => at) };
}
