/**
 * The replicas of `deployment` records (DESIGN §8b): each registered in the replica table as source
 * `deployment` and probed, those named by DNS followed and expanded to one replica per address. A
 * reload keeps every replica it does not change (its object, readiness and probe loop); the replicas
 * it removes leave rotation at once and their pools close once their requests are over.
 */
import type { Logger } from 'pino';
import type { DeploymentReplicaModel, ProbeModel, Snapshot, WorkloadModel } from '../config/model.js';
import { changedWorkloadsOrDeployments } from '../config/changed.js';
import type { Deps } from '../deps.js';
import type { Metrics } from '../admin/metrics.js';
import { workloadTraffic, type ReplicaRegistry, type Replica, type WorkloadTraffic } from '../routing/replicas.js';
import type { DataPlane } from '../proxy/dataplane.js';
import { DEFAULT_PROBE, QuietSlots, quietWhileUnrouted, startProbing } from '../local/probe.js';
import { formatHostPort, parseHostPort } from '../address.js';
import { DnsDiscovery, dnsLookup } from '../discovery/dns.js';
import { discoveredNameOf } from '../discovery/names.js';

/**
 * A ready deployment replica whose workload has had no request routed to it yet is checked once a
 * minute instead of every period (Envoy's `no_traffic_healthy_interval` default): a router in front of
 * thousands of workloads, most of them idle, would otherwise spend a connect per replica and period.
 */
export const QUIET_PROBE_PERIOD_MS = 60_000;

/**
 * The probe of a deployment replica whose workload sets none: a TCP connect every 5 s. The first
 * probes are spread at random over a millisecond per replica, at most 10 s, so a small fleet is
 * ready at once and ten thousand replicas are dialled about 1,000 a second: spread over one second,
 * their connects took the whole second of CPU, and a router that had just turned ready answered
 * its first request a second late. A request to a workload whose replicas are still waiting for
 * that first check runs it at once (see the activator, src/proxy/activator.ts). Failures in between are
 * caught sooner by outlier ejection, which needs no probe.
 */
function deploymentProbe(random: () => number, replicas: number): ProbeModel {
  return { ...DEFAULT_PROBE, periodSeconds: 5, initialDelaySeconds: random() * Math.min(10, replicas / 1000) };
}

interface DeployedReplica {
  readonly replica: Replica;
  readonly stop: () => void;
}

interface MadeFrom {
  readonly list: readonly DeploymentReplicaModel[];
  readonly workload: WorkloadModel;
  /** No replica is named by DNS: the same list and model make the same replicas. */
  readonly fixed: boolean;
  readonly replicas: ReadonlyMap<string, DeployedReplica>;
}

/** What the deployment replicas use of their role's runtime. */
export interface DeploymentContext {
  readonly deps: Deps;
  readonly logger: Logger;
  readonly metrics: Metrics;
  readonly registry: ReplicaRegistry;
  readonly dataplane: DataPlane;
  /** The snapshot in force (applied again when a DNS answer changes). */
  readonly current: () => Snapshot;
  readonly dnsServers?: readonly string[] | undefined;
}

export class DeploymentReplicas {
  /** Per workload (key): its replicas by identity, with their probe loops, and what they were made from. */
  private readonly made = new Map<string, MadeFrom>();
  /** The snapshot applied last: the next is compared with it. */
  private last: Snapshot | undefined;
  /** Workloads (keys) some replica of which DNS names: looked at on every apply (an answer moves them). */
  private readonly unfixed = new Set<string>();
  /** Replicas of every workload in `made`. */
  private total = 0;
  /** Per deployed workload: has a request been routed to it (kept across configuration changes). */
  private readonly traffic = new Map<string, WorkloadTraffic>();
  /** Where the deployment replicas' quiet checks wait (src/local/probe.ts). */
  private readonly quietSlots: QuietSlots;
  /** Follows the DNS names of deployment replicas (DESIGN §8b); made when first needed. */
  private dns: DnsDiscovery | undefined;
  private closed = false;

  constructor(private readonly ctx: DeploymentContext) {
    this.quietSlots = new QuietSlots(ctx.deps.clock);
  }

  /** Replicas named by DNS are known (or their first lookup failed, logged). */
  async firstLookups(): Promise<void> {
    await this.dns?.firstLookups();
  }

  /**
   * Replicas of `deployment` records: registered as source `deployment` and probed. A replica whose
   * identity, addresses and probe are unchanged by a reload keeps its object, its readiness and its
   * probe loop, so a reload never takes healthy replicas out of rotation.
   */
  apply(snapshot: Snapshot): void {
    const made = this.made;
    const last = this.last;
    this.last = snapshot;
    // After the first, only the workloads whose model or deployment the change touched (config/changed.ts)
    // and those a DNS name may move are looked at: a change of one of 10,000 costs that one.
    const keys: Iterable<string> = last === undefined ? [...snapshot.deployments.keys(), ...made.keys()] : new Set([...changedWorkloadsOrDeployments(last, snapshot), ...this.unfixed]);
    const expanded = new Map<string, DeploymentReplicaModel[]>();
    const removed: string[] = [];
    const names = new Set<string>();
    let total = this.total;
    for (const key of keys) {
      const list = snapshot.deployments.get(key);
      const known = made.get(key);
      if (list === undefined || !snapshot.workloads.has(key)) {
        if (known !== undefined) removed.push(key);
        continue;
      }
      // A workload whose deployment and model are the objects its replicas were made from (compile.ts
      // reuses both when their records did not change) and that no DNS name moves keeps them as they are.
      if (known !== undefined && known.fixed && known.list === list && known.workload === snapshot.workloads.get(key)) continue;
      const out = this.expandByDns(list, names);
      expanded.set(key, out);
      total += out.length - (known?.replicas.size ?? 0);
    }
    for (const key of removed) total -= made.get(key)!.replicas.size;
    this.total = total;
    this.dns?.track(names);
    const probeDeps = { ...this.ctx.deps, registry: this.ctx.registry, logger: this.ctx.logger };
    const gone: DeployedReplica[] = [];
    for (const [key, list] of expanded) {
      // Replicas can only be kept within their workload (the identity names it).
      const before = made.get(key)?.replicas ?? new Map<string, DeployedReplica>();
      const workload = snapshot.workloads.get(key)!;
      let traffic = this.traffic.get(key);
      if (!traffic) this.traffic.set(key, (traffic = workloadTraffic()));
      const quiet = quietWhileUnrouted(traffic, QUIET_PROBE_PERIOD_MS, this.quietSlots);
      const portNumber = workload.primaryPort?.number ?? 0;
      const probe = workload.containers[0]?.readinessProbe;
      const probeIdentity = JSON.stringify(probe ?? null);
      const replicas = new Map<string, DeployedReplica>();
      for (const d of list) {
        // Not the index: a replica found by DNS keeps its object (readiness, probe, requests in
        // flight) when another address comes or goes and its place in the answer moves.
        const identity = JSON.stringify([key, d.location, d.name, d.address, d.sidecar ?? '', d.mesh ?? '', portNumber, d.forcedNotReady]) + probeIdentity;
        let deployed = before.get(identity);
        if (deployed && !replicas.has(identity)) {
          deployed.replica.index = d.index;
        } else {
          const app = parseHostPort(d.address);
          const replica: Replica = {
            workload: key,
            location: d.location,
            name: d.name,
            index: d.index,
            ports: new Map([[portNumber, app]]),
            ...(d.sidecar ? { sidecar: parseHostPort(d.sidecar) } : {}),
            ...(d.mesh ? { mesh: parseHostPort(d.mesh) } : {}),
            ready: false,
            outstanding: 0,
            ejectedUntil: 0,
            traffic,
          };
          const stop = d.forcedNotReady
            ? () => undefined
            : startProbing(replica, probe ?? deploymentProbe(this.ctx.deps.random, total), () => app, probeDeps, quiet);
          deployed = { replica, stop };
          // A duplicate identity (validation refuses one): the second is its own replica, as before.
          if (replicas.has(identity)) gone.push(replicas.get(identity)!);
        }
        replicas.set(identity, deployed);
      }
      for (const [identity, old] of before) if (replicas.get(identity) !== old) gone.push(old);
      const fixed = !snapshot.deployments.get(key)!.some((d) => discoveredNameOf(d).name !== undefined);
      made.set(key, { list: snapshot.deployments.get(key)!, workload, fixed, replicas });
      if (fixed) this.unfixed.delete(key);
      else this.unfixed.add(key);
    }
    for (const key of removed) {
      gone.push(...made.get(key)!.replicas.values());
      made.delete(key);
      this.unfixed.delete(key);
      this.traffic.delete(key);
    }
    // Gone (a record changed, or an address left its name's answer): out of rotation now; the
    // pools finish the requests in flight before they close (Upstreams.forget).
    for (const old of gone) {
      old.stop();
      const { dataplane } = this.ctx;
      const upstreams = dataplane.upstreams;
      if (old.replica.mesh) dataplane.forgetMesh(old.replica.mesh);
      if (old.replica.sidecar) upstreams.forget(old.replica.sidecar);
      else for (const address of old.replica.ports.values()) upstreams.forget(address);
    }
    // Only the workloads made again (or gone) are told to the registry, which makes only their view again.
    const changed = new Map<string, readonly Replica[]>();
    for (const key of expanded.keys()) changed.set(key, [...(made.get(key)?.replicas.values() ?? [])].map((deployed) => deployed.replica));
    for (const key of removed) changed.set(key, []);
    this.ctx.registry.replaceWorkloads('deployment', changed);
  }

  /**
   * A workload's deployment replicas with every entry named by DNS replaced by one replica per address
   * of its name's last answer (`NAME@ADDRESS`, in address order; none before the first answer), and
   * each location's replicas numbered again in that order. Collects the names into `names`.
   */
  private expandByDns(list: readonly DeploymentReplicaModel[], names: Set<string>): DeploymentReplicaModel[] {
    const out: DeploymentReplicaModel[] = [];
    const next = new Map<string, number>();
    const place = (d: DeploymentReplicaModel): void => {
      const index = next.get(d.location) ?? 0;
      next.set(d.location, index + 1);
      out.push(index === d.index ? d : { ...d, index });
    };
    for (const d of list) {
      const { name } = discoveredNameOf(d);
      if (name === undefined) {
        place(d);
        continue;
      }
      names.add(name);
      this.dns ??= this.openDns();
      for (const ip of this.dns.addresses(name) ?? []) {
        const at = (address: string | undefined): string | undefined =>
          address === undefined ? undefined : formatHostPort({ host: ip, port: parseHostPort(address).port });
        place({
          ...d,
          name: `${d.name}@${ip}`,
          address: at(d.address)!,
          ...(d.sidecar !== undefined ? { sidecar: at(d.sidecar)! } : {}),
          ...(d.mesh !== undefined ? { mesh: at(d.mesh)! } : {}),
        });
      }
    }
    return out;
  }

  /** The DNS follower, made when a deployment first names a replica by DNS. */
  private openDns(): DnsDiscovery {
    const dns = new DnsDiscovery({
      lookup: dnsLookup(this.ctx.dnsServers),
      clock: this.ctx.deps.clock,
      logger: this.ctx.logger.child({ component: 'dns' }),
      observe: (name, outcome, addresses) => this.ctx.metrics.observeDns(name, outcome, addresses),
    });
    dns.on('change', () => {
      if (!this.closed) this.apply(this.ctx.current());
    });
    return dns;
  }

  /** Every probe loop stopped, the DNS follower closed. */
  close(): void {
    this.closed = true;
    for (const known of this.made.values()) for (const d of known.replicas.values()) d.stop();
    this.made.clear();
    this.dns?.close();
  }
}
