/**
 * The platform API's index of a snapshot's records (src/local/api/views.ts `indexOf`) is made from
 * the index made before when a write changed a few records: after every generated change (records
 * replaced in place, one or a run of them in the same or another order, removed, added at the end or in the middle, moved, duplicated, an org record
 * come and gone) each kind's map holds what a full index holds, in the same order.
 */
import t from 'tap';
import type { Snapshot } from '../../src/config/model.js';
import type { RawRecord } from '../../src/config/records.js';
import { fullIndex, indexOf } from '../../src/local/api/views.js';
import { prng, testSeed } from '../helpers/seed.js';

t.test('generated changes: the index made from the last one is the full index', async (t) => {
  const seed = testSeed('RECORD_INDEX_SEED', 37);
  t.comment(`seed ${seed} (RECORD_INDEX_SEED=${seed} replays it)`);
  const random = prng(seed);
  const int = (n: number): number => Math.floor(random() * n);
  const KINDS = ['workload', 'deployment', 'identity', 'policy', 'domain', 'gvc'];
  const record = (kind: string, name: string, v: number): RawRecord => Object.freeze({
    kind, name, ...(['workload', 'deployment', 'identity'].includes(kind) ? { gvc: `g${v % 2}` } : {}), description: `v${v}`,
  });
  let records: RawRecord[] = [];
  for (let i = 0; i < 40; i++) records.push(record(KINDS[i % KINDS.length]!, `r${i}`, 0));
  const snapshot = (list: readonly RawRecord[]): Snapshot => ({ records: Object.freeze([...list]) }) as unknown as Snapshot;
  indexOf(snapshot(records), 'acme');
  let made = 0;
  for (let step = 0; step < 400; step++) {
    records = [...records];
    const op = int(10);
    const at = int(records.length);
    let what: string;
    if (op < 4 && random() < 0.4) {
      // A file edit of a few records side by side: new objects in their places, sometimes in another order.
      const n = 2 + int(3);
      const run = records.slice(at, at + n).map((r) => record(String(r.kind), String(r.name), step));
      if (random() < 0.3) run.reverse();
      records.splice(at, run.length, ...run);
      what = `replace ${run.length} from ${at}`;
    } else if (op < 4) {
      const r = records[at]!;
      records[at] = record(String(r.kind), String(r.name), step);
      what = `replace ${String(r.kind)}/${String(r.name)}`;
    } else if (op < 5 && records.length > 5) {
      // The first record of a key that has several, when there is one: the next takes its place.
      const keyOf = (r: RawRecord): string => `${String(r.kind)}/${String(r.gvc ?? '')}/${String(r.name)}`;
      const twice = records.findIndex((r, i) => records.findIndex((o, j) => j > i && keyOf(o) === keyOf(r)) >= 0);
      const i = twice >= 0 && random() < 0.7 ? twice : at;
      what = `remove ${String(records[i]!.kind)}/${String(records[i]!.name)}`;
      records.splice(i, 1);
    } else if (op < 7) {
      // A new name mostly; sometimes one in use (a duplicate: the first of a key is indexed).
      const r = record(KINDS[int(KINDS.length)]!, random() < 0.6 ? `n${step}` : `r${int(40)}`, step);
      if (random() < 0.7) records.push(r);
      else records.splice(at, 0, r);
      what = `add ${String(r.kind)}/${String(r.name)}`;
    } else if (op < 8) {
      const j = int(records.length);
      [records[at], records[j]] = [records[j]!, records[at]!];
      what = 'swap';
    } else if (op < 9) {
      const i = records.findIndex((r) => r.kind === 'org');
      if (i >= 0) records.splice(i, 1);
      else records.push({ kind: 'org', name: 'acme', description: `v${step}` });
      what = 'org';
    } else {
      // Duplicates removed: the later records of a key go.
      const seen = new Set<string>();
      records = records.filter((r) => {
        const key = `${String(r.kind)}/${String(r.gvc ?? '')}/${String(r.name)}`;
        return seen.has(key) ? false : (seen.add(key), true);
      });
      what = 'unique';
    }
    const index = indexOf(snapshot(records), 'acme');
    made++;
    const full = fullIndex(records).byKind;
    const kinds = new Set([...full.keys(), ...KINDS, 'org']);
    t.same([...kinds].map((k) => [k, [...index.of(k)]]), [...kinds].map((k) => [k, [...full.get(k) ?? []]]), `step ${step} (${what}): every kind's records, in order`);
    t.equal(index.orgRecord, records.filter((r) => r.kind === 'org').pop(), `step ${step} (${what}): the org record`);
  }
  t.equal(made, 400);
});
