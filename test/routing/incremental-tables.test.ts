/**
 * The data plane's tables made from the table in force (src/proxy/routes.ts `buildRouteTable` with
 * `previous`, src/routing/hosts.ts `nextHostIndex`) against a full build, after generated changes
 * written through the store (so unchanged records keep their models, as under `up`'s API) and file
 * edits: every host name resolves to the same target (the workload model of the snapshot in force,
 * never a stale one), the same names conflict, and each workload has the same filters and retry
 * policy; a workload the change did not touch keeps its chain object; the table it was made from
 * still reads as it did (its maps are layered under the new one's, never changed). The generated records include
 * GVCs of the legacy naming format whose names make canonical host names collide, custom domains,
 * GVC aliases (and their workload suspended), replica-direct and ignored workloads.
 */
import t from 'tap';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pino from 'pino';
import { ConfigStore, type WriteDecision } from '../../src/config/store.js';
import { keyOf } from '../../src/config/record-meta.js';
import type { RawRecord } from '../../src/config/records.js';
import type { Snapshot } from '../../src/config/model.js';
import { silentLogger } from '../../src/log.js';
import { buildHostIndex, nextHostIndex, type HostIndex } from '../../src/routing/index.js';
import { buildRouteTable, type RouteTable } from '../../src/proxy/routes.js';
import { defaultFactories } from '../../src/proxy/policy.js';
import { Metrics } from '../../src/admin/metrics.js';
import { SharedResources } from '../../src/filter/index.js';
import { systemClock } from '../../src/deps.js';
import { tempDir } from '../mesh/fixtures.js';
import { prng, testSeed } from '../helpers/seed.js';

const LOCATIONS = ['loc1', 'loc2'];
// `legacy` names are `W-GVC.APP_DOMAIN`: workload `a-x` of `g1` and workload `a` of `x-g1` collide.
const GVCS = ['g1', 'x-g1', 'g3'];
const NAMES = ['a', 'a-x', 'b', 'c', 'd', 'e', 'f', 'h'];

function gvcRecord(name: string, n: number): RawRecord {
  return {
    kind: 'gvc', name,
    spec: {
      staticPlacement: { locationLinks: (n % 3 === 0 ? ['loc1'] : LOCATIONS).map((l) => `//location/${l}`) },
      ...(name === 'g3' ? {} : { endpointNamingFormat: 'legacy' }),
      ...(n % 2 === 0 ? { aliasWorkloadLink: `//gvc/${name}/workload/${NAMES[n % NAMES.length]}` } : {}),
    },
  };
}

function workloadRecord(name: string, gvc: string, n: number): RawRecord {
  return {
    kind: 'workload', name, gvc,
    tags: {
      ...(n % 7 === 0 ? { 'svc/ignore': 'true' } : {}),
      ...(n % 3 === 0 ? { 'svc/timeoutSecondsOverride': String(1 + (n % 5)) } : {}),
      ...(n % 4 === 1 ? { 'svc/debug': 'true' } : {}),
    },
    spec: {
      type: 'standard',
      containers: [{ name: 'app', image: 'x:1', ports: [{ number: 8080 + (n % 3), protocol: n % 2 ? 'http' : 'http2' }] }],
      defaultOptions: { suspend: n % 5 === 0 },
      ...(n % 6 === 0 ? { loadBalancer: { replicaDirect: true } } : {}),
      firewallConfig: { external: { inboundAllowCIDR: n % 4 === 0 ? ['10.0.0.0/8'] : ['0.0.0.0/0'] } },
    },
  };
}

function domainRecord(n: number): RawRecord {
  const gvc = GVCS[n % GVCS.length]!;
  return {
    kind: 'domain', name: `d${n % 3}.example.com`,
    spec: { gvcLink: `//gvc/${gvc}`, ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: `//gvc/${gvc}/workload/${NAMES[n % NAMES.length]}` }] }] },
  };
}

/** Every name of the index with what it resolves to, the workloads by key (and whether the model is the snapshot's). */
function names(index: HostIndex, snapshot: Snapshot): unknown {
  const target = (v: object): unknown => {
    const w = (v as { workload?: { key: string } }).workload;
    const d = (v as { domain?: { host: string }; port?: { number: number } });
    return {
      ...Object.fromEntries(Object.entries(v).filter(([k]) => k !== 'workload' && k !== 'domain' && k !== 'port' && k !== 'ports')),
      ...(w === undefined ? {} : { workload: w.key, current: snapshot.workloads.get(w.key) === w }),
      ...(d.domain === undefined ? {} : { domain: d.domain.host, port: d.port?.number }),
      ...('ports' in v ? { ports: [...(v.ports as Set<number>)] } : {}),
    };
  };
  const table = (m: ReadonlyMap<string, object>): unknown => [...m].map(([k, v]) => [k, target(v)]).sort((a, b) => String(a[0]).localeCompare(String(b[0])));
  return {
    fixed: table(index.fixed),
    replicaBases: table(index.replicaBases),
    internal: table(index.internal),
    internalReplicas: table(index.internalReplicas),
    domains: [...index.domains].map(([k, v]) => [k, target(v.first), [...v.byNumber.keys()]]).sort(),
    conflicts: [...index.conflicts].sort(),
  };
}

/** Each workload's filters (by name) and retry policy. */
function chains(table: RouteTable): unknown {
  const out: Record<string, unknown> = {};
  for (const key of table.snapshot.workloads.keys()) {
    out[key] = {
      ingress: table.ingressChains.get(key)?.map((f) => f.name),
      sidecar: table.sidecarChains.get(key)?.map((f) => f.name),
      retry: table.retryPolicies.get(key),
    };
  }
  return out;
}

t.test('generated changes: the tables made from the table in force equal a full build', async (t) => {
  const seed = testSeed('INCREMENTAL_TABLES_SEED', 4242);
  t.comment(`seed ${seed} (INCREMENTAL_TABLES_SEED=${seed} replays it)`);
  const draw = prng(seed);
  const random = (n: number): number => Math.floor(draw() * n);
  const dir = await tempDir(t, 'svcproxy-incremental-tables-');
  const file = join(dir, 'records.json');
  const fileRecords = new Map<string, RawRecord>();
  const put = (r: RawRecord): void => void fileRecords.set(`${String(r.kind)}/${String(r.gvc ?? '')}/${String(r.name)}`, r);
  put({ kind: 'org', name: 'acme' });
  for (const l of LOCATIONS) put({ kind: 'location', name: l });
  GVCS.forEach((g, i) => put(gvcRecord(g, i + 1)));
  NAMES.forEach((name, i) => GVCS.forEach((g, j) => put(workloadRecord(name, g, i * 3 + j + 1))));
  await writeFile(file, JSON.stringify([...fileRecords.values()]));
  const store = await ConfigStore.open({ paths: [file], logger: silentLogger() });
  t.teardown(() => store.close());
  const env = { deps: { clock: systemClock, random: Math.random, logger: pino({ level: 'silent' }) }, metrics: new Metrics(), shared: new SharedResources() };
  t.teardown(() => env.shared.close());
  const factories = defaultFactories();
  let table = buildRouteTable(store.current, factories, env);
  let conflicted = 0;
  let incremental = 0;
  let namesKept = 0;
  let clean = 0;

  for (let step = 0; step < 120; step++) {
    const before = table;
    const gvc = GVCS[random(GVCS.length)]!;
    const name = NAMES[random(NAMES.length)]!;
    const op = random(12);
    let what: string;
    let touched: string | undefined;
    let result: { ok: boolean; errors?: string[] } = { ok: true };
    if (op < 7) {
      touched = `${gvc}/${name}`;
      const decision: WriteDecision = random(6) === 0 ? { delete: true } : { put: workloadRecord(name, gvc, random(100)) };
      what = `${'delete' in decision ? 'delete' : 'put'} workload ${touched}`;
      result = await store.write(keyOf('workload', name, gvc), () => decision);
    } else if (op < 8) {
      what = `gvc ${gvc}`;
      result = await store.write(keyOf('gvc', gvc), () => ({ put: gvcRecord(gvc, random(12)) }));
    } else if (op < 10) {
      const domain = domainRecord(random(30));
      what = `domain ${String(domain.name)}`;
      result = await store.write(keyOf('domain', String(domain.name)), () => (random(4) === 0 ? { delete: true } : { put: domain }));
    } else {
      touched = `${gvc}/${name}`;
      put(workloadRecord(name, gvc, random(100)));
      await writeFile(file, JSON.stringify([...fileRecords.values()]));
      what = `file: ${touched}`;
      t.ok(await store.reload(), what);
    }
    if (!result.ok) continue; // refused (a deletion others link to): nothing changed
    const now = store.current;
    if (now === before.snapshot) continue;
    const beforeNames = names(before.hosts, before.snapshot);
    const beforeChains = chains(before);
    table = buildRouteTable(now, factories, env, before);
    // The table in force is left as it was: the requests that started on it finish on it.
    t.same(names(before.hosts, before.snapshot), beforeNames, `step ${step} (${what}): the host names of the table before kept`);
    t.same(chains(before), beforeChains, `step ${step} (${what}): the filters of the table before kept`);
    const full = buildRouteTable(now, factories, env);
    t.same(names(table.hosts, now), names(full.hosts, now), `step ${step} (${what}): the host names of a full build`);
    t.same(names(nextHostIndex(before.hosts, before.snapshot, now), now), names(buildHostIndex(now), now), `step ${step} (${what}): nextHostIndex as buildHostIndex`);
    t.same(chains(table), chains(full), `step ${step} (${what}): the filters and retry policies of a full build`);
    if (full.hosts.conflicts.length > 0) conflicted++;
    // Made from the table in force (not built again): an unchanged name keeps its target object. A
    // workload's write with no name claimed twice before or after is always made so (a claim twice
    // makes the full build's order decide, so a full build; how many such writes a draw has varies).
    const kept = [...before.hosts.fixed].some(([host, target]) => table.hosts.fixed.get(host) === target);
    if (kept) namesKept++;
    if (op < 7 && before.hosts.conflicts.length === 0 && full.hosts.conflicts.length === 0 && before.hosts.fixed.size > 0) {
      clean++;
      if (!kept) t.fail(`step ${step} (${what}): a write without conflicting names, its host names built again`);
    }
    if (op < 7) {
      incremental++;
      for (const [key, model] of now.workloads) {
        if (key === touched || before.snapshot.workloads.get(key) !== model) continue;
        if (table.ingressChains.get(key) !== before.ingressChains.get(key)) t.fail(`step ${step} (${what}): ${key} untouched, its chain built again`);
      }
    }
  }
  t.ok(conflicted > 0, `some generations have conflicting names (${conflicted})`);
  t.ok(incremental > 20, `workload writes (${incremental})`);
  t.ok(namesKept >= clean, `generations whose host names were made from the table in force (${namesKept}; ${clean} writes without conflicting names)`);
});
