/**
 * The resources of `up`'s platform API, one row per kind (DESIGN §13; the platform CLI's
 * `dist/src/rest/map.js` for paths and verbs, plus the `PUT` on collections that `cpln apply` sends
 * and on items that `cpln ... edit --replace` sends): where the kind lives (`root`: the org itself,
 * `org`: `/org/O/KIND/NAME`, `gvc`: `/org/O/gvc/G/KIND/NAME`), the verbs of its collection and its
 * items, whether it is also listed across GVCs at `/org/O/KIND`, the read-only members a written body
 * may carry and that are dropped (besides `id`, `version`, `created`, `lastModified` and `links`),
 * what DELETE answers, read-only sub-resources (a secret's `-reveal`, a workload's `deployment`s),
 * and how a record is shown. The router (router.ts) serves every row the same way; a new kind is a
 * new row. Views never throw.
 */
import type { RawRecord } from '../../config/records.js';
import { internalHostFor, locationHostFor } from '../../routing/hosts.js';
import { stableId } from '../../config/record-meta.js';
import { workloadReadiness, type DeploymentStatus } from '../deployments.js';
import type { Answer, ApiContext } from './context.js';
import type { Action } from './auth.js';
import { ApiError } from './errors.js';
import { quotaRows, quotaView } from './quota.js';
import { gvcView, recordView, selfLink, type Link } from './views.js';


export type CollectionVerb = 'GET' | 'POST' | 'PUT';
export type ItemVerb = 'GET' | 'PUT' | 'PATCH' | 'DELETE';

export interface SubRoute {
  /** The path after the item's (`-reveal`, `deployment`, `deployment/:location`). */
  readonly path: string;
  readonly action: Action;
  /** Answers a GET for the item `record` (found: a missing item is 404 before this runs). */
  run(ctx: ApiContext, record: RawRecord, gvc: string | undefined): Answer;
}

export interface KindRow {
  readonly kind: string;
  readonly scope: 'root' | 'org' | 'gvc';
  readonly collection: readonly CollectionVerb[];
  readonly item: readonly ItemVerb[];
  /** A GVC-scoped kind also listed across every GVC at `/org/O/KIND` (`cpln workload get --all-gvcs`). */
  readonly orgList?: boolean;
  /** Read-only members of this kind besides the common ones: dropped from a written body. */
  readonly readOnly: readonly string[];
  /** DELETE's status: 202 while the removal goes on after the answer (a workload's replicas drain). */
  readonly deleteStatus?: 202 | 204;
  readonly subs?: readonly SubRoute[];
  /** The items of a list when they are not the kind's records (quotas are computed). */
  listItems?(ctx: ApiContext): Record<string, unknown>[];
  /** The record as the API shows it (`gvc`: the GVC of a GVC-scoped record). */
  view(ctx: ApiContext, record: RawRecord, gvc: string | undefined): Record<string, unknown>;
}

/** The verbs of a kind the API writes: what `cpln` sends (map.js, plus `PUT` for `apply` and `edit --replace`). */
const WRITABLE = { collection: ['GET', 'POST', 'PUT'], item: ['GET', 'PUT', 'PATCH', 'DELETE'] } as const;

/** Read-only members every record has (platform spec, Common record fields). */
export const COMMON_READ_ONLY: readonly string[] = ['id', 'version', 'created', 'lastModified', 'links'];

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

export const KINDS: readonly KindRow[] = [
  {
    kind: 'org',
    scope: 'root',
    collection: [],
    item: ['GET'],
    readOnly: ['status'],
    view: plain,
  },
  {
    kind: 'gvc',
    scope: 'org',
    ...WRITABLE,
    readOnly: ['alias', 'status'],
    deleteStatus: 204,
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
    ],
  },
  {
    kind: 'identity',
    scope: 'gvc',
    ...WRITABLE,
    orgList: true,
    readOnly: ['status'],
    deleteStatus: 204,
    view: plain,
  },
  {
    kind: 'secret',
    scope: 'org',
    ...WRITABLE,
    readOnly: ['status'],
    deleteStatus: 204,
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
    view: plain,
  },
  {
    kind: 'auditctx',
    scope: 'org',
    collection: ['GET'],
    item: ['GET'],
    readOnly: ['status', 'origin'],
    view: plain,
  },
  {
    kind: 'quota',
    scope: 'org',
    collection: ['GET'],
    item: [],
    readOnly: [],
    listItems: (ctx) => quotaRows(ctx.snapshot, ctx.index).map((r) => quotaView(r, ctx.org)),
    view: plain,
  },
];
