/**
 * The org and GVC a command works in (DESIGN §14). The org is the one given (`--org`, `<VENDOR>_ORG`,
 * the profile's); when none was and a command needs one (a `//` path, `quota`, `connect`), the
 * endpoint is asked: `GET /org` lists the orgs the caller can see, and when it lists exactly one
 * (a local `up` serves one) that is the org, said with `-v`. Several, or none: a usage error naming
 * them. The GVC of `connect` is found the same way from `GET /org/ORG/gvc`, and said on stderr as
 * the platform CLI says a default it chose. One lookup per command at most.
 */
import { UsageError } from './args.js';
import { requestPath, type ClientContext } from './context.js';

const learned = new WeakMap<ClientContext, Promise<string>>();

/** `Defaulting to location 'X' because ...`: the platform CLI's line for a default it chose. */
export function defaultingTo(type: string, name: string): string {
  return `Defaulting to ${type} '${name}' because no ${type} was specified in the command.\n`;
}

/** The names of a list answer's items. */
function namesOf(body: unknown): string[] {
  const items = (body as { items?: unknown } | null)?.items;
  return Array.isArray(items) ? items.map((i) => (i as { name?: unknown } | null)?.name).filter((n): n is string => typeof n === 'string') : [];
}

/** The org in force: given, else the endpoint's only one. */
export function orgOf(ctx: ClientContext): Promise<string> {
  if (ctx.session.org) return Promise.resolve(ctx.session.org);
  let known = learned.get(ctx);
  if (known === undefined) {
    known = (async () => {
      const orgs = namesOf((await ctx.client.request('GET', '/org')).body);
      const ask = `--org ORG, ${ctx.session.prefix}ORG or a profile's`;
      if (orgs.length === 0) throw new UsageError(`no org given (${ask}), and ${ctx.session.endpoint} lists none at /org`);
      if (orgs.length > 1) throw new UsageError(`no org given (${ask}); ${ctx.session.endpoint} has ${orgs.length}: ${orgs.join(', ')}`);
      if (ctx.args.verbose) ctx.io.stderr.write(`svcproxy: org ${orgs[0]} (the endpoint's only org, GET /org)\n`);
      return orgs[0]!;
    })();
    learned.set(ctx, known);
  }
  return known;
}

/** The GVC in force: given, else the org's only GVC (said on stderr); a usage error otherwise. */
export async function gvcOf(ctx: ClientContext, org: string): Promise<string> {
  if (ctx.session.gvc) return ctx.session.gvc;
  const gvcs = namesOf((await ctx.client.request('GET', `/org/${encodeURIComponent(org)}/gvc`)).body);
  const ask = `--gvc GVC, ${ctx.session.prefix}GVC or a profile's`;
  if (gvcs.length !== 1) throw new UsageError(`no GVC given (${ask}); org ${org} has ${gvcs.length === 0 ? 'none' : `${gvcs.length}: ${gvcs.join(', ')}`}`);
  ctx.io.stderr.write(defaultingTo('gvc', gvcs[0]!));
  return gvcs[0]!;
}

/** The request path of what the user typed (context.ts `requestPath`), the org learned when a `//` path needs it. */
export async function pathOf(ctx: ClientContext, typed: string): Promise<string> {
  const needsOrg = typed.startsWith('//') && !ctx.session.org;
  return requestPath(typed, needsOrg ? { ...ctx.session, org: await orgOf(ctx) } : ctx.session);
}
