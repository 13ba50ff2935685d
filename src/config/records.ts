/**
 * Raw records as the platform API writes them (DESIGN §2, platform spec): the kinds svcproxy reads
 * (`org`, `location`, `gvc`, `workload`, `domain`, `deployment`), the kinds it knows and ignores (with a
 * warning), and the record index validation and compilation share. The interfaces describe a record
 * that passed validation; before that a record is `Readonly<Record<string, unknown>>` and nothing
 * here trusts it: `recordLabel` and `workloadGvc` answer for any input, never throw.
 */
import { gvcName, parseLink } from './links.js';
import type { Scalar } from './values.js';

export type RawRecord = Readonly<Record<string, unknown>>;

/** A record with where it came from (`source` is a file path, or e.g. `inline` for records in memory). */
export interface SourcedRecord {
  readonly record: RawRecord;
  readonly source: string;
  /** 1-based line of the record's document, when known. */
  readonly line?: number;
}

export const READ_KINDS = ['org', 'location', 'gvc', 'workload', 'domain', 'deployment'] as const;
export type ReadKind = (typeof READ_KINDS)[number];

/** Every kind the platform uses; those svcproxy does not read are accepted with a warning. */
export const PLATFORM_KINDS: readonly string[] = [
  'org', 'cloudaccount', 'policy', 'user', 'group', 'resource', 'task', 'permissions', 'serviceaccount',
  'secret', 'location', 'gvc', 'workload', 'quota', 'identity', 'deployment', 'event', 'account', 'domain',
  'image', 'ipset', 'resourcepolicy', 'accessreport', 'agent', 'auditctx', 'dbcluster', 'memcachecluster',
  'spicedbcluster', 'tenant', 'mk8s', 'command', 'policymembership', 'primitive', 'foreign', 'link',
  'imagesummary', 'volumeset',
];

export function isReadKind(kind: unknown): kind is ReadKind {
  return (READ_KINDS as readonly unknown[]).includes(kind);
}

export type Tags = Readonly<Record<string, Scalar>>;

export interface LinkRecord {
  readonly rel: string;
  readonly href: string;
}

interface Common {
  readonly name: string;
  readonly description?: string;
  readonly tags?: Tags;
  readonly links?: readonly LinkRecord[];
}

export interface TracingSpec {
  readonly sampling?: number;
  readonly customTags?: Readonly<Record<string, string | { readonly literal?: { readonly value?: string } }>>;
  readonly provider?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** Legacy vendor members (`spec.tracing.<vendor>`). */
  readonly [legacyVendor: string]: unknown;
}

export interface SidecarSpec {
  readonly envoy?: Readonly<Record<string, unknown>>;
}

export interface OrgRecord extends Common {
  readonly kind: 'org';
  readonly spec?: { readonly tracing?: TracingSpec };
  readonly status?: { readonly endpointPrefix?: string };
}

export interface LocationRecord extends Common {
  readonly kind: 'location';
  readonly provider?: string;
  readonly region?: string;
  readonly status?: { readonly latencyMs?: number };
}

export interface LocationQueryTerm {
  readonly op?: string;
  readonly property?: string;
  readonly rel?: string;
  readonly tag?: string;
  readonly value?: Scalar;
}

export interface LocationQuery {
  readonly kind?: string;
  readonly spec?: {
    readonly match?: 'all' | 'any' | 'none';
    readonly terms?: readonly LocationQueryTerm[];
    readonly sort?: { readonly by?: string; readonly order?: 'asc' | 'desc' };
  };
}

export interface LocationOptionRecord {
  readonly locationLink: string;
  readonly routingTier?: number;
  readonly latencyOffsetMs?: number;
  readonly latencyToleranceMs?: number;
}

export interface GvcRecord extends Common {
  readonly kind: 'gvc';
  readonly alias?: string;
  readonly spec?: {
    readonly staticPlacement?: {
      readonly locationLinks?: readonly string[];
      readonly locationQuery?: LocationQuery;
      readonly locationOptions?: readonly LocationOptionRecord[];
    };
    readonly endpointNamingFormat?: 'default' | 'legacy' | 'org';
    readonly aliasWorkloadLink?: string;
    readonly tracing?: TracingSpec;
    readonly sidecar?: SidecarSpec;
    readonly loadBalancer?: { readonly trustedProxies?: number };
  };
}

export interface ProbeRecord {
  readonly httpGet?: {
    readonly path?: string;
    readonly port?: number;
    readonly scheme?: 'HTTP' | 'HTTPS';
    readonly httpHeaders?: readonly { readonly name: string; readonly value: string }[];
  };
  readonly tcpSocket?: { readonly port?: number };
  readonly exec?: { readonly command: readonly string[] };
  readonly grpc?: { readonly port?: number };
  readonly initialDelaySeconds?: number;
  readonly periodSeconds?: number;
  readonly timeoutSeconds?: number;
  readonly successThreshold?: number;
  readonly failureThreshold?: number;
}

export interface ContainerRecord {
  readonly name: string;
  readonly image?: string;
  readonly command?: string;
  readonly args?: readonly string[];
  readonly env?: readonly { readonly name: string; readonly value?: string }[];
  readonly ports?: readonly { readonly number: number; readonly protocol?: 'http' | 'http2' | 'grpc' | 'tcp' }[];
  /** Deprecated single port, read as `ports: [{number: port}]` when `ports` is absent. */
  readonly port?: number;
  readonly readinessProbe?: ProbeRecord;
  readonly livenessProbe?: ProbeRecord;
  /** Mounts (`cpln://volumeset/NAME`, `cpln://secret/NAME`, ...): `up` mounts none (src/local/not-run.ts). */
  readonly volumes?: readonly { readonly uri: string; readonly path: string; readonly recoveryPolicy?: 'retain' | 'recycle' }[];
}

export interface WorkloadOptionsRecord {
  readonly suspend?: boolean;
  readonly timeoutSeconds?: number;
  readonly debug?: boolean;
  readonly autoscaling?: {
    readonly minScale?: number;
    readonly maxScale?: number;
    readonly metric?: string;
    readonly target?: number;
    readonly maxConcurrency?: number;
    readonly scaleToZeroDelay?: number;
  };
  readonly multiZone?: { readonly enabled?: boolean };
}

export interface WorkloadRecord extends Common {
  readonly kind: 'workload';
  /** The GVC name, or a GVC link; else taken from `links` (rel `gvc`, or `self`). */
  readonly gvc?: string;
  readonly spec?: {
    readonly type?: 'serverless' | 'standard' | 'stateful' | 'cron';
    readonly containers?: readonly ContainerRecord[];
    readonly defaultOptions?: WorkloadOptionsRecord;
    readonly localOptions?: readonly (WorkloadOptionsRecord & { readonly location: string })[];
    readonly rolloutOptions?: {
      readonly terminationGracePeriodSeconds?: number;
      readonly maxSurgeReplicas?: number | string;
      readonly maxUnavailableReplicas?: number | string;
      readonly minReadySeconds?: number;
      readonly scalingPolicy?: string;
    };
    readonly requestRetryPolicy?: { readonly attempts?: number; readonly retryOn?: readonly (string | number)[] };
    readonly firewallConfig?: Readonly<Record<string, unknown>>;
    readonly loadBalancer?: { readonly replicaDirect?: boolean };
    readonly sidecar?: SidecarSpec;
  };
}

export interface DomainRouteRecord {
  readonly prefix?: string;
  readonly regex?: string;
  readonly replacePrefix?: string;
  readonly workloadLink: string;
  readonly port?: number;
  readonly replica?: number;
  readonly headers?: { readonly request?: { readonly set?: Readonly<Record<string, Scalar>> } };
}

export interface DomainRecord extends Common {
  readonly kind: 'domain';
  readonly spec?: {
    readonly gvcLink?: string;
    readonly ports?: readonly { readonly number: number; readonly routes?: readonly DomainRouteRecord[] }[];
  };
}

export interface DeploymentRecord extends Common {
  readonly kind: 'deployment';
  readonly gvc?: string;
  readonly status?: {
    readonly locations?: readonly {
      readonly name: string;
      readonly replicas?: readonly { readonly name: string; readonly address: string; readonly sidecar?: string; readonly mesh?: string; readonly ready?: boolean }[];
    }[];
  };
}

/** `kind/name` as error lines start; `?` for a missing or non-string part. */
export function recordLabel(record: RawRecord): string {
  const part = (v: unknown): string => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : '?');
  return `${part(record.kind)}/${part(record.name)}`;
}

/**
 * The GVC of a workload or deployment: its `gvc` member (a name or a GVC link), else the `links`
 * entry with rel `gvc`, else the GVC in its `self` link. `undefined` when none names one.
 */
export function workloadGvc(record: RawRecord): string | undefined {
  if (typeof record.gvc === 'string') return gvcName(record.gvc);
  if (!Array.isArray(record.links)) return undefined;
  for (const rel of ['gvc', 'self']) {
    const entry: unknown = record.links.find((l: unknown) => typeof l === 'object' && l !== null && (l as LinkRecord).rel === rel);
    const href = (entry as LinkRecord | undefined)?.href;
    if (typeof href !== 'string') continue;
    const link = parseLink(href);
    if (link?.kind === 'gvc') return link.name;
    if (link?.gvc !== undefined) return link.gvc;
  }
  return undefined;
}
