/**
 * Validation of the platform kinds svcproxy keeps but does not route with: `quota` records (what the
 * platform API changed of a built-in quota: its `max` and its increase requests, quotas.ts) and
 * `policy` records (stored and listed by `up`'s API, never enforced: platform spec, Authentication;
 * docs.controlplane.com/reference/policy). Their shape tables and the rules that need other records.
 * Reports through a `Report`; never throws.
 */
import type { Catalog } from './catalog.js';
import { PLATFORM_KINDS, type RawRecord } from './records.js';
import { QUOTA_DEFAULTS, QUOTA_NAMES, REQUEST_STATUSES, isQuotaName, quotaGvc } from './quotas.js';
import { anyObject, anything, arr, int, isObject, member, obj, oneOf, str, type Check, type Report } from './schema.js';
import { didYouMean } from './suggest.js';
import { gvcLink, strings } from './validate-common.js';

/** The name of a quota record: one of the built-in quotas. */
export const quotaName: Check = (v, at, r) => {
  if (isQuotaName(v)) return;
  const hint = typeof v === 'string' ? didYouMean(v, QUOTA_NAMES) : '';
  r.error(at, `must be one of the built-in quotas (${hint === '' ? QUOTA_NAMES.join(', ') : hint})`);
};

const request: Check = obj(
  {
    id: str({ nonEmpty: true }),
    requestedMax: int(0),
    status: oneOf(REQUEST_STATUSES),
    reason: str(),
    created: str(),
    lastModified: str(),
  },
  { closed: true, required: ['id', 'requestedMax', 'status'] },
);

export const quotaShape: Check = obj(
  {
    max: int(0),
    dimensions: obj({ gvcLink }),
    requests: arr(request),
    // What the API shows of a quota besides: read back from a saved answer, they are ignored.
    current: anything,
    origin: anything,
    unit: anything,
  },
  {
    refine: (o, at, r) => {
      if (!isQuotaName(o.name)) return;
      const perGvc = QUOTA_DEFAULTS[o.name].perGvc;
      const link = isObject(o.dimensions) ? o.dimensions.gvcLink : undefined;
      if (perGvc && link === undefined) r.error(member(member(at, 'dimensions'), 'gvcLink'), `is required: ${o.name} is one quota per GVC`);
      if (!perGvc && link !== undefined) r.error(member(member(at, 'dimensions'), 'gvcLink'), `must not be given: ${o.name} is one quota for the org`);
    },
  },
);

/** A per-GVC quota's GVC that is not defined: its max applies to nothing until one of that name is. */
export function checkQuotaRefs(record: RawRecord, catalog: Catalog, r: Report): void {
  const gvc = quotaGvc(record);
  if (gvc !== undefined && !catalog.gvcs.has(gvc)) r.warn('dimensions.gvcLink', `points to gvc ${gvc}, which is not defined: this quota applies to nothing until it is`);
}

const binding: Check = obj(
  { permissions: arr(str({ nonEmpty: true })), principalLinks: strings },
  { closed: true, required: ['permissions', 'principalLinks'] },
);

export const policyShape: Check = obj({
  origin: oneOf(['default', 'builtin']),
  targetKind: oneOf(PLATFORM_KINDS),
  target: oneOf(['all']),
  targetLinks: strings,
  targetQuery: anyObject,
  bindings: arr(binding),
});
