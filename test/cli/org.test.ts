/**
 * `--org` and `SVC_ORG` (DESIGN §3; issue 35): `ingress` and `sidecar` take them again. They name the
 * org of the process's identity when the records carry no org record: the mesh identities are
 * `spiffe://ORG/...`, so a sidecar whose certificate is of that org starts, and without them it is
 * refused. An org other than the records' is a usage error naming both (exit 2), through the real
 * entry in this process, from the flag, from `SVCPROXY_ORG`, from `SVC_ORG` and from `CPLN_ORG`
 * under `--vendor cpln`, for one process and for a `--workers` primary; a reload that brings an org
 * record of another name is rejected and the configuration in force stays.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { LocalCa } from '../../src/mesh/ca.js';
import { Runtime, type RuntimeOptions } from '../../src/roles/runtime.js';
import { records, yamlDocuments } from '../helpers/harness.js';
import { mainOf } from '../helpers/main.js';
import { writeCredentials } from '../mesh/fixtures.js';

const LOCATION = 'aws-us-east-2';
/** The harness's records: org acme, GVC shop, workload api in aws-us-east-2. */
const WITH_ORG = records({ replicas: { [LOCATION]: ['127.0.0.1:9'] } });
const WITHOUT_ORG = WITH_ORG.filter((r) => r.kind !== 'org');

const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-org-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const withOrg = path.join(dir, 'with-org.yaml');
writeFileSync(withOrg, yamlDocuments(WITH_ORG));

const QUIET = ['--listen', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--log-level', 'silent'];
const INGRESS = ['ingress', '--config', withOrg, '--location', LOCATION, ...QUIET];
const SIDECAR = ['sidecar', '--config', withOrg, '--app', '127.0.0.1:9', '--gvc', 'shop', '--workload', 'api', '--location', LOCATION, ...QUIET];

t.test('an org other than the records\' is a usage error naming both, however it is given', async (t) => {
  const cases: [string, string[], Record<string, string>][] = [
    ['ingress --org', [...INGRESS, '--org', 'globex'], {}],
    ['sidecar --org', [...SIDECAR, '--org', 'globex'], {}],
    ['ingress SVCPROXY_ORG', INGRESS, { SVCPROXY_ORG: 'globex' }],
    ['sidecar SVC_ORG', SIDECAR, { SVC_ORG: 'globex' }],
    ['sidecar --vendor cpln: CPLN_ORG', [...SIDECAR, '--vendor', 'cpln'], { CPLN_ORG: 'globex', SVC_ORG: 'acme' }],
    ['ingress --workers 2 (the primary checks before any worker starts)', [...INGRESS, '--org', 'globex', '--workers', '2'], {}],
  ];
  for (const [what, argv, env] of cases) {
    const r = await mainOf(argv, env);
    t.equal(r.code, 2, `${what}: exit 2`);
    t.equal(r.stdout, '', `${what}: nothing on stdout`);
    const command = argv[0]!;
    t.equal(r.stderr, `svcproxy: --org globex is not the configuration's org: its org record is acme\nrun "svcproxy ${command} --help" for usage\n`, what);
  }
  // The variable of the other vendor is not read: SVC_ORG=globex under --vendor cpln is nobody's.
  const other = await mainOf([...SIDECAR, '--vendor', 'cpln', '--org', 'x'], { SVC_ORG: 'globex' });
  t.match(other.stderr, /--org x is not the configuration's org/, 'the flag wins over the variables');
});

t.test('the records\' org, or --org when they have none, is the org of the mesh identities', async (t) => {
  const ca = await LocalCa.open(path.join(dir, 'ca'), { org: 'acme' });
  const files = await writeCredentials(dir, await ca.issue('spiffe://acme/gvc/shop/workload/api', 3600_000));
  const sidecar = (recs: Record<string, unknown>[], more: Partial<RuntimeOptions>) => Runtime.start({
    role: 'sidecar',
    settings: defaultSettings,
    records: recs,
    listen: ['127.0.0.1:0'],
    logger: silentLogger(),
    watch: false,
    location: LOCATION,
    sidecar: { workload: 'shop/api', location: LOCATION, replica: 'api-0', app: '127.0.0.1:9' },
    meshFiles: files,
    meshInbound: ['127.0.0.1:0'],
    ...more,
  });

  // No org record, no --org: the org is "local", and the certificate of acme is refused.
  await t.rejects(sidecar(WITHOUT_ORG, {}), /carries spiffe:\/\/acme\/gvc\/shop\/workload\/api; the sidecar of shop\/api must present spiffe:\/\/local\//);
  // --org acme names it: the sidecar starts with that identity.
  const named = await sidecar(WITHOUT_ORG, { org: 'acme' });
  t.teardown(() => named.stop(0));
  t.equal(named.dataplane.org, 'acme');
  t.equal(named.meshTls?.uri, 'spiffe://acme/gvc/shop/workload/api');
  // The record's org, with an --org that agrees.
  const agreed = await sidecar(WITH_ORG, { org: 'acme' });
  t.teardown(() => agreed.stop(0));
  t.equal(agreed.dataplane.org, 'acme');
  // In-process callers get the same refusal as the command line.
  await t.rejects(sidecar(WITH_ORG, { org: 'globex' }), { message: '--org globex is not the configuration\'s org: its org record is acme' });
});

t.test('a reload whose org record is another than --org is rejected; the configuration in force stays', async (t) => {
  const folder = mkdtempSync(path.join(dir, 'reload-'));
  const file = path.join(folder, 'records.yaml');
  writeFileSync(file, yamlDocuments(WITHOUT_ORG));
  const runtime = await Runtime.start({
    role: 'ingress', settings: defaultSettings, configPaths: [folder], listen: ['127.0.0.1:0'], logger: silentLogger(), watch: false, location: LOCATION, org: 'globex',
  });
  t.teardown(() => runtime.stop(0));
  t.equal(runtime.dataplane.org, 'globex', 'no org record: --org names it');
  const before = runtime.store.current;

  writeFileSync(file, yamlDocuments(WITH_ORG));
  t.equal(await runtime.store.reload(), false, 'an org record of acme is refused');
  t.same(runtime.store.lastErrors, ['--org globex is not the configuration\'s org: its org record is acme']);
  t.equal(runtime.store.current, before, 'the snapshot in force is kept');
  t.equal(runtime.dataplane.org, 'globex');

  writeFileSync(file, yamlDocuments(WITH_ORG.map((r) => (r.kind === 'org' ? { ...r, name: 'globex' } : r))));
  t.equal(await runtime.store.reload(), true, 'an org record that agrees is applied');
  t.equal(runtime.store.lastErrors, undefined);
  t.equal(runtime.dataplane.org, 'globex');
});
