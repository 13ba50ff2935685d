/**
 * A row of the table of kinds (kinds.ts): what the router (router.ts) needs to serve one kind of the
 * platform API. Where the kind lives (`root`: the org itself, `org`: `/org/O/KIND/NAME`, `gvc`:
 * `/org/O/gvc/G/KIND/NAME`), the verbs of its collection and its items, whether it is also listed
 * (and queried) across GVCs at `/org/O/KIND`, the read-only members a written body may carry and
 * that are dropped (besides `id`, `version`, `created`, `lastModified` and `links`), what DELETE
 * answers, read-only sub-resources of an item (a secret's `-reveal`, a workload's `deployment`s),
 * whether it answers `-query` and `-schema/permissions`, routes of its own (a quota's, by id, and
 * its increase requests), where its items come from when they are not exactly its records in force
 * (the platform's locations, the computed quotas), and how an item is shown. Types and one constant.
 */
import type { RawRecord } from '../../config/records.js';
import type { Answer, ApiContext } from './context.js';
import type { Action } from './auth.js';
import type { PermissionTable } from './permissions.js';

export const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type Method = (typeof METHODS)[number];

export type CollectionVerb = 'GET' | 'POST' | 'PUT';
export type ItemVerb = 'GET' | 'PUT' | 'PATCH' | 'DELETE';

export interface SubRoute {
  /** The path after the item's (`-reveal`, `deployment`, `deployment/:location`). */
  readonly path: string;
  readonly action: Action;
  /** Answers a GET for the item `record` (found: a missing item is 404 before this runs). */
  run(ctx: ApiContext, record: RawRecord, gvc: string | undefined): Answer;
}

/** A route of the kind's own, below its collection's path (`:quota`, `-request/:id`). */
export interface KindRoute {
  readonly method: Method;
  readonly path: string;
  readonly action: Action;
  run(ctx: ApiContext): Promise<Answer> | Answer;
}

export interface KindRow {
  readonly kind: string;
  readonly scope: 'root' | 'org' | 'gvc';
  readonly collection: readonly CollectionVerb[];
  readonly item: readonly ItemVerb[];
  /** A GVC-scoped kind also listed (and queried) across every GVC at `/org/O/KIND` (`cpln workload get --all-gvcs`). */
  readonly orgList?: boolean;
  /** Read-only members of this kind besides the common ones: dropped from a written body. */
  readonly readOnly: readonly string[];
  /** DELETE's status: 202 while the removal goes on after the answer (a workload's replicas drain). */
  readonly deleteStatus?: 202 | 204;
  readonly subs?: readonly SubRoute[];
  /** `POST <collection>/-query` (query.ts): for a GVC-scoped kind, at `/org/O/KIND/-query`, across GVCs. */
  readonly query?: boolean;
  /** `GET <collection>/-schema/permissions`: the kind's grantable permissions (permissions.ts). */
  readonly permissions?: PermissionTable;
  readonly routes?: readonly KindRoute[];
  /**
   * The kind's items by key (`name`, or `gvc/name`), in key order, when they are not exactly its
   * records in force (`ctx.index`): the platform's locations beside the records, the computed quotas.
   */
  entries?(ctx: ApiContext): readonly (readonly [key: string, record: RawRecord])[];
  /** The item a path names, with `entries`: undefined when there is none. */
  lookup?(ctx: ApiContext, name: string): RawRecord | undefined;
  /** The item as the API shows it (`gvc`: the GVC of a GVC-scoped record). Never throws. */
  view(ctx: ApiContext, record: RawRecord, gvc: string | undefined): Record<string, unknown>;
}

/** Read-only members every record has (platform spec, Common record fields). */
export const COMMON_READ_ONLY: readonly string[] = ['id', 'version', 'created', 'lastModified', 'links'];
