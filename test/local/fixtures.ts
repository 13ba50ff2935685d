/**
 * Hand-built compiled snapshots for the tests of `src/local/` (matching `src/config/model.ts`), and a
 * pino logger whose JSON lines the tests can read back.
 */
import { Writable } from 'node:stream';
import { pino, type Logger } from 'pino';
import type {
  ContainerModel,
  GvcModel,
  LocationModel,
  ProbeModel,
  Snapshot,
  WorkloadModel,
  WorkloadOptionsModel,
  RolloutModel,
} from '../../src/config/model.js';
import { systemClock, type Deps } from '../../src/deps.js';

export const LOCATIONS: readonly LocationModel[] = [
  { name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
  { name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1' },
];

export function container(overrides: Partial<ContainerModel> = {}): ContainerModel {
  return { name: 'app', args: [], env: [], ports: [{ number: 8080, protocol: 'http' }], volumes: [], ...overrides };
}

export function probe(overrides: Partial<ProbeModel> = {}): ProbeModel {
  return {
    kind: 'tcp',
    httpHeaders: [],
    initialDelaySeconds: 0,
    periodSeconds: 0.05,
    timeoutSeconds: 0.5,
    successThreshold: 1,
    failureThreshold: 1,
    ...overrides,
  };
}

export function options(overrides: Partial<WorkloadOptionsModel> = {}): WorkloadOptionsModel {
  return { suspend: false, timeoutSeconds: 5, minScale: 1, maxScale: 5, debug: false, ...overrides };
}

export interface WorkloadInput {
  readonly name: string;
  readonly gvc?: string;
  readonly containers?: readonly ContainerModel[];
  readonly defaultOptions?: Partial<WorkloadOptionsModel>;
  /** Per-location overrides merged over the defaults. */
  readonly localOptions?: Readonly<Record<string, Partial<WorkloadOptionsModel>>>;
  readonly terminationGracePeriodSeconds?: number;
  readonly locations?: readonly string[];
  readonly rollout?: RolloutModel;
}

export function workload(input: WorkloadInput, alias = 'abcdefghijklm'): WorkloadModel {
  const gvc = input.gvc ?? 'demo';
  const defaults = options(input.defaultOptions);
  const locationOptions = new Map<string, WorkloadOptionsModel>();
  for (const l of input.locations ?? LOCATIONS.map((x) => x.name)) {
    locationOptions.set(l, { ...defaults, ...input.localOptions?.[l] });
  }
  const containers = input.containers ?? [container()];
  return {
    key: `${gvc}/${input.name}`,
    name: input.name,
    gvc,
    mesh: { bypassOutbound: false, discoverCrossGvcReplicas: false },
    ...(input.rollout ? { rollout: input.rollout } : {}),
    type: 'standard',
    tags: {},
    containers,
    defaultOptions: defaults,
    locationOptions,
    globallySuspended: defaults.suspend || defaults.maxScale === 0,
    timeoutMs: 5000,
    timeoutSource: 'the default',
    replicaDirect: false,
    publishNotReadyAddresses: false,
    retryPolicy: { attempts: 2, retryOn: [] },
    terminationGracePeriodSeconds: input.terminationGracePeriodSeconds ?? 90,
    canonicalHost: `${input.name}-${alias}.app.localhost`,
    primaryPort: containers[0]?.ports[0],
  };
}

export interface SnapshotInput {
  readonly vendor?: string;
  readonly workloads: readonly WorkloadModel[];
  readonly locations?: readonly string[];
  /** The org record's name; `null`: the records hold no org record. */
  readonly org?: string | null;
  readonly records?: Snapshot['records'];
  readonly generation?: number;
}

export function snapshot(input: SnapshotInput): Snapshot {
  const locationNames = input.locations ?? LOCATIONS.map((l) => l.name);
  const gvcNames = new Set(input.workloads.map((w) => w.gvc));
  const gvcs = new Map<string, GvcModel>();
  for (const name of gvcNames) {
    gvcs.set(name, {
      name,
      alias: 'abcdefghijklm',
      endpointNamingFormat: 'default',
      locations: locationNames,
      locationOptions: new Map(),
      trustedProxies: 0,
      tags: {},
    });
  }
  return {
    settings: {
      vendor: input.vendor ?? 'svc',
      appDomain: 'app.localhost',
      directDomain: 'direct.localhost',
      internalDomain: 'internal.localhost',
    },
    ...(input.org === null ? {} : { org: { name: input.org ?? 'acme' } }),
    locations: new Map(LOCATIONS.map((l) => [l.name, l])),
    gvcs,
    workloads: new Map(input.workloads.map((w) => [w.key, w])),
    domains: new Map(),
    deployments: new Map(),
    records: input.records ?? [],
    warnings: [],
    generation: input.generation ?? 1,
  };
}

/** A logger writing JSON lines into `lines` (parsed), at `level`. */
export function captureLogger(level = 'debug'): { logger: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  let pending = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      pending += chunk.toString('utf8');
      let i: number;
      while ((i = pending.indexOf('\n')) !== -1) {
        const line = pending.slice(0, i);
        pending = pending.slice(i + 1);
        if (line.trim() !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      }
      cb();
    },
  });
  return { logger: pino({ level }, stream), lines };
}

export function testDeps(logger: Logger = pino({ level: 'silent' })): Deps {
  return { clock: systemClock, random: Math.random, logger };
}

/** Polls `check` every 20 ms until it holds; rejects after `timeoutMs` (a hang guard: a busy machine is slow, not wrong). */
export async function waitFor(check: () => boolean, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A clock that moves only when told: `advance(ms)` runs the timers that fall due, in order. */
export class FakeClock {
  private time = 0;
  private seq = 0;
  private readonly timers = new Map<number, { at: number; fn: () => void }>();

  /** `wallBase`: the wall time at the start (the mesh's tests start at the real now, for openssl). */
  constructor(private readonly wallBase = 1_700_000_000_000) {}

  now = (): number => this.time;
  wallNow = (): number => this.wallBase + this.time;
  setTimeout = (fn: () => void, ms: number): { id: number; unref(): void } => {
    const id = ++this.seq;
    this.timers.set(id, { at: this.time + Math.max(0, ms), fn });
    return { id, unref: () => undefined };
  };
  clearTimeout = (timer: unknown): void => {
    if (timer && typeof timer === 'object' && 'id' in timer) this.timers.delete((timer as { id: number }).id);
  };

  /** Delays of the pending timers, from now. */
  pending(): number[] {
    return [...this.timers.values()].map((t) => t.at - this.time).sort((a, b) => a - b);
  }

  advance(ms: number): void {
    const until = this.time + ms;
    this.runDue(until, false);
    this.time = until;
  }

  /** The process was stalled for `ms`: the time jumps, then the timers that fell due meanwhile run, late, in order. */
  stall(ms: number): void {
    this.time += ms;
    this.runDue(this.time, true);
  }

  private runDue(until: number, late: boolean): void {
    for (;;) {
      let next: [number, { at: number; fn: () => void }] | undefined;
      for (const entry of this.timers) if (entry[1].at <= until && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      this.timers.delete(next[0]);
      if (!late) this.time = next[1].at;
      next[1].fn();
    }
  }
}
