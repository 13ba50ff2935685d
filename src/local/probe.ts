/**
 * Readiness probing of one replica (or one container of it): wait `initialDelaySeconds`, then run
 * the probe's check every `periodSeconds`, each bounded by `timeoutSeconds`; `successThreshold`
 * consecutive passes make it ready, `failureThreshold` consecutive failures make it not ready, as
 * Kubernetes counts them. Readiness starts false and goes to `registry.setReady`. Without a probe,
 * a TCP connect to the first port (`addressOf(undefined)`) is the check, which is also how the
 * replicas of `deployment` records are probed. A check that fails in an unexpected way (gRPC
 * support failing to load, say) counts as a failure and is logged; the loop itself never throws
 * and stops for good when the returned function is called. Time comes from `deps.clock`.
 *
 * A router probing replicas it does not run (`deployment` records) may pass `quiet`: while the
 * replica is ready, its last check passed and its workload has had no request routed to it yet, the
 * next check waits `quiet.periodMs` instead of the period (Envoy's `no_traffic_healthy_interval`);
 * the workload's first request brings the check forward to a period after the last one.
 * Ten thousand deployed workloads of which a few take traffic then cost a connect a minute each,
 * not one every period; a replica that is not ready, or whose check just failed, keeps the period.
 */
import type { Deps, Timer } from '../deps.js';
import type { ProbeModel } from '../config/model.js';
import type { HostPort, Replica, WorkloadTraffic } from '../routing/replicas.js';
import { checkExec, checkGrpc, checkHttp, checkTcp } from './checks.js';

/** Where a probe connects: declared port number (undefined: the first port) → host and port. */
export type AddressOf = (declaredPort: number | undefined) => HostPort | undefined;

export interface ProbeDeps extends Deps {
  /** Receives readiness changes: the registry, or the supervisor's per-container aggregation. */
  readonly registry: { setReady(replica: Replica, ready: boolean): void };
  /** Environment of exec probes (the replica's own); undefined inherits the supervisor's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
}

/**
 * The probe used when none is configured. Kubernetes' default period (10 s) would keep a freshly
 * started local replica out of rotation for seconds, so locally it is checked every second.
 */
export const DEFAULT_PROBE: ProbeModel = Object.freeze({
  kind: 'tcp',
  httpHeaders: Object.freeze([]),
  initialDelaySeconds: 0,
  periodSeconds: 1,
  timeoutSeconds: 1,
  successThreshold: 1,
  failureThreshold: 3,
});

export interface ProbeState {
  readonly successes: number;
  readonly failures: number;
  readonly ready: boolean;
}

export const INITIAL_PROBE_STATE: ProbeState = Object.freeze({ successes: 0, failures: 0, ready: false });

/** The Kubernetes threshold rule, as a pure step: one check result in, the new state out. */
export function nextProbeState(
  state: ProbeState,
  passed: boolean,
  thresholds: Pick<ProbeModel, 'successThreshold' | 'failureThreshold'>,
): ProbeState {
  if (passed) {
    const successes = state.successes + 1;
    return { successes, failures: 0, ready: state.ready || successes >= Math.max(1, thresholds.successThreshold) };
  }
  const failures = state.failures + 1;
  return { successes: 0, failures, ready: state.ready && failures < Math.max(1, thresholds.failureThreshold) };
}

async function runCheck(probe: ProbeModel, addressOf: AddressOf, deps: ProbeDeps, signal: AbortSignal): Promise<boolean> {
  if (probe.kind === 'exec') return checkExec(probe.command ?? [], deps.env, signal);
  const target = addressOf(probe.port);
  if (target === undefined) return false;
  switch (probe.kind) {
    case 'http':
      return checkHttp(target, { path: probe.path ?? '/', scheme: probe.scheme ?? 'HTTP', headers: probe.httpHeaders }, signal);
    case 'tcp':
      return checkTcp(target, signal);
    case 'grpc':
      return checkGrpc(target, '', new Date(deps.clock.wallNow() + probe.timeoutSeconds * 1000), signal);
  }
}

/** The slower period of a ready replica whose workload has had no traffic (see `startProbing`). */
export interface QuietProbing {
  readonly periodMs: number;
  /** Has a request been routed to the replica's workload? Read before each wait. */
  routed(): boolean;
  /** Call `wake` once at the workload's first routed request; the returned function cancels that. */
  whenRouted(wake: () => void): () => void;
}

/**
 * The wait before a quiet check. The first after a replica turned quiet falls at a random point of
 * the quiet period (never sooner than the period): a router that starts with ten thousand ready
 * replicas would otherwise check them all within the same second of every minute, a burst of ten
 * thousand connects that costs the router and the apps over a second of CPU at once. Later waits are
 * the quiet period ±10% (Envoy's `interval_jitter_percent`), so replicas do not fall back into step.
 */
export function quietWait(periodMs: number, quietMs: number, again: boolean, random: () => number): number {
  const q = Math.max(periodMs, quietMs);
  return again ? q * (0.9 + 0.2 * random()) : periodMs + random() * (q - periodMs);
}

/**
 * Quiet checks fall on boundaries of this many milliseconds of the process clock, so the ~170 a
 * second of a router with ten thousand quiet replicas are run in four wake-ups a second instead of
 * one each. Measured on an idle ingress with 10,000 deployed workloads: 61 ms of CPU a second with
 * a wake-up per check, 18 ms in 250 ms slots (a batch of ~40 connects takes ~1 ms of the loop).
 */
export const QUIET_SLOT_MS = 250;

/** Quiet probing of a deployment replica: slow while `traffic` (its workload's mark) is unrouted. */
export function quietWhileUnrouted(traffic: WorkloadTraffic, periodMs: number): QuietProbing {
  return {
    periodMs,
    routed: () => traffic.routed,
    whenRouted: (wake) => {
      traffic.waiters.add(wake);
      return () => traffic.waiters.delete(wake);
    },
  };
}

/** Starts the probe loop; the returned function stops it (idempotent) and cancels a running check. */
export function startProbing(
  replica: Replica,
  probe: ProbeModel | undefined,
  addressOf: AddressOf,
  deps: ProbeDeps,
  quiet?: QuietProbing,
): () => void {
  const p = probe ?? DEFAULT_PROBE;
  const log = deps.logger.child({
    component: 'probe',
    workload: replica.workload,
    location: replica.location,
    replica: replica.name,
  });
  // Fractional seconds are accepted (tests use them); a zero period must not spin.
  const periodMs = Math.max(10, p.periodSeconds * 1000);
  const timeoutMs = Math.max(1, p.timeoutSeconds * 1000);
  let state = INITIAL_PROBE_STATE;
  let stopped = false;
  let timer: Timer | undefined;
  let running: AbortController | undefined;
  let loggedError = false;
  let cancelWake: (() => void) | undefined;
  /** Was the wait before this check a quiet one (see `quietWait`)? */
  let wasQuiet = false;
  /** When the last check started. */
  let lastStarted = 0;

  const schedule = (ms: number): void => {
    timer = deps.clock.setTimeout(() => void tick(), ms);
    timer.unref?.();
  };

  // Made once, not per check: the workload keeps it for the whole quiet minute, and a closure made
  // inside `tick` would keep that check's whole context alive with it (its AbortController, signal,
  // timer): ~2 KB a replica promoted to the old generation every minute, which with 10,000 quiet
  // replicas made every scavenge of a loaded router slower.
  const onRouted = (): void => {
    cancelWake = undefined;
    if (stopped || timer === undefined) return;
    deps.clock.clearTimeout(timer);
    wasQuiet = false;
    schedule(Math.max(0, periodMs - (deps.clock.now() - lastStarted)));
  };

  const tick = async (): Promise<void> => {
    timer = undefined;
    cancelWake?.();
    cancelWake = undefined;
    if (stopped) return;
    const started = deps.clock.now();
    lastStarted = started;
    const controller = new AbortController();
    running = controller;
    const timeout = deps.clock.setTimeout(() => controller.abort(), timeoutMs);
    let passed: boolean;
    try {
      passed = await runCheck(p, addressOf, deps, controller.signal);
    } catch (error) {
      passed = false;
      if (!loggedError) log.warn({ err: error, probe: p.kind }, 'readiness probe could not run');
      loggedError = true;
    } finally {
      deps.clock.clearTimeout(timeout);
      running = undefined;
    }
    if (stopped) return;
    const next = nextProbeState(state, passed, p);
    if (next.ready !== state.ready) {
      log.info({ probe: p.kind, ready: next.ready, failures: next.failures }, next.ready ? 'replica ready' : 'replica not ready');
      deps.registry.setReady(replica, next.ready);
    } else if (!passed) {
      log.debug({ probe: p.kind, failures: next.failures }, 'readiness probe failed');
    }
    state = next;
    if (quiet && passed && next.ready && !quiet.routed()) {
      const due = Math.ceil((started + quietWait(periodMs, quiet.periodMs, wasQuiet, deps.random)) / QUIET_SLOT_MS) * QUIET_SLOT_MS;
      schedule(Math.max(0, due - deps.clock.now()));
      wasQuiet = true;
      cancelWake = quiet.whenRouted(onRouted);
      return;
    }
    wasQuiet = false;
    schedule(Math.max(0, periodMs - (deps.clock.now() - started)));
  };

  deps.registry.setReady(replica, false);
  schedule(Math.max(0, p.initialDelaySeconds * 1000));

  return () => {
    if (stopped) return;
    stopped = true;
    cancelWake?.();
    deps.clock.clearTimeout(timer);
    running?.abort();
  };
}

/**
 * `addressOf` for a replica of a `deployment` record: every probe goes to its `address`
 * (`host:port`, `[v6]:port`), whatever port the probe names; `undefined` (so every check fails)
 * when the address cannot be parsed, which validation should have caught.
 */
export function addressOfDeployment(address: string): AddressOf {
  const match = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(address.trim());
  const port = match ? Number(match[3]) : 0;
  const target: HostPort | undefined = match && port > 0 && port < 65536 ? { host: (match[1] ?? match[2])!, port } : undefined;
  return () => target;
}
