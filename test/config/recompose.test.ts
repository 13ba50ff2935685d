/**
 * A write composes and stamps only the record it changes (src/config/overlay.ts `recomposed`): after
 * every generated change of the overlay at one key (a file's record replaced or deleted, an API
 * record created, replaced or deleted, a deletion of nothing), what it makes is what composing and
 * stamping every record again makes (`stamp(compose(...))`), the other records the same objects; it
 * declines (undefined) only where a composition would place the record elsewhere.
 */
import t from 'tap';
import { compose, positionsOf, recomposed, stamp } from '../../src/config/overlay.js';
import { contentHash, keyOf, recordKey, type RecordMeta } from '../../src/config/record-meta.js';
import type { OverlayEntry } from '../../src/config/record-state.js';
import type { RawRecord, SourcedRecord } from '../../src/config/records.js';
import { prng, testSeed } from '../helpers/seed.js';

function workload(name: string, n: number): RawRecord {
  return Object.freeze({ kind: 'workload', name, gvc: 'g1', spec: Object.freeze({ type: 'standard', n }) });
}

t.test('generated writes: recomposing one key is composing and stamping every record again', async (t) => {
  const seed = testSeed('RECOMPOSE_SEED', 37);
  t.comment(`seed ${seed} (RECOMPOSE_SEED=${seed} replays it)`);
  const random = prng(seed);
  const int = (n: number): number => Math.floor(random() * n);
  const base: SourcedRecord[] = [{ record: Object.freeze({ kind: 'gvc', name: 'g1' }), source: 'a.yaml', line: 1 }];
  for (let i = 0; i < 30; i++) base.push({ record: workload(`w${i}`, i), source: 'a.yaml', line: i + 2 });
  // Two records of one key (of a kind validation does not index): a write of it is composed in full.
  base.push({ record: Object.freeze({ kind: 'identity', name: 'twice', gvc: 'g1' }), source: 'b.yaml', line: 1 });
  base.push({ record: Object.freeze({ kind: 'identity', name: 'twice', gvc: 'g1', description: 'again' }), source: 'b.yaml', line: 2 });
  const hashes = new Map<string, string>();
  for (const s of base) {
    const key = recordKey(s.record)!;
    if (!hashes.has(key)) hashes.set(key, contentHash(s.record));
  }

  const basePositions = positionsOf(base);
  let overlay = new Map<string, OverlayEntry>();
  let clock = 0;
  const time = (): string => new Date(Date.UTC(2026, 0, 1) + ++clock * 1000).toISOString();
  let state = stamp(compose(base, overlay), new Map<string, RecordMeta>(), time());
  let positions: ReadonlyMap<string, number> = positionsOf(state.records);
  let recomposedSteps = 0;
  let declined = 0;
  for (let step = 0; step < 400; step++) {
    const which = int(4);
    const key = which === 0 ? keyOf('identity', 'twice', 'g1') : keyOf('workload', `w${int(45)}`, 'g1');
    const inBase = hashes.has(key);
    const name = key.split('/').pop()!;
    const entry: OverlayEntry | undefined = int(3) === 0
      ? (inBase ? { base: hashes.get(key)! } : undefined)
      : { base: hashes.get(key) ?? null, record: which === 0 ? Object.freeze({ kind: 'identity', name, gvc: 'g1', description: `v${step}` }) : workload(name, 100 + int(3)) };
    const next = new Map(overlay);
    if (entry === undefined) next.delete(key);
    else next.set(key, entry);
    const now = time();
    const newId = (k: string): string | undefined => (k === key ? `id-${step}` : undefined);
    // Recomposed first: the stamped copy of a record is kept by its meta object, which each path makes its own.
    const again = recomposed(state, positions, basePositions, key, entry, inBase, now, newId);
    const full = stamp(compose(base, next), state.meta, now, newId);
    const what = `step ${step}: ${entry === undefined ? 'nothing of' : entry.record === undefined ? 'delete' : 'put'} ${key}`;
    if (again === undefined) {
      declined++;
      const at = positions.get(key);
      t.ok(at === -1 || (at === undefined && inBase) || basePositions.get(key) === -1, `${what}: declined only where a composition places it elsewhere`);
    } else {
      recomposedSteps++;
      t.same(again.records, full.records, `${what}: the same records`);
      const differ = again.records.flatMap((s, i) => (s === full.records[i] || recordKey(s.record) === key ? [] : [`${i}:${recordKey(s.record)}`]));
      t.same(differ, [], `${what}: the others the same objects`);
      t.same([...again.meta], [...full.meta], `${what}: the same meta`);
      t.same([...again.changed], [...full.changed], `${what}: the same keys changed`);
      if (again.positions !== undefined) t.same([...again.positions].sort(), [...positionsOf(full.records)].sort(), `${what}: the positions kept or made along`);
      t.equal(again.at, again.records.findIndex((s) => recordKey(s.record) === key) === -1 ? undefined : again.records.findIndex((s) => recordKey(s.record) === key), `${what}: where the key's record is`);
    }
    overlay = next;
    state = full;
    positions = (again?.positions) ?? positionsOf(full.records);
  }
  t.ok(recomposedSteps > 0 && declined > 0, `${recomposedSteps} writes recomposed, ${declined} composed in full`);
});
