/**
 * The quotas' CURRENT counts (src/local/api/quota.ts) are followed from one write to the next (the
 * keys the record index gained and lost, views.ts `indexChange`) rather than counted again over every
 * workload: after every generated change (workloads and identities added, removed, replaced; GVCs
 * come and gone; domains, agents, cloud accounts) the rows read as those of the same records
 * counted from scratch.
 */
import t from 'tap';
import type { Snapshot } from '../../src/config/model.js';
import type { RawRecord } from '../../src/config/records.js';
import { indexOf } from '../../src/local/api/views.js';
import { quotaRows } from '../../src/local/api/quota.js';
import { prng, testSeed } from '../helpers/seed.js';

t.test('generated changes: the counts followed from the last write are the counts made in full', async (t) => {
  const seed = testSeed('QUOTA_COUNTS_SEED', 40);
  t.comment(`seed ${seed} (QUOTA_COUNTS_SEED=${seed} replays it)`);
  const random = prng(seed);
  const int = (n: number): number => Math.floor(random() * n);
  const SCOPED = ['workload', 'identity'];
  const ORG_KINDS = ['domain', 'agent', 'cloudaccount', 'policy'];
  const record = (kind: string, name: string, v: number, gvc?: string): RawRecord => Object.freeze({ kind, name, ...(gvc === undefined ? {} : { gvc }), description: `v${v}` });
  let gvcs = ['g0', 'g1'];
  let records: RawRecord[] = [];
  for (let i = 0; i < 30; i++) records.push(record(SCOPED[i % 2]!, `r${i}`, 0, gvcs[i % 2]));
  for (let i = 0; i < 6; i++) records.push(record(ORG_KINDS[i % ORG_KINDS.length]!, `o${i}`, 0));
  const snapshot = (list: readonly RawRecord[], names: readonly string[]): Snapshot =>
    ({ records: Object.freeze([...list]), gvcs: new Map(names.map((g) => [g, { name: g }])), workloads: new Map() }) as unknown as Snapshot;
  /** The counts made here from the records, the first of each key (the oracle). */
  const expected = Object.assign((): Map<string, number> => {
    const seen = new Set<string>();
    const out = new Map<string, number>([['agents/', 0], ['gvcs/', gvcs.length], ['domains/', 0], ['cloudaccounts/', 0]]);
    for (const g of gvcs) out.set(`workloads-per-gvc/${g}`, 0).set(`identities-per-gvc/${g}`, 0);
    for (const r of records) {
      const key = `${String(r.kind)}/${String(r.gvc ?? '')}/${String(r.name)}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const name = { agent: 'agents/', domain: 'domains/', cloudaccount: 'cloudaccounts/', workload: `workloads-per-gvc/${String(r.gvc)}`, identity: `identities-per-gvc/${String(r.gvc)}` }[String(r.kind)];
      if (name !== undefined && out.has(name)) out.set(name, out.get(name)! + 1);
    }
    return out;
  }, { has: (k: string): boolean => /^(agents|gvcs|domains|cloudaccounts|workloads-per-gvc|identities-per-gvc)\//.test(k) });
  const current = (s: Snapshot): [string, number][] => quotaRows(s, indexOf(s, 'acme')).map((r) => [`${r.name}/${r.gvc ?? ''}`, r.current]);
  current(snapshot(records, gvcs));
  for (let step = 0; step < 300; step++) {
    records = [...records];
    const op = int(10);
    let what: string;
    if (op < 3) {
      const r = record(SCOPED[int(2)]!, `n${step}`, step, gvcs[int(gvcs.length)]);
      records.push(r);
      what = `add ${String(r.kind)}/${String(r.gvc)}/${String(r.name)}`;
    } else if (op < 5 && records.length > 3) {
      const at = int(records.length);
      what = `remove ${String(records[at]!.kind)}/${String(records[at]!.name)}`;
      records.splice(at, 1);
    } else if (op < 7) {
      const at = int(records.length);
      const r = records[at]!;
      records[at] = record(String(r.kind), String(r.name), step, r.gvc as string | undefined);
      what = `replace ${String(r.kind)}/${String(r.name)}`;
    } else if (op < 8) {
      const r = record(ORG_KINDS[int(ORG_KINDS.length)]!, `m${step}`, step);
      records.push(r);
      what = `add ${String(r.kind)}`;
    } else if (op < 9) {
      gvcs = gvcs.includes('g2') ? gvcs.filter((g) => g !== 'g2') : [...gvcs, 'g2'];
      what = `gvcs ${gvcs.join(',')}`;
    } else {
      // A new workload in a GVC the snapshot does not have: counted nowhere.
      records.push(record('workload', `x${step}`, step, 'g9'));
      what = 'a workload of an unknown GVC';
    }
    const followed = new Map(current(snapshot(records, gvcs)));
    const want = expected();
    t.same(Object.fromEntries([...followed].filter(([k]) => expected.has(k))), Object.fromEntries(want), `step ${step} (${what})`);
  }
});
