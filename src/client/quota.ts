/**
 * `svcproxy quota get|edit|patch|permissions|query|request` (DESIGN §14; the platform CLI's `cpln quota`,
 * its generic get, edit, patch, permissions and query commands, plus the spec's increase requests):
 *
 * - `get [REF...]`: none, the org's quotas (`--max` pages, default 50, with the CLI's note when more
 *   exist); one, that quota (by id, or a name one quota has); several, a list of them.
 * - `edit REF [--replace]`: edit.ts on the quota (PATCH of what changed; `-r`: PUT of it whole).
 * - `patch REF -f FILE|-`: PATCH with the file's body (JSON or YAML).
 * - `permissions`: the grantable permissions and what each implies; with `-o text` asked for (the
 *   flag or a profile's), one row per permission; else, as the platform CLI, the answer as JSON.
 * - `query [--match all|any|none] [--prop EXPR]... [--tag EXPR]... [--rel EXPR]...`: `POST -query`
 *   with the terms the platform CLI's query.js makes of the expressions (`expressionToTerm`, kept as
 *   it parses, quirks included: `name<=3` is `name<` `=` `3` there too); no terms: no body.
 * - `request create NAME --requested-max N`, `request get ID`, `request list [--status S]`: the
 *   increase requests of `POST|GET /org/O/quota/-request`.
 *
 * The org is the one in force, else the endpoint's only one (scope.ts).
 */
import { checkTakes, SHARED_OPTIONS, UsageError, type ClientArgs, type ClientOption } from './args.js';
import { ClientError, printAnswer, readBody, type ClientContext } from './context.js';
import { runEdit } from './edit.js';
import { ENVIRONMENT, optionLines } from './help.js';
import { DEFAULT_MAX, withPages } from './rest.js';
import { orgOf } from './scope.js';
import { CLIENT_COMMANDS } from './words.js';

export const QUOTA_VERBS = ['get', 'edit', 'patch', 'permissions', 'query', 'request'] as const;
export type QuotaVerb = (typeof QUOTA_VERBS)[number];
const REQUEST_VERBS = ['create', 'get', 'list'] as const;

/** What each verb takes besides the shared options. */
const QUOTA_TAKES: { readonly [V in QuotaVerb]: readonly ClientOption[] } = {
  get: [],
  edit: ['replace'],
  patch: ['file'],
  permissions: [],
  query: ['match', 'property', 'tag', 'rel'],
  request: ['requested-max', 'status'],
};

const VERB_HELP: { readonly [V in QuotaVerb]: { readonly synopsis: string; readonly about: string } } = {
  get: { synopsis: '[REF...]', about: 'the quotas named (by id or name), or all of the org\'s' },
  edit: { synopsis: 'REF [--replace]', about: 'the quota as YAML in $VISUAL or $EDITOR; what changed is one PATCH (-r: the whole, one PUT)' },
  patch: { synopsis: 'REF -f FILE|-', about: 'PATCH the quota with the body of --file (max, description, tags)' },
  permissions: { synopsis: '', about: 'the grantable permissions of quotas and what each implies' },
  query: { synopsis: '[--match all|any|none] [--prop EXPR]... [--tag EXPR]... [--rel EXPR]...', about: 'the quotas that match the terms' },
  request: { synopsis: 'create NAME --requested-max N | get ID | list [--status S]', about: 'the increase requests: ask for a higher max, read one, list them' },
};

/** A query term as the platform CLI's query.js `expressionToTerm` makes it of `--TYPE EXPR`. */
export function expressionToTerm(type: 'property' | 'tag' | 'rel', expr: string): Record<string, unknown> {
  let op = '';
  let key: string | undefined;
  let value: unknown;
  // The CLI's order of operators: `>=`, `!=`, `=`, `>`, `<`, `~` (so `<=` is never reached first).
  const split = (sign: string): boolean => {
    const i = expr.indexOf(sign);
    if (i <= 0) return false;
    op = sign;
    key = expr.substring(0, i);
    value = expr.substring(i + sign.length);
    return true;
  };
  if (!['>=', '!=', '=', '>', '<', '~', '<='].some(split)) {
    if (expr.endsWith('!')) {
      op = '!exists';
      key = expr.substring(0, expr.length - 1);
    } else if (expr.startsWith('~')) {
      op = '~';
      key = '*';
      value = expr.substring(1);
    } else {
      op = 'exists';
      key = expr;
    }
  }
  // A number written as JavaScript writes it, and true/false, are sent as such.
  if (typeof value === 'string') {
    const n = parseFloat(value);
    if (!Number.isNaN(n) && String(n) === value) value = n;
    if (value === 'true') value = true;
    if (value === 'false') value = false;
  }
  return { op, [type]: key, value };
}

/** The `-query` body of the command line, as the platform CLI's `fromQueryOptions` (undefined: no terms). */
export function queryOf(args: Pick<ClientArgs, 'match' | 'property' | 'tag' | 'rel'>): Record<string, unknown> | undefined {
  const terms = [
    ...args.property.map((e) => expressionToTerm('property', e)),
    ...args.tag.map((e) => expressionToTerm('tag', e)),
    ...args.rel.map((e) => expressionToTerm('rel', e)),
  ];
  return terms.length === 0 ? undefined : { spec: { match: args.match ?? 'all', terms } };
}

export interface QuotaCommand {
  readonly verb: QuotaVerb;
  readonly words: readonly string[];
}

/** The words after `quota VERB`, checked. */
export function quotaCommand(verb: QuotaVerb, words: readonly string[], args: ClientArgs): QuotaCommand {
  checkTakes(args, `quota ${verb}`, [...SHARED_OPTIONS, ...QUOTA_TAKES[verb]]);
  const none = (): void => {
    if (words.length > 0) throw new UsageError(`quota ${verb} takes no REF, not ${words.map((w) => JSON.stringify(w)).join(' ')}`);
  };
  const one = (what: string): void => {
    if (words.length !== 1) throw new UsageError(`quota ${verb} takes one ${what}${words.length > 1 ? `, not ${words.map((w) => JSON.stringify(w)).join(' ')}` : ''}`);
  };
  switch (verb) {
    case 'get':
      break;
    case 'edit':
      one('REF');
      break;
    case 'patch':
      one('REF');
      if (args.file === undefined) throw new UsageError('quota patch needs --file FILE (JSON or YAML; - for standard input)');
      break;
    case 'permissions':
    case 'query':
      none();
      break;
    case 'request': {
      const sub = words[0];
      if (!(REQUEST_VERBS as readonly string[]).includes(sub ?? '')) throw new UsageError(`quota request needs create, get or list${sub === undefined ? '' : `, not ${JSON.stringify(sub)}`}`);
      const rest = words.slice(1);
      if (sub === 'list' && rest.length > 0) throw new UsageError(`quota request list takes no argument, not ${rest.map((w) => JSON.stringify(w)).join(' ')}`);
      if (sub !== 'list' && rest.length !== 1) throw new UsageError(`quota request ${sub} takes one ${sub === 'create' ? 'quota NAME' : 'ID'}`);
      if (sub === 'create' && args.requestedMax === undefined) throw new UsageError('quota request create needs --requested-max N');
      if (sub !== 'create' && args.requestedMax !== undefined) throw new UsageError(`quota request ${sub} does not take --requested-max`);
      if (sub !== 'list' && args.status !== undefined) throw new UsageError(`quota request ${sub} does not take --status`);
      break;
    }
  }
  return { verb, words };
}

/** A list with its further pages up to `--max` (default 50, as the platform CLI), printed with its note. */
async function printPaged(ctx: ClientContext, body: unknown): Promise<void> {
  const paged = await withPages(ctx, body, ctx.session.max ?? DEFAULT_MAX);
  await printAnswer(ctx, paged.body, paged.notice);
}

export async function runQuota(ctx: ClientContext, { verb, words }: QuotaCommand): Promise<number> {
  const { client, args } = ctx;
  const home = `/org/${encodeURIComponent(await orgOf(ctx))}/quota`;
  const link = (ref: string): string => `${home}/${encodeURIComponent(ref)}`;
  switch (verb) {
    case 'get': {
      const refs = [...new Set(words)];
      if (refs.length === 0) await printPaged(ctx, (await client.request('GET', home)).body);
      else if (refs.length === 1) await printAnswer(ctx, (await client.request('GET', link(refs[0]!))).body);
      else {
        const items: unknown[] = [];
        for (const ref of refs) items.push((await client.request('GET', link(ref))).body);
        await printAnswer(ctx, { kind: 'list', itemKind: 'quota', items, links: [] });
      }
      return 0;
    }
    case 'edit':
      return runEdit(ctx, link(words[0]!), [], { replace: args.replace === true });
    case 'patch': {
      const body = await readBody(args.file!, ctx.io);
      await printAnswer(ctx, (await client.request('PATCH', link(words[0]!), { body })).body);
      return 0;
    }
    case 'permissions': {
      const body = (await client.request('GET', `${home}/-schema/permissions`)).body as { items?: unknown; implied?: unknown } | null;
      // The table only when text was asked for (-o text, a profile's): the platform CLI prints JSON else.
      if (ctx.session.output !== 'text' || ctx.session.sources.output === 'default') {
        await printAnswer(ctx, body);
        return 0;
      }
      if (!Array.isArray(body?.items)) throw new ClientError(`${home}/-schema/permissions answered no permissions`);
      // As text, as the platform CLI: one row per permission, with what it implies.
      const rows = body.items.map((p) => ({ name: (p as { name?: unknown }).name, description: (p as { description?: unknown }).description, implied: body.implied }));
      await printAnswer(ctx, rows, undefined, 'flattenedPermissions');
      return 0;
    }
    case 'query':
      await printPaged(ctx, (await client.request('POST', `${home}/-query`, { body: queryOf(args) })).body);
      return 0;
    case 'request': {
      const [sub, id] = words;
      if (sub === 'create') {
        await printAnswer(ctx, (await client.request('POST', `${home}/-request`, { body: { quota: id, requestedMax: args.requestedMax } })).body);
      } else if (sub === 'get') {
        await printAnswer(ctx, (await client.request('GET', `${home}/-request/${encodeURIComponent(id!)}`)).body);
      } else {
        await printPaged(ctx, (await client.request('GET', `${home}/-request${args.status ? `?status=${args.status}` : ''}`)).body);
      }
      return 0;
    }
  }
}

/** `svcproxy quota --help`, or one verb's. */
export function quotaHelp(verb?: QuotaVerb): string {
  const verbs = verb ? [verb] : QUOTA_VERBS;
  const lines = [
    verb ? `svcproxy quota ${verb} — ${VERB_HELP[verb].about}` : `svcproxy quota — ${CLIENT_COMMANDS.quota}`,
    '',
    'Usage:',
    ...verbs.map((v) => `  svcproxy quota ${v} ${VERB_HELP[v].synopsis}${VERB_HELP[v].synopsis ? ' ' : ''}[flags]`),
    '',
    '  The org\'s quotas on the endpoint in force (a profile, --endpoint, or a local svcproxy up), printed',
    '  in --output\'s format as the platform CLI (cpln quota) prints them. A quota\'s max is changed by',
    '  edit and patch (up: the operator key only), or raised by an increase request. Exit 0; 1 when the',
    '  API refuses (its error body on stderr); 2 for a usage error.',
    '',
    ...(verb ? [] : ['Commands:', ...QUOTA_VERBS.map((v) => `  ${v.padEnd(12)}${VERB_HELP[v].about}`), '']),
    'Flags:',
    ...optionLines([...new Set(verbs.flatMap((v) => QUOTA_TAKES[v])), ...SHARED_OPTIONS]),
    '',
    ...ENVIRONMENT,
    '',
    'Examples:',
    ...[
      'svcproxy quota get',
      'svcproxy quota get gvcs -o yaml',
      'svcproxy quota query --prop name~per-gvc --prop "max>60" --match all',
      "echo 'max: 120' | svcproxy quota patch gvcs -f -",
      'EDITOR=nano svcproxy quota edit gvcs',
      'svcproxy quota request create gvcs --requested-max 40',
      'svcproxy quota request list --status pending',
    ].filter((e) => !verb || e.startsWith(`svcproxy quota ${verb}`) || e.includes(` quota ${verb} `)).map((e) => `  ${e}`),
  ];
  return `${lines.join('\n').replace(/\n\nExamples:$/, '')}\n`;
}
