/**
 * Validation with a memo (src/config/validate.ts `ValidationMemo`, convert.ts `ConvertedMemo`) checks
 * again only the records a change touched and those whose checks read them: after every generated
 * change (workloads, deployments, GVCs, domains, locations, the org, quotas, the settings; valid and
 * invalid, duplicates, conversions and records moved among them) it says exactly what a whole-set
 * validation of the same records says, with the same index (catalog.ts `catalogAfter`), and it keeps
 * the findings of the records a workload's change did not touch.
 */
import t from 'tap';
import { ConvertedMemo, validateConverted } from '../../src/config/convert.js';
import type { Settings } from '../../src/config/model.js';
import type { RawRecord, SourcedRecord } from '../../src/config/records.js';
import { defaultSettings } from '../../src/config/snapshot.js';
import type { ValidationResult } from '../../src/config/validate.js';
import type { Catalog } from '../../src/config/catalog.js';
import { prng, testSeed } from '../helpers/seed.js';

const GVCS = ['g1', 'g2', 'g3'];
const LOCATIONS = ['loc1', 'loc2', 'aws-us-west-2', 'nowhere'];

type Pick = <T>(list: readonly T[]) => T;

function workload(name: string, gvc: string, pick: Pick): RawRecord {
  const port = pick([8080, 8081, '8082', 'eighty']);
  return {
    kind: 'workload', name, ...(pick([true, true, true, false]) ? { gvc } : {}),
    ...(pick([true, false, false]) ? { tags: { 'svc/timeoutSecondsOverride': pick(['5', 'x']) } } : {}),
    spec: {
      type: pick(['standard', 'standard', 'cron', 'bogus']),
      containers: [{ name: 'app', image: 'x:1', ports: [{ number: port, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale: pick([0, 1, '2', -1]), maxScale: 3 } },
      ...(pick([true, false]) ? { firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } } } : {}),
      ...(pick([true, false, false]) ? { localOptions: [{ location: `//location/${pick(LOCATIONS)}` }] } : {}),
    },
  };
}

function deployment(name: string, gvc: string, pick: Pick): RawRecord {
  return { kind: 'deployment', name, gvc, status: { locations: [{ name: pick(LOCATIONS), replicas: [{ name: `${name}-0`, address: pick(['127.0.0.1:9000', 'nope']) }] }] } };
}

function gvc(name: string, pick: Pick): RawRecord {
  return {
    kind: 'gvc', name, ...(pick([true, false, false]) ? { alias: pick(['shared', name]) } : {}),
    spec: {
      staticPlacement: { locationLinks: [`//location/${pick(LOCATIONS)}`, ...(pick([true, false]) ? ['//location/loc1'] : [])] },
      ...(pick([true, false]) ? { aliasWorkloadLink: `//gvc/${name}/workload/w${Math.floor(pick([0, 1, 2, 3, 30]))}` } : {}),
      ...(pick([true, false, false, false]) ? { endpointNamingFormat: 'org' } : {}),
    },
  };
}

function domain(name: string, pick: Pick): RawRecord {
  const g = pick(GVCS);
  return {
    kind: 'domain', name,
    spec: { gvcLink: `//gvc/${g}`, ports: [{ number: 443, routes: [{ prefix: '/', workloadLink: `//gvc/${g}/workload/w${pick([0, 1, 2, 3, 4, 5, 40])}`, port: pick([8080, 8081, undefined]) }] }] },
  };
}

function location(name: string, pick: Pick): RawRecord {
  return { kind: 'location', name, ...(pick([true, false]) ? { provider: 'local' } : {}) };
}

/** The findings' records as places in `records` (the list they are about), and the texts. */
function said(result: ValidationResult, records: readonly SourcedRecord[]): unknown {
  const place = (r: SourcedRecord | undefined): number => (r === undefined ? -1 : records.indexOf(r));
  return {
    errors: result.errors,
    warnings: result.warnings,
    errorPlaces: result.errorFindings.map((f) => place(f.record)),
    warningPlaces: result.warningFindings.map((f) => place(f.record)),
  };
}

t.test('generated changes: a validation with a memo says what a whole-set validation says', async (t) => {
  const seed = testSeed('INCREMENTAL_VALIDATE_SEED', 37);
  t.comment(`seed ${seed} (INCREMENTAL_VALIDATE_SEED=${seed} replays it)`);
  const random = prng(seed);
  const pick: Pick = (list) => list[Math.floor(random() * list.length)]!;
  let n = 0;
  const sourced = (record: RawRecord): SourcedRecord => ({ record: Object.freeze(record), source: 'records.yaml', line: ++n });

  let records: SourcedRecord[] = [
    sourced({ kind: 'org', name: 'acme', status: { endpointPrefix: 'acme' } }),
    sourced(location('loc1', pick)),
    sourced(location('loc2', pick)),
    ...GVCS.map((g) => sourced(gvc(g, pick))),
    sourced({ kind: 'quota', name: 'workloads-per-gvc', max: 100, dimensions: { gvcLink: '//gvc/g1' } }),
    sourced({ kind: 'policy', name: 'p1', targetKind: 'workload' }),
    sourced({ kind: 'identity', name: 'id1', gvc: 'g1' }),
    sourced(domain('a.example.com', pick)),
  ];
  for (let i = 0; i < 30; i++) {
    records.push(sourced(workload(`w${i}`, GVCS[i % 3]!, pick)));
    if (i % 2 === 0) records.push(sourced(deployment(`w${i}`, GVCS[i % 3]!, pick)));
  }
  let settings: Settings = defaultSettings;
  const memo = new ConvertedMemo();
  const first = validateConverted(records, settings, memo);
  const firstWhole = validateConverted(records, settings);
  t.same(said(first.result, first.records), said(firstWhole.result, firstWhole.records), 'the first validation');

  let workloadSteps = 0;
  let kept = 0;
  for (let step = 0; step < 500; step++) {
    const previous = memo.read.records;
    const locationsBefore = [...(memo.read.catalog?.locations.keys() ?? [])].join();
    const op = Math.floor(random() * 23);
    const at = (kind: string): number[] => records.flatMap((s, i) => (s.record.kind === kind ? [i] : []));
    const replace = (i: number, record: RawRecord | undefined): void => {
      records = [...records];
      if (record === undefined) records.splice(i, 1);
      else records[i] = sourced(record);
    };
    let what: string;
    let workloadOnly = false;
    if (random() < 0.3) {
      // The later records of a key removed: duplicates come and go (an index with any is built in full).
      const seen = new Set<string>();
      const unique = records.filter((s) => {
        const key = `${String(s.record.kind)}/${String(s.record.gvc ?? '')}/${String(s.record.name).toLowerCase()}`;
        return seen.has(key) ? false : (seen.add(key), true);
      });
      if (unique.length < records.length) records = unique;
    }
    if (op < 8) {
      // A workload changed, added (a new name or a duplicate) or deleted.
      const list = at('workload');
      const i = pick(list);
      const name = `w${Math.floor(random() * 45)}`;
      const g = pick(GVCS);
      const kind = pick(['change', 'change', 'add', 'delete']);
      if (kind === 'change' && i !== undefined) replace(i, workload(String(records[i]!.record.name), g, pick));
      else if (kind === 'delete' && i !== undefined && list.length > 3) replace(i, undefined);
      else records = [...records, sourced(workload(random() < 0.2 ? name : `x${step}`, g, pick))];
      what = `workload ${kind} (${name})`;
      workloadOnly = true;
    } else if (op < 11) {
      const list = at('deployment');
      const i = pick(list);
      const name = `w${Math.floor(random() * 45)}`;
      if (random() < 0.5 && i !== undefined) replace(i, deployment(String(records[i]!.record.name), String(records[i]!.record.gvc), pick));
      else if (random() < 0.5 && i !== undefined) replace(i, undefined);
      else records = [...records, sourced(deployment(name, pick(GVCS), pick))];
      what = 'deployment';
      workloadOnly = true;
    } else if (op < 13) {
      const i = pick(at('gvc'));
      if (i !== undefined) replace(i, gvc(String(records[i]!.record.name), pick));
      what = 'gvc';
    } else if (op < 15) {
      const list = at('domain');
      if (list.length > 0 && random() < 0.6) replace(pick(list), domain(pick(['a.example.com', 'b.example.com']), pick));
      else records = [...records, sourced(domain(pick(['a.example.com', 'b.example.com', 'c.example.com']), pick))];
      what = 'domain';
    } else if (op < 16) {
      const list = at('location');
      if (list.length > 1 && random() < 0.5) replace(pick(list), undefined);
      else records = [...records, sourced(location(pick(['loc1', 'loc2']), pick))];
      what = 'location';
    } else if (op < 17) {
      const i = pick(at('org'));
      const org = { kind: 'org', name: 'acme', ...(random() < 0.5 ? { status: { endpointPrefix: 'acme' } } : {}) };
      if (i !== undefined) replace(i, org);
      else records = [...records, sourced(org)];
      what = 'org';
    } else if (op < 18) {
      const i = pick(at('quota'));
      if (i !== undefined) replace(i, { kind: 'quota', name: 'workloads-per-gvc', max: pick([10, -1, '5']), dimensions: { gvcLink: `//gvc/${pick([...GVCS, 'g9'])}` } });
      what = 'quota';
    } else if (op >= 19 && op < 22) {
      // A workload put in the middle, or two records swapped: the index's order is the records'.
      records = [...records];
      if (random() < 0.5) records.splice(Math.floor(random() * records.length), 0, sourced(workload(`m${step}`, pick(GVCS), pick)));
      else {
        const [i, j] = [Math.floor(random() * records.length), Math.floor(random() * records.length)];
        [records[i], records[j]] = [records[j]!, records[i]!];
      }
      what = 'moved';
    } else if (op < 19) {
      settings = random() < 0.5 ? defaultSettings : { ...defaultSettings, vendor: pick(['svc', 'acme']) };
      what = `settings (vendor ${settings.vendor})`;
    } else {
      // The same records again, as a reload that changed nothing.
      what = 'nothing';
      workloadOnly = true;
    }
    const incremental = validateConverted(records, settings, memo);
    const whole = validateConverted(records, settings);
    t.same(incremental.records.map((s) => s.record), whole.records.map((s) => s.record), `step ${step} (${what}): the same records as converted`);
    t.same(said(incremental.result, incremental.records), said(whole.result, whole.records), `step ${step} (${what}): the same findings`);
    const index = (c: Catalog): unknown => Object.entries(c).map(([k, v]) => [k, v instanceof Map ? [...v] : v]);
    t.same(index(incremental.result.catalog), index(whole.result.catalog), `step ${step} (${what}): the same index, in the same order`);

    if (workloadOnly && [...memo.read.catalog!.locations.keys()].join() === locationsBefore) {
      // Records no change touched keep what they were found to have: their findings are not made
      // again (unless the platform locations the records link changed: every location check reads those).
      workloadSteps++;
      for (const [s, found] of memo.read.records) {
        if (s.record.kind !== 'workload' || found.warnings.length === 0) continue;
        const before = previous.get(s);
        if (before === undefined) continue;
        if (before.warnings[0] === found.warnings[0]) kept++;
        else t.fail(`step ${step} (${what}): workload ${String(s.record.name)} untouched, its findings made again`);
      }
    }
  }
  t.ok(workloadSteps > 0 && kept > 0, `changes of workloads alone kept the findings of the others (${kept} over ${workloadSteps} changes)`);
});
