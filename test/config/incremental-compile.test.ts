/**
 * A write through the store reuses the compiled models of the records it did not change
 * (src/config/compile.ts: by record identity; overlay.ts: the stamped copy of an unchanged record is
 * the same object; compile.ts: only the workloads and deployments the index changed, in maps
 * layered over the snapshot before): after every generated change, written through the API or made
 * by editing the file, the snapshot in force equals a full compile of the same records (copied, so
 * nothing is reused; maps in the same order), and a workload the change did not touch keeps its model object (after a file edit too:
 * a reload keeps the objects of the records whose content did not change). What `up`'s listeners
 * make of each snapshot from the one before (a workload's record, the notes of what it does not
 * run) is held to the same made from scratch.
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ConfigStore, type WriteDecision } from '../../src/config/store.js';
import { keyOf, recordKey } from '../../src/config/record-meta.js';
import type { RawRecord } from '../../src/config/records.js';
import { compileRecords } from '../../src/config/snapshot.js';
import type { Snapshot } from '../../src/config/model.js';
import { silentLogger } from '../../src/log.js';
import { tempDir } from '../mesh/fixtures.js';
import { findWorkloadRecord } from '../../src/local/plan.js';
import { changedWorkloads, changedWorkloadsOrDeployments } from '../../src/config/changed.js';
import { noteOf, notRunNotes } from '../../src/local/not-run.js';

const LOCATIONS = ['loc1', 'loc2'];
const GVCS = ['g1', 'g2'];

function gvcRecord(name: string, locations: readonly string[], tracing?: number): RawRecord {
  return {
    kind: 'gvc', name,
    spec: { staticPlacement: { locationLinks: locations.map((l) => `//location/${l}`) }, ...(tracing === undefined ? {} : { tracing: { sampling: tracing, provider: { otel: { endpoint: '127.0.0.1:4317' } } } }) },
  };
}

function workloadRecord(name: string, gvc: string, n: number): RawRecord {
  return {
    kind: 'workload', name, gvc, tags: n % 3 === 0 ? { 'svc/timeoutSecondsOverride': String(1 + (n % 7)) } : {},
    spec: {
      type: 'standard',
      containers: [{ name: 'app', image: 'x:1', ports: [{ number: 8080 + (n % 3), protocol: n % 2 ? 'http' : 'http2' }] }],
      defaultOptions: { suspend: n % 5 === 0, autoscaling: { minScale: n % 3, maxScale: 3 + (n % 4) } },
      firewallConfig: { external: { inboundAllowCIDR: n % 4 === 0 ? ['10.0.0.0/8'] : ['0.0.0.0/0'] } },
    },
  };
}

function deploymentRecord(name: string, gvc: string, port: number): RawRecord {
  return { kind: 'deployment', name, gvc, status: { locations: [{ name: 'loc1', replicas: [{ name: `${name}-0`, address: `127.0.0.1:${port}` }] }] } };
}

/**
 * The compiled models of a snapshot (not the warnings, which name each record's file), each map as
 * its entries in order (a snapshot made from the one before holds maps layered over its maps: they
 * must read as a full compile's, in the same order).
 */
function models(s: Snapshot): unknown {
  return {
    org: s.org, locations: [...s.locations], gvcs: [...s.gvcs], workloads: [...s.workloads], domains: [...s.domains], deployments: [...s.deployments],
    settings: s.settings, records: s.records,
  };
}

t.test('generated writes and file edits: the snapshot equals a full compile; untouched workloads keep their models', async (t) => {
  let seed = 12345;
  const random = (n: number): number => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return Math.floor(seed / 65536) % n;
  };
  const dir = await tempDir(t, 'svcproxy-incremental-');
  const file = join(dir, 'records.json');
  const fileRecords = new Map<string, RawRecord>();
  const put = (r: RawRecord): void => void fileRecords.set(`${String(r.kind)}/${String(r.gvc ?? '')}/${String(r.name)}`, r);
  put({ kind: 'org', name: 'acme' });
  for (const l of LOCATIONS) put({ kind: 'location', name: l });
  for (const g of GVCS) put(gvcRecord(g, LOCATIONS));
  for (let i = 0; i < 40; i++) {
    put(workloadRecord(`w${i}`, GVCS[i % 2]!, i));
    if (i % 2 === 0) put(deploymentRecord(`w${i}`, GVCS[i % 2]!, 9000 + i));
  }
  await writeFile(file, JSON.stringify([...fileRecords.values()]));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());

  for (let step = 0; step < 80; step++) {
    const before = store.current;
    const i = random(50);
    const gvc = GVCS[random(2)]!;
    const op = random(10);
    let touched: string | undefined;
    let what: string;
    if (op < 6) {
      // A workload written through the API: changed, created, or deleted.
      const name = `w${i}`;
      const key = keyOf('workload', name, gvc);
      touched = `${gvc}/${name}`;
      const decision: WriteDecision = random(5) === 0 ? { delete: true } : { put: workloadRecord(name, gvc, random(100)) };
      what = `${'delete' in decision ? 'delete' : 'put'} ${key}`;
      const result = await store.write(key, () => decision);
      if (!result.ok) {
        // Deleting a workload that a deployment record of the file names is refused: nothing changes.
        t.equal(store.current, before, `${what}: refused (${result.errors[0]}), the snapshot in force stays`);
        continue;
      }
      if ('delete' in decision) t.equal(store.record(key), undefined, `${what}: no record of the key in force`);
    } else if (op < 8) {
      // A GVC changed through the API (its locations or its tracing): every workload of it is compiled again.
      const locations = random(2) === 0 ? LOCATIONS : ['loc1'];
      const tracing = random(2) === 0 ? undefined : random(101);
      what = `gvc ${gvc}: ${locations.join(',')} tracing ${tracing}`;
      const result = await store.write(keyOf('gvc', gvc), () => ({ put: gvcRecord(gvc, locations, tracing) }));
      if (!result.ok) t.fail(`${what}: ${result.errors.join('; ')}`);
    } else if (op < 9) {
      // The org's tracing, through the API: inherited by GVCs without their own.
      const tracing = random(2) === 0 ? {} : { spec: { tracing: { sampling: random(101), provider: { otel: { endpoint: '127.0.0.1:4317' } } } } };
      what = `org tracing ${JSON.stringify(tracing)}`;
      const result = await store.write(keyOf('org', 'acme'), () => ({ put: { kind: 'org', name: 'acme', ...tracing } }));
      if (!result.ok) t.fail(`${what}: ${result.errors.join('; ')}`);
    } else {
      // The file edited: one workload of it changed, then read again.
      const name = `w${i % 40}`;
      const g = GVCS[(i % 40) % 2]!;
      put(workloadRecord(name, g, random(100)));
      await writeFile(file, JSON.stringify([...fileRecords.values()]));
      what = `file: ${g}/${name}`;
      touched = `${g}/${name}`;
      t.ok(await store.reload(), what);
    }
    const now = store.current;
    const full = compileRecords(structuredClone(now.records) as RawRecord[], now.settings, now.generation);
    if (!full.ok) {
      t.fail(`step ${step} (${what}): a full compile refuses what is in force: ${full.errors.join('; ')}`);
      continue;
    }
    t.same(models(now), models(full.snapshot), `step ${step} (${what}): as a full compile`);
    // The records by key a write keeps along (store.ts) are those in force.
    const firsts = new Map<string, RawRecord>();
    for (const r of now.records) if (!firsts.has(recordKey(r)!)) firsts.set(recordKey(r)!, r);
    t.ok([...firsts].every(([k, r]) => store.record(k) === r) && store.record(keyOf('workload', 'w99', 'g1')) === undefined, `step ${step} (${what}): each key's record in force`);
    // What changed, as the listeners are told it (config/changed.ts; from the compilation when it made
    // this snapshot from the one before), against a walk of both snapshots' models.
    const walked = new Set<string>();
    for (const [key, w] of now.workloads) if (before.workloads.get(key) !== w) walked.add(key);
    for (const key of before.workloads.keys()) if (!now.workloads.has(key)) walked.add(key);
    t.same([...changedWorkloads(before, now)].sort(), [...walked].sort(), `step ${step} (${what}): the workloads changed`);
    for (const [key, d] of now.deployments) if (before.deployments.get(key) !== d) walked.add(key);
    for (const key of before.deployments.keys()) if (!now.deployments.has(key)) walked.add(key);
    t.same([...changedWorkloadsOrDeployments(before, now)].sort(), [...walked].sort(), `step ${step} (${what}): and their deployments`);
    // What up's listeners keep along from one snapshot to the next (src/local/plan.ts, not-run.ts), as made from scratch.
    t.ok([...now.workloads.values()].every((w) => findWorkloadRecord(now.records, w) === firsts.get(keyOf('workload', w.name, w.gvc))), `step ${step} (${what}): each workload's record`);
    const fresh = [...now.workloads.values()].map((w) => noteOf(w, now)).filter((n) => n !== undefined);
    const byKey = (a: { workload: string }, b: { workload: string }): number => a.workload.localeCompare(b.workload);
    t.same([...notRunNotes(now).values()].sort(byKey), fresh.sort(byKey), `step ${step} (${what}): the notes of what up does not run`);
    if (op < 6 || op === 9) {
      let kept = 0;
      for (const [key, model] of now.workloads) {
        if (key === touched) continue;
        if (before.workloads.get(key) === model) kept++;
      }
      // A file edit too: the records whose content it did not change keep their objects (store.ts `unchangedKept`).
      t.equal(kept, [...now.workloads.keys()].filter((k) => k !== touched && before.workloads.has(k)).length, `step ${step} (${what}): every other workload keeps its model`);
    }
  }
});
