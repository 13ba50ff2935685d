/**
 * Access-log service settings compiled from a snapshot, once per (re)load: for each workload, the
 * `envoy.access_loggers.http_grpc` entries of its GVC's and its own `spec.sidecar.envoy.accessLog[]`
 * that do not exclude it, each resolved to gRPC targets through the named cluster of `clusters[]`
 * (`STATIC`, `STRICT_DNS` or `LOGICAL_DNS` with `load_assignment` socket addresses; a cluster that
 * excludes the workload does not count). `google_grpc.target_uri` is accepted in place of a cluster.
 * A cluster's `envoy.transport_sockets.tls` makes the stream TLS (its `sni`, `trusted_ca` and client
 * certificate, read here: files are read on every load). Entries that cannot be used (unknown
 * cluster, no endpoint, `EDS`, a transport socket or TLS option svcproxy cannot honour, an unreadable
 * file, a key that is not the certificate's) are skipped
 * with a note the caller logs once, never sent in plaintext instead. No sockets here.
 */
import { X509Certificate, createHash, createPrivateKey, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { SidecarEnvoyModel, Snapshot, WorkloadModel } from '../config/model.js';
import { workloadRef } from '../config/links.js';
import { isObject } from '../config/schema.js';
import { TLS_TRANSPORT_SOCKET } from '../config/validate-common.js';
import { parseDuration } from '../config/values.js';

export const HTTP_GRPC_LOGGER = 'envoy.access_loggers.http_grpc';
/** Envoy's defaults for `buffer_flush_interval` and `buffer_size_bytes`. */
export const DEFAULT_FLUSH_MS = 1000;
export const DEFAULT_BUFFER_BYTES = 16 * 1024;

export interface AccessLogSpec {
  /** Identity of the stream: one per workload, log name, targets and batching. */
  readonly key: string;
  /** Workload key (`gvc/name`). */
  readonly workload: string;
  readonly workloadName: string;
  readonly gvc: string;
  readonly logName: string;
  /** gRPC targets (`host:port`), tried in order. */
  readonly targets: readonly string[];
  /** The cluster's `envoy.transport_sockets.tls`: connect with TLS; absent: plaintext. */
  readonly tls?: AccessLogTls;
  readonly flushMs: number;
  readonly bufferBytes: number;
  /** Lower-case header names. */
  readonly requestHeaders: readonly string[];
  readonly responseHeaders: readonly string[];
  readonly responseTrailers: readonly string[];
}

export interface AccessLogTls {
  /** PEM of `validation_context.trusted_ca`; absent: the system's public roots. */
  readonly ca?: string;
  /** `sni`: the server name sent and the name the certificate must carry (else the target's host). */
  readonly sni?: string;
  /** PEM of the client certificate (`tls_certificates[0]`) and its key, for servers that ask for one. */
  readonly cert?: string;
  readonly key?: string;
}

export interface AccessLogPlan {
  readonly specs: ReadonlyMap<string, AccessLogSpec>;
  /** Workload key → its access logs; workloads without any are absent. */
  readonly workloads: ReadonlyMap<string, readonly AccessLogSpec[]>;
  readonly notes: readonly string[];
}

interface Held<T> {
  readonly value: T;
  /** GVC of the record that holds it (for `//workload/NAME` links). */
  readonly gvc: string;
}

function list(envoy: SidecarEnvoyModel | undefined, member: string): unknown[] {
  const v = envoy?.[member];
  return Array.isArray(v) ? v : [];
}

/** Does `excludedWorkloads` (names or workload links) name this workload? */
export function excludes(excluded: unknown, workload: WorkloadModel, holderGvc: string): boolean {
  if (!Array.isArray(excluded)) return false;
  for (const item of excluded) {
    if (typeof item !== 'string') continue;
    if (!item.includes('/')) {
      if (item === workload.name) return true;
      continue;
    }
    const ref = workloadRef(item, holderGvc);
    if (ref && ref.name === workload.name && (ref.gvc ?? workload.gvc) === workload.gvc) return true;
  }
  return false;
}

/** A protobuf Duration as written in config (`"1s"`, `"0.5s"`, `{seconds, nanos}`) → ms. */
export function durationMs(value: unknown): number | undefined {
  if (typeof value === 'string' || typeof value === 'number') return parseDuration(value);
  if (isObject(value)) {
    const seconds = Number(value.seconds ?? 0);
    const nanos = Number(value.nanos ?? 0);
    if (Number.isFinite(seconds) && Number.isFinite(nanos)) return seconds * 1000 + nanos / 1e6;
  }
  return undefined;
}

function hostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** `load_assignment.endpoints[].lb_endpoints[].endpoint.address.socket_address` → `host:port` list. */
export function clusterTargets(cluster: Record<string, unknown>): string[] {
  const out: string[] = [];
  const assignment = isObject(cluster.load_assignment) ? cluster.load_assignment : {};
  for (const locality of Array.isArray(assignment.endpoints) ? assignment.endpoints : []) {
    if (!isObject(locality)) continue;
    for (const lb of Array.isArray(locality.lb_endpoints) ? locality.lb_endpoints : []) {
      const endpoint = isObject(lb) && isObject(lb.endpoint) ? lb.endpoint : undefined;
      const address = endpoint && isObject(endpoint.address) ? endpoint.address : undefined;
      const socket = address && isObject(address.socket_address) ? address.socket_address : undefined;
      if (!socket || typeof socket.address !== 'string') continue;
      const port = Number(socket.port_value);
      if (Number.isInteger(port) && port > 0 && port < 65536) out.push(hostPort(socket.address, port));
    }
  }
  return out;
}

function headerNames(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string' && v !== '').map((v) => v.toLowerCase()) : [];
}

/** How a CA file is read (tests pass their own). */
export type ReadFile = (path: string) => string;

const readText: ReadFile = (path) => readFileSync(path, 'utf8');

/**
 * A cluster's `transport_socket` (shape already validated at load): `undefined` for plaintext (none,
 * or `raw_buffer`), the TLS settings for `envoy.transport_sockets.tls`, or a reason it cannot be used
 * (another socket, client certificates, a CA from SDS, an unreadable CA file).
 */
export function clusterTls(cluster: Record<string, unknown>, readFile: ReadFile = readText): AccessLogTls | undefined | { problem: string } {
  const socket = cluster.transport_socket;
  if (!isObject(socket)) return undefined;
  if (socket.name === 'envoy.transport_sockets.raw_buffer') return undefined;
  if (socket.name !== TLS_TRANSPORT_SOCKET) return { problem: `transport_socket ${JSON.stringify(socket.name)} is not supported (only ${TLS_TRANSPORT_SOCKET})` };
  const context = isObject(socket.typed_config) ? socket.typed_config : {};
  const common = isObject(context.common_tls_context) ? context.common_tls_context : {};
  if (common.tls_certificate_sds_secret_configs !== undefined) {
    return { problem: 'transport_socket: client certificates from SDS (tls_certificate_sds_secret_configs) are not supported' };
  }
  if (common.validation_context_sds_secret_config !== undefined || common.combined_validation_context !== undefined) {
    return { problem: 'transport_socket: only common_tls_context.validation_context.trusted_ca is supported for the CA' };
  }
  const out: { ca?: string; sni?: string; cert?: string; key?: string } = {};
  if (typeof context.sni === 'string' && context.sni !== '') out.sni = context.sni;
  const validation = isObject(common.validation_context) ? common.validation_context : {};
  const ca = readDataSource(validation.trusted_ca, 'trusted_ca', readFile);
  if (typeof ca === 'object') return ca;
  if (ca !== undefined) out.ca = ca;
  const certificates = Array.isArray(common.tls_certificates) ? common.tls_certificates : [];
  const certificate = isObject(certificates[0]) ? certificates[0] : undefined;
  if (certificate) {
    const cert = readDataSource(certificate.certificate_chain, 'tls_certificates[0].certificate_chain', readFile);
    if (typeof cert === 'object') return cert;
    const key = readDataSource(certificate.private_key, 'tls_certificates[0].private_key', readFile);
    if (typeof key === 'object') return key;
    if (cert === undefined || key === undefined) return { problem: 'transport_socket: a client certificate needs both certificate_chain and private_key' };
    const unusable = certificateProblem(cert, key);
    if (unusable) return { problem: `transport_socket: tls_certificates[0]: ${unusable}` };
    out.cert = cert;
    out.key = key;
  }
  return out;
}

/** Why a PEM certificate chain and private key cannot be used together, or `undefined`. */
function certificateProblem(cert: string, key: string): string | undefined {
  let certificate: X509Certificate;
  let privateKey: KeyObject;
  try {
    certificate = new X509Certificate(cert);
  } catch (err) {
    return `certificate_chain is not a PEM certificate (${(err as Error).message})`;
  }
  try {
    privateKey = createPrivateKey(key);
  } catch (err) {
    return `private_key is not a PEM private key (${(err as Error).message})`;
  }
  return certificate.checkPrivateKey(privateKey) ? undefined : 'private_key does not belong to the certificate';
}

/** A PEM's SHA-256 (hex) for a plan's key; '' when absent. */
function digest(pem: string | undefined): string {
  return pem === undefined ? '' : createHash('sha256').update(pem).digest('hex');
}

/** Envoy's `DataSource` (a file, inline text or base64 bytes) as text; `undefined` when absent. */
function readDataSource(source: unknown, name: string, readFile: ReadFile): string | undefined | { problem: string } {
  if (!isObject(source)) return undefined;
  if (typeof source.inline_string === 'string') return source.inline_string;
  if (typeof source.inline_bytes === 'string') return Buffer.from(source.inline_bytes, 'base64').toString('utf8');
  if (typeof source.filename !== 'string') return undefined;
  try {
    return readFile(source.filename);
  } catch (err) {
    return { problem: `transport_socket: cannot read ${name} ${JSON.stringify(source.filename)}: ${(err as Error).message}` };
  }
}

export function compileAccessLogPlan(snapshot: Snapshot, readFile: ReadFile = readText): AccessLogPlan {
  const specs = new Map<string, AccessLogSpec>();
  const workloads = new Map<string, AccessLogSpec[]>();
  const notes = new Set<string>();
  for (const w of snapshot.workloads.values()) {
    const gvcEnvoy = snapshot.gvcs.get(w.gvc)?.sidecarEnvoy;
    // Most workloads log nothing: a change of one of 10,000 makes no list for each of the others.
    if (gvcEnvoy === undefined && w.sidecarEnvoy === undefined) continue;
    const entries: Held<unknown>[] = [
      ...list(gvcEnvoy, 'accessLog').map((value) => ({ value, gvc: w.gvc })),
      ...list(w.sidecarEnvoy, 'accessLog').map((value) => ({ value, gvc: w.gvc })),
    ];
    if (entries.length === 0) continue;
    // The workload's own clusters first, so one of the same name overrides the GVC's.
    const clusters: Held<Record<string, unknown>>[] = [...list(w.sidecarEnvoy, 'clusters'), ...list(gvcEnvoy, 'clusters')]
      .filter(isObject)
      .map((value) => ({ value, gvc: w.gvc }));
    const mine: AccessLogSpec[] = [];
    for (const { value: entry, gvc } of entries) {
      if (!isObject(entry) || excludes(entry.excludedWorkloads, w, gvc)) continue;
      if (entry.name !== undefined && entry.name !== HTTP_GRPC_LOGGER) continue;
      const typed = isObject(entry.typed_config) ? entry.typed_config : {};
      const common = isObject(typed.common_config) ? typed.common_config : {};
      const service = isObject(common.grpc_service) ? common.grpc_service : {};
      const logName = typeof common.log_name === 'string' ? common.log_name : '';
      const where = `accessLog ${JSON.stringify(logName)} of ${w.key}`;
      let targets: string[] = [];
      let tls: AccessLogTls | undefined;
      if (isObject(service.envoy_grpc) && typeof service.envoy_grpc.cluster_name === 'string') {
        const name = service.envoy_grpc.cluster_name;
        const cluster = clusters.find((c) => c.value.name === name && !excludes(c.value.excludedWorkloads, w, c.gvc));
        if (!cluster) {
          notes.add(`${where}: no cluster ${JSON.stringify(name)} in sidecar.envoy.clusters for this workload; not logging`);
          continue;
        }
        const type = typeof cluster.value.type === 'string' ? cluster.value.type : 'STATIC';
        if (type === 'EDS' || type === 'ORIGINAL_DST') {
          notes.add(`${where}: cluster ${JSON.stringify(name)} is ${type}, which svcproxy cannot resolve; not logging`);
          continue;
        }
        targets = clusterTargets(cluster.value);
        if (targets.length === 0) {
          notes.add(`${where}: cluster ${JSON.stringify(name)} has no load_assignment socket address; not logging`);
          continue;
        }
        const found = clusterTls(cluster.value, readFile);
        if (found && 'problem' in found) {
          notes.add(`${where}: cluster ${JSON.stringify(name)}: ${found.problem}; not logging`);
          continue;
        }
        tls = found;
      } else if (isObject(service.google_grpc) && typeof service.google_grpc.target_uri === 'string') {
        targets = [service.google_grpc.target_uri];
      } else {
        notes.add(`${where}: grpc_service names no envoy_grpc.cluster_name; not logging`);
        continue;
      }
      const flushMs = durationMs(common.buffer_flush_interval) ?? DEFAULT_FLUSH_MS;
      const bufferBytes = typeof common.buffer_size_bytes === 'number' ? common.buffer_size_bytes : DEFAULT_BUFFER_BYTES;
      const tlsKey = tls && [tls.sni ?? '', digest(tls.ca), digest(tls.cert), digest(tls.key)];
      const key = JSON.stringify([w.key, logName, targets, flushMs, bufferBytes, tlsKey ?? null]);
      const spec: AccessLogSpec = specs.get(key) ?? Object.freeze({
        key,
        workload: w.key,
        workloadName: w.name,
        gvc: w.gvc,
        logName,
        targets: Object.freeze(targets),
        ...(tls ? { tls: Object.freeze(tls) } : {}),
        flushMs: flushMs > 0 ? flushMs : DEFAULT_FLUSH_MS,
        bufferBytes: Math.max(0, bufferBytes),
        requestHeaders: Object.freeze(headerNames(typed.additional_request_headers_to_log)),
        responseHeaders: Object.freeze(headerNames(typed.additional_response_headers_to_log)),
        responseTrailers: Object.freeze(headerNames(typed.additional_response_trailers_to_log)),
      });
      specs.set(key, spec);
      if (!mine.includes(spec)) mine.push(spec);
    }
    if (mine.length > 0) workloads.set(w.key, mine);
  }
  return { specs, workloads, notes: [...notes] };
}
