/**
 * The platform API's routes, built once from the table of kinds (kinds.ts) with find-my-way
 * (fastify's router): for each row its collection, its items, its list across GVCs, its `-query`
 * and `-schema/permissions` (at the org's level for a GVC-scoped kind, as the platform's map has
 * them), its sub-resources and its own routes, with the action each asks for (auth.ts) and the
 * function that answers. `match()` says which route a method and path take, or why none does: an
 * unknown path (404), or a known path that this method is not served on (405, with the methods that
 * are). Paths are matched after normalization (handler.ts), case-sensitively; a trailing slash is
 * ignored; a static segment (`-query`, `-request`) wins over a name. Never throws.
 */
import FindMyWay from 'find-my-way';
import type { Answer, ApiContext } from './context.js';
import { KINDS } from './kinds.js';
import type { Action } from './auth.js';
import { permissionsAnswer } from './permissions.js';
import { rootAnswer } from './root.js';
import { nextQueryPage, postQuery } from './query.js';
import { METHODS, type KindRow, type Method } from './row.js';
import { collectionLink, deleteRecord, getItem, listRecords, patchRecord, putRecord, itemOf } from './writes.js';

export { METHODS, type Method };

export interface Route {
  readonly action: Action;
  /** The row the route serves (for handler-level checks: the org of the path). */
  readonly row: KindRow;
  run(ctx: ApiContext): Promise<Answer> | Answer;
}

export type Match =
  | { readonly route: Route; readonly params: Readonly<Record<string, string | undefined>> }
  | { readonly route: undefined; readonly allow: readonly Method[] };

export interface ApiRouter {
  match(method: string, path: string): Match;
}

function itemParam(row: KindRow): string {
  return row.kind === 'gvc' ? 'gvc' : 'name';
}

/** Where a row's collection and items are, and its org-level home (`-query`, `-schema/permissions`). */
function paths(row: KindRow): { collection: string; item: string; home: string } {
  if (row.scope === 'root') return { collection: '/org', item: '/org/:org', home: '/org' };
  const prefix = row.scope === 'gvc' ? '/org/:org/gvc/:gvc' : '/org/:org';
  const collection = `${prefix}/${row.kind}`;
  return { collection, item: `${collection}/:${itemParam(row)}`, home: `/org/:org/${row.kind}` };
}

export function buildRouter(rows: readonly KindRow[] = KINDS): ApiRouter {
  const router = FindMyWay({ ignoreTrailingSlash: true, caseSensitive: true, maxParamLength: 1000 });
  const noop = (): void => undefined;
  const add = (method: Method, path: string, route: Route): void => router.on(method, path, noop, route);
  for (const row of rows) {
    const { collection, item, home } = paths(row);
    const name = (ctx: ApiContext): string => ctx.params[itemParam(row)]!;
    const readCollection: Action = row.scope === 'root' ? 'read-org' : 'read';
    for (const verb of row.collection) {
      if (verb === 'GET') add('GET', collection, { action: readCollection, row, run: (ctx) => listRecords(ctx, row, ctx.params.gvc) });
      else add(verb, collection, { action: 'write', row, run: (ctx) => putRecord(ctx, row, verb === 'POST' ? 'create' : 'upsert') });
    }
    if (row.orgList) add('GET', home, { action: 'read', row, run: (ctx) => listRecords(ctx, row, undefined) });
    if (row.query) {
      add('POST', `${home}/-query`, { action: readCollection, row, run: (ctx) => postQuery(ctx, row) });
      add('GET', `${home}/-query`, { action: readCollection, row, run: (ctx) => nextQueryPage(ctx, row) });
    }
    const permissions = row.permissions;
    if (permissions) {
      add('GET', `${home}/-schema/permissions`, {
        action: 'read', row, run: (ctx) => permissionsAnswer(row.kind, permissions, `${collectionLink(ctx, row, undefined)}/-schema/permissions`),
      });
    }
    for (const verb of row.item) {
      const action: Action = verb === 'GET' ? (row.scope === 'root' ? 'read-org' : 'read') : 'write';
      if (verb === 'GET') add('GET', item, { action, row, run: (ctx) => getItem(ctx, row, row.scope === 'root' ? '' : name(ctx)) });
      else if (verb === 'PUT') add('PUT', item, { action, row, run: (ctx) => putRecord(ctx, row, 'upsert', name(ctx)) });
      else if (verb === 'PATCH') add('PATCH', item, { action, row, run: (ctx) => patchRecord(ctx, row, name(ctx)) });
      else add('DELETE', item, { action, row, run: (ctx) => deleteRecord(ctx, row, name(ctx)) });
    }
    for (const sub of row.subs ?? []) {
      add('GET', `${item}/${sub.path}`, {
        action: sub.action,
        row,
        run: (ctx) => sub.run(ctx, itemOf(ctx, row, name(ctx)), ctx.params.gvc),
      });
    }
    for (const own of row.routes ?? []) add(own.method, `${collection}/${own.path}`, { action: own.action, row, run: own.run });
  }
  // `GET /`: the references of everything above (root.ts), read as the org is.
  const top = rows.find((r) => r.scope === 'root');
  if (top) add('GET', '/', { action: 'read-org', row: top, run: (ctx) => rootAnswer(ctx, rows) });
  return {
    match(method, path) {
      const found = (METHODS as readonly string[]).includes(method) ? router.find(method as Method, path) : null;
      if (found) return { route: found.store as Route, params: found.params };
      return { route: undefined, allow: METHODS.filter((m) => router.find(m, path) !== null) };
    },
  };
}
