/**
 * `rest edit`'s merge patch against RFC 7386 itself: the RFC's MergePatch algorithm (section 2,
 * written out here as the reference) applied to `before` with the computed patch gives `after`, on
 * generated pairs of resources and mutations of them (members added, removed, changed, nested
 * objects and arrays replaced), the patch holds nothing that did not change, and it is the patch the
 * json-merge-patch package (a devDependency) generates for the same pair. The RFC's own examples
 * (appendix A) are checked in the other direction where a patch is unique.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import { mergePatch, sameJson } from '../../src/client/merge-patch.js';
import { prng, testSeed } from '../helpers/seed.js';

/** RFC 7386, section 2: MergePatch(Target, Patch). */
function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (patch === null || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> = target !== null && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [name, value] of Object.entries(patch as Record<string, unknown>)) {
    if (value === null) delete out[name];
    else out[name] = applyMergePatch(out[name], value);
  }
  return out;
}

const generate = (createRequire(import.meta.url)('json-merge-patch') as { generate(before: unknown, after: unknown): unknown }).generate;

const seed = testSeed('CLIENT_PATCH_SEED', 38);
t.comment(`seed ${seed} (CLIENT_PATCH_SEED=${seed} replays it)`);
const rand = prng(seed);
const KEYS = ['name', 'description', 'tags', 'spec', 'a', 'b', 'containers', 'env', '10', 'x-y'];

/** A JSON value without nulls in objects (RFC 7386 cannot set a member to null). */
function value(depth: number): unknown {
  const r = rand();
  if (depth > 3 || r < 0.35) return [() => 'text', () => Math.floor(rand() * 100), () => rand() < 0.5, () => ''][Math.floor(rand() * 4)]!();
  if (r < 0.55) return Array.from({ length: Math.floor(rand() * 3) }, () => (rand() < 0.1 ? null : value(depth + 1)));
  return object(depth + 1);
}

function object(depth: number): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  const n = Math.floor(rand() * 5);
  for (let i = 0; i < n; i++) o[KEYS[Math.floor(rand() * KEYS.length)]!] = value(depth);
  return o;
}

function mutate(o: Record<string, unknown>, depth = 0): Record<string, unknown> {
  const out: Record<string, unknown> = structuredClone(o);
  const steps = 1 + Math.floor(rand() * 3);
  for (let i = 0; i < steps; i++) {
    const keys = Object.keys(out);
    const key = rand() < 0.3 || keys.length === 0 ? KEYS[Math.floor(rand() * KEYS.length)]! : keys[Math.floor(rand() * keys.length)]!;
    const r = rand();
    if (r < 0.25) delete out[key];
    else if (r < 0.5 && out[key] !== null && typeof out[key] === 'object' && !Array.isArray(out[key]) && depth < 3) out[key] = mutate(out[key] as Record<string, unknown>, depth + 1);
    else out[key] = value(depth + 1);
  }
  return out;
}

t.test('applying the patch (RFC 7386) to before gives after, on generated resources', async (t) => {
  for (let i = 0; i < 3000; i++) {
    const before = object(0);
    const after = rand() < 0.1 ? structuredClone(before) : mutate(before);
    const patch = mergePatch(before, after);
    if (!sameJson(applyMergePatch(before, patch), after)) t.fail(`${JSON.stringify({ before, after, patch })}`);
    if (sameJson(before, after) !== (Object.keys(patch).length === 0)) t.fail(`empty exactly when nothing changed: ${JSON.stringify({ before, after, patch })}`);
    if (!sameJson(patch, generate(before, after) ?? {})) t.fail(`json-merge-patch generates another patch: ${JSON.stringify({ before, after, patch, theirs: generate(before, after) })}`);
    for (const key of Object.keys(patch)) {
      if (sameJson(before[key], after[key])) t.fail(`${key} unchanged yet in the patch: ${JSON.stringify({ before, after, patch })}`);
    }
  }
  t.pass('3000 pairs: applied, minimal, and json-merge-patch\'s');
});

t.test('RFC 7386 appendix A examples whose patch is the smallest one', async (t) => {
  t.same(mergePatch({ a: 'b' }, { a: 'c' }), { a: 'c' });
  t.same(mergePatch({ a: 'b' }, { a: 'b', b: 'c' }), { b: 'c' });
  t.same(mergePatch({ a: 'b' }, {}), { a: null });
  t.same(mergePatch({ a: 'b', b: 'c' }, { b: 'c' }), { a: null });
  t.same(mergePatch({ a: ['b'] }, { a: 'c' }), { a: 'c' });
  t.same(mergePatch({ a: { b: 'c' } }, { a: { b: 'd' } }), { a: { b: 'd' } });
  t.same(mergePatch({ a: [{ b: 'c' }] }, { a: [1] }), { a: [1] });
  t.same(mergePatch({ a: { b: 'c' } }, { a: { b: 'c', d: 'e' } }), { a: { d: 'e' } }, 'a nested member, not the whole object');
  t.same(mergePatch({ spec: { env: [{ name: 'A' }] } }, { spec: { env: [{ name: 'A' }, { name: 'B' }] } }), { spec: { env: [{ name: 'A' }, { name: 'B' }] } }, 'arrays whole');
  const proto = mergePatch({}, JSON.parse('{"__proto__": {"x": 1}}') as Record<string, unknown>);
  t.same(Object.keys(proto), ['__proto__'], 'a member named __proto__ is a member');
});
