/**
 * The resources of `up`'s platform API, one row per kind (DESIGN §13; the platform CLI's
 * `dist/src/rest/map.js` for paths and verbs, plus the `PUT` on collections that `cpln apply` sends
 * and on items that `cpln ... edit --replace` sends; row.ts says what a row holds): org, gvc,
 * workload, identity, secret, domain, policy (stored and listed, never enforced), location (the
 * platform's own and the records', read-only), auditctx (read-only) and quota (computed; its own
 * routes, quota-api.ts). Every collection answers `-query` and `-schema/permissions`. The router
 * (router.ts) serves every row the same way; a new kind is a new row. Views never throw.
 */
import type { RawRecord } from '../../config/records.js';
import { internalHostFor, locationHostFor } from '../../routing/hosts.js';
import { stableId } from '../../config/record-meta.js';
import { PLATFORM_LOCATION_NAMES, platformLocationRecord } from '../../config/platform-locations.js';
import { isObject } from '../../config/schema.js';
import { workloadReadiness, type DeploymentStatus } from '../deployments.js';
import type { ApiContext } from './context.js';
import { ApiError } from './errors.js';
import { patchOrg } from './org.js';
import { connectAnswer } from './connect.js';
import { PERMISSIONS } from './permissions.js';
import { QUOTA_ROUTES, quotaEntries, quotaLookup } from './quota-api.js';
import type { CollectionVerb, ItemVerb, KindRow } from './row.js';
import { gvcView, recordView, selfLink, type Link } from './views.js';

/** The verbs of a kind the API writes: what `cpln` sends (map.js, plus `PUT` for `apply` and `edit --replace`). */
const WRITABLE: { readonly collection: readonly CollectionVerb[]; readonly item: readonly ItemVerb[] } = {
  collection: ['GET', 'POST', 'PUT'],
  item: ['GET', 'PUT', 'PATCH', 'DELETE'],
};

const plain = (ctx: ApiContext, record: RawRecord, gvc: string | undefined): Record<string, unknown> => recordView(record, ctx.org, ctx.deps.since, gvc);

function withLinks(view: Record<string, unknown>, extra: readonly Link[]): Record<string, unknown> {
  return { ...view, links: [...(view.links as Link[]), ...extra] };
}

/** A workload as the platform shows it: its deployments' link, its endpoints and readiness in `status`. */
function workloadView(ctx: ApiContext, record: RawRecord, gvc: string | undefined): Record<string, unknown> {
  const g = gvc ?? '';
  const name = String(record.name);
  const view = withLinks(recordView(record, ctx.org, ctx.deps.since, g), [{ rel: 'deployment', href: `${selfLink(ctx.org, 'workload', name, g)}/deployment` }]);
  const model = ctx.snapshot.workloads.get(`${g}/${name}`);
  const gvcModel = ctx.snapshot.gvcs.get(g);
  if (model === undefined || gvcModel === undefined) return { ...view, status: {} };
  const deployments = ctx.deps.deployments(model.key);
  const { ready, readyLatest } = workloadReadiness(model, deployments);
  const endpoint = ctx.deps.endpointUrl(model.canonicalHost);
  return {
    ...view,
    status: {
      endpoint,
      canonicalEndpoint: endpoint,
      internalName: internalHostFor(ctx.snapshot.settings, gvcModel, name),
      ready,
      readyLatest,
      readyCheckTimestamp: ctx.deps.now(),
      currentReplicaCount: deployments.reduce((n, d) => n + d.replicas, 0),
    },
  };
}

/** One deployment (a location of the workload) as `cpln workload get` and `apply --ready` read it. */
function deploymentView(ctx: ApiContext, record: RawRecord, gvc: string, d: DeploymentStatus): Record<string, unknown> {
  const name = String(record.name);
  const workloadLink = selfLink(ctx.org, 'workload', name, gvc);
  const self = `${workloadLink}/deployment/${encodeURIComponent(d.location)}`;
  const gvcModel = ctx.snapshot.gvcs.get(gvc);
  const gvcVersion = Number(ctx.index.of('gvc').get(gvc)?.version ?? 1);
  const created = typeof record.created === 'string' ? record.created : ctx.deps.since;
  return {
    kind: 'deployment',
    id: stableId(`deployment/${gvc}/${name}/${d.location}`),
    name: d.location,
    version: d.version,
    created,
    lastModified: typeof record.lastModified === 'string' ? record.lastModified : created,
    links: [
      { rel: 'self', href: self },
      { rel: 'workload', href: workloadLink },
      { rel: 'location', href: selfLink(ctx.org, 'location', d.location) },
    ],
    status: {
      ...(gvcModel ? { endpoint: ctx.deps.endpointUrl(locationHostFor(ctx.snapshot.settings, gvcModel, name, d.location)) } : {}),
      ready: d.ready,
      deploying: d.deploying,
      health: d.health,
      message: d.message,
      internal: { syncFailed: false },
      lastProcessedVersion: d.version,
      expectedDeploymentVersion: d.version,
      replicas: d.replicas,
      readyReplicas: d.readyReplicas,
      versions: d.versions.map((v) => ({
        name: String(v.workload),
        workload: v.workload,
        gvc: gvcVersion,
        ready: v.ready,
        message: `${v.readyReplicas}/${v.replicas} replicas ready`,
        containers: Object.fromEntries(Object.entries(v.containers).map(([c, s]) => [c, { ready: s.ready, message: s.restarts > 0 ? `${s.restarts} restarts` : s.ready ? 'ready' : 'not ready' }])),
      })),
    },
  };
}

function deploymentsOf(ctx: ApiContext, record: RawRecord, gvc: string): readonly DeploymentStatus[] {
  return ctx.deps.deployments(`${gvc}/${String(record.name)}`);
}

/** A location as the platform shows it: its origin (`builtin` for the platform's own), `spec.enabled`. */
function locationView(ctx: ApiContext, record: RawRecord): Record<string, unknown> {
  const view = recordView(record, ctx.org, ctx.deps.since);
  const spec = isObject(record.spec) ? record.spec : {};
  return { ...view, origin: typeof record.origin === 'string' ? record.origin : 'default', spec: { enabled: true, ...spec } };
}

/** The platform's own locations and the location records (a record overrides one of its name), by name. */
function locationEntries(ctx: ApiContext): [string, RawRecord][] {
  const records = ctx.index.of('location');
  const out: [string, RawRecord][] = [...records];
  for (const name of PLATFORM_LOCATION_NAMES) if (!records.has(name)) out.push([name, platformLocationRecord(name)!]);
  return out.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export const KINDS: readonly KindRow[] = [
  {
    kind: 'org',
    scope: 'root',
    collection: ['GET'],
    item: ['GET'],
    readOnly: ['status'],
    query: true,
    permissions: PERMISSIONS.org,
    routes: [{ method: 'PATCH', path: ':org', action: 'write', run: patchOrg }],
    view: plain,
  },
  {
    kind: 'gvc',
    scope: 'org',
    ...WRITABLE,
    readOnly: ['alias', 'status'],
    deleteStatus: 204,
    query: true,
    permissions: PERMISSIONS.gvc,
    // `spec` always: the CLI's table reads `spec.domain`.
    view: (ctx, record) => {
      const view = gvcView(record, ctx.snapshot, ctx.org, ctx.deps.since);
      return view.spec === undefined || view.spec === null ? { ...view, spec: {} } : view;
    },
  },
  {
    kind: 'workload',
    scope: 'gvc',
    ...WRITABLE,
    orgList: true,
    readOnly: ['status'],
    deleteStatus: 202,
    query: true,
    permissions: PERMISSIONS.workload,
    view: workloadView,
    subs: [
      {
        path: 'deployment',
        action: 'read',
        run: (ctx, record, gvc) => {
          const self = `${selfLink(ctx.org, 'workload', String(record.name), gvc)}/deployment`;
          const items = deploymentsOf(ctx, record, gvc!).map((d) => deploymentView(ctx, record, gvc!, d));
          return { status: 200, body: { kind: 'list', itemKind: 'deployment', items, links: [{ rel: 'self', href: self }] } };
        },
      },
      {
        path: 'deployment/:location',
        action: 'read',
        run: (ctx, record, gvc) => {
          const location = ctx.params.location!;
          const d = deploymentsOf(ctx, record, gvc!).find((x) => x.location === location);
          if (d === undefined) throw new ApiError('not_found', `deployment ${location} of workload ${String(record.name)} not found`, { kind: 'deployment', name: location });
          return { status: 200, body: deploymentView(ctx, record, gvc!, d) };
        },
      },
      // up's own (svcproxy connect): a replica's environment and working directory, the operator key's only.
      { path: '-connect', action: 'connect', run: (ctx, record, gvc) => connectAnswer(ctx, record, gvc!) },
    ],
  },
  {
    kind: 'identity',
    scope: 'gvc',
    ...WRITABLE,
    orgList: true,
    readOnly: ['status'],
    deleteStatus: 204,
    query: true,
    permissions: PERMISSIONS.identity,
    view: plain,
  },
  {
    kind: 'secret',
    scope: 'org',
    ...WRITABLE,
    readOnly: ['status'],
    deleteStatus: 204,
    query: true,
    permissions: PERMISSIONS.secret,
    view: plain,
    subs: [
      {
        path: '-reveal',
        action: 'reveal',
        run: (ctx, record) => ({ status: 200, body: recordView(record, ctx.org, ctx.deps.since, undefined, true) }),
      },
    ],
  },
  {
    kind: 'domain',
    scope: 'org',
    ...WRITABLE,
    readOnly: ['status'],
    deleteStatus: 204,
    query: true,
    permissions: PERMISSIONS.domain,
    view: plain,
  },
  {
    kind: 'policy',
    scope: 'org',
    ...WRITABLE,
    readOnly: ['status', 'origin'],
    deleteStatus: 204,
    query: true,
    permissions: PERMISSIONS.policy,
    view: (ctx, record) => ({ origin: 'default', ...plain(ctx, record, undefined) }),
  },
  {
    kind: 'location',
    scope: 'org',
    collection: ['GET'],
    item: ['GET'],
    readOnly: ['status', 'origin'],
    query: true,
    permissions: PERMISSIONS.location,
    entries: locationEntries,
    lookup: (ctx, name) => ctx.index.of('location').get(name) ?? platformLocationRecord(name),
    view: locationView,
  },
  {
    kind: 'auditctx',
    scope: 'org',
    collection: ['GET'],
    item: ['GET'],
    readOnly: ['status', 'origin'],
    query: true,
    permissions: PERMISSIONS.auditctx,
    view: plain,
  },
  {
    kind: 'quota',
    scope: 'org',
    collection: ['GET'],
    item: [],
    readOnly: [],
    query: true,
    permissions: PERMISSIONS.quota,
    routes: QUOTA_ROUTES,
    entries: quotaEntries,
    lookup: quotaLookup,
    // A quota's entry is its view already (quota.ts).
    view: (_ctx, record) => record as Record<string, unknown>,
  },
];
