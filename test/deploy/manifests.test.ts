/**
 * deploy/kubernetes and the Dockerfile, checked as far as this machine allows (no cluster, no
 * Docker): every manifest against the Kubernetes OpenAPI schemas (kubernetes-models), strict about
 * unknown members, and shown to reject mutated manifests; the kustomization, security contexts,
 * resources and the drain arithmetic; the Dockerfile's final stage staged as files and its
 * ENTRYPOINT + CMD run; the records ConfigMap through `svcproxy validate`; and the exact argv of
 * every svcproxy container (and Redis's) run on loopback — ingress → sidecar → app with the rate
 * limit through the rate-limit service and a real redis-server — until SIGTERM, exit 0. What was
 * substituted to run on loopback (ports, volume folders, cluster DNS names, Secrets) is printed.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { spawnSync } from 'node:child_process';
import { KUBE_DIR, ROOT, loadManifests, parseKubeYaml, schemaErrors, type Obj } from './schema.js';
import { ignoredBy, readImage, stageImage } from './image.js';
import { deploymentsOf, kubeletVolume, planCluster, planContainer, type PodInputs } from './pod.js';
import { meshSecret, tlsSecret } from './certs.js';
import { get, redisCommand, runArgv, runSync, waitFor200, type Proc } from './run.js';
import { prng, testSeed } from '../helpers/seed.js';
import { redisMissing } from '../fixtures/ratelimit/servers.js';
import { loadSnapshot, defaultSettings } from '../../src/config/index.js';
import { graceMs, type Flags } from '../../src/flags.js';
import { parseFlags, settingsFrom } from '../../src/cli.js';
import { parseHostPort } from '../../src/address.js';
import { proxyVariables } from '../../src/roles/up-mesh.js';

// Tap's per-file limit is a hang guard; four processes start on two busy cores.
t.setTimeout(240_000);

const manifests = loadManifests();
const byKind = (kind: string): Obj[] => manifests.filter((m) => m.obj.kind === kind).map((m) => m.obj);
const clone = <T>(v: T): T => structuredClone(v);
const svcproxyImage = (c: Obj): boolean => /^svcproxy(:|$)/.test(String(c.image));
const dist = existsSync(path.join(ROOT, 'dist/cli.js')) ? false : 'dist/ is not built (npm run build)';
const openssl = spawnSync('openssl', ['version']).status === 0 ? false : 'openssl is not installed';

t.test('every manifest passes the Kubernetes OpenAPI schema, unknown members included', async (t) => {
  t.ok(manifests.length >= 10, `${manifests.length} objects`);
  for (const { file, obj } of manifests) t.same(schemaErrors(obj), [], `${file}: ${obj.kind}/${obj.metadata?.name}`);
});

t.test('the schema check rejects mutated manifests', async (t) => {
  const deployment = byKind('Deployment').find((d) => d.metadata.name === 'api')!;
  const cases: [string, (d: Obj) => void, RegExp][] = [
    ['unknown container field', (d) => (d.spec.template.spec.containers[1].imagePullPolcy = 'Always'), /containers\[1\]\.imagePullPolcy: unknown field/],
    ['unknown spec field', (d) => (d.spec.replicaz = 2), /^spec\.replicaz: unknown field/],
    ['wrong type', (d) => (d.spec.replicas = '2'), /data\/spec\/replicas must be integer/],
    ['wrong type in a probe', (d) => (d.spec.template.spec.containers[1].readinessProbe.periodSeconds = 'often'), /readinessProbe\/periodSeconds must be integer/],
    ['missing container name', (d) => delete d.spec.template.spec.containers[1].name, /containers\/1 must have required property '?name'?/],
    ['bad enum', (d) => (d.spec.template.spec.containers[1].imagePullPolicy = 'Sometimes'), /imagePullPolicy must be equal to one of the allowed values/],
  ];
  for (const [what, mutate, expected] of cases) {
    const d = clone(deployment);
    mutate(d);
    t.match(schemaErrors(d).join('\n'), expected, what);
  }
  const service = byKind('Service')[0]!;
  t.match(schemaErrors({ ...clone(service), spec: { ...clone(service.spec), clusterIp: 'None' } }).join('\n'), /spec\.clusterIp: unknown field/, 'misspelt Service field');
  t.match(schemaErrors({ apiVersion: 'apps/v1', kind: 'Deploymnet', metadata: { name: 'x' } }).join('\n'), /not a kind/, 'unknown kind');

  // Generated mutations: a random member added to (or a member renamed in) a random object of a
  // random manifest is flagged, unless that object is a map, whose keys are free.
  const seed = testSeed('DEPLOY_SCHEMA_SEED', 28);
  const random = prng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!;
  const MAPS = /(^|\.)(labels|annotations|matchLabels|data|limits|requests|selector)$/;
  const objects = (v: unknown, at: string, out: [string, Obj][]): [string, Obj][] => {
    if (Array.isArray(v)) v.forEach((x, i) => objects(x, `${at}[${i}]`, out));
    else if (v !== null && typeof v === 'object') {
      out.push([at, v as Obj]);
      for (const [k, x] of Object.entries(v)) objects(x, at === '' ? k : `${at}.${k}`, out);
    }
    return out;
  };
  let flagged = 0;
  for (let i = 0; i < 200; i++) {
    const doc = clone(pick(manifests).obj);
    const [at, target] = pick(objects(doc, '', []));
    // A Deployment's or PodDisruptionBudget's spec.selector is a LabelSelector, a Service's a map.
    const isMap = MAPS.test(at) && !(at === 'spec.selector' && doc.kind !== 'Service');
    const keys = Object.keys(target);
    const rename = keys.length > 0 && random() < 0.5;
    let member: string;
    if (rename) {
      const old = pick(keys);
      member = `${old}${String.fromCharCode(97 + Math.floor(random() * 26))}x`;
      target[member] = target[old];
      delete target[old];
    } else {
      member = `extra${Math.floor(random() * 1e6)}`;
      target[member] = random() < 0.5 ? 'x' : 1;
    }
    const where = at === '' ? member : `${at}.${member}`;
    const errors = schemaErrors(doc);
    // A renamed apiVersion or kind makes the object one of no known kind: rejected as such.
    const unknown = errors.some((e) => e.startsWith(`${where}: unknown field`) || (at === '' && /not a kind/.test(e)));
    if (isMap) {
      if (unknown) t.fail(`seed ${seed}: ${where} is a map's key, reported unknown`);
    } else if (!unknown) {
      t.fail(`seed ${seed}: ${doc.kind} ${where} (${rename ? 'renamed' : 'added'}) not reported: ${JSON.stringify(errors)}`);
    } else {
      flagged++;
    }
  }
  t.ok(flagged > 100, `seed ${seed}: ${flagged} of 200 generated unknown members flagged (the rest in maps)`);
});

t.test('kustomization, namespaces, images, security contexts, resources, probes, drain', async (t) => {
  const kustomization = parseKubeYaml(readFileSync(path.join(KUBE_DIR, 'kustomization.yaml'), 'utf8'), 'kustomization.yaml')[0]!;
  t.same([...(kustomization.resources as string[])].sort(), [...new Set(manifests.map((m) => m.file))].sort(), 'kustomization lists every manifest file');
  const namespace = kustomization.namespace as string;
  t.same(byKind('Namespace').map((n) => n.metadata.name), [namespace]);
  for (const { file, obj } of manifests) if (obj.kind !== 'Namespace') t.equal(obj.metadata.namespace, namespace, `${file}: in ${namespace}`);

  const image = readImage();
  const uid = Number(image.user?.split(':')[0]);
  t.ok(uid > 0, `Dockerfile USER is a non-root uid (${image.user})`);
  for (const d of deploymentsOf(manifests)) {
    const pod = d.spec.template.spec as Obj;
    t.equal(pod.automountServiceAccountToken, false, `${d.metadata.name}: no API token`);
    t.equal(pod.securityContext?.runAsNonRoot, true, `${d.metadata.name}: runAsNonRoot`);
    for (const v of (pod.volumes ?? []) as Obj[]) if (v.secret) t.equal(v.secret.defaultMode, 0o440, `${d.metadata.name}: Secret ${v.name} mode 0440 (octal, as kubectl reads YAML 1.1)`);
    for (const c of pod.containers as Obj[]) {
      const sc = c.securityContext ?? {};
      const name = `${d.metadata.name}/${c.name}`;
      t.equal(sc.readOnlyRootFilesystem, true, `${name}: read-only root`);
      t.equal(sc.allowPrivilegeEscalation, false, `${name}: no privilege escalation`);
      t.same(sc.capabilities?.drop, ['ALL'], `${name}: no capabilities`);
      t.ok(c.resources?.requests?.cpu && c.resources?.requests?.memory && c.resources?.limits?.memory, `${name}: requests and a memory limit`);
      if (!svcproxyImage(c)) continue;
      t.ok(kustomization.images.some((i: Obj) => `${i.name}:${i.newTag}` === c.image), `${name}: image ${c.image} is the kustomization's`);
      t.equal(sc.runAsUser, uid, `${name}: runs as the image's USER`);
      for (const p of c.ports as Obj[]) t.ok(image.expose.includes(p.containerPort), `${name}: port ${p.containerPort} is EXPOSEd`);
      t.match(c.readinessProbe?.httpGet, { path: '/ready' }, `${name}: readiness is /ready`);
      t.match(c.livenessProbe?.httpGet, { path: '/healthz' }, `${name}: liveness is /healthz`);
      checkAdminListeners(t, d, c);
    }
  }

  // The drain: svcproxy waits up to graceMs (the records' longest terminationGracePeriodSeconds)
  // after SIGTERM, which Kubernetes sends after preStop; the pod's grace must cover both.
  const records = byKind('ConfigMap').find((c) => c.metadata.name === 'svcproxy-records')!;
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-records-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  kubeletVolume(dir, records.data as Record<string, string>);
  const loaded = await loadSnapshot([dir], defaultSettings, 1);
  if (!loaded.ok) throw new Error(loaded.errors.join('\n'));
  const drainSeconds = graceMs(loaded.snapshot) / 1000;
  for (const d of deploymentsOf(manifests)) {
    const pod = d.spec.template.spec as Obj;
    const role = (pod.containers as Obj[]).find(svcproxyImage)?.args?.[0];
    if (role !== 'ingress' && role !== 'sidecar') continue;
    const sleeps = (pod.containers as Obj[]).map((c) => Number(c.lifecycle?.preStop?.sleep?.seconds ?? 0));
    t.ok(sleeps.every((s) => s === sleeps[0] && s > 0), `${d.metadata.name}: every container sleeps ${sleeps[0]} s in preStop (serves while endpoints go)`);
    t.ok(pod.terminationGracePeriodSeconds >= sleeps[0]! + drainSeconds, `${d.metadata.name}: grace ${pod.terminationGracePeriodSeconds} s ≥ preStop ${sleeps[0]} s + drain ${drainSeconds} s`);
  }
});

/** A svcproxy container's flags, read by the program's own parser (the manifest's `args`, no environment). */
function flagsOfContainer(c: Obj): Flags {
  return parseFlags([...(c.args as string[])], {}).flags;
}

/** The port a probe or Service names (a number, or a container port's name). */
function portOf(c: Obj, port: number | string): number | undefined {
  return typeof port === 'number' ? port : (c.ports as Obj[] | undefined)?.find((p) => p.name === port)?.containerPort;
}

/**
 * The admin on the pod's loopback only (its /config shows the topology, its dashboard the traffic);
 * the probes on the --status listener, Prometheus' annotations on the --metrics listener, both
 * reachable from the cluster (DESIGN §3; Istio's 15021 and 15090).
 */
function checkAdminListeners(t: Test, d: Obj, c: Obj): void {
  const name = `${d.metadata.name}/${c.name}`;
  const flags = flagsOfContainer(c);
  const admin = parseHostPort(flags.admin ?? '127.0.0.1:9901');
  t.ok(['127.0.0.1', '::1'].includes(admin.host), `${name}: --admin ${flags.admin} is on loopback`);
  t.notOk((c.ports as Obj[]).some((p) => p.containerPort === admin.port), `${name}: the admin port is not a container port`);
  t.ok(flags.status && flags.metrics, `${name}: --status and --metrics are given`);
  const status = parseHostPort(flags.status ?? ':0');
  const metrics = parseHostPort(flags.metrics ?? ':0');
  t.same([status, metrics], [{ host: '0.0.0.0', port: 15021 }, { host: '0.0.0.0', port: 15090 }], `${name}: --status 0.0.0.0:15021, --metrics 0.0.0.0:15090`);
  t.equal(portOf(c, c.readinessProbe.httpGet.port), status.port, `${name}: readinessProbe on the status port`);
  t.equal(portOf(c, c.livenessProbe.httpGet.port), status.port, `${name}: livenessProbe on the status port`);
  t.equal(portOf(c, 'metrics'), metrics.port, `${name}: the container port named metrics is --metrics'`);
  t.same(d.spec.template.metadata.annotations, { 'prometheus.io/scrape': 'true', 'prometheus.io/port': String(metrics.port), 'prometheus.io/path': '/metrics' }, `${name}: Prometheus' annotations name the metrics listener`);
}

t.test('the app container\'s proxy variables are the ones up gives its replicas (one rule: docs/mesh.md)', async (t) => {
  const pod = deploymentsOf(manifests).find((d) => d.metadata.name === 'api')!.spec.template.spec as Obj;
  const sidecar = (pod.containers as Obj[]).find(svcproxyImage)!;
  const app = (pod.containers as Obj[]).find((c) => !svcproxyImage(c))!;
  const flags = flagsOfContainer(sidecar);
  const settings = settingsFrom(flags);
  const mesh = flags.mesh?.[0];
  t.ok(mesh, `the sidecar has an outbound listener (--mesh ${mesh})`);
  const want = proxyVariables(`http://${mesh}`, [settings.appDomain, settings.directDomain, settings.internalDomain]);
  const given = Object.fromEntries(((app.env ?? []) as Obj[]).filter((e) => /_proxy$/i.test(e.name as string)).map((e) => [e.name as string, e.value as string]));
  t.same(given, want, `the app's ${Object.keys(want).join(', ')} are up's for the sidecar's domains`);
  t.equal(given.NO_PROXY, '127.0.0.1,::1', 'NO_PROXY leaves localhost out: internal names are *.localhost here');
});

t.test('the Dockerfile: what it copies exists and is in the context; ENTRYPOINT + CMD runs', { skip: dist }, async (t) => {
  const image = readImage();
  const ignore = readFileSync(path.join(ROOT, '.dockerignore'), 'utf8');
  for (const source of image.contextSources) {
    t.ok(existsSync(path.join(ROOT, source)), `COPY ${source} exists`);
    t.notOk(ignoredBy(ignore, source), `COPY ${source} is not in .dockerignore`);
  }
  t.ok(ignoredBy(ignore, 'node_modules') && ignoredBy(ignore, 'dist') && ignoredBy(ignore, '.git'), 'node_modules, dist and .git stay out of the context');
  t.same(image.entrypoint, ['svcproxy']);
  const staged = stageImage(t, image);
  // Files the program reads beside its modules at run time (proto/, package.json, ...): each
  // relative path that dist/ resolves from import.meta.url must be in the image. The argv runs
  // below use no proto/ file (the rate-limit wire is hand-coded), so this is what checks it.
  const distDir = path.join(staged.cwd, 'dist');
  const relatives = /(?:new URL\('(\.\.?\/[^']+)', import\.meta\.url\)|createRequire\(import\.meta\.url\)\('(\.\.?\/[^']+)'\))/g;
  let found = 0;
  for (const file of readdirSync(distDir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js'))) {
    for (const m of readFileSync(path.join(distDir, file), 'utf8').matchAll(relatives)) {
      found++;
      const target = path.resolve(path.dirname(path.join(distDir, file)), m[1] ?? m[2]!);
      t.ok(existsSync(target), `dist/${file} reads ${m[1] ?? m[2]}: in the image as ${path.relative(staged.root, target)}`);
    }
  }
  t.ok(found >= 3, `${found} run-time file references in dist/`);
  const run = runSync([...image.entrypoint, ...image.cmd], { ...process.env } as Record<string, string>, staged);
  t.equal(run.code, 0, `${[...image.entrypoint, ...image.cmd].join(' ')}: exit 0 ${run.stderr}`);
  t.match(run.stdout, /^Usage:/m);
});

t.test('the records ConfigMap passes svcproxy validate', { skip: dist }, async (t) => {
  const image = readImage();
  const staged = stageImage(t, image);
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-records-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  kubeletVolume(dir, byKind('ConfigMap').find((c) => c.metadata.name === 'svcproxy-records')!.data as Record<string, string>);
  const run = runSync([...image.entrypoint, 'validate', '--config', dir], { ...process.env } as Record<string, string>, staged);
  t.equal(run.code, 0, run.stderr);
  t.match(run.stdout, /^valid: 5 records checked \(org 1, location 1, gvc 1, workload 1, deployment 1\)/);
  t.notMatch(run.stderr, /warning/, 'no warnings');
});

t.test('each manifest\'s argv runs: ingress → sidecar → app, rate limit through Redis, probes, SIGTERM', { skip: dist || openssl || redisMissing() || false }, async (t) => {
  const image = readImage();
  const staged = stageImage(t, image);
  const cluster = await planCluster(manifests);
  const appDomain = 'app.example.com';
  const inputs: PodInputs = {
    configMaps: new Map(byKind('ConfigMap').map((c) => [c.metadata.name as string, c])),
    secrets: new Map([
      ['svcproxy-mesh-api', meshSecret('spiffe://acme/gvc/shop/workload/api')],
      ['svcproxy-ingress-tls', tlsSecret(appDomain)],
    ]),
    images: new Map<string, { entrypoint: readonly string[]; cmd: readonly string[] }>([
      ['svcproxy:0.1.0', image],
      // The redis image's entrypoint runs redis-server with arguments that start with '-'.
      ['redis:7', { entrypoint: ['redis-server'], cmd: [] }],
    ]),
  };
  const deployment = (name: string): Obj => deploymentsOf(manifests).find((d) => d.metadata.name === name)!;
  const plans = {
    redis: planContainer(t, deployment('redis'), 'redis', cluster, inputs),
    ratelimit: planContainer(t, deployment('ratelimit'), 'ratelimit', cluster, inputs),
    sidecar: planContainer(t, deployment('api'), 'svcproxy', cluster, inputs),
    ingress: planContainer(t, deployment('svcproxy-ingress'), 'svcproxy', cluster, inputs),
  };
  for (const [name, plan] of Object.entries(plans)) t.comment(`${name}: ${plan.argv.join(' ')}\n  substituted: ${plan.substitutions.join('; ')}`);

  // The app container: a placeholder image in the manifest, a loopback server here on its port.
  const seen: http.IncomingHttpHeaders[] = [];
  const app = http.createServer((req, res) => {
    seen.push(req.headers);
    res.end('hello from the app');
  });
  await new Promise<void>((resolve) => app.listen(cluster.pods.get('api')!.get(8080), '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    app.closeAllConnections();
    app.close(() => resolve());
  }));

  // Redis: the manifest's args, and (a substitution) the pod's loopback port for 6379.
  const redisPort = plans.redis.ports.get(6379)!;
  t.comment(`redis: + --port ${redisPort} --bind 127.0.0.1 (the pod's port on loopback)`);
  const redis = runArgv(t, 'redis', [...plans.redis.argv, '--port', String(redisPort), '--bind', '127.0.0.1'], plans.redis.env, staged);
  for (let i = 0; (await redisCommand(redisPort, 'PING').catch(() => '')) !== '+PONG'; i++) {
    if (redis.child.exitCode !== null || i > 600) throw new Error(`redis-server did not start: ${redis.output()}`);
    await new Promise((r) => setTimeout(r, 25));
  }

  const procs: Record<string, Proc> = {};
  for (const name of ['ratelimit', 'sidecar', 'ingress'] as const) procs[name] = runArgv(t, name, plans[name].argv, plans[name].env, staged);
  for (const name of ['ratelimit', 'sidecar', 'ingress'] as const) {
    await waitFor200(procs[name]!, plans[name].readiness!);
    await waitFor200(procs[name]!, plans[name].liveness!);
    t.pass(`${name}: readinessProbe ${new URL(plans[name].readiness!).pathname} and livenessProbe ${new URL(plans[name].liveness!).pathname} answer 200`);
    // The probes' port is the status listener: it answers them and nothing else; the metrics
    // listener only /metrics; the admin (on the pod's loopback) the rest.
    const on = (port: number) => async (p: string) => (await fetch(`http://127.0.0.1:${plans[name].ports.get(port)!}${p}`)).status;
    const [status, metrics, admin] = [on(15021), on(15090), on(9901)];
    t.equal(Number(new URL(plans[name].readiness!).port), plans[name].ports.get(15021), `${name}: the probes reach the status listener`);
    t.same(await Promise.all(['/healthz', '/ready', '/metrics', '/config', '/'].map(status)), [200, 200, 404, 404, 404], `${name}: status answers /healthz and /ready only`);
    t.same(await Promise.all(['/metrics', '/healthz', '/ready', '/config'].map(metrics)), [200, 404, 404, 404], `${name}: metrics answers /metrics only`);
    t.equal(await admin('/config'), 200, `${name}: the admin (loopback) serves /config`);
  }

  // The workload's canonical host name, as `svcproxy endpoints` prints it with the ingress's domains.
  const ingressArgs = plans.ingress.argv;
  const flag = (name: string): string[] => (ingressArgs.includes(name) ? [name, ingressArgs[ingressArgs.indexOf(name) + 1]!] : []);
  const config = flag('--config')[1]!;
  const endpoints = runSync([...image.entrypoint, 'endpoints', '--config', config, '-o', 'json', ...flag('--app-domain'), ...flag('--direct-domain')], plans.ingress.env, staged);
  t.equal(endpoints.code, 0, endpoints.stderr);
  const host = (JSON.parse(endpoints.stdout) as { workload: string; kind: string; host: string }[]).find((e) => e.workload === 'api' && e.kind === 'canonical')!.host;
  t.ok(host.endsWith(`.${appDomain}`), `canonical host ${host}`);

  // The ingress probes the replica before routing to it: answers before then are 503s.
  const listen = Number(flag('--listen')[1]!.split(':')[1]);
  let answer = await get(listen, host, '/hello');
  for (let i = 0; answer.status === 503 && i < 600; i++) {
    await new Promise((r) => setTimeout(r, 50));
    answer = await get(listen, host, '/hello');
  }
  t.equal(answer.status, 200, `HTTP through the ingress: ${answer.body}`);
  t.equal(answer.body, 'hello from the app');
  t.ok(answer.headers['x-ratelimit-limit'], `the sidecar asked the rate-limit service (x-ratelimit-limit: ${String(answer.headers['x-ratelimit-limit'])})`);
  const tlsPort = Number(flag('--listen-tls')[1]!.split(':')[1]);
  const tls = await get(tlsPort, host, '/tls', inputs.secrets.get('svcproxy-ingress-tls')!['tls.crt']);
  t.equal(tls.status, 200, `HTTPS through the ingress (the Secret's certificate): ${tls.body}`);
  t.ok(seen.length >= 2 && seen.every((h) => h['x-request-id']), 'the app saw the requests, with x-request-id');
  const keys = await redisCommand(redisPort, 'DBSIZE');
  t.ok(Number(keys.slice(1)) >= 1, `the rate-limit counters are in Redis (DBSIZE ${keys})`);

  // SIGTERM, as the kubelet sends after preStop: each drains and exits 0.
  for (const name of ['ingress', 'sidecar', 'ratelimit'] as const) {
    procs[name]!.child.kill('SIGTERM');
    t.equal(await procs[name]!.exited, 0, `${name}: SIGTERM → exit 0\n${procs[name]!.child.exitCode === 0 ? '' : procs[name]!.output()}`);
  }
  redis.child.kill('SIGTERM');
  t.equal(await redis.exited, 0, 'redis-server: SIGTERM → exit 0');
});
