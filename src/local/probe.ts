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
import { CheckDeadline, checkExec, checkGrpc, checkHttp, checkTcp } from './checks.js';

/** Where a probe connects: declared port number (undefined: the first port) → host and port. */
export type AddressOf = (declaredPort: number | undefined) => HostPort | undefined;

export interface ProbeDeps extends Deps {
  /**
   * Receives readiness changes: the registry, or the supervisor's per-container aggregation. With
   * `awaitingFirstCheck` (the registry, for `deployment` replicas), a request that finds none of a
   * workload's replicas ready can run their first checks at once and wait for them.
   */
  readonly registry: {
    setReady(replica: Replica, ready: boolean): void;
    awaitingFirstCheck?(replica: Replica, bring: (() => Promise<void>) | undefined): void;
  };
  /** Environment of exec probes (the replica's own); undefined inherits the supervisor's. */
  readonly env?: Readonly<Record<string, string | undefined>>;
  /**
   * A process that has just started (`up`'s replicas): until its first ready, the replica is marked
   * `starting` (requests wait for it: DESIGN §10) and checked every `STARTING_CHECK_MS`, not at its
   * probe's period, so the first request is forwarded within ~100 ms of the app listening.
   */
  readonly starting?: boolean;
}

/** Checks of a starting replica: 50 ms apart, then 75, then every 100 ms until it is ready. */
export const STARTING_CHECK_MS: readonly number[] = Object.freeze([50, 75, 100]);

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
    // Counted up to the threshold only: a ready replica's state then stops changing at every check.
    const successes = Math.min(state.successes + 1, Math.max(1, thresholds.successThreshold));
    return { successes, failures: 0, ready: state.ready || successes >= Math.max(1, thresholds.successThreshold) };
  }
  const failures = state.failures + 1;
  return { successes: 0, failures, ready: state.ready && failures < Math.max(1, thresholds.failureThreshold) };
}

/** How a running check is stopped at its timeout: a CheckDeadline for TCP (see checks.ts), an AbortController for the rest. */
type CheckStop = CheckDeadline | AbortController;

async function runCheck(probe: ProbeModel, addressOf: AddressOf, deps: ProbeDeps, stop: CheckStop): Promise<boolean> {
  const target = probe.kind === 'exec' ? undefined : addressOf(probe.port);
  if (stop instanceof CheckDeadline) return target !== undefined && checkTcp(target, stop);
  const { signal } = stop;
  if (probe.kind === 'exec') return checkExec(probe.command ?? [], deps.env, signal);
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
  /** Where quiet checks wait: shared by every replica the router probes. */
  readonly slots: QuietSlots;
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

/**
 * At most this many quiet checks start in one turn of the event loop; the rest of a slot's start on
 * the turns after (`setImmediate`), each after the I/O that came meanwhile. A check's start is
 * synchronous work (the socket, the connect system call, which on a local network runs the
 * handshake), and so is its end: a slot of a router with 10,000 quiet replicas holds ~42 checks,
 * which started together held up every request in flight for ~2 ms and their ends, all reported
 * by the same poll, for ~3 ms more, four times a second (measured on a 2-core machine). Eight
 * take ~0.5 ms. A slot that comes late (the process was stalled) is run the same way, after the
 * checks of the slots before it.
 */
export const QUIET_CHECKS_PER_TURN = 8;

/** A replica's quiet check, as its probe loop hands it to `QuietSlots` (made once per replica). */
export interface QuietCheck {
  readonly run: () => void;
  /** Bumped by every schedule and cancel: an entry of an older generation is stale. */
  gen: number;
  /** The slot it waits for, while it waits. */
  at: number | undefined;
}

interface Slot {
  readonly checks: QuietCheck[];
  readonly gens: number[];
  live: number;
}

/**
 * The quiet checks of every replica a router probes, grouped by the slot (a multiple of
 * `QUIET_SLOT_MS` on the clock) they fall on, with one timer for the earliest slot. A timer per
 * replica would keep ten thousand timers (each quiet wait its own duration, so Node also keeps a
 * timer list per wait) and make a new one at every check, which lives for the minute and so is
 * promoted to the old generation. Measured with 10,000 replicas checked about 170 times a second in
 * a process allocating 250 MB/s of short-lived objects: 22 KB promoted per scavenge (0.60 ms) with
 * a timer per replica, 16 KB (0.56 ms) with the slots; most of the rest are the checks' sockets.
 * Cancelling leaves the entry where it is, stale; a slot is dropped with its last live entry.
 */
export class QuietSlots {
  private readonly slots = new Map<number, Slot>();
  /** The times of the slots, ascending. */
  private readonly times: number[] = [];
  private timer: Timer | undefined;
  private timerAt = Infinity;
  /** Checks whose slot came, in order, with their generations, not started yet (from `next`). */
  private readonly due: QuietCheck[] = [];
  private readonly dueGens: number[] = [];
  private next = 0;
  private turnPending = false;

  /** `nextTurn` runs a function on a later turn of the event loop (tests pass their own). */
  constructor(
    private readonly clock: Deps['clock'],
    private readonly nextTurn: (fn: () => void) => void = (fn) => void setImmediate(fn),
  ) {}

  /** Runs `check.run()` at slot time `at` unless it is cancelled or scheduled again before. */
  schedule(check: QuietCheck, at: number): void {
    this.cancel(check);
    let slot = this.slots.get(at);
    if (slot === undefined) {
      slot = { checks: [], gens: [], live: 0 };
      this.slots.set(at, slot);
      this.times.splice(this.indexOf(at), 0, at);
    }
    slot.checks.push(check);
    slot.gens.push(check.gen);
    slot.live++;
    check.at = at;
    if (at < this.timerAt) this.arm(at);
  }

  cancel(check: QuietCheck): void {
    check.gen++;
    const at = check.at;
    if (at === undefined) return;
    check.at = undefined;
    const slot = this.slots.get(at);
    if (slot === undefined || --slot.live > 0) return;
    this.slots.delete(at);
    this.times.splice(this.indexOf(at), 1);
    if (at === this.timerAt) this.arm(this.times[0]);
  }

  /** How many slots have checks waiting. */
  get size(): number {
    return this.times.length;
  }

  /** How many checks whose slot came wait for a turn to start in (cancelled ones included). */
  get starting(): number {
    return this.due.length - this.next;
  }

  /** Where `at` is or would go in `times`. */
  private indexOf(at: number): number {
    let lo = 0;
    let hi = this.times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.times[mid]! < at) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private arm(at: number | undefined): void {
    this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = at ?? Infinity;
    if (at === undefined) return;
    this.timer = this.clock.setTimeout(this.fire, Math.max(0, at - this.clock.now()));
    this.timer.unref?.();
  }

  private readonly fire = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = this.clock.now();
    while (this.times.length > 0 && this.times[0]! <= now) {
      const at = this.times.shift()!;
      const slot = this.slots.get(at)!;
      this.slots.delete(at);
      for (let i = 0; i < slot.checks.length; i++) {
        const check = slot.checks[i]!;
        if (check.gen !== slot.gens[i]) continue;
        // No longer waiting for a slot: cancelling it now only makes this entry stale.
        check.at = undefined;
        this.due.push(check);
        this.dueGens.push(check.gen);
      }
    }
    if (this.times.length > 0 && this.timer === undefined) this.arm(this.times[0]);
    if (!this.turnPending) this.start();
  };

  /** Starts up to `QUIET_CHECKS_PER_TURN` due checks, and the rest on a later turn. */
  private readonly start = (): void => {
    this.turnPending = false;
    const { due, dueGens } = this;
    let started = 0;
    while (this.next < due.length && started < QUIET_CHECKS_PER_TURN) {
      const i = this.next++;
      const check = due[i]!;
      if (check.gen !== dueGens[i]) continue;
      started++;
      check.run();
    }
    if (this.next < due.length) {
      this.turnPending = true;
      this.nextTurn(this.start);
      return;
    }
    due.length = 0;
    dueGens.length = 0;
    this.next = 0;
  };
}

/** Quiet probing of a deployment replica: slow while `traffic` (its workload's mark) is unrouted. */
export function quietWhileUnrouted(traffic: WorkloadTraffic, periodMs: number, slots: QuietSlots): QuietProbing {
  return {
    periodMs,
    slots,
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
  // Made when first needed: a router starting with 10,000 replicas would build 10,000 child loggers
  // (each serialising its bindings) for lines that mostly never come.
  let childLog: ProbeDeps['logger'] | undefined;
  const log = (): ProbeDeps['logger'] => (childLog ??= deps.logger.child({
    component: 'probe',
    workload: replica.workload,
    location: replica.location,
    replica: replica.name,
  }));
  // Fractional seconds are accepted (tests use them); a zero period must not spin.
  const periodMs = Math.max(10, p.periodSeconds * 1000);
  const timeoutMs = Math.max(1, p.timeoutSeconds * 1000);
  let state = INITIAL_PROBE_STATE;
  let stopped = false;
  let timer: Timer | undefined;
  let running: CheckStop | undefined;
  let loggedError = false;
  /** Set while the replica waits for its workload's first request (see `onRouted`). */
  let cancelWake: (() => void) | undefined;
  /** Was the wait before this check a quiet one (see `quietWait`)? */
  let wasQuiet = false;
  /** When the last check started. */
  let lastStarted = 0;
  /** Until the first check completes: resolves the promises handed out by `bringForward`. */
  let firstDone: (() => void) | undefined;
  let firstChecked: Promise<void> | undefined;
  let firstComplete = false;

  const schedule = (ms: number): void => {
    timer = deps.clock.setTimeout(() => void tick(), ms);
    timer.unref?.();
  };
  // Made once, not per check: a quiet wait allocates nothing that lives for its minute but its
  // slot's entry (see QuietSlots).
  const quietCheck: QuietCheck = { run: () => void tick(), gen: 0, at: undefined };

  // Registered with the workload when the replica first waits quietly and kept across its quiet
  // checks (the workload's set is not churned every minute). Made once: a closure made inside `tick`
  // would keep that check's whole context alive for the minute (its AbortController, signal, timer).
  const onRouted = (): void => {
    cancelWake = undefined;
    if (stopped || quietCheck.at === undefined) return;
    quiet!.slots.cancel(quietCheck);
    wasQuiet = false;
    schedule(Math.max(0, periodMs - (deps.clock.now() - lastStarted)));
  };

  /** The first check, now if it has not started (still in its initial delay); resolves when it is done. */
  const bringForward = (): Promise<void> => {
    if (firstComplete || stopped) return Promise.resolve();
    firstChecked ??= new Promise<void>((resolve) => (firstDone = resolve));
    if (running === undefined && timer !== undefined) {
      deps.clock.clearTimeout(timer);
      void tick();
    }
    return firstChecked;
  };
  const completeFirst = (): void => {
    if (firstComplete) return;
    firstComplete = true;
    deps.registry.awaitingFirstCheck?.(replica, undefined);
    firstDone?.();
  };

  const tick = async (): Promise<void> => {
    timer = undefined;
    if (stopped) return;
    const started = deps.clock.now();
    lastStarted = started;
    const stop: CheckStop = p.kind === 'tcp' ? new CheckDeadline() : new AbortController();
    running = stop;
    const timeout = deps.clock.setTimeout(() => stop.abort(), timeoutMs);
    let passed: boolean;
    try {
      passed = await runCheck(p, addressOf, deps, stop);
    } catch (error) {
      passed = false;
      if (!loggedError) log().warn({ err: error, probe: p.kind }, 'readiness probe could not run');
      loggedError = true;
    } finally {
      deps.clock.clearTimeout(timeout);
      running = undefined;
    }
    if (stopped) return;
    const next = nextProbeState(state, passed, p);
    if (next.ready !== state.ready) {
      if (deps.logger.isLevelEnabled('info')) log().info({ probe: p.kind, ready: next.ready, failures: next.failures }, next.ready ? 'replica ready' : 'replica not ready');
      deps.registry.setReady(replica, next.ready);
    } else if (!passed) {
      if (deps.logger.isLevelEnabled('debug')) log().debug({ probe: p.kind, failures: next.failures }, 'readiness probe failed');
    }
    if (next.ready !== state.ready || next.successes !== state.successes || next.failures !== state.failures) state = next;
    completeFirst();
    if (starting) {
      if (!next.ready) {
        schedule(Math.min(periodMs, STARTING_CHECK_MS[Math.min(startingChecks++, STARTING_CHECK_MS.length - 1)]!));
        return;
      }
      starting = false;
      replica.starting = false;
    }
    if (quiet && passed && next.ready && !quiet.routed()) {
      const due = Math.ceil((started + quietWait(periodMs, quiet.periodMs, wasQuiet, deps.random)) / QUIET_SLOT_MS) * QUIET_SLOT_MS;
      quiet.slots.schedule(quietCheck, due);
      wasQuiet = true;
      cancelWake ??= quiet.whenRouted(onRouted);
      return;
    }
    wasQuiet = false;
    schedule(Math.max(0, periodMs - (deps.clock.now() - started)));
  };

  /** Until the first ready: checked quickly, and the replica is marked as starting (see ProbeDeps). */
  let starting = deps.starting === true;
  let startingChecks = 0;
  deps.registry.setReady(replica, false);
  if (starting) replica.starting = true;
  if (quiet) deps.registry.awaitingFirstCheck?.(replica, bringForward);
  schedule(Math.max(0, p.initialDelaySeconds * 1000));

  return () => {
    if (stopped) return;
    stopped = true;
    if (starting) replica.starting = false;
    completeFirst();
    cancelWake?.();
    cancelWake = undefined;
    quiet?.slots.cancel(quietCheck);
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
