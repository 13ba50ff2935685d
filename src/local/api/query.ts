/**
 * `POST <collection>/-query` (DESIGN §13; the platform CLI's `cpln KIND query`, generic.js `Query`):
 * the body is a query spec, `{kind?, spec: {match, terms, sort?}}` (commands/query.js builds it from
 * `--prop`, `--tag`, `--rel`, `--match`; `cpln` adds `rel gvc = G` for the GVC of its profile), judged
 * by the one implementation of the query language (config/location-query.ts) over each item as the
 * API shows it: a secret without its data, a workload with its `links` (so `rel gvc` selects its GVC)
 * and `status`. A GVC-scoped kind is queried across the org's GVCs at `/org/O/KIND/-query`. No body
 * (`cpln KIND query` without options sends none) is the query with no terms: every item.
 *
 * The answer is the platform's `queryresult`: `{kind: 'queryresult', itemKind, items, links, query}`
 * (its CLI picks its table by `query.kind`), in pages as lists are (`?limit=N`, 100 by default), in
 * key order unless the query sorts. A `rel: next` link continues with `GET <collection>/-query
 * ?limit=N&cursor=C`, the cursor carrying the query and where the page ended (the CLI follows `next`
 * with GET), so a page costs the items it reads, not the whole collection again. A query that does
 * not read as one is 400 with every finding. Throws `ApiError` only.
 */
import type { RawRecord } from '../../config/records.js';
import { compileQuery } from '../../config/location-query.js';
import { isObject, reporter } from '../../config/schema.js';
import { queryShape } from '../../config/validate-gvc.js';
import type { Answer, ApiContext } from './context.js';
import { ApiError } from './errors.js';
import type { KindRow } from './row.js';
import { after, bodyObject, collectionLink, itemsOf, limitOf } from './writes.js';

interface Cursor {
  /** The query, as POSTed. */
  readonly q: Record<string, unknown>;
  /** Key of the last item of the page before (unsorted queries). */
  readonly after?: string;
  /** Matches already answered (sorted queries). */
  readonly offset?: number;
}

function encodeCursor(c: Cursor): string {
  return Buffer.from(JSON.stringify(c)).toString('base64url');
}

function decodeCursor(text: string): Cursor {
  let c: unknown;
  try {
    c = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
  } catch {
    c = undefined;
  }
  if (!isObject(c) || !isObject(c.q) || (c.after !== undefined && typeof c.after !== 'string')
    || (c.offset !== undefined && !(Number.isSafeInteger(c.offset) && (c.offset as number) >= 0))) {
    throw new ApiError('bad_request', 'cursor is not a cursor this API made (follow the rel next link of a query\'s answer)');
  }
  return c as unknown as Cursor;
}

/** Checks a query body: 400 with every finding when it does not read as a query of this kind. */
function checkQuery(row: KindRow, q: Record<string, unknown>): void {
  if (q.kind !== undefined && q.kind !== null && q.kind !== row.kind) {
    throw new ApiError('bad_request', `the query is of kind ${JSON.stringify(q.kind)}; this path queries ${row.kind}`, { kind: q.kind, expected: row.kind });
  }
  const errors: string[] = [];
  queryShape(q, '', reporter('query', errors, []));
  if (errors.length > 0) throw new ApiError('bad_request', `the query is not valid: ${errors[0]}`, { errors });
}

/** One page of the items of `row` that `q` selects, from `cursor`. */
function answer(ctx: ApiContext, row: KindRow, q: Record<string, unknown>, from: Cursor | undefined): Answer {
  const limit = limitOf(ctx);
  const { selects, sort } = compileQuery(q);
  const spec = isObject(q.spec) ? q.spec : {};
  const sorted = isObject(spec.sort) && typeof spec.sort.by === 'string' && spec.sort.by !== '';
  const items = itemsOf(ctx, row, undefined);
  const page: Record<string, unknown>[] = [];
  let next: Cursor | undefined;
  if (sorted) {
    // A sorted query orders every match first: pages are offsets into that order.
    const matches: RawRecord[] = [];
    for (const i of items) {
      const view = row.view(ctx, i.record, i.gvc);
      if (selects(view)) matches.push(view);
    }
    sort(matches);
    const offset = from?.offset ?? 0;
    page.push(...(matches.slice(offset, offset + limit) as Record<string, unknown>[]));
    if (offset + limit < matches.length) next = { q, offset: offset + limit };
  } else {
    let last: string | undefined;
    for (let at = after(items, from?.after ?? null); at < items.length; at++) {
      const i = items[at]!;
      const view = row.view(ctx, i.record, i.gvc);
      if (!selects(view)) continue;
      if (page.length === limit) {
        next = { q, after: last! };
        break;
      }
      page.push(view);
      last = i.key;
    }
  }
  const self = `${collectionLink(ctx, row, undefined)}/-query`;
  const links = [{ rel: 'self', href: self }];
  if (next !== undefined) links.push({ rel: 'next', href: `${self}?limit=${limit}&cursor=${encodeCursor(next)}` });
  const query = { kind: row.kind, ...q, spec: { match: 'all', terms: [], ...spec } };
  return { status: 200, body: { kind: 'queryresult', itemKind: row.kind, items: page, links, query } };
}

/** `POST <collection>/-query`. */
export async function postQuery(ctx: ApiContext, row: KindRow): Promise<Answer> {
  const q = await bodyObject(ctx, true);
  checkQuery(row, q);
  return answer(ctx, row, q, undefined);
}

/** `GET <collection>/-query?cursor=C`: the next page of a query. */
export function nextQueryPage(ctx: ApiContext, row: KindRow): Answer {
  const text = ctx.query.get('cursor');
  if (text === null) throw new ApiError('bad_request', 'a query is POSTed; GET continues one with the cursor of its rel next link');
  const cursor = decodeCursor(text);
  checkQuery(row, cursor.q);
  return answer(ctx, row, cursor.q, cursor);
}
