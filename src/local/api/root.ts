/**
 * `GET /` (platform spec, Command-line client: "rest get: an empty path returns all references"): the
 * references of everything this API serves, as links: `self`, the orgs (`/org`), the org `up` serves,
 * and each kind's collection in it (a GVC-scoped kind's across GVCs, `/org/O/workload`, where it has
 * one), named by the kind, in the order of the table of kinds (kinds.ts). What anyone may read (it
 * names the org, as `GET /org` does). Pure.
 */
import type { Answer, ApiContext } from './context.js';
import type { KindRow } from './row.js';
import type { Link } from './views.js';

export function rootAnswer(ctx: ApiContext, rows: readonly KindRow[]): Answer {
  const org = `/org/${encodeURIComponent(ctx.org)}`;
  const links: Link[] = [{ rel: 'self', href: '/' }, { rel: 'orgs', href: '/org' }];
  for (const row of rows) {
    if (row.scope === 'root') links.push({ rel: row.kind, href: org });
    else if (row.scope === 'org' || row.orgList) links.push({ rel: row.kind, href: `${org}/${row.kind}` });
  }
  return { status: 200, body: { links } };
}
