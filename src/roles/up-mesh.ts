/**
 * The mesh under `svcproxy up` (DESIGN §9). A local CA kept in `.svcproxy/ca/` (created once, reused
 * across runs) issues every replica the supervisor starts its own ECDSA P-256 key and certificate for
 * its workload's identity, renewed at two thirds of `--mesh-cert-ttl` (default 24 h). Each replica
 * gets, in this process, on loopback: its sidecar's mTLS listener (other replicas' calls arrive
 * there, meet its internal firewall and its filters, then its app) and its own outbound listener
 * (an explicit HTTP proxy its processes find in `HTTP_PROXY`/`HTTPS_PROXY`: internal names go out
 * over mTLS with its certificate, sibling containers by name, everything else is egress). The host's
 * `--mesh` listener calls as `spiffe://ORG/ingress`: a member of the org outside every workload,
 * which only `same-org` admits. With `up`'s platform API (src/local/api) each outbound listener
 * also answers `SVC_ENDPOINT`'s name itself, as its replica's workload.
 */
import type { Logger } from 'pino';
import type { Clock } from '../deps.js';
import { LocalCa, issuedCredentials, workloadUri, type CredentialSource } from '../mesh/index.js';
import { listen, type Listener } from '../listener/index.js';
import { MeshTlsClient } from '../proxy/mesh-tls.js';
import type { MeshInbound, OutboundCaller } from '../proxy/mesh-peer.js';
import type { ReplicaMesh, ReplicaMeshes } from '../local/supervisor.js';
import type { ReplicaPlan } from '../local/plan.js';
import type { HostPort } from '../routing/replicas.js';
import { startMeshInbound, type Runtime } from './runtime.js';
import type { PlatformApi } from '../local/api/index.js';
import { endpointVariable } from '../local/env.js';

export const DEFAULT_CERT_TTL_MS = 24 * 3600 * 1000;

/** The identity of callers outside every workload (the host's mesh listener). */
export function outsideUri(org: string): string {
  return `spiffe://${org}/ingress`;
}

/**
 * What NO_PROXY holds: the loopback addresses, and `localhost` only when no endpoint domain is a
 * `*.localhost` name (proxy clients read `localhost` as every name under it too, which would send
 * `W.GVC.internal.localhost` around the mesh).
 */
export function noProxy(domains: readonly string[]): string {
  const underLocalhost = domains.some((d) => d === 'localhost' || d.endsWith('.localhost'));
  return underLocalhost ? '127.0.0.1,::1' : 'localhost,127.0.0.1,::1';
}

/**
 * The proxy variables of a process whose calls go through the outbound listener at `proxy`
 * (`http://HOST:PORT`), in both spellings (curl reads only the lower-case `http_proxy`; Go and Python
 * either), with `noProxy(domains)`. What `up` gives its replicas, and what the Kubernetes manifest's
 * app container has (test/deploy checks it against this).
 */
export function proxyVariables(proxy: string, domains: readonly string[]): Record<string, string> {
  const none = noProxy(domains);
  return { HTTP_PROXY: proxy, http_proxy: proxy, HTTPS_PROXY: proxy, https_proxy: proxy, NO_PROXY: none, no_proxy: none };
}

export class UpMesh implements ReplicaMeshes {
  private runtime: Runtime | undefined;
  /** The platform API the replicas' outbound listeners answer for (set before any replica starts). */
  api: PlatformApi | undefined;

  private constructor(
    private readonly ca: LocalCa,
    readonly org: string,
    private readonly ttlMs: number,
    private readonly deps: { clock: Clock; logger: Logger },
    /** The host `--mesh` listener's identity. */
    readonly outside: CredentialSource,
  ) {}

  static async open(opts: { dir: string; org: string; ttlMs: number; clock: Clock; logger: Logger }): Promise<UpMesh> {
    const deps = { clock: opts.clock, logger: opts.logger.child({ component: 'mesh' }) };
    const ca = await LocalCa.open(opts.dir, { org: opts.org, clock: opts.clock, logger: deps.logger });
    const outside = await issuedCredentials(ca, outsideUri(opts.org), opts.ttlMs, deps);
    return new UpMesh(ca, opts.org, opts.ttlMs, deps, outside);
  }

  /** The runtime whose data plane serves the replicas' listeners (set once it started). */
  bind(runtime: Runtime): void {
    this.runtime = runtime;
  }

  async attach(plan: ReplicaPlan, replica: { readonly ports: ReadonlyMap<number, HostPort>; sibling(container: string, port: number): HostPort | undefined }): Promise<ReplicaMesh> {
    const runtime = this.runtime!;
    const { workload, location } = plan;
    const uri = workloadUri(runtime.dataplane.org, workload.gvc, workload.name);
    const credentials = await issuedCredentials(this.ca, uri, this.ttlMs, this.deps);
    const tls = new MeshTlsClient(credentials, () => runtime.metrics.meshHandshakes.inc({ side: 'client' }));
    const identity: MeshInbound = {
      workload: workload.key,
      location: location.name,
      replica: plan.name,
      index: plan.index,
      uri: () => credentials.current().uri,
      app: (port) => replica.ports.get(port),
    };
    const listeners: Listener[] = [];
    const detach = async (): Promise<void> => {
      for (const l of listeners) {
        await l.stopAccepting();
        l.destroy();
      }
      runtime.dataplane.releaseCaller(tls);
      if (listeners[0]) runtime.dataplane.forgetMesh(listeners[0].address);
      tls.close();
      credentials.close();
    };
    try {
      listeners.push(await startMeshInbound('127.0.0.1:0', identity, credentials, runtime));
      const caller: OutboundCaller = { workload: workload.key, gvc: workload.gvc, tls, sibling: (c, p) => replica.sibling(c, p) };
      const api = this.api;
      const outbound = await listen({
        host: '127.0.0.1', port: 0,
        handlers: (bound) => {
          const handlers = runtime.dataplane.meshHandlers({ port: bound.address.port }, caller);
          return api ? api.wrap(handlers, { workload: workload.key, replica: plan.name }) : handlers;
        },
        ...(runtime.opts.limits ? { limits: runtime.opts.limits } : {}),
      });
      listeners.push(outbound);
    } catch (err) {
      await detach();
      throw err;
    }
    const proxy = `http://127.0.0.1:${listeners[1]!.address.port}`;
    const settings = runtime.store.current.settings;
    const env: Record<string, string> = workload.mesh.bypassOutbound ? {} : proxyVariables(proxy, [settings.appDomain, settings.directDomain, settings.internalDomain]);
    // Through its own proxy the API knows the caller; a replica that bypasses it can only reach the
    // `--api` listener, where its token is from outside its workload (docs/platform-api.md).
    const endpoint = this.api && (workload.mesh.bypassOutbound ? this.api.url : this.api.endpoint());
    if (endpoint !== undefined) env[endpointVariable(settings.vendor)] = endpoint;
    return { address: listeners[0]!.address, env, detach };
  }

  close(): void {
    this.outside.close();
  }
}
