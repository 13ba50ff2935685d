/**
 * A PATCH body applied to a record (DESIGN §13): a JSON merge patch (RFC 7386: members merge into
 * objects recursively, `null` removes a member, any other value replaces), plus the platform's keys
 * for arrays that `cpln ... update --set/--unset` sends (its `update/update.js`), at any depth:
 *
 * - `$patch/NAME: [items]`: each item (an object with `name`) is merged, by these same rules, into
 *   the element of array NAME with that `name`; an item naming no element is appended;
 * - `$drop/NAME: [values]`: removes the elements equal to a value, or whose `name` is one (that is
 *   how `--unset spec.containers.main` removes a container);
 * - `$append/NAME: [values]`: appends the values.
 *
 * Keys apply in the order written. Pure; a patch that cannot apply (a `$` key whose value is not an
 * array, an array key on a member that is not one, an unknown `$` key) throws `PatchError` naming its path.
 */
import { isDeepStrictEqual } from 'node:util';

export class PatchError extends Error {
  constructor(readonly path: string, message: string) {
    super(`${path}: ${message}`);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

const ARRAY_KEY = /^\$(patch|drop|append)\/(.+)$/;

function at(path: string, key: string): string {
  return path === '' ? key : `${path}.${key}`;
}

/** `target` with `patch` applied (neither is changed). */
export function applyPatch(target: unknown, patch: unknown, path = ''): unknown {
  if (!isObject(patch)) return patch;
  const out: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    const m = ARRAY_KEY.exec(key);
    if (m === null) {
      if (key.startsWith('$')) throw new PatchError(at(path, key), 'unknown patch key (the platform\'s are $patch/, $drop/ and $append/)');
      if (value === null) delete out[key];
      else out[key] = applyPatch(out[key], value, at(path, key));
      continue;
    }
    const [, op, name] = m as unknown as [string, 'patch' | 'drop' | 'append', string];
    const where = at(path, key);
    if (!Array.isArray(value)) throw new PatchError(where, 'must be an array');
    const current = out[name];
    if (current !== undefined && current !== null && !Array.isArray(current)) throw new PatchError(at(path, name), `is not an array: ${key} cannot apply`);
    const list: unknown[] = Array.isArray(current) ? [...current] : [];
    if (op === 'append') {
      list.push(...value);
    } else if (op === 'drop') {
      const named = (e: unknown): unknown => (isObject(e) ? e.name : undefined);
      out[name] = list.filter((e) => !value.some((v) => isDeepStrictEqual(e, v) || (typeof v === 'string' && named(e) === v)));
      continue;
    } else {
      value.forEach((item, i) => {
        if (!isObject(item) || typeof item.name !== 'string') throw new PatchError(`${where}[${i}]`, 'must be an object with a name');
        const index = list.findIndex((e) => isObject(e) && e.name === item.name);
        if (index < 0) list.push(applyPatch(undefined, item, `${at(path, name)}[${list.length}]`));
        else list[index] = applyPatch(list[index], item, `${at(path, name)}[${index}]`);
      });
    }
    out[name] = list;
  }
  return out;
}
