/**
 * Validation of a whole set of records against the platform spec's rules (DESIGN §2): the common
 * fields (`kind`, `name` ≤ 64 and DNS-like, `description` ≤ 250, scalar `tags`), each kind's shape
 * table, the links between records, duplicates, and GVC alias clashes. Every problem is collected,
 * never just the first, as one line `FILE:LINE: kind/name: json.path: what is wrong` (findings.ts;
 * records in memory have no `FILE:LINE: `); warnings (kinds svcproxy does not read, unknown vendor
 * tags, workloads closed to external traffic, ...) use the same form. The kinds `up`'s API keeps
 * without routing with them (`quota`, `policy`: validate-platform.ts) are checked as well. Any other
 * platform kind svcproxy does not read is a warning and its record is not looked into; a kind that is no platform kind at all is
 * an error with the nearest kind ("did you mean"), as a misspelt kind silently ignored is how a
 * workload goes missing. Never throws.
 *
 * A `ValidationMemo` makes the next validation of a set that changed in a few records check only
 * those and the records whose checks read them (`reusable`); the others' findings are taken from the
 * memo, and the index is made from the last one where the change allows (catalog.ts `catalogAfter`);
 * the duplicates and the aliases are found again every time; the result is what a
 * whole-set validation says (test/config/incremental-validate.test.ts holds the two together).
 */
import type { Settings } from './model.js';
import { gvcAlias } from './alias.js';
import { LayeredMap } from '../layered-map.js';
import { replacedRun } from './runs.js';
import { buildCatalog, catalogAfter, catalogChange, recordKey as catalogKey, type BuiltCatalog, type Catalog } from './catalog.js';
import { PLATFORM_KINDS, READ_KINDS, isReadKind, recordLabel, type RawRecord, type ReadKind, type SourcedRecord } from './records.js';
import { findingReporter, findingText, placeOf, type Finding } from './findings.js';
import { str, type Check, type Report } from './schema.js';
import { didYouMean } from './suggest.js';
import { checkTagValues } from './tags.js';
import { locationShape, orgShape, plainName } from './validate-common.js';
import { checkDeploymentRefs, checkDomainRefs, deploymentShape, domainShape } from './validate-domain.js';
import { checkGvcRefs, gvcShape } from './validate-gvc.js';
import { checkWorkloadRefs, workloadShape } from './validate-workload.js';
import { checkQuotaRefs, policyShape, quotaName, quotaShape } from './validate-platform.js';
import { DESCRIPTION_MAX, NAME_MAX, isHostName } from './values.js';

export interface ValidationResult {
  readonly errors: string[];
  readonly warnings: string[];
  /** What `errors` and `warnings` say, with the records they are about (same order). */
  readonly errorFindings: readonly Finding[];
  readonly warningFindings: readonly Finding[];
  /** The record index the checks used; `compile()` takes it instead of building it again. */
  readonly catalog: Catalog;
}

interface KindRules {
  readonly shape: Check;
  readonly refs?: (record: RawRecord, catalog: Catalog, r: Report, settings: Settings) => void;
  readonly name: Check;
}

const hostName = str({ max: NAME_MAX, test: [isHostName, 'must be a host name (letters, digits and hyphens in dot-separated labels)'] });

/** One row per kind svcproxy reads. */
const READ_RULES: Readonly<Record<ReadKind, KindRules>> = {
  org: { shape: orgShape, name: plainName },
  location: { shape: locationShape, name: plainName },
  gvc: { shape: gvcShape, name: plainName, refs: checkGvcRefs },
  workload: { shape: workloadShape, name: plainName, refs: checkWorkloadRefs },
  domain: { shape: domainShape, name: hostName, refs: checkDomainRefs },
  deployment: { shape: deploymentShape, name: plainName, refs: checkDeploymentRefs },
};

/** Every kind whose records are checked: those svcproxy reads, and those `up`'s API keeps (validate-platform.ts). */
const KINDS: Readonly<Record<string, KindRules>> = {
  ...READ_RULES,
  quota: { shape: quotaShape, name: quotaName, refs: checkQuotaRefs },
  policy: { shape: policyShape, name: plainName },
};

/** The kinds whose records validation looks into, in the order reports list them. */
export const CHECKED_KINDS: readonly string[] = Object.keys(KINDS);

export function isCheckedKind(kind: unknown): kind is string {
  return typeof kind === 'string' && Object.hasOwn(KINDS, kind);
}

/** A kind-less document with these members is the rate-limit service's rules (ratelimit/service/rules.ts). */
export function isRulesDocument(record: RawRecord): boolean {
  return isAbsent(record.kind) && 'domain' in record && 'descriptors' in record;
}

function isAbsent(v: unknown): boolean {
  return v === undefined || v === null || v === '';
}

/** The common fields; `false` when the record cannot be looked into further. */
function checkCommon(sourced: SourcedRecord, r: Report): boolean {
  const { record } = sourced;
  const kind = record.kind;
  if (isAbsent(kind)) {
    const rules = isRulesDocument(record) ? ' (this is a rate-limit rules document: `svcproxy ratelimit --config` reads it)' : '';
    r.error('kind', `is required${rules}`);
    return false;
  }
  if (typeof kind !== 'string') {
    r.error('kind', 'must be a string');
    return false;
  }
  if (!isCheckedKind(kind)) {
    if (PLATFORM_KINDS.includes(kind)) {
      // Its common members are every record's (and name the record at up's API); the rest is not looked into.
      checkCommonMembers(record, plainName, r);
      r.warn('kind', `${JSON.stringify(kind)} is a platform kind svcproxy does not read; not checked`);
    } else {
      const hint = didYouMean(kind, [...READ_KINDS, ...PLATFORM_KINDS.filter((k) => !isReadKind(k))]);
      r.error('kind', `${JSON.stringify(kind)} is not a platform kind (${hint === '' ? `svcproxy reads ${READ_KINDS.join(', ')}` : hint})`);
    }
    return false;
  }
  checkCommonMembers(record, KINDS[kind]!.name, r);
  return typeof record.name === 'string' && record.name !== '';
}

/** `name` (by the kind's rule), `description`, `tags`: the members every record has. */
function checkCommonMembers(record: RawRecord, name: Check, r: Report): void {
  if (record.name === undefined || record.name === null || record.name === '') r.error('name', 'is required');
  else name(record.name, 'name', r);
  if (record.description !== undefined && record.description !== null) str({ max: DESCRIPTION_MAX })(record.description, 'description', r);
  if (record.tags !== undefined && record.tags !== null) checkTagValues(record.tags, 'tags', r);
}

function checkAliases(catalog: Catalog, records: readonly SourcedRecord[], errors: Finding[]): void {
  const owners = new Map<string, string>();
  for (const [name, gvc] of catalog.gvcs) {
    const alias = gvcAlias(name, gvc.alias);
    const owner = owners.get(alias);
    if (owner === undefined) {
      owners.set(alias, name);
      continue;
    }
    const record = records.find((s) => s.record === gvc);
    errors.push({ ...(record ? { record } : {}), label: `gvc/${name}`, at: 'alias', message: `${alias} is already the alias of gvc ${owner}` });
  }
}

/** What one record's own checks found (its shape, its links): the part of a validation a memo keeps. */
export interface RecordFindings {
  readonly errors: readonly Finding[];
  readonly warnings: readonly Finding[];
  /** The strings read as numbers or booleans (convert.ts), when the validation took them. */
  readonly conversions: readonly (readonly [at: string, value: number | boolean])[];
}

const NOTHING: RecordFindings = Object.freeze({ errors: [], warnings: [], conversions: [] });

/**
 * What the last validation given this memo found of each record (by the sourced record's identity:
 * records read from files and stamped are the same objects while they do not change), and the
 * index and settings it checked them against. Holds one validation: each one replaces it.
 */
export class ValidationMemo {
  records: ReadonlyMap<SourcedRecord, RecordFindings> = new Map();
  /** The index of the records validated last (catalog.ts `catalogAfter` makes the next one from it). */
  built: BuiltCatalog | undefined;
  get catalog(): Catalog | undefined {
    return this.built?.catalog;
  }
  settings: Settings | undefined;
  converting = false;
}

/** The same keys in the same order (messages list them: "the records define 3 gvcs: g1, g2, g3"), with the same values. */
function sameEntries<V>(a: ReadonlyMap<string, V>, b: ReadonlyMap<string, V>, same: (x: V, y: V) => boolean = (x, y) => x === y): boolean {
  if (a === b) return true;
  if (a.size !== b.size) return false;
  const before = a.entries();
  for (const [key, value] of b) {
    const [k, v] = before.next().value as [string, V];
    if (k !== key || !same(v, value)) return false;
  }
  return true;
}

function sameSettings(a: Settings, b: Settings): boolean {
  return a === b || JSON.stringify(a) === JSON.stringify(b);
}

/**
 * Which records' findings in `memo` still hold against `catalog`: undefined when none (the org, a
 * GVC, a location, a domain or the settings changed: every kind's checks read some of those). Else
 * only workloads and deployments changed, and what reads them is checked again: a deployment of a
 * changed workload key (it must name a workload), every GVC (its alias workload) and every domain
 * (its routes' workloads and their ports). A workload's checks read no other workload.
 */
function reusable(memo: ValidationMemo, catalog: Catalog, settings: Settings, converting: boolean): ((record: RawRecord) => boolean) | undefined {
  const before = memo.catalog;
  if (before === undefined || memo.settings === undefined || memo.converting !== converting || !sameSettings(memo.settings, settings)) return undefined;
  if (before.org !== catalog.org || !sameEntries(before.gvcs, catalog.gvcs) || !sameEntries(before.locations, catalog.locations)
    || !sameEntries(before.domains, catalog.domains) || !sameEntries(before.gvcLocations, catalog.gvcLocations, (x, y) => x.join('\u0000') === y.join('\u0000'))) {
    return undefined;
  }
  const changed = new Set<string>();
  // Made from the index before (catalog.ts): it says which keys it changed, no walk of 10,000.
  const change = catalogChange(catalog);
  if (change !== undefined && change.from.deref() === before) {
    for (const key of change.workloads.deleted) changed.add(key);
    for (const key of change.workloads.put) if (before.workloads.get(key) !== catalog.workloads.get(key)) changed.add(key);
  } else {
    for (const [key, w] of catalog.workloads) if (before.workloads.get(key) !== w) changed.add(key);
    for (const key of before.workloads.keys()) if (!catalog.workloads.has(key)) changed.add(key);
  }
  if (changed.size === 0) return () => true;
  return (record) => {
    switch (record.kind) {
      case 'gvc':
      case 'domain':
        return false;
      case 'deployment': {
        const key = catalogKey('deployment', record);
        return key === undefined || !changed.has(key);
      }
      default:
        return true;
    }
  };
}

/** The checks of one record against the index. */
function checkRecord(sourced: SourcedRecord, catalog: Catalog, settings: Settings, converting: boolean): RecordFindings {
  const errors: Finding[] = [];
  const warnings: Finding[] = [];
  const conversions: [string, number | boolean][] = [];
  const r = findingReporter(recordLabel(sourced.record), sourced, errors, warnings, converting ? (at, value) => void conversions.push([at, value]) : undefined);
  if (checkCommon(sourced, r)) {
    const rules = KINDS[sourced.record.kind as string]!;
    rules.shape(sourced.record, '', r);
    rules.refs?.(sourced.record, catalog, r, settings);
  }
  return errors.length + warnings.length + conversions.length === 0 ? NOTHING : { errors, warnings, conversions };
}

/**
 * Validates every record; the result lists every error and warning found. `convert` (convert.ts)
 * takes, instead of an error, each string that reads as the number or boolean its member takes.
 * `memo`, when given, holds what the previous validation given it found: the records it checked
 * that did not change, nor anything their checks read, are not checked again; it then holds this one.
 */
export function validate(
  records: readonly SourcedRecord[],
  settings: Settings,
  convert?: (record: SourcedRecord, at: string, value: number | boolean) => void,
  memo?: ValidationMemo,
): ValidationResult {
  const errors: Finding[] = [];
  const warnings: Finding[] = [];
  const built = memo === undefined ? { records, ...buildCatalog(records) } : catalogAfter(memo.built, records);
  const { catalog, duplicates } = built;
  const converting = convert !== undefined;
  const reuse = memo === undefined ? undefined : reusable(memo, catalog, settings, converting);
  // What each record's checks found, layered over the memo's (layered-map.ts) when its findings are
  // reused: only the records checked again are put, not 20,000 entries at every write.
  const found = memo === undefined ? undefined : reuse === undefined ? new Map<SourcedRecord, RecordFindings>() : LayeredMap.next(memo.records);
  // The records gone since (config/runs.ts) leave the memo with their findings (put back if they moved).
  const gone = new Set(reuse !== undefined && memo!.built !== undefined ? replacedRun(memo!.built.records, records).removed : []);
  for (const record of gone) found!.delete(record);
  for (const sourced of records) {
    const known = reuse?.(sourced.record) ? memo!.records.get(sourced) : undefined;
    const own = known ?? checkRecord(sourced, catalog, settings, converting);
    if (known === undefined || (gone.size > 0 && gone.has(sourced))) found?.set(sourced, own);
    if (own === NOTHING) continue;
    for (const f of own.errors) errors.push(f);
    for (const f of own.warnings) warnings.push(f);
    if (convert) for (const [at, value] of own.conversions) convert(sourced, at, value);
  }
  if (memo !== undefined) {
    memo.records = found!;
    memo.built = built;
    memo.settings = settings;
    memo.converting = converting;
  }
  for (const { record, first } of duplicates) {
    const r = findingReporter(recordLabel(record.record), record, errors, warnings);
    if (record.record.kind === 'org') {
      r.error('name', `only one org record is allowed (org/${String(first.record.name)} is in ${placeOf(first)})`);
    } else {
      r.error('name', `duplicate: also defined in ${placeOf(first)}`);
    }
  }
  checkAliases(catalog, records, errors);
  return {
    errors: errors.map((f) => findingText(f)),
    warnings: warnings.map((f) => findingText(f)),
    errorFindings: errors,
    warningFindings: warnings,
    catalog,
  };
}
