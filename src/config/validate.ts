/**
 * Validation of a whole set of records against the platform spec's rules (DESIGN §2): the common
 * fields (`kind`, `name` ≤ 64 and DNS-like, `description` ≤ 250, scalar `tags`), each kind's shape
 * table, the links between records, duplicates, and GVC alias clashes. Every problem is collected,
 * never just the first, as one line `kind/name: json.path: what is wrong`; warnings (ignored kinds,
 * unknown vendor tags, workloads closed to external traffic, ...) use the same form. Records of
 * kinds svcproxy does not read are accepted with a warning and not looked into. Never throws.
 */
import type { Settings } from './model.js';
import { gvcAlias } from './alias.js';
import { buildCatalog, type Catalog } from './catalog.js';
import { PLATFORM_KINDS, READ_KINDS, isReadKind, recordLabel, type RawRecord, type ReadKind, type SourcedRecord } from './records.js';
import { reporter, str, type Check, type Report } from './schema.js';
import { checkTagValues } from './tags.js';
import { locationShape, orgShape, plainName } from './validate-common.js';
import { checkDeploymentRefs, checkDomainRefs, deploymentShape, domainShape } from './validate-domain.js';
import { checkGvcRefs, gvcShape } from './validate-gvc.js';
import { checkWorkloadRefs, workloadShape } from './validate-workload.js';
import { DESCRIPTION_MAX, NAME_MAX, isHostName } from './values.js';

export interface ValidationResult {
  readonly errors: string[];
  readonly warnings: string[];
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
const KINDS: Readonly<Record<ReadKind, KindRules>> = {
  org: { shape: orgShape, name: plainName },
  location: { shape: locationShape, name: plainName },
  gvc: { shape: gvcShape, name: plainName, refs: checkGvcRefs },
  workload: { shape: workloadShape, name: plainName, refs: (rec, cat, r, s) => checkWorkloadRefs(rec, cat, s.vendor, r) },
  domain: { shape: domainShape, name: hostName, refs: checkDomainRefs },
  deployment: { shape: deploymentShape, name: plainName, refs: checkDeploymentRefs },
};

function where(sourced: SourcedRecord): string {
  return sourced.line === undefined ? sourced.source : `${sourced.source} line ${sourced.line}`;
}

/** The common fields; `false` when the record cannot be looked into further. */
function checkCommon(sourced: SourcedRecord, r: Report): boolean {
  const { record } = sourced;
  const kind = record.kind;
  if (kind === undefined || kind === null || kind === '') {
    r.error('kind', `is required (${where(sourced)})`);
    return false;
  }
  if (typeof kind !== 'string') {
    r.error('kind', 'must be a string');
    return false;
  }
  if (!isReadKind(kind)) {
    const known = PLATFORM_KINDS.includes(kind) ? 'a platform kind that svcproxy does not read' : 'not a platform kind';
    r.warn('kind', `${kind} is ${known} (ignored kind; read: ${READ_KINDS.join(', ')})`);
    return false;
  }
  const rules = KINDS[kind];
  if (record.name === undefined || record.name === null || record.name === '') r.error('name', `is required (${where(sourced)})`);
  else rules.name(record.name, 'name', r);
  if (record.description !== undefined && record.description !== null) str({ max: DESCRIPTION_MAX })(record.description, 'description', r);
  if (record.tags !== undefined && record.tags !== null) checkTagValues(record.tags, 'tags', r);
  return typeof record.name === 'string' && record.name !== '';
}

function checkAliases(catalog: Catalog, errors: string[]): void {
  const owners = new Map<string, string>();
  for (const [name, gvc] of catalog.gvcs) {
    const alias = gvcAlias(name, gvc.alias);
    const owner = owners.get(alias);
    if (owner !== undefined) errors.push(`gvc/${name}: alias: ${alias} is already the alias of gvc ${owner}`);
    else owners.set(alias, name);
  }
}

/** Validates every record; the result lists every error and warning found. */
export function validate(records: readonly SourcedRecord[], settings: Settings): ValidationResult {
  const errors: string[] = [];
  const warnings: string[] = [];
  const { catalog, duplicates } = buildCatalog(records);
  for (const sourced of records) {
    const r = reporter(recordLabel(sourced.record), errors, warnings);
    if (!checkCommon(sourced, r)) continue;
    const rules = KINDS[sourced.record.kind as ReadKind];
    rules.shape(sourced.record, '', r);
    rules.refs?.(sourced.record, catalog, r, settings);
  }
  for (const { record, first } of duplicates) {
    const r = reporter(recordLabel(record.record), errors, warnings);
    if (record.record.kind === 'org') {
      r.error('name', `only one org record is allowed (org/${String(first.record.name)} is in ${where(first)})`);
    } else {
      r.error('name', `duplicate: also defined in ${where(first)}`);
    }
  }
  checkAliases(catalog, errors);
  return { errors, warnings, catalog };
}
