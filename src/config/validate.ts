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
 */
import type { Settings } from './model.js';
import { gvcAlias } from './alias.js';
import { buildCatalog, type Catalog } from './catalog.js';
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

/**
 * Validates every record; the result lists every error and warning found. `convert` (convert.ts)
 * takes, instead of an error, each string that reads as the number or boolean its member takes.
 */
export function validate(records: readonly SourcedRecord[], settings: Settings, convert?: (record: SourcedRecord, at: string, value: number | boolean) => void): ValidationResult {
  const errors: Finding[] = [];
  const warnings: Finding[] = [];
  const { catalog, duplicates } = buildCatalog(records);
  for (const sourced of records) {
    const r = findingReporter(recordLabel(sourced.record), sourced, errors, warnings, convert && ((at, value) => convert(sourced, at, value)));
    if (!checkCommon(sourced, r)) continue;
    const rules = KINDS[sourced.record.kind as string]!;
    rules.shape(sourced.record, '', r);
    rules.refs?.(sourced.record, catalog, r, settings);
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
