/**
 * A Deployment's pod run as local processes on loopback, as near to what the kubelet would run as
 * one machine allows, with every departure recorded as a substitution the test prints:
 * - a container's argv is Kubernetes' rule (`command` replaces the image's ENTRYPOINT, `args` its
 *   CMD), its env the manifest's (`fieldRef` answered as the API server would, HOSTNAME the pod's
 *   name, as the kubelet sets it) over the test's environment less any SVC_/SVCPROXY_ variable;
 * - each pod is one network namespace: every port it uses (`HOST:PORT` in an argv, `containerPort`)
 *   becomes one free loopback port, the same for all its containers, and 0.0.0.0 becomes 127.0.0.1;
 * - a Service's cluster DNS name (`NAME.NS.svc.cluster.local:PORT`) becomes its pod's loopback port,
 *   in argv and in ConfigMap records (a replica address, a `svc/...Address` tag with its port tag);
 * - a ConfigMap or Secret volume is a temporary folder laid out as the kubelet's atomic writer
 *   lays it (`..TIMESTAMP/` files, a `..data` link to it, each key a link through `..data`), so the
 *   program reads the same links it reads in a pod; Secrets' contents are the test's own.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import jsyaml from 'js-yaml';
import { freePort } from '../fixtures/ratelimit/servers.js';
import type { Image } from './image.js';
import type { Manifest, Obj } from './schema.js';
import type { SecretFiles } from './certs.js';

const CLUSTER_NAME = /^([a-z0-9-]+)\.([a-z0-9-]+)\.svc\.cluster\.local$/;
const LOCAL_HOSTS = new Set(['0.0.0.0', '127.0.0.1', '[::]', 'localhost']);

export interface Cluster {
  /** Per Deployment name: the pod's port numbers → loopback ports. */
  readonly pods: Map<string, Map<number, number>>;
  /** `NAME.NS.svc.cluster.local:PORT` → `127.0.0.1:P`. */
  readonly services: Map<string, string>;
}

export function deploymentsOf(manifests: readonly Manifest[]): Obj[] {
  return manifests.filter((m) => m.obj.kind === 'Deployment').map((m) => m.obj);
}

function containerPort(pod: Obj, port: number | string): number {
  if (typeof port === 'number') return port;
  for (const c of pod.spec.containers as Obj[]) for (const p of (c.ports ?? []) as Obj[]) if (p.name === port) return p.containerPort as number;
  throw new Error(`no container port named ${port}`);
}

/** Every port a pod uses: declared container ports and `HOST:PORT` arguments on its own host. */
function podPorts(pod: Obj): Set<number> {
  const ports = new Set<number>();
  for (const c of pod.spec.containers as Obj[]) {
    for (const p of (c.ports ?? []) as Obj[]) ports.add(p.containerPort as number);
    for (const arg of [...(c.command ?? []), ...(c.args ?? [])] as string[]) {
      const m = /^(.+):(\d+)$/.exec(arg);
      if (m && LOCAL_HOSTS.has(m[1]!)) ports.add(Number(m[2]));
    }
  }
  return ports;
}

/** Free loopback ports for every pod, and the Services' names onto them. */
export async function planCluster(manifests: readonly Manifest[]): Promise<Cluster> {
  const pods = new Map<string, Map<number, number>>();
  for (const d of deploymentsOf(manifests)) {
    const map = new Map<number, number>();
    for (const port of podPorts(d.spec.template)) map.set(port, await freePort());
    pods.set(d.metadata.name as string, map);
  }
  const services = new Map<string, string>();
  for (const { obj: svc } of manifests.filter((m) => m.obj.kind === 'Service')) {
    const selector = Object.entries((svc.spec.selector ?? {}) as Record<string, string>);
    const target = deploymentsOf(manifests).find((d) => selector.length > 0 && selector.every(([k, v]) => d.spec.template.metadata.labels?.[k] === v));
    if (!target) throw new Error(`Service ${svc.metadata.name} selects no Deployment`);
    const podMap = pods.get(target.metadata.name as string)!;
    const base = `${svc.metadata.name}.${svc.metadata.namespace}.svc.cluster.local`;
    // A headless Service's name answers with the pods' own addresses: every port of the pod is
    // reached through it, not only the Service's ports.
    if (svc.spec.clusterIP === 'None') for (const [number, local] of podMap) services.set(`${base}:${number}`, `127.0.0.1:${local}`);
    for (const p of svc.spec.ports as Obj[]) {
      const number = containerPort(target.spec.template, (p.targetPort ?? p.port) as number | string);
      const local = podMap.get(number);
      if (local === undefined) throw new Error(`Service ${svc.metadata.name} port ${p.port}: pod port ${number} is not used`);
      if (svc.spec.clusterIP !== 'None') services.set(`${base}:${p.port}`, `127.0.0.1:${local}`);
    }
  }
  return { pods, services };
}

/** A cluster `NAME:PORT` as its loopback address, or undefined when `value` names none. */
function serviceAddress(cluster: Cluster, value: string, note: (s: string) => void): string | undefined {
  const m = /^(.+):(\d+)$/.exec(value);
  if (!m || !CLUSTER_NAME.test(m[1]!)) return undefined;
  const local = cluster.services.get(value);
  if (!local) throw new Error(`${value}: no Service of the manifests answers it`);
  note(`${value} → ${local} (cluster DNS and Service)`);
  return local;
}

/** ConfigMap records with the cluster's Service names replaced by their loopback addresses. */
export function recordsToLoopback(text: string, cluster: Cluster, note: (s: string) => void): string {
  const docs = jsyaml.loadAll(text).filter((d) => d !== null && d !== undefined) as Obj[];
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') return serviceAddress(cluster, v, note) ?? v;
    if (Array.isArray(v)) return v.map(walk);
    if (v !== null && typeof v === 'object') return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, walk(x)]));
    return v;
  };
  const out = docs.map((doc) => {
    const tags = (doc.tags ?? {}) as Record<string, unknown>;
    for (const [key, host] of Object.entries(tags)) {
      // svc/rateLimitAddress + svc/rateLimitPort (and externalAuth's): a host and a port apart.
      const m = /^(.+)Address$/.exec(key);
      if (!m || typeof host !== 'string' || !CLUSTER_NAME.test(host)) continue;
      const port = tags[`${m[1]}Port`] ?? 443;
      const local = serviceAddress(cluster, `${host}:${String(port)}`, note)!;
      const [lh, lp] = local.split(':');
      tags[key] = lh;
      tags[`${m[1]}Port`] = Number(lp);
    }
    return walk(doc);
  });
  const result = out.map((d) => jsyaml.dump(d, { lineWidth: -1 })).join('---\n');
  if (result.includes('.svc.cluster.local')) throw new Error(`records still name a cluster address:\n${result}`);
  return result;
}

/** A folder as the kubelet writes a ConfigMap or Secret volume. */
export function kubeletVolume(root: string, files: Record<string, string>): void {
  const version = '..2026_01_01_00_00_00.000000001';
  mkdirSync(path.join(root, version), { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(root, version, name), text, { mode: 0o440 });
  symlinkSync(version, path.join(root, '..data'));
  for (const name of Object.keys(files)) symlinkSync(path.join('..data', name), path.join(root, name));
}

export interface PodProcessPlan {
  readonly argv: readonly string[];
  readonly env: Record<string, string>;
  readonly podName: string;
  /** The loopback ports of this pod. */
  readonly ports: Map<number, number>;
  /** The probes' URLs on loopback. */
  readonly readiness: string | undefined;
  readonly liveness: string | undefined;
  readonly substitutions: readonly string[];
}

export interface PodInputs {
  readonly configMaps: ReadonlyMap<string, Obj>;
  readonly secrets: ReadonlyMap<string, SecretFiles>;
  /** Images by name as the manifests write them: their ENTRYPOINT and CMD. */
  readonly images: ReadonlyMap<string, Pick<Image, 'entrypoint' | 'cmd'>>;
}

/** What one container of `deployment` runs here; its volumes are made now and removed at teardown. */
export function planContainer(t: { teardown(fn: () => unknown): void }, deployment: Obj, containerName: string, cluster: Cluster, inputs: PodInputs): PodProcessPlan {
  const pod = deployment.spec.template as Obj;
  const container = (pod.spec.containers as Obj[]).find((c) => c.name === containerName);
  if (!container) throw new Error(`${deployment.metadata.name}: no container ${containerName}`);
  const notes: string[] = [];
  const note = (s: string): void => void notes.push(s);
  const ports = cluster.pods.get(deployment.metadata.name as string)!;
  const podName = `${deployment.metadata.name}-5d8f7c9b4-x2k4q`;
  // Volumes as folders.
  const mounts: { mountPath: string; dir: string }[] = [];
  for (const m of (container.volumeMounts ?? []) as Obj[]) {
    const volume = (pod.spec.volumes as Obj[]).find((v) => v.name === m.name);
    if (!volume) throw new Error(`volume ${m.name} is mounted but not defined`);
    const dir = mkdtempSync(path.join(tmpdir(), `svcproxy-vol-${m.name}-`));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    if (volume.configMap) {
      const cm = inputs.configMaps.get(volume.configMap.name as string);
      if (!cm) throw new Error(`ConfigMap ${volume.configMap.name} is not in the manifests`);
      const data = Object.fromEntries(Object.entries(cm.data as Record<string, string>).map(([k, v]) => [k, v.includes('.svc.cluster.local') ? recordsToLoopback(v, cluster, note) : v]));
      kubeletVolume(dir, data);
    } else if (volume.secret) {
      const files = inputs.secrets.get(volume.secret.secretName as string);
      if (!files) throw new Error(`Secret ${volume.secret.secretName}: the test has no stand-in for it`);
      kubeletVolume(dir, files);
      note(`Secret ${volume.secret.secretName} → test certificates made by openssl`);
    } else if (!volume.emptyDir) {
      throw new Error(`volume ${m.name}: only configMap, secret and emptyDir volumes are emulated`);
    }
    note(`${m.mountPath} → ${dir}`);
    mounts.push({ mountPath: m.mountPath as string, dir });
  }
  const image = inputs.images.get(container.image as string);
  if (!image) throw new Error(`image ${container.image}: the test does not know its ENTRYPOINT`);
  const argv = [...((container.command as string[] | undefined) ?? image.entrypoint), ...((container.args as string[] | undefined) ?? (container.command ? [] : image.cmd))].map((arg) => {
    const mount = mounts.find((m) => arg === m.mountPath || arg.startsWith(`${m.mountPath}/`));
    if (mount) return mount.dir + arg.slice(mount.mountPath.length);
    const local = /^(.+):(\d+)$/.exec(arg);
    if (local && LOCAL_HOSTS.has(local[1]!)) {
      const to = `127.0.0.1:${ports.get(Number(local[2]))!}`;
      note(`${arg} → ${to} (the pod's port on loopback)`);
      return to;
    }
    const url = /^([a-z]+:\/\/)([^/]+)(.*)$/.exec(arg);
    const service = url ? serviceAddress(cluster, url[2]!, note) : serviceAddress(cluster, arg, note);
    if (service !== undefined) return url ? `${url[1]}${service}${url[3]}` : service;
    return arg;
  });
  const env: Record<string, string> = { HOSTNAME: podName };
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^(SVC|SVCPROXY)_/.test(k) && k !== 'HOSTNAME') env[k] = v;
  for (const e of (container.env ?? []) as Obj[]) {
    if (typeof e.value === 'string') env[e.name as string] = e.value;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.name') env[e.name as string] = podName;
    else if (e.valueFrom?.fieldRef?.fieldPath === 'metadata.namespace') env[e.name as string] = deployment.metadata.namespace as string;
    else throw new Error(`env ${e.name}: not emulated here`);
  }
  const probe = (p: Obj | undefined): string | undefined => {
    if (!p?.httpGet) return undefined;
    const port = ports.get(containerPort(pod, p.httpGet.port as number | string));
    return `http://127.0.0.1:${port}${p.httpGet.path as string}`;
  };
  return { argv, env, podName, ports, readiness: probe(container.readinessProbe), liveness: probe(container.livenessProbe), substitutions: notes };
}
