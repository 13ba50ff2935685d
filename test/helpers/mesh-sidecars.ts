/**
 * The mesh as operators run it, for the tests in test/mesh/sidecars*.test.ts: `svcproxy sidecar` and
 * `svcproxy ingress` as child processes (bin/svcproxy.js, so dist/ must be built) given PEM files
 * with `--mesh-cert/--mesh-key/--mesh-ca`, HTTPS calls made straight to a sidecar's mTLS listener
 * with a chosen client certificate, counters read from a process's admin `/metrics`, and its JSON
 * log lines read once it has exited (the process logger flushes in 4 KiB batches and at exit, so
 * lines are only complete then).
 */
import { spawn } from 'node:child_process';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { join } from 'node:path';
import tls from 'node:tls';
import type { MeshCredentials } from '../../src/mesh/index.js';
import type { TapLike } from './harness.js';
import { BIN, startProxyProcess, type ProxyProcess } from './proxy-process.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { eventually } from '../faults/fixtures.js';
import { writeCredentials } from '../mesh/fixtures.js';

export const ORG = 'acme';
export const LOCATION = 'loc1';
export const INGRESS_URI = `spiffe://${ORG}/ingress`;
export const uriOf = (gvc: string, workload: string): string => `spiffe://${ORG}/gvc/${gvc}/workload/${workload}`;

export interface MeshFiles {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/** Writes `creds` as `dir/name/{cert,key,ca}.pem`. */
export async function credentialFiles(dir: string, name: string, creds: Pick<MeshCredentials, 'certPem' | 'keyPem' | 'caPem'>): Promise<MeshFiles> {
  const folder = join(dir, name);
  await mkdir(folder, { recursive: true });
  return writeCredentials(folder, creds);
}

export interface TargetWorkload {
  readonly gvc: string;
  readonly name: string;
  /** `firewallConfig.internal`. */
  readonly internal: Record<string, unknown>;
  readonly tags?: Record<string, unknown>;
  /** Its one replica as the `deployment` record lists it: the app and the sidecar's mTLS listener. */
  readonly replica?: { readonly app: number; readonly mesh: number };
}

/** org, location, gvcs g1 and g2, the workloads (container port 8080, http), and deployments of those with a replica. */
export function meshRecords(workloads: readonly TargetWorkload[]): Record<string, unknown>[] {
  const placement = { staticPlacement: { locationLinks: [`//location/${LOCATION}`] } };
  return [
    { kind: 'org', name: ORG },
    { kind: 'location', name: LOCATION, provider: 'aws', region: 'r1' },
    { kind: 'gvc', name: 'g1', spec: placement },
    { kind: 'gvc', name: 'g2', spec: placement },
    ...workloads.flatMap((w) => [
      {
        kind: 'workload', name: w.name, gvc: w.gvc, tags: w.tags ?? {},
        spec: {
          type: 'standard',
          containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }] }],
          defaultOptions: { autoscaling: { minScale: 1 }, timeoutSeconds: 10 },
          firewallConfig: { internal: w.internal },
        },
      },
      ...(w.replica ? [{
        kind: 'deployment', name: w.name, gvc: w.gvc,
        status: { locations: [{ name: LOCATION, replicas: [{ name: `${w.name}-0`, address: `127.0.0.1:${w.replica.app}`, mesh: `127.0.0.1:${w.replica.mesh}` }] }] },
      }] : []),
    ]),
  ];
}

export interface Sidecar extends ProxyProcess {
  /** Its outbound (mesh) listener: the explicit HTTP proxy its app calls through. */
  readonly meshPort: number;
}

function meshArgs(files: MeshFiles): string[] {
  return ['--mesh-cert', files.cert, '--mesh-key', files.key, '--mesh-ca', files.ca];
}

/** `svcproxy sidecar` for `gvc/workload` (replica `workload-0`) in front of the app on `app`. */
export async function startSidecar(
  t: TapLike,
  opts: { config: string; gvc: string; workload: string; app: number; inbound: number; files: MeshFiles },
): Promise<Sidecar> {
  const meshPort = await freePort();
  const proc = await startProxyProcess(t, [
    'sidecar', '--config', opts.config, '--gvc', opts.gvc, '--workload', opts.workload, '--location', LOCATION,
    '--replica', `${opts.workload}-0`, '--app', `127.0.0.1:${opts.app}`,
    '--mesh', `127.0.0.1:${meshPort}`, '--mesh-inbound', `127.0.0.1:${opts.inbound}`, ...meshArgs(opts.files),
  ]);
  return Object.assign(proc, { meshPort });
}

/** `svcproxy ingress` with an outbound mesh listener and a mesh identity of its own. */
export async function startIngress(t: TapLike, opts: { config: string; files: MeshFiles }): Promise<Sidecar> {
  const meshPort = await freePort();
  const proc = await startProxyProcess(t, ['ingress', '--config', opts.config, '--location', LOCATION, '--mesh', `127.0.0.1:${meshPort}`, ...meshArgs(opts.files)]);
  return Object.assign(proc, { meshPort });
}

/** Runs `svcproxy ARGS` to its exit (a start that must fail); a hang guard kills it after 60 s. */
export function runToExit(t: TapLike, args: readonly string[]): Promise<{ code: number | null; stderr: string; stdout: string }> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  const guard = setTimeout(() => child.kill('SIGKILL'), 60_000);
  t.teardown(() => {
    clearTimeout(guard);
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('close', (code) => {
    clearTimeout(guard);
    resolve({ code, stdout, stderr });
  }));
}

/** Until the process's `/config` lists `n` replicas, all ready (a hang guard of 60 s). */
export async function replicasReady(proc: ProxyProcess, n: number): Promise<boolean> {
  return eventually(async () => {
    const res = await fetch(`${proc.admin}/config`).catch(() => undefined);
    if (res?.status !== 200) return false;
    const replicas = ((await res.json()) as { replicas: { ready: boolean }[] }).replicas;
    return replicas.length === n && replicas.every((r) => r.ready);
  }, 60_000, 50);
}

/** The value of one counter series in the process's `/metrics` (0 when absent); `labels` in the exported order. */
export async function counter(proc: ProxyProcess, name: string, labels: string): Promise<number> {
  const text = await (await fetch(`${proc.admin}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** SIGTERM, wait for the exit, and the JSON lines it logged. */
export async function stopAndReadLogs(proc: ProxyProcess): Promise<Record<string, unknown>[]> {
  if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGTERM');
  await proc.exited;
  const lines: Record<string, unknown>[] = [];
  for (const line of proc.output().split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      lines.push(JSON.parse(line) as Record<string, unknown>);
    } catch {
      // a line of something else
    }
  }
  return lines;
}

/** `cipher`: the TLS suite the connection negotiated (the listener's order decides). */
export type Direct = { status: number; headers: Record<string, unknown>; body: string; cipher: string } | { error: string };

/**
 * One HTTP/1.1 request straight to an mTLS listener, presenting `client` (or no certificate). The
 * listener names itself by URI only, so the chain is checked against `ca` and not a host name.
 */
export function direct(
  port: number,
  host: string,
  path: string,
  opts: { client?: Pick<MeshCredentials, 'certPem' | 'keyPem'>; ca: string; headers?: Record<string, string> },
): Promise<Direct> {
  return new Promise((resolve) => {
    const req = https.request({
      host: '127.0.0.1', port, path, agent: false,
      headers: { host, ...opts.headers },
      ca: opts.ca,
      ...(opts.client ? { cert: opts.client.certPem, key: opts.client.keyPem } : {}),
      checkServerIdentity: () => undefined,
    }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      const cipher = (res.socket as tls.TLSSocket).getCipher().standardName;
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString(), cipher }));
      res.on('error', (err) => resolve({ error: err.message }));
    });
    req.on('error', (err) => resolve({ error: err.message }));
    req.end();
  });
}

/** The serial number of the certificate a new connection to the mTLS listener on `port` is shown. */
export function serialAt(port: number, client: Pick<MeshCredentials, 'certPem' | 'keyPem' | 'caPem'>): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, cert: client.certPem, key: client.keyPem, ca: client.caPem, checkServerIdentity: () => undefined }, () => {
      const serial = socket.getPeerCertificate().serialNumber;
      socket.end();
      resolve(serial);
    });
    socket.once('error', reject);
  });
}

/** Replaces `path` the way cert-manager and kubelet do: a new file written beside it, then renamed over it. */
export async function replaceFile(path: string, text: string, mode = 0o644): Promise<void> {
  const tmp = `${path}.new`;
  await writeFile(tmp, text, { mode });
  await rename(tmp, path);
}
