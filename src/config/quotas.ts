/**
 * The platform's built-in quotas (platform spec, Quota) as svcproxy keeps them: the nine names, each
 * with its unit, its description, whether it comes once per GVC (a `gvcLink` dimension) and its
 * default maximum, and the `quota` record that holds what the API changed of one (DESIGN §13): its
 * `max`, and its increase requests. A quota record names its quota and, for the per-GVC ones, its
 * GVC in `dimensions.gvcLink`, so its key is `quota/NAME` or `quota/GVC/NAME` (record-meta.ts).
 * Pure; never throws.
 *
 * MAX defaults. The platform's documentation (docs.controlplane.com/reference/quota) names the
 * quotas but publishes no default values, and the spec shows none: these are svcproxy's, chosen to
 * be above what a machine running `up` holds. `PATCH /org/O/quota/ID` and approved increase
 * requests change them per quota (per GVC for the per-GVC ones).
 */
import { linkOfKind } from './links.js';
import type { RawRecord } from './records.js';
import { isObject } from './schema.js';

export interface QuotaSpec {
  readonly max: number;
  readonly unit: 'count' | 'MiB' | 'millicore';
  readonly description: string;
  /** One quota per GVC (`dimensions.gvcLink`). */
  readonly perGvc: boolean;
}

/** In the spec's order. */
export const QUOTA_DEFAULTS = {
  agents: { max: 10, unit: 'count', description: 'Max number of agents', perGvc: false },
  'workloads-per-gvc': { max: 100, unit: 'count', description: 'Max number of workloads in a gvc', perGvc: true },
  'memory-per-workload': { max: 8192, unit: 'MiB', description: 'Max memory of a container of a workload', perGvc: false },
  'replicas-per-workload': { max: 20, unit: 'count', description: 'Max replicas of a workload in a location', perGvc: false },
  'cpu-per-workload': { max: 4000, unit: 'millicore', description: 'Max CPU of a container of a workload', perGvc: false },
  'identities-per-gvc': { max: 50, unit: 'count', description: 'Max number of workload identities in a gvc', perGvc: true },
  gvcs: { max: 25, unit: 'count', description: 'Max number of GVCs', perGvc: false },
  domains: { max: 25, unit: 'count', description: 'Max number of domains', perGvc: false },
  cloudaccounts: { max: 10, unit: 'count', description: 'Max number of cloud accounts', perGvc: false },
} as const satisfies Record<string, QuotaSpec>;

export type QuotaName = keyof typeof QUOTA_DEFAULTS;

export const QUOTA_NAMES = Object.keys(QUOTA_DEFAULTS) as QuotaName[];

export function isQuotaName(v: unknown): v is QuotaName {
  return typeof v === 'string' && Object.hasOwn(QUOTA_DEFAULTS, v);
}

/** The statuses of an increase request (platform spec, Quota). */
export const REQUEST_STATUSES = ['pending', 'approved', 'denied'] as const;
export type RequestStatus = (typeof REQUEST_STATUSES)[number];

/** An increase request as a quota record keeps it. */
export interface QuotaRequest {
  readonly id: string;
  readonly requestedMax: number;
  readonly status: RequestStatus;
  /** Why it was decided so (the local rule, or who decided). */
  readonly reason?: string;
  readonly created: string;
  readonly lastModified?: string;
}

/** The GVC a quota record's `dimensions.gvcLink` names; undefined when none (or not a GVC link). */
export function quotaGvc(record: RawRecord): string | undefined {
  const link = isObject(record.dimensions) ? record.dimensions.gvcLink : undefined;
  return linkOfKind(link, 'gvc')?.name;
}

/** The key of the quota `name` (of `gvc`, for a per-GVC one) in the record state: record-meta.ts `recordKey`. */
export function quotaKey(name: string, gvc?: string): string {
  return gvc === undefined ? `quota/${name}` : `quota/${gvc}/${name}`;
}
