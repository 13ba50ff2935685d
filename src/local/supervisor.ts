/**
 * The process side of `svcproxy up`: runs the replicas `planReplicas()` asks for, one process per
 * container with a `command`, each on its own free loopback ports with the platform's environment;
 * registers them in the `ReplicaRegistry` under source `up` (not ready until their probes pass);
 * keeps them running (restart with backoff, not ready while down); and on `apply()` of a reloaded
 * snapshot starts what is new, stops what is gone and restarts what changed. A replica is ready
 * when every one of its containers is. `stop()` sends SIGTERM to everything and SIGKILL after the
 * workload's `terminationGracePeriodSeconds` (capped by the caller's grace). Failures to allocate
 * ports are logged and that replica is skipped until the next `apply()`; process failures are
 * retried forever with backoff. Time and timers come from `deps.clock`.
 */
import { randomBytes } from 'node:crypto';
import type { ContainerModel, Snapshot } from '../config/model.js';
import type { Deps } from '../deps.js';
import type { HostPort, Replica, ReplicaRegistry } from '../routing/replicas.js';
import { buildReplicaEnv, localToken, workloadNamespace } from './env.js';
import { planReplicas, type DesiredReplicas, type ReplicaPlan } from './plan.js';
import { rolloutLimits, rolloutStep } from './rollout.js';
import { allocatePorts, layPorts, LOOPBACK } from './ports.js';
import { startProbing, type AddressOf } from './probe.js';
import { ContainerProcess, DEFAULT_BACKOFF, type BackoffOptions } from './process.js';

export const UP_SOURCE = 'up';

export interface SupervisorOptions {
  readonly registry: ReplicaRegistry;
  readonly deps: Deps;
  /** How many replicas the scaler wants per workload and location (src/local/scaler.ts); else `minScale`. */
  readonly desired?: DesiredReplicas;
  /** Inherited by every process (PATH, HOME, ...); defaults to this process's environment. */
  readonly baseEnv?: Readonly<Record<string, string | undefined>>;
  /** Restart backoff; tests shorten it. */
  readonly backoff?: Partial<BackoffOptions>;
  /** Where the processes listen; loopback by default. */
  readonly host?: string;
  /** Keys `<VENDOR>_TOKEN`; random per supervisor by default. */
  readonly tokenSecret?: string | Uint8Array;
  /** Working directory of the processes; this process's by default. */
  readonly cwd?: string;
  readonly allocatePorts?: (count: number, host: string) => Promise<number[]>;
  /** Gives each replica its place in the mesh (its listeners, identity and proxy variables). */
  readonly mesh?: ReplicaMeshes;
}

/** What the mesh gives a replica `up` starts (src/roles/up-mesh.ts). */
export interface ReplicaMesh {
  /** Its sidecar's mTLS listener. */
  readonly address: HostPort;
  /** HTTP_PROXY and friends: where its processes' outbound calls go. */
  readonly env: Readonly<Record<string, string>>;
  /** Close its listeners and stop renewing its certificate. */
  detach(): Promise<void>;
}

export interface ReplicaMeshes {
  attach(plan: ReplicaPlan, replica: { readonly ports: ReadonlyMap<number, HostPort>; sibling(container: string, port: number): HostPort | undefined }): Promise<ReplicaMesh>;
}

interface RunningContainer {
  readonly model: ContainerModel;
  readonly env: Readonly<Record<string, string>>;
  readonly process: ContainerProcess;
  readonly addressOf: AddressOf;
  ready: boolean;
  stopProbe?: () => void;
}

interface RunningReplica {
  plan: ReplicaPlan;
  readonly replica: Replica;
  readonly containers: RunningContainer[];
  retired: boolean;
  readonly mesh?: ReplicaMesh;
  /** Set by `retire()`: resolves when every process of the replica has exited. */
  stopped?: Promise<void>;
  /** When it was launched (clock ms), and whether it has been ready since: its health (src/local/health.ts). */
  readonly startedAt: number;
  wasReady: boolean;
  /** Since when it has been ready without a break (clock ms); undefined while not ready. */
  readySince?: number;
}

/** A replica as its workload's health sees it (`replicaStates()`; src/local/workloads.ts). */
export interface UpReplicaState {
  readonly replica: Replica;
  /** Removed, replaced or scaled down: its processes are being stopped. */
  readonly stopping: boolean;
  readonly wasReady: boolean;
  /** Crash restarts of its processes since it was launched. */
  readonly restarts: number;
  readonly startedAtMs: number;
  readonly workloadVersion: number;
  /** Its containers' processes: ready (probe passing), crash restarts. */
  readonly containers: readonly { readonly name: string; readonly ready: boolean; readonly restarts: number }[];
}

/** What `processes()` reports, for the CLI's summary and for tests. */
export interface ProcessInfo {
  readonly workload: string;
  readonly location: string;
  readonly replica: string;
  readonly container: string;
  readonly pid?: number;
  readonly restarts: number;
  readonly ready: boolean;
  readonly env: Readonly<Record<string, string>>;
  /** Its working directory. */
  readonly cwd: string;
}

export class Supervisor {
  private readonly registry: ReplicaRegistry;
  private readonly deps: Deps;
  private readonly host: string;
  private readonly backoff: BackoffOptions;
  private readonly baseEnv: Readonly<Record<string, string | undefined>>;
  private readonly tokenSecret: string | Uint8Array;
  private readonly allocate: (count: number, host: string) => Promise<number[]>;
  private readonly log: Deps['logger'];
  private readonly running = new Map<string, RunningReplica>();
  private readonly retiring = new Set<RunningReplica>();
  /** Per plan key: the old replica still serving while its replacement starts (a rollout's surge). */
  private readonly rolling = new Map<string, RunningReplica>();
  /** Outdated replicas remain: a replica turning ready applies the last snapshot again. */
  private rolloutPending = false;
  private lastSnapshot: Snapshot | undefined;
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  constructor(private readonly options: SupervisorOptions) {
    this.registry = options.registry;
    this.deps = options.deps;
    this.host = options.host ?? LOOPBACK;
    this.backoff = { ...DEFAULT_BACKOFF, ...options.backoff };
    // The one place this module reads process.env: the processes inherit it, as a shell would.
    this.baseEnv = options.baseEnv ?? process.env;
    this.tokenSecret = options.tokenSecret ?? randomBytes(32);
    this.allocate = options.allocatePorts ?? allocatePorts;
    this.log = this.deps.logger.child({ component: 'supervisor' });
  }

  /** Brings the running replicas in line with `snapshot`; calls are applied one after another. */
  apply(snapshot: Snapshot): Promise<void> {
    const next = this.queue.then(() => this.reconcile(snapshot));
    this.queue = next.catch(() => undefined);
    return next;
  }

  /**
   * Stops every process: SIGTERM, then SIGKILL after the workload's grace period or `graceMs`,
   * whichever is shorter. Resolves when all have exited. Later `apply()` calls do nothing.
   */
  async stop(graceMs: number = Number.POSITIVE_INFINITY): Promise<void> {
    this.closed = true;
    await this.queue;
    // Replicas retired by earlier reloads may still be stopping: hold them to the same bound.
    for (const replica of this.retiring) this.retire(replica, graceMs);
    for (const replica of [...this.running.values(), ...this.rolling.values()]) this.retire(replica, graceMs);
    this.running.clear();
    this.rolling.clear();
    this.registry.replace(UP_SOURCE, []);
    while (this.retiring.size > 0) await Promise.all([...this.retiring].map((r) => r.stopped));
  }

  /**
   * Last resort for the CLI's `process.on('exit')` handler: SIGKILL every process synchronously.
   * The processes run in their own process groups, so if svcproxy exits without `stop()` (a crash)
   * they would otherwise outlive it and keep their ports.
   */
  killNow(): void {
    this.closed = true;
    for (const r of [...this.running.values(), ...this.rolling.values(), ...this.retiring]) for (const c of r.containers) c.process.killNow();
  }

  /** The replicas currently registered, in start order. */
  replicas(): Replica[] {
    return [...this.running.values(), ...this.rolling.values()].map((r) => r.replica);
  }

  processes(): ProcessInfo[] {
    const out: ProcessInfo[] = [];
    for (const r of this.running.values()) {
      for (const c of r.containers) {
        out.push({
          workload: r.replica.workload,
          location: r.replica.location,
          replica: r.replica.name,
          container: c.model.name,
          pid: c.process.pid,
          restarts: c.process.restarts,
          ready: c.ready,
          env: c.env,
          cwd: this.options.cwd ?? process.cwd(),
        });
      }
    }
    return out;
  }

  /** The replicas running and those still stopping, for `/workloads` and the health gauge. */
  replicaStates(): UpReplicaState[] {
    const state = (r: RunningReplica, stopping: boolean): UpReplicaState => ({
      replica: r.replica,
      stopping,
      wasReady: r.wasReady,
      restarts: r.containers.reduce((n, c) => n + c.process.restarts, 0),
      startedAtMs: r.startedAt,
      workloadVersion: r.plan.workloadVersion,
      containers: r.containers.map((c) => ({ name: c.model.name, ready: c.ready, restarts: c.process.restarts })),
    });
    return [...[...this.running.values()].map((r) => state(r, false)), ...[...this.retiring].map((r) => state(r, true))];
  }

  private async reconcile(snapshot: Snapshot): Promise<void> {
    if (this.closed) return;
    this.lastSnapshot = snapshot;
    const plans = planReplicas(snapshot, this.options.desired);
    const wanted = new Map(plans.map((p) => [p.key, p]));
    for (const [key, running] of this.running) {
      const plan = wanted.get(key);
      if (plan !== undefined && plan.fingerprint === running.plan.fingerprint) {
        running.plan = plan;
        continue;
      }
      // A changed replica is replaced by the rollout below; a removed one stops now.
      if (plan !== undefined) continue;
      this.log.info({ workload: running.replica.workload, location: running.replica.location, replica: running.replica.name }, 'replica removed');
      this.running.delete(key);
      this.retire(running, Number.POSITIVE_INFINITY);
    }
    for (const [key, old] of this.rolling) {
      if (wanted.has(key)) continue;
      this.rolling.delete(key);
      this.retire(old, Number.POSITIVE_INFINITY);
    }
    this.rolloutPending = this.rollout(plans, this.deps.clock.now());
    const launched: RunningReplica[] = [];
    // `scalingPolicy: OrderedReady` (the default): replicas of a workload's location start in index
    // order, each once the ones before it are ready (a StatefulSet's order); `Parallel`: at once.
    const waitingOrder = new Set<string>();
    for (const plan of plans) {
      if (this.closed) break;
      const ordered = (plan.workload.rollout?.scalingPolicy ?? 'OrderedReady') !== 'Parallel';
      const group = `${plan.workload.key}\u0000${plan.location.name}`;
      const present = this.running.get(plan.key);
      if (present !== undefined) {
        if (ordered && !present.replica.ready) waitingOrder.add(group);
        continue;
      }
      if (ordered && waitingOrder.has(group)) {
        this.rolloutPending = true;
        continue;
      }
      if (ordered) waitingOrder.add(group);
      try {
        const running = await this.launch(plan);
        this.running.set(plan.key, running);
        launched.push(running);
      } catch (error) {
        this.log.error({ err: error, workload: plan.workload.key, location: plan.location.name, replica: plan.name }, 'replica not started');
      }
    }
    this.registry.replace(UP_SOURCE, this.replicas());
    // Start after registering, so a probe's first `setReady` lands on a listed replica.
    for (const running of launched) {
      for (const c of running.containers) c.process.start();
    }
  }

  /** Ports not handed to any running replica (the OS may return a port we just released). */
  private async freePorts(count: number): Promise<number[]> {
    const inUse = new Set<number>();
    for (const r of [...this.running.values(), ...this.rolling.values()]) for (const hp of r.replica.ports.values()) inUse.add(hp.port);
    for (let attempt = 0; ; attempt++) {
      const ports = await this.allocate(count, this.host);
      if (ports.every((p) => !inUse.has(p)) || attempt >= 4) return ports;
    }
  }

  private async launch(plan: ReplicaPlan): Promise<RunningReplica> {
    const { workload, location } = plan;
    const ports = await this.freePorts(plan.containers.reduce((n, c) => n + c.ports.length, 0));
    const layout = layPorts(plan.containers, ports, this.host);
    const { own, ports: replicaPorts } = layout;
    const mesh = await this.options.mesh?.attach(plan, layout);
    const replica: Replica = {
      workload: workload.key,
      location: location.name,
      name: plan.name,
      index: plan.index,
      ports: replicaPorts,
      ...(mesh ? { mesh: mesh.address } : {}),
      ready: false,
      // Its processes are about to start: requests wait for it (DESIGN §10) until it is ready.
      starting: true,
      outstanding: 0,
      ejectedUntil: 0,
    };
    const running: RunningReplica = { plan, replica, containers: [], retired: false, ...(mesh ? { mesh } : {}), startedAt: this.deps.clock.now(), wasReady: false };
    const namespace = workloadNamespace(workload.key);
    const token = localToken(this.tokenSecret, workload.key);

    plan.containers.forEach((container, i) => {
      const mine = own[i]!;
      const envPorts = new Map<number, number>([...[...replicaPorts].map(([n, hp]) => [n, hp.port] as const), ...mine]);
      const env = buildReplicaEnv({
        vendor: plan.vendor,
        org: plan.org,
        gvc: { name: workload.gvc, alias: plan.gvcAlias },
        location,
        workload,
        container,
        replica: plan.name,
        ports: envPorts,
        namespace,
        workloadVersion: plan.workloadVersion,
        token,
        baseEnv: this.baseEnv,
        ...(mesh ? { mesh: mesh.env } : {}),
      });
      const first = container.ports[0] ? mine.get(container.ports[0].number) : undefined;
      const addressOf: AddressOf = (declared) => {
        if (declared === undefined) return first === undefined ? undefined : { host: this.host, port: first };
        // An undeclared probe port is taken literally: the app listens on it as written.
        return { host: this.host, port: mine.get(declared) ?? replicaPorts.get(declared)?.port ?? declared };
      };
      const logger = this.deps.logger.child({
        workload: workload.name,
        gvc: workload.gvc,
        location: location.name,
        replica: plan.name,
        container: container.name,
      });
      const rc: RunningContainer = {
        model: container,
        env,
        addressOf,
        ready: false,
        process: new ContainerProcess({
          command: container.command!,
          args: container.args,
          env,
          logger,
          clock: this.deps.clock,
          backoff: this.backoff,
          cwd: this.options.cwd,
          onRunning: () => this.containerRunning(running, rc),
          onDown: () => this.containerDown(running, rc),
        }),
      };
      running.containers.push(rc);
    });
    this.log.info(
      { workload: workload.key, location: location.name, replica: plan.name, ports: Object.fromEntries([...replicaPorts].map(([n, hp]) => [n, hp.port])) },
      'replica starting',
    );
    return running;
  }

  private containerRunning(running: RunningReplica, rc: RunningContainer): void {
    if (running.retired) return;
    rc.stopProbe?.();
    if (rc.model.readinessProbe === undefined && rc.model.ports.length === 0) {
      // Nothing to connect to: ready once running, as Kubernetes treats a container without a probe.
      rc.ready = true;
      this.updateReady(running);
      return;
    }
    rc.stopProbe = startProbing(running.replica, rc.model.readinessProbe, rc.addressOf, {
      ...this.deps,
      env: rc.env,
      // Requests wait for a replica that is starting, and it is checked quickly until ready.
      starting: true,
      registry: {
        setReady: (_replica, ready) => {
          rc.ready = ready;
          this.updateReady(running);
        },
      },
    });
  }

  private containerDown(running: RunningReplica, rc: RunningContainer): void {
    rc.stopProbe?.();
    rc.stopProbe = undefined;
    rc.ready = false;
    // It is restarted (with backoff): requests may wait for it meanwhile, as for a first start.
    if (!running.retired) running.replica.starting = true;
    this.updateReady(running);
  }

  private updateReady(running: RunningReplica): void {
    const ready = !running.retired && running.containers.every((c) => c.ready);
    if (ready) running.replica.starting = false;
    if (ready) running.wasReady = true;
    if (!ready) running.readySince = undefined;
    else if (running.readySince === undefined) {
      running.readySince = this.deps.clock.now();
      // A rollout in progress moves on when a replacement is available (after minReadySeconds).
      if (this.rolloutPending) this.continueRollout((running.plan.workload.rollout?.minReadySeconds ?? 0) * 1000);
    }
    this.registry.setReady(running.replica, ready);
  }

  /** Applies the last snapshot again after `delayMs` (a rollout's next step). */
  private continueRollout(delayMs: number): void {
    const snapshot = this.lastSnapshot;
    if (!snapshot || this.closed) return;
    const timer = this.deps.clock.setTimeout(() => {
      if (!this.closed) void this.apply(this.lastSnapshot ?? snapshot).catch(() => undefined);
    }, delayMs);
    timer.unref?.();
  }

  /** Ready for at least its workload's `minReadySeconds`: it counts as available to a rollout. */
  private available(r: RunningReplica, now: number): boolean {
    if (!r.replica.ready || r.readySince === undefined) return false;
    return now - r.readySince >= (r.plan.workload.rollout?.minReadySeconds ?? 0) * 1000;
  }

  /**
   * Replaces outdated replicas (what they run changed) by `rolloutOptions` (src/local/rollout.ts):
   * a replacement starts beside its old replica while the surge allows (the old one keeps serving
   * until the new one is available), else in its place while enough stay available; otherwise the
   * rollout waits for the next replica to turn ready. Returns whether outdated replicas remain.
   */
  private rollout(plans: readonly ReplicaPlan[], now: number): boolean {
    // Surges done: an available replacement retires the old replica it replaces.
    for (const [key, old] of this.rolling) {
      const next = this.running.get(key);
      if (next && next.plan.fingerprint !== old.plan.fingerprint && this.available(next, now)) {
        this.rolling.delete(key);
        this.log.info({ workload: old.replica.workload, location: old.replica.location, replica: old.replica.name }, 'replica replaced');
        this.retire(old, Number.POSITIVE_INFINITY);
      }
    }
    const groups = new Map<string, ReplicaPlan[]>();
    for (const p of plans) {
      const g = `${p.workload.key}\u0000${p.location.name}`;
      let list = groups.get(g);
      if (!list) groups.set(g, (list = []));
      list.push(p);
    }
    let pending = this.rolling.size > 0;
    for (const group of groups.values()) {
      const outdated = group.filter((p) => {
        const r = this.running.get(p.key);
        return r !== undefined && r.plan.fingerprint !== p.fingerprint;
      });
      if (outdated.length === 0) continue;
      pending = true;
      const limits = rolloutLimits(group[0]!.workload.rollout, group.length);
      let total = 0;
      let available = 0;
      for (const p of group) {
        for (const r of [this.running.get(p.key), this.rolling.get(p.key)]) {
          if (r === undefined) continue;
          total++;
          if (this.available(r, now) || (r.plan.fingerprint !== p.fingerprint && r.replica.ready)) available++;
        }
      }
      for (const p of outdated) {
        const old = this.running.get(p.key)!;
        const step = rolloutStep(limits, group.length, total, available, old.replica.ready);
        if (step.surge) {
          // The old one keeps serving; its replacement is launched under its key below.
          this.running.delete(p.key);
          this.rolling.set(p.key, old);
          total++;
        } else if (step.replaceInPlace) {
          this.running.delete(p.key);
          if (old.replica.ready) available--;
          this.log.info({ workload: old.replica.workload, location: old.replica.location, replica: old.replica.name }, 'replica changed; replacing it in place');
          this.retire(old, Number.POSITIVE_INFINITY);
        } else {
          break;
        }
      }
    }
    return pending;
  }

  private retire(running: RunningReplica, capMs: number): void {
    running.retired = true;
    running.replica.starting = false;
    const graceMs = Math.min(running.plan.workload.terminationGracePeriodSeconds * 1000, capMs);
    for (const c of running.containers) {
      c.stopProbe?.();
      c.stopProbe = undefined;
    }
    this.registry.setReady(running.replica, false);
    this.retiring.add(running);
    const done = Promise.all(running.containers.map((c) => c.process.stop(graceMs))).then(async () => {
      await running.mesh?.detach();
      this.retiring.delete(running);
    });
    // A second retire() (stop() after a reload) only shortens the grace; the first promise stands.
    running.stopped ??= done;
  }
}
