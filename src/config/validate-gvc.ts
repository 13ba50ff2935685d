/**
 * Validation of `gvc` records: the shape table of `spec` (placement, location query, location
 * options, naming format, tracing, sidecar) and the rules that need the other records (links to
 * locations and to the alias workload must point to records that exist; `org` naming needs the org's
 * endpoint prefix). Reports through a `Report`; never throws.
 */
import { ALIAS_PATTERN } from './alias.js';
import type { Catalog } from './catalog.js';
import { linkOfKind, workloadRef } from './links.js';
import type { RawRecord } from './records.js';
import {
  anyObject, arr, exactlyOne, int, isAbsent, isObject, item, member, obj, objectAt, oneOf, str, valueAt, type Check, type Report,
} from './schema.js';
import { checkLinkOrg, checkLocationDefined, locationLink, sidecar, strings, tracing, workloadLink } from './validate-common.js';
import { isScalar, regexError } from './values.js';

export const TERM_OPS = ['=', '>', '>=', '<', '<=', '!=', '~', '=~', 'exists', '!exists', 'contains'];

const termValue: Check = (v, at, r) => {
  if (!isScalar(v)) r.error(at, 'must be a string, number or boolean');
};

/**
 * A query term: one subject; an `=~` value must compile as a JavaScript regular expression. Every op
 * but `exists` and `!exists` compares with a value: without one the term holds for no location (for
 * every one with `!=`), which is warned about, not refused, since the platform's schema lets it be.
 */
const term: Check = obj(
  { op: oneOf(TERM_OPS), property: str(), rel: str(), tag: str(), value: termValue },
  {
    closed: true,
    refine: (o, at, r) => {
      exactlyOne(o, ['property', 'rel', 'tag'], at, r);
      const op = o.op ?? '=';
      if (typeof op !== 'string' || !TERM_OPS.includes(op) || op === 'exists' || op === '!exists') return;
      if (isAbsent(o.value)) r.warn(member(at, 'value'), `not set: with op ${op} the term holds for ${op === '!=' ? 'every' : 'no'} location`);
      else if (op === '=~' && typeof o.value === 'string') {
        const problem = regexError(o.value);
        if (problem !== undefined) r.error(member(at, 'value'), `does not compile: ${problem}`);
      }
    },
  },
);

/** A query (a GVC's `locationQuery`, or the body of a `POST .../-query` of `up`'s API). */
export const queryShape: Check = obj({
  kind: str(),
  context: anyObject,
  spec: obj({
    match: oneOf(['all', 'any', 'none']),
    terms: arr(term),
    sort: obj({ by: str({ nonEmpty: true }), order: oneOf(['asc', 'desc']) }),
  }),
});

const locationOption: Check = obj(
  { locationLink, routingTier: int(), latencyOffsetMs: int(), latencyToleranceMs: int(0) },
  { closed: true, required: ['locationLink'] },
);

export const gvcShape: Check = obj({
  alias: str({ test: [(s) => ALIAS_PATTERN.test(s), 'must be exactly 13 lowercase letters or digits'] }),
  spec: obj({
    staticPlacement: obj({ locationLinks: arr(locationLink), locationQuery: queryShape, locationOptions: arr(locationOption) }),
    pullSecretLinks: strings,
    domain: str(),
    endpointNamingFormat: oneOf(['default', 'legacy', 'org']),
    aliasWorkloadLink: workloadLink,
    tracing,
    sidecar,
    loadBalancer: obj({ trustedProxies: int(0) }),
  }),
});

function checkLocationLinks(placement: Record<string, unknown>, at: string, catalog: Catalog, r: Report): void {
  const links = Array.isArray(placement.locationLinks) ? placement.locationLinks : [];
  links.forEach((v, i) => {
    const link = linkOfKind(v, 'location');
    const here = item(member(at, 'locationLinks'), i);
    if (!link) return;
    checkLinkOrg(link, catalog, here, r);
    checkLocationDefined(link.name, catalog, here, r);
  });
}

function checkLocationOptions(gvc: string, placement: Record<string, unknown>, at: string, catalog: Catalog, r: Report): void {
  const options = Array.isArray(placement.locationOptions) ? placement.locationOptions : [];
  const seen = new Set<string>();
  options.forEach((v, i) => {
    const link = isObject(v) ? linkOfKind(v.locationLink, 'location') : undefined;
    if (!link) return;
    const here = member(item(member(at, 'locationOptions'), i), 'locationLink');
    checkLinkOrg(link, catalog, here, r);
    if (seen.has(link.name)) r.error(here, `location ${link.name} already has options`);
    seen.add(link.name);
    if (!checkLocationDefined(link.name, catalog, here, r)) return;
    if (!(catalog.gvcLocations.get(gvc) ?? []).includes(link.name)) r.warn(here, `location ${link.name} is not one of the GVC's locations (ignored)`);
  });
}

/** The rules of a GVC that need other records. */
export function checkGvcRefs(record: RawRecord, catalog: Catalog, r: Report): void {
  const name = record.name as string;
  const spec = objectAt(record, 'spec');
  const placement = objectAt(spec, 'staticPlacement');
  checkLocationLinks(placement, 'spec.staticPlacement', catalog, r);
  checkLocationOptions(name, placement, 'spec.staticPlacement', catalog, r);
  if ((catalog.gvcLocations.get(name) ?? []).length === 0) {
    r.warn('spec.staticPlacement', 'selects no location: the GVC\'s workloads run nowhere');
  }

  const alias = workloadRef(spec.aliasWorkloadLink, name);
  if (alias) {
    const at = 'spec.aliasWorkloadLink';
    checkLinkOrg(alias, catalog, at, r);
    if (alias.gvc !== name) r.error(at, `must point to a workload of this GVC, not of gvc ${alias.gvc}`);
    else if (!catalog.workloads.has(`${name}/${alias.name}`)) r.error(at, `points to workload ${alias.name}, which is not defined in gvc ${name}`);
  }

  if (spec.endpointNamingFormat === 'org') {
    const prefix = valueAt(catalog.org, 'status', 'endpointPrefix');
    if (typeof prefix !== 'string' || prefix === '') {
      r.error('spec.endpointNamingFormat', 'org needs an org record with status.endpointPrefix');
    }
  }
}
