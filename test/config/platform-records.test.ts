/**
 * Records as the platform's users write them (DESIGN §3), from fixtures in the shapes of the platform's
 * own example manifests (test/config/fixtures/platform): workloads that name no GVC belong to `--gvc`
 * (else to the records' only GVC; with none or several and no `--gvc`, an error that says to pass it);
 * the platform's own locations need no record (one given overrides), behave as location records, and
 * only those the records link join the configuration; rollout counts the platform writes as strings
 * (`maxUnavailableReplicas: '1'`) are numbers, in validation and compilation, while a string that is no
 * count is still refused. The string-count reader is checked against a reference built on `Number()`
 * on generated and mutated strings.
 */
import t from 'tap';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { defaultSettings, loadSnapshot } from '../../src/config/index.js';
import { PLATFORM_LOCATIONS, platformLocationRecord } from '../../src/config/platform-locations.js';
import { parseDigits, parseReplicaAmount } from '../../src/config/values.js';
import { validateReport } from '../../src/config/validate-report.js';
import { listEndpoints } from '../../src/routing/index.js';
import { prng, testSeed } from '../helpers/seed.js';
import { mainOf } from '../helpers/main.js';

const DIR = fileURLToPath(new URL('./fixtures/platform/', import.meta.url));
const SHOP = join(DIR, 'shop.yaml');
const WORKLOADS = join(DIR, 'workloads.yaml');
const GVCS = join(DIR, 'gvcs.yaml');

async function lineOf(file: string, needle: string, from = 0): Promise<number> {
  const text = await readFile(file, 'utf8');
  const at = text.indexOf(needle, from);
  if (at < 0) throw new Error(`${needle} is not in ${file}`);
  return text.slice(0, at).split('\n').length;
}

async function load(paths: string[], gvc?: string) {
  return loadSnapshot(paths, gvc === undefined ? defaultSettings : { ...defaultSettings, gvc }, 1);
}

t.test('a manifest of the platform\'s shape loads as it is: no gvc members, the platform\'s locations, counts as strings', async (t) => {
  const result = await load([SHOP]);
  if (!result.ok) return t.fail(result.errors.join('\n'));
  const s = result.snapshot;
  t.same([...s.workloads.keys()].sort(), ['shop/cart', 'shop/front', 'shop/nightly'], 'every workload in the only GVC');
  t.same(s.gvcs.get('shop')?.locations, ['aws-eu-central-1', 'azure-eastus2', 'gcp-us-west1'], 'placed in the platform\'s locations, in link order');
  t.same([...s.locations.values()].map((l) => [l.name, l.provider, l.region]), [
    ['aws-eu-central-1', 'aws', 'eu-central-1'], ['azure-eastus2', 'azure', 'eastus2'], ['gcp-us-west1', 'gcp', 'us-west1'],
  ], 'only the linked platform locations, each with its provider and region');
  t.same(s.workloads.get('shop/cart')?.rollout, { maxSurgeReplicas: '25%', maxUnavailableReplicas: 1, minReadySeconds: 0 }, "'1' is the count 1; 25% stays a percentage");
  const cart = s.records.find((r) => r.kind === 'workload' && r.name === 'cart');
  t.equal(cart?.gvc, 'shop', 'the record as applied names its GVC (the local API and up read it so)');
  t.ok(Object.isFrozen(cart), 'and is frozen as every record of the snapshot');
  t.ok(s.records.every((r) => r.kind !== 'location'), 'the platform\'s locations are not records of the files');

  const hosts = listEndpoints(s).filter((e) => e.workload === 'front' && e.kind === 'location').map((e) => [e.location, e.host]);
  const alias = s.gvcs.get('shop')!.alias;
  t.same(hosts, ['aws-eu-central-1', 'azure-eastus2', 'gcp-us-west1'].map((l) => [l, `front-${alias}.${l}.direct.localhost`]), 'a location host name per platform location');

  const report = await validateReport([SHOP], defaultSettings);
  t.equal(report.exitCode, 0, report.stderr.join('\n'));
  t.same(report.stdout, ['valid: 5 records checked (gvc 1, workload 3, policy 1); 3 not checked, of kinds svcproxy does not read (volumeset 1, secret 1, identity 1)']);
});

t.test('a location record overrides the platform\'s location of its name', async (t) => {
  const dir = t.testdir({ 'loc.yaml': 'kind: location\nname: azure-eastus2\nprovider: lab\nregion: rack-7\nstatus:\n  latencyMs: 12\n' });
  const result = await load([SHOP, join(dir, 'loc.yaml')]);
  if (!result.ok) return t.fail(result.errors.join('\n'));
  t.same(result.snapshot.locations.get('azure-eastus2'), { name: 'azure-eastus2', provider: 'lab', region: 'rack-7', latencyMs: 12 });
  t.same(result.snapshot.locations.get('aws-eu-central-1'), { name: 'aws-eu-central-1', provider: 'aws', region: 'eu-central-1' });
});

t.test('the platform\'s locations: at least those its examples use, each <provider>-<region>', async (t) => {
  const names = PLATFORM_LOCATIONS.map((l) => l.name);
  for (const name of ['aws-us-east-2', 'aws-us-west-2', 'aws-eu-central-1', 'gcp-us-east1', 'gcp-us-west1', 'azure-eastus2']) t.ok(names.includes(name), name);
  for (const l of PLATFORM_LOCATIONS) {
    t.equal(l.name, `${l.provider}-${l.region}`, `${l.name}: provider and region`);
    t.match(platformLocationRecord(l.name), { kind: 'location', name: l.name, provider: l.provider, region: l.region });
  }
  t.equal(new Set(names).size, names.length, 'no name twice');
  t.equal(platformLocationRecord('mars'), undefined);
});

t.test('a link to a location neither recorded nor the platform\'s is an error with the nearest name', async (t) => {
  const dir = t.testdir({ 'g.yaml': 'kind: gvc\nname: g\nspec:\n  staticPlacement:\n    locationLinks:\n      - //location/aws-us-east2\n' });
  const result = await load([join(dir, 'g.yaml')]);
  t.equal(result.ok, false);
  t.same(!result.ok && result.errors, [
    `${join(dir, 'g.yaml')}:6: gvc/g: spec.staticPlacement.locationLinks[0]: points to location aws-us-east2, which is not defined (no location record, and not one of the platform's locations; did you mean "aws-us-east-2"?)`,
  ]);
});

t.test('--gvc: the GVC of records that name none; a record that names one keeps it', async (t) => {
  const result = await load([GVCS, WORKLOADS], 'blue');
  if (!result.ok) return t.fail(result.errors.join('\n'));
  t.same([...result.snapshot.workloads.keys()].sort(), ['blue/client', 'blue/server', 'green/pinned']);
  t.same(result.snapshot.workloads.get('blue/client')?.rollout, { maxSurgeReplicas: 2, maxUnavailableReplicas: 0 }, "'2' and '0' are counts");
  const without = await load([SHOP], 'shop');
  t.ok(without.ok, '--gvc naming the only GVC changes nothing');
});

t.test('no --gvc and several GVCs, or none: an error per record, with file, line and what to do', async (t) => {
  const several = await load([GVCS, WORKLOADS]);
  t.same(!several.ok && several.errors, [
    `${WORKLOADS}:${await lineOf(WORKLOADS, 'kind: workload')}: workload/server: gvc: is required: name the GVC here, or pass --gvc NAME as to cpln apply (the records define 2 gvcs: blue, green)`,
    `${WORKLOADS}:${await lineOf(WORKLOADS, 'name: client', 0) - 1}: workload/client: gvc: is required: name the GVC here, or pass --gvc NAME as to cpln apply (the records define 2 gvcs: blue, green)`,
  ]);
  const none = await load([WORKLOADS]);
  t.match(!none.ok && none.errors, [/workload\/server: gvc: is required: .* \(the records define no gvc\)$/, /workload\/client: gvc: is required/]);
  const undefinedGvc = await load([WORKLOADS], 'prod');
  t.match(!undefinedGvc.ok && undefinedGvc.errors, [
    /:\d+: workload\/server: gvc: points to gvc prod, which is not defined \(--gvc names it: the records need a gvc record of that name\)$/,
    /workload\/client: gvc: points to gvc prod/,
  ]);
  const badName = await load([SHOP], 'Not_A_Name');
  t.match(!badName.ok && badName.errors, ['settings: gvc: must be lowercase letters, digits and hyphens, starting and ending with a letter or digit']);
});

t.test('rollout counts: digits as strings are counts; any other string is still refused', async (t) => {
  const bad = ['one', '1.5', '-1', ' 1', '1 ', '+1', '1e2', '0x10', '', '%', '1%%', '١', '99999999999999999999'];
  for (const value of bad) {
    const text = (await readFile(WORKLOADS, 'utf8')).replace("maxUnavailableReplicas: '0'", `maxUnavailableReplicas: ${JSON.stringify(value)}`);
    const dir = t.testdir({ 'w.yaml': text, 'g.yaml': 'kind: gvc\nname: g\n' });
    const result = await load([join(dir, 'g.yaml'), join(dir, 'w.yaml')]);
    t.same(!result.ok && result.errors, [
      `${join(dir, 'w.yaml')}:${text.split('\n').findIndex((l) => l.includes('maxUnavailableReplicas')) + 1}: workload/client: spec.rolloutOptions.maxUnavailableReplicas: must be an integer of at least 0 (a number, or a string of digits such as '1') or a percentage such as 25%`,
    ], JSON.stringify(value));
  }
});

t.test('parseReplicaAmount: counts, digit strings, percentages', async (t) => {
  const cases: [unknown, unknown][] = [
    [0, 0], [3, 3], ['1', 1], ['007', 7], ['25%', '25%'], ['0%', '0%'], ['100%', '100%'],
    [-1, undefined], [1.5, undefined], [Number.NaN, undefined], [2 ** 53, undefined], ['1.5%', undefined], ['-5%', undefined], [' 5%', undefined], [true, undefined], [null, undefined],
  ];
  for (const [v, want] of cases) t.equal(parseReplicaAmount(v), want, JSON.stringify(v) ?? String(v));
});

t.test('parseDigits agrees with a reference built on Number() on generated and mutated strings', async (t) => {
  const seed = testSeed('DIGITS_SEED', 35);
  t.comment(`seed ${seed} (DIGITS_SEED=${seed} replays it)`);
  const random = prng(seed);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  // The reference: what Number() reads, kept to the strings made only of ASCII digits that stay exact.
  const reference = (s: string): number | undefined => {
    if (s === '' || [...s].some((c) => c < '0' || c > '9')) return undefined;
    const n = Number(s);
    return Number.isSafeInteger(n) ? n : undefined;
  };
  const alphabet = ['0', '1', '5', '9', '0', '7', '+', '-', '.', 'e', 'E', ' ', '\t', '\n', '%', 'x', '_', ',', '١', '０', 'Infinity', 'NaN', '\u00a0'];
  const digits = (n: number): string => Array.from({ length: n }, () => String(Math.floor(random() * 10))).join('');
  const inputs: string[] = ['9007199254740991', '9007199254740992', '09007199254740991', '0000000000000000000001', String(2 ** 60)];
  for (let i = 0; i < 3000; i++) {
    const kind = random();
    if (kind < 0.4) {
      inputs.push(Array.from({ length: Math.floor(random() * 8) }, () => pick(alphabet)).join(''));
    } else {
      // A valid count, then maybe mutated: a character replaced, inserted or removed.
      const chars = [...digits(1 + Math.floor(random() * 18))];
      const at = Math.floor(random() * (chars.length + 1));
      const m = random();
      if (m < 0.25) chars[Math.min(at, chars.length - 1)] = pick(alphabet);
      else if (m < 0.5) chars.splice(at, 0, pick(alphabet));
      else if (m < 0.6) chars.splice(at, 1);
      inputs.push(chars.join(''));
    }
  }
  let accepted = 0;
  for (const s of inputs) {
    const want = reference(s);
    if (want !== undefined) accepted++;
    if (parseDigits(s) !== want) t.fail(`parseDigits(${JSON.stringify(s)})`, { seed, want, got: parseDigits(s) });
  }
  t.ok(accepted > 500 && accepted < inputs.length - 500, `both kinds drawn (${accepted} of ${inputs.length} are counts)`);
});

t.test('the command line: --gvc and SVCPROXY_GVC on the commands that read records', async (t) => {
  const r = await mainOf(['validate', '--config', GVCS, '--config', WORKLOADS, '--gvc', 'green']);
  t.equal(r.code, 0, r.stderr);
  t.equal(r.stdout, 'valid: 5 records checked (gvc 2, workload 3)\n');
  const refused = await mainOf(['validate', '--config', GVCS, '--config', WORKLOADS]);
  t.equal(refused.code, 1);
  t.match(refused.stderr, 'pass --gvc NAME');
  const endpoints = await mainOf(['endpoints', '--config', GVCS, '--config', WORKLOADS, '-o', 'json'], { SVCPROXY_GVC: 'blue' });
  t.equal(endpoints.code, 0, endpoints.stderr);
  const list = JSON.parse(endpoints.stdout) as { workload: string; gvc: string; kind: string; location?: string }[];
  t.same([...new Set(list.filter((e) => e.workload === 'server').map((e) => e.gvc))], ['blue'], 'SVCPROXY_GVC fills --gvc');
  t.same(list.filter((e) => e.workload === 'server' && e.kind === 'location').map((e) => e.location), ['aws-us-east-2', 'gcp-us-east1']);
  const explain = await mainOf(['explain', '--config', GVCS, '--config', WORKLOADS, '--gvc', 'blue', `http://server-${aliasOf(list, 'server')}.app.localhost/`]);
  t.match(explain.stdout, /^workload: +blue\/server \(gvc blue\)/m, 'explain reads records the same way');
  t.match(explain.stdout, /^verdict: +503 NO_HEALTHY_UPSTREAM: .*: svcproxy up runs no image \(container server has image registry\.example\/quickstart\/server:1 and no command\)$/m, 'and says why nothing answers');
});

/** The alias part of a workload's canonical host in an endpoints listing. */
function aliasOf(list: readonly { workload: string; kind: string; host?: string }[], workload: string): string {
  const host = (list as { workload: string; kind: string; host: string }[]).find((e) => e.workload === workload && e.kind === 'canonical')!.host;
  return host.slice(workload.length + 1, host.indexOf('.'));
}
