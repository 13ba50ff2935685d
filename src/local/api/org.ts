/**
 * `PATCH /org/O` (the platform CLI's `cpln org update --set description=…`, `cpln org tag`, `cpln org
 * edit`): the org's `description` and `tags` change through the API, as a merge patch (patch.ts) of
 * the org record, created when the records hold none (the org `up` serves by default). The org's
 * other members are the configuration's (its `spec.tracing` routes every workload's spans): a body
 * that would change one is refused (400), one that repeats them as they are (`cpln org edit` sends
 * the whole org back) is taken. Throws `ApiError` only.
 */
import { isDeepStrictEqual } from 'node:util';
import { keyOf, withoutBookkeeping } from '../../config/record-meta.js';
import type { Answer, ApiContext } from './context.js';
import { ApiError } from './errors.js';
import { PatchError, applyPatch } from './patch.js';
import { COMMON_READ_ONLY } from './row.js';
import { bodyObject, checkVersion, converted, versionOf, write } from './writes.js';
import { recordView } from './views.js';

/** What a PATCH of the org may change. */
const ORG_WRITABLE = new Set(['description', 'tags']);

export async function patchOrg(ctx: ApiContext): Promise<Answer> {
  const name = ctx.org;
  const body = await bodyObject(ctx);
  if (body.name !== undefined && body.name !== name) throw new ApiError('bad_request', `the body names org ${JSON.stringify(body.name)}; this path is org ${name}`, { name: body.name, expected: name });
  if (body.kind !== undefined && body.kind !== 'org') throw new ApiError('bad_request', `the body is a ${JSON.stringify(body.kind)} record; this path takes org`, { kind: body.kind, expected: 'org' });
  const given = versionOf(body);
  const patch: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(body)) if (!COMMON_READ_ONLY.includes(k) && k !== 'kind' && k !== 'name' && k !== 'status') patch[k] = v;
  const result = await write(ctx, keyOf('org', name), (current) => {
    if (current !== undefined) checkVersion('org', name, current.version, given);
    const base = current === undefined ? { kind: 'org', name } : withoutBookkeeping(current);
    let merged: Record<string, unknown>;
    try {
      merged = applyPatch(base, patch) as Record<string, unknown>;
    } catch (e) {
      if (e instanceof PatchError) throw new ApiError('bad_request', `the patch does not apply: ${e.message}`, { path: e.path });
      throw e;
    }
    for (const k of new Set([...Object.keys(base), ...Object.keys(merged)])) {
      if (ORG_WRITABLE.has(k) || isDeepStrictEqual(base[k], merged[k])) continue;
      throw new ApiError('bad_request', `org: only description and tags change through the API; ${k} is the configuration's (change it in the --config files)`, { member: k });
    }
    return { put: converted(ctx, { ...merged, kind: 'org', name }) };
  });
  return { status: 200, body: recordView(result.record!, ctx.org, ctx.deps.since) };
}
