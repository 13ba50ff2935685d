/**
 * Tracing settings compiled from a snapshot, once per (re)load: for every workload whose GVC traces
 * (its own `spec.tracing`, else the org's) and that is not `svc/tracingDisabled`, which exporter its
 * spans go to and the attributes every one of its spans carries. Exporters are keyed by what makes
 * them distinct (protocol, URL, authorization, sampling), so GVCs that share a collector share one
 * tracer. Nothing here fails: a GVC whose provider cannot be used (controlplane without
 * `--tracing-collector`, a credentials secret link that cannot be read) is left untraced and the
 * reason is returned in `notes` for the caller to log once.
 *
 * Provider precedence (the platform allows several members at once): `provider.otel`, then a
 * tracing-vendor member of `provider`, then the legacy `spec.tracing.<vendor>`, then
 * `provider.controlplane`.
 */
import type { Snapshot, TracingModel } from '../config/model.js';
import { isObject } from '../config/schema.js';
import { parseHostPort } from '../config/values.js';

export interface ExporterSpec {
  /** Identity of the exporter and of its tracer. */
  readonly key: string;
  /** `grpc`: OTLP/gRPC (`host:port`, plaintext); `http`: OTLP/HTTP with protobuf bodies. */
  readonly protocol: 'grpc' | 'http';
  /** grpc: `http://host:port`; http: the full URL of the traces endpoint. */
  readonly url: string;
  /** `authorization` header (HTTP) or metadata (gRPC), from a vendor member's `credentials`. */
  readonly authorization?: string;
  /** Sampling ratio (0–1) for requests that arrive without a decision. */
  readonly ratio: number;
}

export interface WorkloadTracing {
  readonly exporter: string;
  /** Custom tags, then `<vendor>.workload` and `<vendor>.gvc` (ours win over a custom tag of that name). */
  readonly attributes: Readonly<Record<string, string>>;
}

export interface TracingPlan {
  readonly exporters: ReadonlyMap<string, ExporterSpec>;
  /** Keyed by workload key (`gvc/name`); a workload that is not traced is absent. */
  readonly workloads: ReadonlyMap<string, WorkloadTracing>;
  /** Why a GVC that asks for tracing is not traced; each is logged once. */
  readonly notes: readonly string[];
}

export interface TracingPlanOptions {
  /** `--tracing-collector HOST:PORT` (or an OTLP/HTTP URL): where `provider.controlplane` sends spans. */
  readonly collector?: string;
}

const OWN_MEMBERS = new Set(['sampling', 'customTags', 'provider']);
const PROVIDER_OWN = new Set(['otel', 'controlplane']);

/** An OTLP endpoint → protocol and URL (DESIGN §7): `host:port` is gRPC, a URL is HTTP (`/v1/traces` when no path). */
export function exporterTarget(endpoint: string): { protocol: 'grpc' | 'http'; url: string } | undefined {
  const s = endpoint.trim();
  const hp = parseHostPort(s);
  if (hp) return { protocol: 'grpc', url: `http://${hp.host.includes(':') ? `[${hp.host}]` : hp.host}:${hp.port}` };
  if (!/^https?:\/\//i.test(s)) return undefined;
  let url: URL;
  try {
    url = new URL(s);
  } catch {
    return undefined;
  }
  if (url.pathname === '' || url.pathname === '/') url.pathname = '/v1/traces';
  return { protocol: 'http', url: url.toString() };
}

/**
 * The `authorization` value for a vendor member's `credentials`: sent as written when it names its
 * scheme (`Bearer xyz`, `Basic ...`), else as a bearer token. A secret link cannot be read here
 * (secrets are not records svcproxy reads), so it yields `undefined` and a note.
 */
export function authorizationValue(credentials: string): { value?: string; note?: string } {
  const c = credentials.trim();
  if (c === '') return {};
  if (c.startsWith('//secret/') || /^\/org\/[^/]+\/secret\//.test(c)) {
    return { note: `credentials ${c} is a secret link, which svcproxy cannot read; spans are sent without authorization` };
  }
  return { value: /\s/.test(c) ? c : `Bearer ${c}` };
}

interface Endpoint {
  readonly endpoint: string;
  readonly credentials?: string;
  readonly source: string;
}

/** Which endpoint a `spec.tracing` names, by the precedence above; a string is a reason not to trace. */
export function tracingEndpoint(tracing: TracingModel, collector: string | undefined): Endpoint | string {
  if (tracing.otelEndpoint) return { endpoint: tracing.otelEndpoint, source: 'provider.otel' };
  const raw = isObject(tracing.raw) ? tracing.raw : {};
  const provider = isObject(raw.provider) ? raw.provider : {};
  const vendorMember = (owner: Record<string, unknown>, skip: Set<string>, at: string): Endpoint | undefined => {
    for (const [name, value] of Object.entries(owner)) {
      if (skip.has(name) || !isObject(value) || typeof value.endpoint !== 'string') continue;
      return { endpoint: value.endpoint, ...(typeof value.credentials === 'string' ? { credentials: value.credentials } : {}), source: `${at}.${name}` };
    }
    return undefined;
  };
  const vendor = vendorMember(provider, PROVIDER_OWN, 'provider') ?? vendorMember(raw, OWN_MEMBERS, 'tracing');
  if (vendor) return vendor;
  if (tracing.controlplane) {
    return collector ? { endpoint: collector, source: 'provider.controlplane' } : 'provider.controlplane needs --tracing-collector HOST:PORT';
  }
  return 'no provider (otel, a tracing vendor or controlplane)';
}

/** Sampling percentage → ratio, clamped to 0–1 (validation already bounds it to 0–100). */
function ratioOf(sampling: number): number {
  if (!Number.isFinite(sampling)) return 1;
  return Math.min(Math.max(sampling / 100, 0), 1);
}

export function compileTracingPlan(snapshot: Snapshot, opts: TracingPlanOptions = {}): TracingPlan {
  const vendor = snapshot.settings.vendor;
  const disabledTag = `${vendor}/tracingDisabled`;
  const exporters = new Map<string, ExporterSpec>();
  const byGvc = new Map<string, ExporterSpec | undefined>();
  const notes: string[] = [];
  for (const gvc of snapshot.gvcs.values()) {
    const tracing = gvc.tracing;
    if (!tracing) continue;
    const endpoint = tracingEndpoint(tracing, opts.collector);
    if (typeof endpoint === 'string') {
      notes.push(`gvc ${gvc.name}: tracing is configured but ${endpoint}; not tracing`);
      byGvc.set(gvc.name, undefined);
      continue;
    }
    const target = exporterTarget(endpoint.endpoint);
    if (!target) {
      notes.push(`gvc ${gvc.name}: ${endpoint.source} endpoint ${JSON.stringify(endpoint.endpoint)} is neither host:port nor an http(s) URL; not tracing`);
      byGvc.set(gvc.name, undefined);
      continue;
    }
    const auth = endpoint.credentials === undefined ? {} : authorizationValue(endpoint.credentials);
    if (auth.note) notes.push(`gvc ${gvc.name}: ${endpoint.source} ${auth.note}`);
    const ratio = ratioOf(tracing.sampling);
    const key = `${target.protocol} ${target.url} ${auth.value ?? ''} ${ratio}`;
    const spec: ExporterSpec = exporters.get(key) ?? Object.freeze({ key, ...target, ...(auth.value ? { authorization: auth.value } : {}), ratio });
    exporters.set(key, spec);
    byGvc.set(gvc.name, spec);
  }
  const workloads = new Map<string, WorkloadTracing>();
  // No GVC traces (the common case): no pass over every workload for each change.
  if (exporters.size === 0) return { exporters, workloads, notes };
  for (const w of snapshot.workloads.values()) {
    const spec = byGvc.get(w.gvc);
    if (!spec || w.tags[disabledTag] === 'true') continue;
    const tags = snapshot.gvcs.get(w.gvc)?.tracing?.customTags ?? {};
    workloads.set(w.key, Object.freeze({
      exporter: spec.key,
      attributes: Object.freeze({ ...tags, [`${vendor}.workload`]: w.name, [`${vendor}.gvc`]: w.gvc }),
    }));
  }
  return { exporters, workloads, notes };
}
