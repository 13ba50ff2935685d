/**
 * src/layered-map.ts against a `Map` (the reference) on generated operations over many
 * generations: each generation reads as the `Map` it was filled like (get, has, size, iteration in
 * the same order; walked in some generations, so the next is made over the walked copy or over the
 * layers),
 * and every earlier generation still reads as it did when it was made, across the folds into a new
 * base (past 64 changed entries).
 */
import t from 'tap';
import { LayeredMap } from '../../src/layered-map.js';
import { prng, testSeed } from '../helpers/seed.js';

/** The entries in iteration order (a `Map`'s: the order compared). */
function inOrder(map: ReadonlyMap<string, number>): [string, number][] {
  return [...map];
}

t.test('generated generations read as a Map filled alike, the earlier ones as they were', async (t) => {
  const seed = testSeed('LAYERED_MAP_SEED', 5150);
  t.comment(`seed ${seed} (LAYERED_MAP_SEED=${seed} replays it)`);
  const draw = prng(seed);
  const random = (n: number): number => Math.floor(draw() * n);
  for (const keys of [8, 300, 1500]) {
    const first = new Map<string, number>();
    for (let i = 0; i < keys; i += 2) first.set(`k${i}`, i);
    let map: ReadonlyMap<string, number> = LayeredMap.over(new Map(first));
    const kept: { map: ReadonlyMap<string, number>; entries: [string, number][] }[] = [{ map, entries: inOrder(first) }];
    let reference = new Map(first);
    for (let generation = 0; generation < 150; generation++) {
      const next = LayeredMap.next(map);
      reference = new Map(reference);
      const ops = 1 + random(keys > 100 ? 12 : 4);
      for (let i = 0; i < ops; i++) {
        const key = `k${random(keys)}`;
        if (random(3) === 0) t.equal(next.delete(key), reference.delete(key), `delete ${key} answers as a Map`);
        else {
          const value = random(1000);
          next.set(key, value);
          reference.set(key, value);
        }
      }
      map = next;
      if (next.size !== reference.size) t.fail(`${keys} keys, generation ${generation}: size ${next.size} against ${reference.size}`);
      for (let i = 0; i < keys; i++) {
        const key = `k${i}`;
        if (next.get(key) !== reference.get(key) || next.has(key) !== reference.has(key)) t.fail(`${keys} keys, generation ${generation}: ${key}`);
      }
      // Walked in some generations only: the next is made over its walked copy (a fold for nothing),
      // or over the layers (and folded past 64 changes) when nobody walked it.
      if (random(3) !== 0) {
        t.same(inOrder(next), inOrder(reference), `${keys} keys, generation ${generation}: the entries of a Map`);
        t.same([...next.keys()], [...reference.keys()], 'keys');
        t.same([...next.values()], [...reference.values()], 'values');
        const each: [string, number][] = [];
        next.forEach((v, k) => each.push([k, v]));
        t.same(each, inOrder(reference), 'forEach');
      }
      kept.push({ map: next, entries: inOrder(reference) });
    }
    for (const [i, k] of kept.entries()) t.same(inOrder(k.map), k.entries, `${keys} keys: generation ${i - 1} still reads as it was made`);
  }
});
