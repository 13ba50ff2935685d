/**
 * The environment of a replica's container process, as the platform would set it: the parent's
 * environment (PATH, HOME, ...), then `PORT` and `<VENDOR>_PORT_<number>`, then the platform's
 * built-in variables with the vendor prefix (`SVC_…` for vendor `svc`, `CPLN_…` for `cpln`) plus
 * `<VENDOR>_REPLICA`, then the container's own `env`, which wins over everything. Pure functions:
 * no I/O, no clock, nothing random; the same input always gives the same environment. They do not
 * fail; a missing location or org gives empty strings, as an unset value would on the platform.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { ContainerModel } from '../config/model.js';
import { canonicalJson } from '../config/canonical.js';

export interface ReplicaEnvInput {
  /** `settings.vendor`: the prefix of every built-in variable, upper-cased. */
  readonly vendor: string;
  readonly org?: string;
  readonly gvc: { readonly name: string; readonly alias: string };
  readonly location: { readonly name: string; readonly provider: string };
  readonly workload: { readonly name: string; readonly canonicalHost: string };
  readonly container: ContainerModel;
  /** The replica name, `W-N`. */
  readonly replica: string;
  /**
   * Declared port number → the port the process really listens on. Holds every port of the
   * replica (so sibling containers can be found); the container's own first port gives `PORT`.
   */
  readonly ports: ReadonlyMap<number, number>;
  readonly namespace: string;
  readonly workloadVersion: number;
  readonly token: string;
  /** The environment inherited from the supervisor (PATH, HOME, ...). */
  readonly baseEnv: Readonly<Record<string, string | undefined>>;
  /** The mesh's variables (HTTP_PROXY, ...: DESIGN §9), set before the container's own `env`. */
  readonly mesh?: Readonly<Record<string, string>>;
}

/** `svc` → `SVC_`; characters that cannot appear in a variable name become `_`. */
export function envPrefix(vendor: string): string {
  return `${vendor.toUpperCase().replace(/[^A-Z0-9_]/g, '_')}_`;
}

export function buildReplicaEnv(input: ReplicaEnvInput): Record<string, string> {
  const prefix = envPrefix(input.vendor);
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(input.baseEnv)) {
    if (value === undefined) continue;
    // The supervisor's own identity (when it runs inside a platform container) and its PORT must
    // not leak into the replica: a stale SVC_WORKLOAD would be worse than none.
    if (name === 'PORT' || name.startsWith(prefix)) continue;
    env[name] = value;
  }

  for (const [number, actual] of input.ports) env[`${prefix}PORT_${number}`] = String(actual);
  const first = input.container.ports[0];
  if (first !== undefined) {
    const actual = input.ports.get(first.number);
    if (actual !== undefined) env.PORT = String(actual);
  }

  env[`${prefix}GLOBAL_ENDPOINT`] = input.workload.canonicalHost;
  env[`${prefix}GVC`] = input.gvc.name;
  env[`${prefix}GVC_ALIAS`] = input.gvc.alias;
  env[`${prefix}LOCATION`] = input.location.name;
  env[`${prefix}NAMESPACE`] = input.namespace;
  env[`${prefix}PROVIDER`] = input.location.provider;
  env[`${prefix}ORG`] = input.org ?? '';
  env[`${prefix}WORKLOAD`] = input.workload.name;
  env[`${prefix}WORKLOAD_VERSION`] = String(input.workloadVersion);
  env[`${prefix}TOKEN`] = input.token;
  env[`${prefix}IMAGE`] = input.container.image ?? '';
  env[`${prefix}REPLICA`] = input.replica;
  if (input.mesh) Object.assign(env, input.mesh);

  for (const { name, value } of input.container.env) env[name] = value;
  return env;
}

/**
 * `<VENDOR>_NAMESPACE`: looks random (the platform generates one per workload), but is derived from
 * the workload key so it stays the same across restarts and reloads.
 */
export function workloadNamespace(workloadKey: string): string {
  const digest = createHash('sha256').update(`namespace\0${workloadKey}`).digest();
  // 16 base-32 characters (80 bits), lower-case letters and digits, starting with a letter.
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  let out = '';
  for (let i = 0; i < 16; i++) out += alphabet[digest[i]! & 31];
  return /^[a-z]/.test(out) ? out : `n${out.slice(1)}`;
}

/** Members of `defaultOptions` / `localOptions[]` that scale a workload: no new version (platform spec). */
const SCALING_MEMBERS = new Set(['autoscaling', 'capacityAI', 'suspend']);
/** Read-only bookkeeping the platform adds; not part of what is applied. */
const BOOKKEEPING_MEMBERS = new Set(['id', 'version', 'created', 'lastModified', 'links', 'status']);

function ignored(path: readonly string[]): boolean {
  if (path.length === 1) return BOOKKEEPING_MEMBERS.has(path[0]!);
  if (path[0] !== 'spec') return false;
  if (path.length === 3 && path[1] === 'defaultOptions') return SCALING_MEMBERS.has(path[2]!);
  if (path.length === 4 && path[1] === 'localOptions') return SCALING_MEMBERS.has(path[3]!);
  return false;
}

/**
 * `<VENDOR>_WORKLOAD_VERSION`: a positive integer derived from the workload record's content, with
 * key order, read-only bookkeeping (`version`, `status`, ...) and scaling members (`autoscaling`,
 * `suspend` of `defaultOptions` and `localOptions[]`) ignored, so it changes exactly when something
 * that must be applied changes.
 */
export function workloadVersion(record: unknown): number {
  const frozen = typeof record === 'object' && record !== null && Object.isFrozen(record);
  if (frozen) {
    const known = versions.get(record);
    if (known !== undefined) return known;
  }
  const digest = createHash('sha256').update(canonicalJson(record, ignored)).digest();
  // 31 bits: a positive number that survives any consumer parsing it as a signed 32-bit integer.
  const version = (digest.readUInt32BE(0) & 0x7fffffff) || 1;
  if (frozen) versions.set(record, version);
  return version;
}

/**
 * The version of each frozen record (the records in force are deep-frozen, and a write keeps the
 * objects of those it does not change): every change hashed 10,000 unchanged workloads again.
 */
const versions = new WeakMap<object, number>();

/**
 * `<VENDOR>_TOKEN`: opaque to the workload, bound to the workload key and to the running `up`
 * process's secret, so a token from another run or another workload does not match.
 */
export function localToken(secret: string | Uint8Array, workloadKey: string): string {
  return `local.${createHmac('sha256', secret).update(workloadKey).digest('base64url')}`;
}

/**
 * Whether `token` is `workloadKey`'s token of this run, compared in constant time (a caller learns
 * nothing from how long a wrong token took to refuse). Any string is accepted as input.
 */
export function isLocalToken(secret: string | Uint8Array, workloadKey: string, token: string): boolean {
  const want = Buffer.from(localToken(secret, workloadKey));
  const given = Buffer.from(token);
  // timingSafeEqual needs equal lengths; the length of a token says nothing secret.
  return given.length === want.length && timingSafeEqual(given, want);
}

/** `<VENDOR>_ENDPOINT`: the platform API's base URL (`up`: src/local/api, set with the mesh's variables). */
export function endpointVariable(vendor: string): string {
  return `${envPrefix(vendor)}ENDPOINT`;
}
