/**
 * The mesh rows' records and identities (DESIGN §9): a folder of their own (org, location, GVC and
 * the two workloads `caller` and `meshed`, so the other rows' configurations do not change), one
 * deployment folder per topology (the caller sidecar or the ingress reads the one naming its own
 * target sidecar: its mTLS listener, or its plain listener for the plaintext control), and the
 * certificates, issued by the svcproxy build under test's own local CA (`LocalCa` of dist/mesh).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import jsyaml from 'js-yaml';
import { httpRequest } from './proc.js';
import { APP_PORT, APP_ROOT, GVC, LOCATION } from './svc.js';

/** The org of every bench record (`base()` in svc.ts): the trust domain of the identities. */
export const MESH_ORG = 'bench';
/** The workload whose app wrk stands in for, and the workload it calls. */
export const CALLER = 'caller';
export const MESHED = 'meshed';

/** The target's internal name, as the caller's app would ask its outbound listener for it. */
export function internalHost(workload = MESHED, gvc = GVC): string {
  return `${workload}.${gvc}.internal.localhost:${APP_PORT}`;
}

export function workloadUri(workload: string): string {
  return `spiffe://${MESH_ORG}/gvc/${GVC}/workload/${workload}`;
}

/** The identity of a caller outside every workload, as `up`'s host listener uses it. */
export const INGRESS_URI = `spiffe://${MESH_ORG}/ingress`;

export interface PemFiles {
  cert: string;
  key: string;
  ca: string;
}

export interface MeshConfig {
  records: string;
  /** `meshed`'s replica: its app and its sidecar's mTLS listener (the caller sidecar's view). */
  deploymentsTls: string;
  /** `meshed`'s replica: its app and its sidecar's plain listener (the plaintext control). */
  deploymentsPlain: string;
  /** `meshed`'s replica behind the ingress's mesh listener: another sidecar's mTLS listener. */
  deploymentsIngress: string;
}

type Rec = Record<string, unknown>;

function writeYaml(file: string, records: readonly Rec[]): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, records.map((r) => jsyaml.dump(r, { lineWidth: -1 })).join('---\n'));
}

function workload(name: string): Rec {
  return {
    kind: 'workload',
    name,
    gvc: GVC,
    spec: {
      type: 'standard',
      containers: [{ name: 'app', image: 'bench:1', ports: [{ number: APP_PORT, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale: 1, maxScale: 1 } },
      // same-org admits the caller workload and the ingress's identity (a member of the org).
      firewallConfig: { internal: { inboundAllowType: 'same-org' } },
    },
  };
}

function deployment(replica: Rec): Rec {
  return { kind: 'deployment', name: MESHED, gvc: GVC, status: { locations: [{ name: LOCATION, replicas: [{ name: `${MESHED}-0`, ...replica }] }] } };
}

/**
 * A deployment folder of its own naming `meshed`'s replica behind `replica` (`{ mesh: addr }` or
 * `{ sidecar: addr }`): bench/instructions' callers of a target sidecar counted on fresh ports.
 */
export function writeTargetDeployments(dir: string, app: string, replica: Rec): string {
  writeYaml(path.join(dir, 'deployments.yaml'), [deployment({ address: app, ...replica })]);
  return dir;
}

export function writeMeshConfig(dir: string, ports: { app: number; tlsTarget: number; plainTarget: number; ingressTarget: number }): MeshConfig {
  const records = path.join(dir, 'mesh-records');
  writeYaml(path.join(records, 'records.yaml'), [
    { kind: 'org', name: MESH_ORG },
    { kind: 'location', name: LOCATION, provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: GVC, alias: 'benchalias001', spec: { staticPlacement: { locationLinks: [`//location/${LOCATION}`] } } },
    workload(CALLER),
    workload(MESHED),
  ]);
  const app = `127.0.0.1:${ports.app}`;
  const out = (name: string, replica: Rec): string => writeTargetDeployments(path.join(dir, name), app, replica);
  return {
    records,
    deploymentsTls: out('mesh-deployments-tls', { mesh: `127.0.0.1:${ports.tlsTarget}` }),
    deploymentsPlain: out('mesh-deployments-plain', { sidecar: `127.0.0.1:${ports.plainTarget}` }),
    deploymentsIngress: out('mesh-deployments-ingress', { mesh: `127.0.0.1:${ports.ingressTarget}` }),
  };
}

interface Issued {
  certPem: string;
  keyPem: string;
  caPem: string;
}
interface LocalCaLike {
  issue(uri: string, ttlMs: number): Promise<Issued>;
}

/** Certificates (24 h) for the caller, the target and the ingress, from a CA in `dir/ca`. */
export async function issueMeshFiles(dir: string): Promise<Record<'caller' | 'meshed' | 'ingress', PemFiles>> {
  const mod = (await import(pathToFileURL(path.join(APP_ROOT, 'dist', 'mesh', 'index.js')).href)) as {
    LocalCa: { open(dir: string, opts: { org: string }): Promise<LocalCaLike> };
  };
  const ca = await mod.LocalCa.open(path.join(dir, 'ca'), { org: MESH_ORG });
  const write = async (name: string, uri: string): Promise<PemFiles> => {
    const c = await ca.issue(uri, 24 * 3600 * 1000);
    const files = { cert: path.join(dir, `${name}.crt`), key: path.join(dir, `${name}.key`), ca: path.join(dir, 'ca.pem') };
    writeFileSync(files.cert, c.certPem);
    writeFileSync(files.key, c.keyPem, { mode: 0o600 });
    writeFileSync(files.ca, c.caPem);
    return files;
  };
  return { caller: await write(CALLER, workloadUri(CALLER)), meshed: await write(MESHED, workloadUri(MESHED)), ingress: await write('ingress', INGRESS_URI) };
}

export function meshArgs(files: PemFiles): string[] {
  return ['--mesh-cert', files.cert, '--mesh-key', files.key, '--mesh-ca', files.ca];
}

/** The sidecars' `svcproxy_mesh_tls_handshakes_total` by side (client: dials; server: accepted). */
export async function handshakes(adminPort: number): Promise<{ client: number; server: number }> {
  const body = (await httpRequest(adminPort, { path: '/metrics' })).body;
  const out = { client: 0, server: 0 };
  for (const m of body.matchAll(/^svcproxy_mesh_tls_handshakes_total\{side="(client|server)"\} (\S+)$/gm)) out[m[1] as 'client' | 'server'] += Number(m[2]);
  return out;
}

/** Requests the target sidecar's mTLS listener admitted (`svcproxy_mesh_requests_total`, destination side). */
export async function meshRequests(adminPort: number): Promise<number> {
  const body = (await httpRequest(adminPort, { path: '/metrics' })).body;
  let n = 0;
  for (const m of body.matchAll(/^svcproxy_mesh_requests_total\{([^}]*)\} (\S+)$/gm)) if (m[1]!.includes('reporter="destination"')) n += Number(m[2]);
  return n;
}
