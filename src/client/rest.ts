/**
 * `svcproxy rest get|post|put|patch|create|delete|edit PATH` (DESIGN §14, the spec's raw request
 * commands): one request to the path, its answer printed in `-o`'s format, as the platform CLI's
 * `rest` does. `--file/-f FILE|-` is the body (JSON or YAML): optional for post and put, required for
 * patch and create; `-H 'NAME: VALUE'` adds headers. `create` is a POST, then a GET of the `Location`
 * it answers (same origin only: the token goes nowhere else). `get --max N` follows a list's
 * `rel: next` links up to N items (below 1: all) and says on stderr when more exist; without `--max`
 * the answer is printed as it came. `edit` is edit.ts.
 */
import { checkTakes, parseHeader, SHARED_OPTIONS, UsageError, type ClientOption } from './args.js';
import { ClientError, printAnswer, readBody, type ClientContext } from './context.js';
import { pathOf } from './scope.js';
import { linkOf } from './format/cells.js';
import { runEdit } from './edit.js';
import { exporterOf } from './exporters.js';

export const REST_VERBS = ['get', 'post', 'put', 'patch', 'create', 'delete', 'edit'] as const;
export type RestVerb = (typeof REST_VERBS)[number];

/** What each verb takes besides the shared options. */
export const REST_TAKES: { readonly [V in RestVerb]: readonly ClientOption[] } = {
  get: ['header'],
  post: ['header', 'file'],
  put: ['header', 'file'],
  patch: ['header', 'file'],
  create: ['header', 'file'],
  delete: ['header'],
  edit: ['header'],
};

/** The platform CLI's default of `--max` (its note says "(default)" for it). */
export const DEFAULT_MAX = 50;

/** The command line's words after `rest`, checked: the verb and the path. */
export function restCommand(words: readonly string[], given: Parameters<typeof checkTakes>[0]): { verb: RestVerb; path: string } {
  const verb = words[0] as RestVerb;
  checkTakes(given, `rest ${verb}`, [...SHARED_OPTIONS, ...REST_TAKES[verb]]);
  if (words.length < 2) throw new UsageError(`rest ${verb} needs a PATH (/org/ORG/...)`);
  if (words.length > 2) throw new UsageError(`rest ${verb} takes one PATH, not ${words.slice(1).map((w) => JSON.stringify(w)).join(' ')}`);
  if ((verb === 'patch' || verb === 'create') && given.file === undefined) throw new UsageError(`rest ${verb} needs --file FILE (JSON or YAML; - for standard input)`);
  return { verb, path: words[1]! };
}

/** A page link as a request target: a path, or a URL of the endpoint's origin. */
function sameOriginTarget(ctx: ClientContext, link: string, what: string): string {
  if (link.startsWith('/')) return link;
  let url: URL;
  try {
    url = new URL(link);
  } catch {
    throw new ClientError(`${what} ${JSON.stringify(link)} is not a path or URL`);
  }
  if (!ctx.client.sameOrigin(url)) throw new ClientError(`${what} ${link} is not on ${ctx.session.endpoint}: not followed (the token is sent to the endpoint only)`);
  return link;
}

/**
 * A list (or a query's result) with its further pages (`rel: next`) appended up to `max` items (below 1: all), the last
 * page's links kept (so they still say where to continue); the note to print when more exist.
 */
export async function withPages(ctx: ClientContext, first: unknown, max: number): Promise<{ body: unknown; notice?: string }> {
  const list = first as { kind?: unknown; items?: unknown; links?: unknown } | null;
  if (list === null || typeof list !== 'object' || (list.kind !== 'list' && list.kind !== 'queryresult') || !Array.isArray(list.items)) return { body: first };
  const items: unknown[] = [...list.items];
  let links = list.links;
  let next = linkOf(list, 'next');
  while (next !== undefined && (max < 1 || items.length < max)) {
    const page = (await ctx.client.request('GET', sameOriginTarget(ctx, next, 'the next page'))).body as { items?: unknown; links?: unknown } | null;
    if (!Array.isArray(page?.items)) throw new ClientError(`the next page ${next} is not a list`);
    items.push(...page.items);
    links = page.links;
    next = linkOf(page, 'next');
  }
  const cut = max > 0 && items.length > max;
  const body = { ...list, items: max > 0 ? items.slice(0, max) : items, ...(links !== undefined ? { links } : {}) };
  if (max > 0 && (next !== undefined || cut)) {
    const suffix = max === DEFAULT_MAX ? ' (default)' : '';
    return { body, notice: `Note: More records are available. Showing first ${max} results${suffix}. Use --max 0 to fetch all records.\n` };
  }
  return { body };
}

export async function runRest(ctx: ClientContext, verb: RestVerb, typed: string): Promise<number> {
  const { client, args, session } = ctx;
  const path = await pathOf(ctx, typed);
  const headers = args.header.map(parseHeader);
  // An endpoint that cannot render -o tf|crd refuses before anything is sent.
  if ((session.output === 'tf' || session.output === 'crd') && verb !== 'delete') await exporterOf(ctx, session.output);
  if (verb === 'edit') return runEdit(ctx, path, headers);
  const body = args.file !== undefined ? await readBody(args.file, ctx.io) : undefined;
  switch (verb) {
    case 'get': {
      const answer = await client.request('GET', path, { headers });
      const paged = session.max !== undefined ? await withPages(ctx, answer.body, session.max) : { body: answer.body };
      await printAnswer(ctx, paged.body, paged.notice);
      return 0;
    }
    case 'post':
    case 'put':
    case 'patch':
      await printAnswer(ctx, (await client.request(verb.toUpperCase(), path, { body, headers })).body);
      return 0;
    case 'create': {
      const posted = await client.request('POST', path, { body, headers });
      const location = posted.headers.location;
      if (typeof location !== 'string' || location === '') {
        await printAnswer(ctx, posted.body);
        return 0;
      }
      await printAnswer(ctx, (await client.request('GET', sameOriginTarget(ctx, location, 'the Location'))).body);
      return 0;
    }
    case 'delete':
      // As the platform CLI: the answer's body is not printed (an empty line is).
      await client.request('DELETE', path, { headers });
      ctx.io.stdout.write('\n');
      return 0;
  }
}
