/**
 * The load pipeline: settings checked, records read (load.ts), validated (validate.ts), compiled
 * (compile.ts). The answer is `{ok: true, snapshot}` or `{ok: false, errors, warnings}` with every
 * error; nothing is compiled from a rejected set. A file that does not parse stops the load before
 * validation: its records may be the targets of other records' links, so validating the rest would
 * only add misleading "not defined" errors. Errors about records of files name the file and the line
 * of the offending path (`FILE:LINE: kind/name: path: message`); the line is looked up only when
 * there are errors (locate.ts), so a valid load costs nothing more. `buildSnapshot` throws a `ConfigError` instead, for
 * callers that build a snapshot from records they wrote themselves (the built-in demo, tests).
 */
import { compile } from './compile.js';
import type { Finding } from './findings.js';
import { locateFindings, type ReadText } from './locate.js';
import { readRecords } from './load.js';
import type { Settings, Snapshot } from './model.js';
import type { RawRecord, SourcedRecord } from './records.js';
import { isObject } from './schema.js';
import { validateConverted, type ConvertedMemo } from './convert.js';
import type { ValidationResult } from './validate.js';
import { NAME_MAX, NAME_PATTERN, NAME_RULE, isHostName } from './values.js';
import { asApplied } from './applied.js';

export const defaultSettings: Settings = Object.freeze({
  vendor: 'svc',
  appDomain: 'app.localhost',
  directDomain: 'direct.localhost',
  internalDomain: 'internal.localhost',
});

/** A configuration that cannot be used, with every error as `kind/name: path: what is wrong`. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(readonly errors: readonly string[], readonly warnings: readonly string[] = []) {
    super(`invalid configuration (${errors.length} error${errors.length === 1 ? '' : 's'}):\n${errors.join('\n')}`);
    this.name = 'ConfigError';
  }
}

export type LoadResult =
  | { readonly ok: true; readonly snapshot: Snapshot }
  | { readonly ok: false; readonly errors: string[]; readonly warnings: string[] };

/** A record given in memory: sourced, or bare (then its source is `inline`). */
export type RecordInput = SourcedRecord | RawRecord;

function isSourced(r: RecordInput): r is SourcedRecord {
  const o = r as Readonly<Record<string, unknown>>;
  return isObject(o.record) && typeof o.source === 'string' && o.kind === undefined;
}

export function toSourced(records: readonly RecordInput[], source = 'inline'): SourcedRecord[] {
  return records.map((r) => (isSourced(r) ? r : { record: r, source }));
}

/** Settings are flags, not records; they are checked here with the same line format. */
export function checkSettings(settings: Settings): string[] {
  const errors: string[] = [];
  if (!NAME_PATTERN.test(settings.vendor)) {
    errors.push('settings: vendor: must be lowercase letters, digits and hyphens');
  }
  for (const key of ['appDomain', 'directDomain', 'internalDomain'] as const) {
    if (!isHostName(settings[key])) errors.push(`settings: ${key}: must be a host name`);
  }
  if (settings.gvc !== undefined && !(NAME_PATTERN.test(settings.gvc) && settings.gvc.length <= NAME_MAX)) {
    errors.push(`settings: gvc: ${NAME_RULE}`);
  }
  return errors;
}

/** Validates and compiles records held in memory. */
export function compileRecords(records: readonly RecordInput[], settings: Settings = defaultSettings, generation = 1): LoadResult {
  return compileSourced(toSourced(records), settings, generation).result;
}

/** The records as applied and converted, validated: what `compiled` compiles when there is no error. */
interface Checked {
  readonly settingsErrors: string[];
  readonly applied: readonly SourcedRecord[];
  readonly validation: ValidationResult;
}

/**
 * Validates the records as applied (applied.ts: records that name no GVC placed in the default one)
 * and converted (convert.ts: `'5'` for a number member is 5); `applied` is that list, the one the
 * findings' records belong to and the snapshot holds.
 */
function checkSourced(sourced: readonly SourcedRecord[], settings: Settings, memo?: ConvertedMemo): Checked {
  const settingsErrors = checkSettings(settings);
  const { records: applied, result: validation } = validateConverted(asApplied(sourced, settings.gvc), settings, memo);
  return { settingsErrors, applied, validation };
}

/** The snapshot of checked records, or every error. */
function compiled({ settingsErrors, applied, validation: { errors, warnings, catalog, errorFindings } }: Checked, settings: Settings, generation: number): { result: LoadResult; settingsErrors: string[]; findings: readonly Finding[]; applied: readonly SourcedRecord[] } {
  if (settingsErrors.length + errors.length > 0) {
    return { result: { ok: false, errors: [...settingsErrors, ...errors], warnings }, settingsErrors, findings: errorFindings, applied };
  }
  return { result: { ok: true, snapshot: compile(applied, settings, generation, warnings, catalog) }, settingsErrors, findings: [], applied };
}

function compileSourced(sourced: readonly SourcedRecord[], settings: Settings, generation: number): ReturnType<typeof compiled> {
  return compiled(checkSourced(sourced, settings), settings, generation);
}

/** How `compileLocated` runs in a process that keeps running. */
export interface LocatedOptions {
  /** Reads a file again for the lines of errors (default: the file system). */
  readonly read?: ReadText;
  /**
   * Awaited between validation and compilation: a running process lets the requests waiting
   * meanwhile through, rather than blocking its event loop for both at once (10,000 workloads:
   * hundreds of ms).
   */
  readonly pause?: () => Promise<unknown>;
  /** What the previous validation found (convert.ts): only what changed since is checked again. */
  readonly memo?: ConvertedMemo;
}

/**
 * `compileRecords` for records read from files: errors name the line of their path in the file,
 * read again only when there are errors.
 */
export async function compileLocated(records: readonly RecordInput[], settings: Settings, generation: number, options: LocatedOptions = {}): Promise<LoadResult> {
  const { read, pause, memo } = options;
  const checked = checkSourced(toSourced(records), settings, memo);
  await pause?.();
  const { result, settingsErrors, findings, applied } = compiled(checked, settings, generation);
  if (result.ok) return result;
  return { ok: false, errors: [...settingsErrors, ...(await locateFindings(findings, applied, read))], warnings: result.warnings };
}

/** Reads, validates and compiles the records of files and folders (and `extra` records in memory). */
export async function loadSnapshot(
  paths: readonly string[],
  settings: Settings = defaultSettings,
  generation = 1,
  extra: readonly RecordInput[] = [],
): Promise<LoadResult> {
  const read = await readRecords(paths);
  if (read.errors.length > 0) return { ok: false, errors: read.errors, warnings: [] };
  return compileLocated([...read.records, ...toSourced(extra)], settings, generation);
}

/** Like `compileRecords`, but throws a `ConfigError` when the records are invalid. */
export function buildSnapshot(records: readonly RecordInput[], settings: Settings = defaultSettings, generation = 1): Snapshot {
  const result = compileRecords(records, settings, generation);
  if (!result.ok) throw new ConfigError(result.errors, result.warnings);
  return result.snapshot;
}
