/**
 * svcproxy for the bench: the record folders (org, location, GVCs, workloads; deployments apart, so
 * sidecars do not load and probe the ingress's replicas), the rate-limit rules, and launching
 * `node bin/svcproxy.js ROLE ...` as a child process, ready when the admin `/ready` answers 200.
 */
import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import jsyaml from 'js-yaml';
import { httpRequest, spawnProc, waitUntil, type Proc } from './proc.js';

/** The repository root: the nearest folder above this file with svcproxy's package.json. */
export const ROOT = ((): string => {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    try {
      if ((JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { name?: string }).name === 'svcproxy') return dir;
    } catch {
      /* keep going up */
    }
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error('svcproxy package.json not found above the bench');
    dir = parent;
  }
})();
/** The svcproxy the bench runs: the repository's, until `snapshotApp` points elsewhere. */
export let APP_ROOT = ROOT;
export let CLI = path.join(ROOT, 'bin', 'svcproxy.js');

/**
 * Copy the built svcproxy (dist/, bin/, proto/, package.json; node_modules linked) into `dir` and run
 * that copy from now on: other people's `npm run build` during a long bench then cannot swap the
 * code under test halfway through.
 */
export function snapshotApp(dir: string): string {
  mkdirSync(dir, { recursive: true });
  for (const name of ['dist', 'bin', 'proto']) {
    if (existsSync(path.join(ROOT, name))) cpSync(path.join(ROOT, name), path.join(dir, name), { recursive: true });
  }
  cpSync(path.join(ROOT, 'package.json'), path.join(dir, 'package.json'));
  symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  APP_ROOT = dir;
  CLI = path.join(dir, 'bin', 'svcproxy.js');
  return dir;
}

export const LOCATION = 'aws-us-east-2';
export const GVC = 'bench';
export const ALIAS = 'benchalias001';
export const TRACED_GVC = 'traced';
export const TRACED_ALIAS = 'tracealias001';
/** A GVC whose `spec.sidecar.envoy` sends every workload's access log to an access-log service. */
export const ALS_GVC = 'als';
export const ALS_ALIAS = 'alslogalias01';
/** Domain and descriptor key of the rate-limit service section's rules (`rlsRules`). */
export const RLS_DOMAIN = 'bench';
export const RLS_KEY = 'user';
export const APP_PORT = 8080;

type Rec = Record<string, unknown>;

export function hostOf(workload: string, alias = ALIAS): string {
  return `${workload}-${alias}.app.localhost`;
}

export function workload(name: string, gvc: string, opts: { tags?: Rec; protocol?: string } = {}): Rec {
  return {
    kind: 'workload',
    name,
    gvc,
    tags: opts.tags ?? {},
    spec: {
      type: 'standard',
      containers: [{ name: 'app', image: 'bench:1', ports: [{ number: APP_PORT, protocol: opts.protocol ?? 'http' }] }],
      defaultOptions: { autoscaling: { minScale: 1, maxScale: 1 } },
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0', '::/0'] } },
    },
  };
}

export function deployment(name: string, gvc: string, address: string, sidecar?: string): Rec {
  return {
    kind: 'deployment',
    name,
    gvc,
    status: { locations: [{ name: LOCATION, replicas: [{ name: `${name}-0`, address, ...(sidecar ? { sidecar } : {}) }] }] },
  };
}

function base(): Rec[] {
  return [
    { kind: 'org', name: 'bench' },
    { kind: 'location', name: LOCATION, provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: GVC, alias: ALIAS, spec: { staticPlacement: { locationLinks: [`//location/${LOCATION}`] } } },
  ];
}

export function writeYaml(file: string, records: readonly Rec[]): void {
  writeFileSync(file, records.map((r) => jsyaml.dump(r, { lineWidth: -1 })).join('---\n'));
}

export interface MainConfigPorts {
  app: number;
  h2App: number;
  grpcApp: number;
  authz: number;
  ratelimit: number;
  otlp: number;
  /** The access-log service sink. */
  als: number;
  chainSidecar: number;
}

export interface MainConfig {
  /** Records every role reads. */
  records: string;
  /**
   * Records of the access-log service row alone (org, location, the `als` GVC and workload): a GVC
   * with an access log anywhere in a configuration makes svcproxy keep per-request access-log state
   * for every workload, which must not weigh on the other rows.
   */
  alsRecords: string;
  /** The ingress's `deployment` records. */
  deployments: string;
  rules: string;
  /** Rules of the rate-limit service section: domain `bench`, any value of descriptor key `user`. */
  rlsRules: string;
}

/**
 * Workloads: `plain` (no tags), `api` (ingress → app), `chain` (ingress → its own sidecar → app),
 * `guarded` (external auth over gRPC + rate limit), `limited` (rate limit only), `authed` (external
 * auth only), `logged` (no tags: its sidecar runs at --log-level info, writing the access log),
 * `traced` (GVC with tracing at 100%), `h2` (port protocol http2), `grpc` (port protocol grpc); in a
 * folder of its own, `als` (GVC whose sidecar.envoy sends the access log to an access-log service).
 */
export function writeMainConfig(dir: string, ports: MainConfigPorts): MainConfig {
  const records = path.join(dir, 'records');
  const deployments = path.join(dir, 'deployments');
  const extAuthTags = {
    'svc/externalAuthAddress': '127.0.0.1',
    'svc/externalAuthPort': String(ports.authz),
    'svc/externalAuthScheme': 'http',
    // Fail closed: a 200 then proves the auth server said yes.
    'svc/externalAuthFailureAllow': 'false',
  };
  const rateLimitTags = {
    'svc/rateLimitAddress': '127.0.0.1',
    'svc/rateLimitPort': String(ports.ratelimit),
    'svc/rateLimitScheme': 'http',
  };
  mkdirSync(records, { recursive: true });
  mkdirSync(deployments, { recursive: true });
  const alsRecords = path.join(dir, 'als-records');
  mkdirSync(alsRecords, { recursive: true });
  writeYaml(path.join(alsRecords, 'records.yaml'), [
    ...base(),
    {
      kind: 'gvc',
      name: ALS_GVC,
      alias: ALS_ALIAS,
      spec: {
        staticPlacement: { locationLinks: [`//location/${LOCATION}`] },
        // Envoy's http_grpc access logger with its defaults (flush every 1 s or at 16 KiB), to a
        // STATIC cluster at the bench's sink.
        sidecar: {
          envoy: {
            accessLog: [{
              name: 'envoy.access_loggers.http_grpc',
              typed_config: {
                common_config: { log_name: 'bench', grpc_service: { envoy_grpc: { cluster_name: 'als' } }, transport_api_version: 'V3' },
              },
            }],
            clusters: [{
              name: 'als',
              type: 'STATIC',
              load_assignment: {
                cluster_name: 'als',
                endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: ports.als } } } }] }],
              },
            }],
          },
        },
      },
    },
    workload('als', ALS_GVC),
  ]);
  writeYaml(path.join(records, 'records.yaml'), [
    ...base(),
    {
      kind: 'gvc',
      name: TRACED_GVC,
      alias: TRACED_ALIAS,
      spec: {
        staticPlacement: { locationLinks: [`//location/${LOCATION}`] },
        tracing: { sampling: 100, provider: { otel: { endpoint: `127.0.0.1:${ports.otlp}` } } },
      },
    },
    workload('plain', GVC),
    workload('api', GVC),
    workload('chain', GVC),
    workload('guarded', GVC, { tags: { ...extAuthTags, ...rateLimitTags } }),
    workload('limited', GVC, { tags: rateLimitTags }),
    workload('authed', GVC, { tags: extAuthTags }),
    workload('logged', GVC),
    workload('traced', TRACED_GVC),
    workload('h2', GVC, { protocol: 'http2' }),
    workload('grpc', GVC, { protocol: 'grpc' }),
  ]);
  writeYaml(path.join(deployments, 'deployments.yaml'), [
    deployment('api', GVC, `127.0.0.1:${ports.app}`),
    deployment('chain', GVC, `127.0.0.1:${ports.app}`, `127.0.0.1:${ports.chainSidecar}`),
    deployment('grpc', GVC, `127.0.0.1:${ports.grpcApp}`),
  ]);
  const rules = path.join(dir, 'rules.yaml');
  // The default descriptor is `authority`; one rule with a limit no bench can reach.
  writeFileSync(rules, jsyaml.dump({ domain: 'svc', descriptors: [{ key: 'authority', rate_limit: { unit: 'second', requests_per_unit: 1_000_000_000 } }] }));
  // The rate-limit service section: one rule for any value of `user` (the load client sends 1,000
  // distinct values), again out of reach, so every call is counted and none is over the limit.
  const rlsRules = path.join(dir, 'rls-rules.yaml');
  writeFileSync(rlsRules, jsyaml.dump({ domain: RLS_DOMAIN, descriptors: [{ key: RLS_KEY, rate_limit: { unit: 'second', requests_per_unit: 1_000_000_000 } }] }));
  return { records, alsRecords, deployments, rules, rlsRules };
}

/**
 * N workloads `w00000`… in one GVC; the first `deployments` of them (all by default) have a
 * deployment at the same app address. YAML (one document per record) or a JSON array.
 */
export function writeScaleConfig(dir: string, n: number, appPort: number, opts: { deployments?: number; format?: 'yaml' | 'json' } = {}): string {
  mkdirSync(dir, { recursive: true });
  const recs: Rec[] = [...base()];
  for (let i = 0; i < n; i++) recs.push(workload(scaleName(i), GVC));
  for (let i = 0; i < Math.min(n, opts.deployments ?? n); i++) recs.push(deployment(scaleName(i), GVC, `127.0.0.1:${appPort}`));
  if (opts.format === 'json') writeFileSync(path.join(dir, 'records.json'), JSON.stringify(recs));
  else writeYaml(path.join(dir, 'records.yaml'), recs);
  return dir;
}

export function scaleName(i: number): string {
  return `w${String(i).padStart(5, '0')}`;
}

export interface SvcProc {
  proc: Proc;
  port: number;
  adminPort: number;
}

export interface SvcLaunch {
  name: string;
  role: 'sidecar' | 'ingress' | 'ratelimit';
  args: string[];
  port: number;
  adminPort: number;
  logDir: string;
  /** Extra node flags (`--cpu-prof`, ...). */
  nodeFlags?: string[];
  /** `--log-level` (default warn: no access log). At info the access log goes to stdout: the log file. */
  logLevel?: string;
  /** Keep the default load shedding (the memory section measures the program as it ships). */
  shedding?: boolean;
}

export function launchSvc(opts: SvcLaunch): SvcProc {
  const proc = spawnProc(
    opts.name,
    process.execPath,
    [
      ...(opts.nodeFlags ?? []), CLI, opts.role, ...opts.args, '--listen', `127.0.0.1:${opts.port}`, '--admin', `127.0.0.1:${opts.adminPort}`, '--log-level', opts.logLevel ?? 'warn',
      // No load shedding: the rows measure how fast a proxy goes at saturation, as nginx's and the
      // others' do; on a machine shared with other work the event loop can lag past the default
      // 250 ms and answer 503 `overloaded`, which voids the row (bench/README.md).
      ...(opts.role === 'ratelimit' || opts.shedding ? [] : ['--max-event-loop-delay', '0']),
    ],
    { logDir: opts.logDir, cwd: ROOT },
  );
  return { proc, port: opts.port, adminPort: opts.adminPort };
}

export async function waitReady(svc: SvcProc, timeoutMs = 20_000): Promise<void> {
  await waitUntil(async () => (await httpRequest(svc.adminPort, { path: '/ready', timeoutMs: 1000 })).status === 200, timeoutMs, `${svc.proc.name} /ready`, svc.proc);
}

export function sidecarArgs(config: readonly string[], workloadName: string, app: string, gvc = GVC): string[] {
  return [...config.flatMap((c) => ['--config', c]), '--app', app, '--gvc', gvc, '--workload', workloadName, '--location', LOCATION, '--replica', `${workloadName}-0`];
}

export function ingressArgs(config: readonly string[]): string[] {
  return [...config.flatMap((c) => ['--config', c]), '--location', LOCATION];
}
