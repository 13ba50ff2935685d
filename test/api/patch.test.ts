/**
 * PATCH bodies (src/local/api/patch.ts): RFC 7386's merge patch, checked against its own examples
 * and against a reference implementation (npm json-merge-patch) on generated documents and patches
 * (seeded; `API_PATCH_SEED` replays); and the platform's `$patch/`, `$drop/`, `$append/` keys as the
 * platform's CLI makes them: patches built by cpln's own `makePatch` (its `update/update.js`) from
 * generated `--set`/`--unset` expressions on a workload, applied, and compared with what each
 * expression means, done directly on the record.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import jsonMergePatch from 'json-merge-patch';
import { PatchError, applyPatch } from '../../src/local/api/patch.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('API_PATCH_SEED', 20261207);
const require = createRequire(import.meta.url);
const { makePatch } = require('@controlplane/cli/dist/src/update/update.js') as {
  makePatch(paths: { path: string; array?: boolean }[], set: string[], ctx: unknown, unset: string[]): Record<string, unknown>;
};

t.test('RFC 7386 appendix A', async (t) => {
  const cases: [unknown, unknown, unknown][] = [
    [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
    [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
    [{ a: 'b' }, { a: null }, {}],
    [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
    [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
    [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
    [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
    [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
    [['a', 'b'], ['c', 'd'], ['c', 'd']],
    [{ a: 'b' }, ['c'], ['c']],
    [{ a: 'foo' }, null, null],
    [{ a: 'foo' }, 'bar', 'bar'],
    [{ e: null }, { a: 1 }, { e: null, a: 1 }],
    [[1, 2], { a: 'b', c: null }, { a: 'b' }],
    [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
  ];
  for (const [target, patch, want] of cases) t.same(applyPatch(target, patch), want, JSON.stringify(patch));
});

t.test(`merge patch agrees with a reference implementation (seed ${SEED})`, async (t) => {
  const random = prng(SEED);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const keys = ['a', 'b', 'c', 'spec', 'name', 'x-y', '$dollar'];
  const value = (depth: number, nulls: boolean): unknown => {
    const r = random();
    if (depth === 0 || r < 0.3) return pick([1, 0, -2.5, 'text', '', true, false, ...(nulls ? [null, null] : [])]);
    if (r < 0.45) return Array.from({ length: Math.floor(random() * 3) }, () => value(depth - 1, nulls));
    const o: Record<string, unknown> = {};
    for (let i = Math.floor(random() * 4); i > 0; i--) o[pick(keys.filter((k) => !k.startsWith('$')))] = value(depth - 1, nulls);
    return o;
  };
  for (let i = 0; i < 2000; i++) {
    const target = value(4, false);
    const patch = value(4, true);
    const before = JSON.stringify(target);
    const want = jsonMergePatch.apply(structuredClone(target), structuredClone(patch)) as unknown;
    const got = applyPatch(target, patch);
    if (JSON.stringify(got) !== JSON.stringify(want)) t.fail(`seed ${SEED} #${i}: ${before} + ${JSON.stringify(patch)} = ${JSON.stringify(got)}, reference ${JSON.stringify(want)}`);
    if (JSON.stringify(target) !== before) t.fail(`seed ${SEED} #${i}: the target was changed`);
  }
  t.pass('2000 generated patches');
});

t.test('the platform\'s array keys', async (t) => {
  const w = { spec: { containers: [{ name: 'a', cpu: '1', env: [{ name: 'X', value: '1' }] }, { name: 'b' }], tags: ['t1', 't2'] } };
  t.same(applyPatch(w, { spec: { '$patch/containers': [{ name: 'a', cpu: '2', '$patch/env': [{ name: 'Y', value: '2' }] }] } }), {
    spec: { containers: [{ name: 'a', cpu: '2', env: [{ name: 'X', value: '1' }, { name: 'Y', value: '2' }] }, { name: 'b' }], tags: ['t1', 't2'] },
  });
  t.same(applyPatch(w, { spec: { '$drop/containers': ['b'], '$append/tags': ['t3'], '$drop/tags': ['t1'] } }), { spec: { containers: [w.spec.containers[0]], tags: ['t2', 't3'] } });
  t.same(applyPatch({}, { '$append/list': [1], '$patch/items': [{ name: 'n', v: 1 }] }), { list: [1], items: [{ name: 'n', v: 1 }] });
  t.same((applyPatch(w, { spec: { '$patch/containers': [{ name: 'a', env: null }] } }) as typeof w).spec.containers[0], { name: 'a', cpu: '1' });
  t.same(w.spec.containers[0]!.env, [{ name: 'X', value: '1' }], 'the target is not changed');
  const refused: [unknown, RegExp][] = [
    [{ '$append/spec': [1] }, /spec: is not an array/],
    [{ spec: { '$drop/containers': 'a' } }, /spec\.\$drop\/containers: must be an array/],
    [{ spec: { '$patch/containers': ['a'] } }, /\[0\]: must be an object with a name/],
    [{ '$set/x': 1 }, /\$set\/x: unknown patch key/],
  ];
  for (const [patch, message] of refused) t.throws(() => applyPatch(w, patch), { name: 'Error', message }, JSON.stringify(patch));
  let caught: unknown;
  try {
    applyPatch(w, { '$append/spec': [1] });
  } catch (e) {
    caught = e;
  }
  t.ok(caught instanceof PatchError && caught.path === 'spec', 'a PatchError naming its path');
});

t.test(`cpln's --set/--unset patches mean what they say (seed ${SEED})`, async (t) => {
  const PATHS = [
    { path: 'description' },
    { path: 'tags.<key>' },
    { path: 'spec.containers.<name>.cpu' },
    { path: 'spec.containers.<name>.args', array: true },
    { path: 'spec.containers.<name>.env.<name>.value' },
    { path: 'spec.containers.<name>.env.<name>' },
    { path: 'spec.defaultOptions.autoscaling.minScale' },
    { path: 'spec.firewallConfig.external.inboundAllowCIDR', array: true },
  ];
  const random = prng(SEED + 1);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const names = ['main', 'side', 'extra'];
  for (let i = 0; i < 300; i++) {
    type C = { name: string; cpu?: string; args?: string[]; env?: { name: string; value?: string }[] };
    const w = {
      description: 'd',
      tags: { keep: 'k' } as Record<string, string>,
      spec: {
        containers: names.slice(0, 1 + Math.floor(random() * 2)).map((name): C => ({ name, cpu: '1', args: ['a'], env: [{ name: 'E0', value: 'v' }] })),
        defaultOptions: { autoscaling: { minScale: 1 } },
        firewallConfig: { external: { inboundAllowCIDR: ['10.0.0.0/8'] } },
      },
    };
    const want = structuredClone(w) as typeof w;
    const container = (name: string): C => {
      let c = want.spec.containers.find((x) => x.name === name);
      if (!c) want.spec.containers.push((c = { name }));
      return c;
    };
    const set: string[] = [];
    const unset: string[] = [];
    // cpln's makePatch puts every --set before every --unset: so does the meaning.
    const sets: (() => void)[] = [];
    const unsets: (() => void)[] = [];
    const used = new Set<string>();
    for (let n = 1 + Math.floor(random() * 3); n > 0; n--) {
      const c = pick(names);
      const v = `v${Math.floor(random() * 100)}`;
      const env = pick(['E0', 'E1']);
      const op = Math.floor(random() * 9);
      // One expression per member: makePatch keeps one value per member (the last).
      const member = op === 0 || op === 8 ? 'description' : op === 4 || op === 5 ? `${op}/${c}/${env}` : `${op}/${c}`;
      if (used.has(member) || (op === 5 && used.has(`4/${c}/${env}`)) || (op === 4 && used.has(`5/${c}/${env}`))) continue;
      used.add(member);
      if (op === 0) { set.push(`description=${v}`); sets.push(() => { want.description = v; }); }
      else if (op === 1) { set.push(`tags.t${v}=${v}`); sets.push(() => { want.tags[`t${v}`] = v; }); }
      else if (op === 2) { set.push(`spec.containers.${c}.cpu=${v}`); sets.push(() => { container(c).cpu = v; }); }
      else if (op === 3) { set.push(`spec.containers.${c}.args+=${v}`); sets.push(() => { const x = container(c); x.args = [...(x.args ?? []), v]; }); }
      else if (op === 4) { set.push(`spec.containers.${c}.env.${env}.value=${v}`); sets.push(() => { const x = container(c); const e = (x.env ??= []).find((y) => y.name === env); if (e) e.value = v; else x.env.push({ name: env, value: v }); }); }
      else if (op === 5) { unset.push(`spec.containers.${c}.env.${env}`); unsets.push(() => { const x = container(c); x.env = (x.env ?? []).filter((y) => y.name !== env); }); }
      else if (op === 6) { set.push(`spec.defaultOptions.autoscaling.minScale=${v.slice(1)}`); sets.push(() => { (want.spec.defaultOptions.autoscaling as Record<string, unknown>).minScale = v.slice(1); }); }
      else if (op === 7) { set.push('spec.firewallConfig.external.inboundAllowCIDR-=10.0.0.0/8'); sets.push(() => { want.spec.firewallConfig.external.inboundAllowCIDR = want.spec.firewallConfig.external.inboundAllowCIDR.filter((x) => x !== '10.0.0.0/8'); }); }
      else { unset.push('description'); unsets.push(() => { delete (want as Partial<typeof want>).description; }); }
    }
    for (const f of [...sets, ...unsets]) f();
    if (set.length + unset.length === 0) continue;
    const patch = makePatch(PATHS, set, {}, unset);
    const got = applyPatch(w, patch);
    if (JSON.stringify(got) !== JSON.stringify(want)) t.fail(`seed ${SEED} #${i}: --set ${set.join(' ')} --unset ${unset.join(' ')}: patch ${JSON.stringify(patch)} gave ${JSON.stringify(got)}, meant ${JSON.stringify(want)}`);
  }
  t.pass('300 generated updates');
});
