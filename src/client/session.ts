/**
 * Where the client sends its requests and how it prints (DESIGN §14): the platform CLI's profiles
 * and precedence, for the vendor in force (`--vendor`, else `SVCPROXY_VENDOR`, else `svc`). The
 * profile is `--profile`, else `<VENDOR>_PROFILE`, else the name in `profiles/default`, else the only
 * profile there is; its file is `profiles/NAME.json` under `<VENDOR>_HOME`, else
 * `$XDG_CONFIG_HOME/<vendor>`, else `~/.config/<vendor>` (`--vendor cpln` reads a user's existing cpln
 * profiles). Over the profile: `<VENDOR>_ENDPOINT`, `_TOKEN`, `_ORG`, `_GVC`, then the flags. With no
 * profile: `--endpoint` and `--token` (or their variables); with neither, a local `up`:
 * `http://127.0.0.1:15080` (or `SVCPROXY_API`, up's own variable of `--api`) with the operator key in
 * `.svcproxy/api-token` of the current folder (sent to that address only). A token-less profile logged in by the platform CLI
 * lends its access token while it is valid (this client does not log in or refresh). Failures are
 * `SessionError`s with the platform CLI's wording where it has one (exit 1).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import type { ClientArgs } from './args.js';
import { OUTPUTS, TIMESTAMPS, type Output, type Timestamps } from './format/index.js';

export const LOCAL_ENDPOINT = 'http://127.0.0.1:15080';
export const LOCAL_KEY_FILE = '.svcproxy/api-token';
/** The platform's own API, where the platform CLI sends a bare token. */
export const PLATFORM_ENDPOINT = 'https://api.cpln.io';
/** A request's default time limit; a profile's `request.timeout` (seconds) replaces it. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** The platform CLI refreshes an access token with less than this left; this client stops using it. */
const TOKEN_MARGIN_S = 30;

export class SessionError extends Error {}

/** Where a setting came from, for `-v`. */
export type Source = 'flag' | 'variable' | 'profile' | 'default' | 'key file' | 'login';

export interface Profile {
  readonly name?: string;
  readonly request?: { readonly endpoint?: string; readonly token?: string; readonly insecure?: boolean; readonly timeout?: number };
  readonly context?: { readonly org?: string; readonly gvc?: string };
  readonly format?: { readonly output?: string; readonly color?: boolean; readonly ts?: string; readonly max?: number };
  readonly authInfo?: { readonly accessToken?: string; readonly email?: string };
}

export interface Session {
  readonly vendor: string;
  /** `SVC_`, `CPLN_`: the prefix of the variables read. */
  readonly prefix: string;
  /** The profile in force, and how it was chosen. */
  readonly profile?: { readonly name: string; readonly source: 'flag' | 'variable' | 'default' | 'only one' };
  readonly endpoint: string;
  readonly token?: string;
  readonly org?: string;
  readonly gvc?: string;
  readonly insecure: boolean;
  readonly timeoutMs: number;
  readonly output: Output;
  readonly color: boolean;
  readonly ts: Timestamps;
  /** `--max` as given (none: `rest get` prints one answer as it is). */
  readonly max?: number;
  /** The local `up` default is in force (no profile, endpoint or token given). */
  readonly local: boolean;
  /** Who the requests act as, for `edit`'s header: a login's email, a key's account, else `<system>`. */
  readonly actor: string;
  /** Where each setting came from, for `-v`. */
  readonly sources: Readonly<Record<string, Source>>;
}

export interface SessionEnv {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Whether stdout is a terminal (colour is for terminals only). */
  readonly stdoutIsTTY: boolean;
  /** Wall clock, ms since the epoch (an access token's expiry). */
  readonly now: number;
}

/**
 * The local `up`'s API: `SVCPROXY_API` (the variable of `up --api`, so a moved API is found by both)
 * else 127.0.0.1:15080; a wildcard address is reached on loopback.
 */
export function localEndpoint(env: NodeJS.ProcessEnv): string {
  const api = env.SVCPROXY_API;
  if (!api) return LOCAL_ENDPOINT;
  const m = /^(?:\[([^\]]*)\]|([^:]*)):(\d+)$/.exec(api.trim());
  if (!m) throw new SessionError(`SVCPROXY_API must be HOST:PORT (up's --api), not ${JSON.stringify(api)}`);
  let host = m[1] ?? m[2] ?? '';
  if (host === '' || host === '0.0.0.0') host = '127.0.0.1';
  if (host === '::') host = '::1';
  return `http://${host.includes(':') ? `[${host}]` : host}:${m[3]}`;
}

/** Where the vendor's profiles live (the platform CLI's getRootDir, for any vendor). */
export function profileHome(vendor: string, env: NodeJS.ProcessEnv): string {
  const override = env[`${vendor.toUpperCase()}_HOME`];
  if (override) return override;
  if (env.XDG_CONFIG_HOME) return path.join(env.XDG_CONFIG_HOME, vendor);
  return path.join(env.HOME || homedir(), '.config', vendor);
}

function readProfile(home: string, name: string): Profile | undefined {
  let text: string;
  try {
    text = readFileSync(path.join(home, 'profiles', `${name}.json`), 'utf8');
  } catch {
    return undefined;
  }
  try {
    const p = JSON.parse(text) as unknown;
    if (p === null || typeof p !== 'object' || Array.isArray(p)) throw new Error('not an object');
    return p as Profile;
  } catch (e) {
    throw new SessionError(`${path.join(home, 'profiles', `${name}.json`)}: not a profile (${(e as Error).message})`);
  }
}

/** The profile named by default: `profiles/default`, else the only `*.json` there is. */
function defaultProfile(home: string): { name: string; source: 'default' | 'only one' } | undefined {
  try {
    const named = readFileSync(path.join(home, 'profiles', 'default'), 'utf8');
    if (named) return { name: named, source: 'default' };
  } catch {
    // no default file
  }
  let files: string[];
  try {
    files = readdirSync(path.join(home, 'profiles')).filter((f) => f.endsWith('.json'));
  } catch {
    return undefined;
  }
  if (files.length !== 1) return undefined;
  const only = readProfile(home, files[0]!.slice(0, -'.json'.length));
  return typeof only?.name === 'string' ? { name: only.name, source: 'only one' } : undefined;
}

function notFound(name: string, source: string, prefix: string, cli: string): string {
  const list = `Run '${cli} profile get' to see available profiles.`;
  if (source === 'variable') {
    return `Profile '${name}' does not exist.\n\nThe profile was specified by the ${prefix}PROFILE environment variable.\n\nTo fix this, either:\n`
      + `  - Update ${prefix}PROFILE to a valid profile name, or\n  - Unset ${prefix}PROFILE and set a default profile with '${cli} profile set-default <name>'\n\n${list}`;
  }
  if (source === 'default') {
    return `Profile '${name}' does not exist.\n\nThe profile was set as the default but no longer exists.\n\nRun '${cli} profile set-default <name>' to set a valid default profile.\n\n${list}`;
  }
  return `Profile '${name}' does not exist.\n\n${list}`;
}

/** The `exp` of a JWT, in seconds; undefined when the token is no JWT. */
export function jwtExpiry(token: string): number | undefined {
  const payload = token.split('.')[1];
  if (payload === undefined) return undefined;
  try {
    const exp = (JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { exp?: unknown }).exp;
    return typeof exp === 'number' ? exp : undefined;
  } catch {
    return undefined;
  }
}

/** The org and account of a service-account key (`s1.<base64url(ORG.NAME.SECRET)>`), as the platform CLI reads one. */
export function keyAccount(token: string): { org: string; name: string } | undefined {
  if (!token.startsWith('s')) return undefined;
  const parts = Buffer.from(token.split('.')[1] ?? '', 'base64url').toString('utf8').split('.');
  return parts.length === 3 && parts[0] && parts[1] ? { org: parts[0], name: parts[1] } : undefined;
}

/** The first of `candidates` that is set (not undefined, null or empty, as the platform CLI merges), with its source. */
function first<T>(...candidates: [T | undefined | null, Source][]): [T, Source] | undefined {
  for (const [value, source] of candidates) if (value !== undefined && value !== null && value !== '') return [value, source];
  return undefined;
}

export function openSession(args: ClientArgs, ctx: SessionEnv): Session {
  const { env } = ctx;
  const vendor = args.vendor ?? (env.SVCPROXY_VENDOR || 'svc');
  if (!/^[a-z][a-z0-9]*$/.test(vendor)) throw new SessionError(`--vendor must be lower-case letters and digits (svc, cpln), not ${JSON.stringify(vendor)}`);
  const prefix = `${vendor.toUpperCase()}_`;
  const cli = vendor === 'cpln' ? 'cpln' : 'svcproxy';
  const home = profileHome(vendor, env);
  const sources: Record<string, Source> = {};

  let chosen: Session['profile'];
  if (args.profile !== undefined) chosen = { name: args.profile, source: 'flag' };
  else if (env[`${prefix}PROFILE`]) chosen = { name: env[`${prefix}PROFILE`]!, source: 'variable' };
  else chosen = defaultProfile(home);
  let profile: Profile | undefined;
  if (chosen) {
    if (/[/\\\0]/.test(chosen.name) || chosen.name.startsWith('.')) throw new SessionError(`${JSON.stringify(chosen.name)} is not a profile name`);
    profile = readProfile(home, chosen.name);
    if (!profile) throw new SessionError(notFound(chosen.name, chosen.source, prefix, cli));
  }

  const flagEndpoint = first<string>([args.endpoint, 'flag'], [env[`${prefix}ENDPOINT`], 'variable']);
  const flagToken = first<string>([args.token, 'flag'], [env[`${prefix}TOKEN`], 'variable']);
  let endpoint: [string, Source];
  let token: [string, Source] | undefined;
  let local = false;
  if (profile) {
    const named = flagEndpoint ?? first<string>([profile.request?.endpoint, 'profile']);
    if (!named) throw new SessionError(`profile ${chosen!.name} names no endpoint (request.endpoint): give --endpoint or ${prefix}ENDPOINT`);
    endpoint = named;
    token = flagToken ?? first<string>([profile.request?.token, 'profile']);
    if (!token) {
      const access = profile.authInfo?.accessToken;
      if (!access) throw new SessionError(`\nYour profile is not logged in.\n\nLog in by running: cpln profile update ${chosen!.name} --login`);
      const exp = jwtExpiry(access);
      if (exp !== undefined && exp - ctx.now / 1000 < TOKEN_MARGIN_S) {
        throw new SessionError(`The login of profile ${chosen!.name} has expired (svcproxy does not refresh it).\n\nLog in again by running: cpln profile update ${chosen!.name} --login`);
      }
      token = [access, 'login'];
    }
  } else if (flagEndpoint || flagToken) {
    endpoint = flagEndpoint ?? [vendor === 'cpln' ? PLATFORM_ENDPOINT : LOCAL_ENDPOINT, 'default'];
    token = flagToken;
  } else {
    // Nothing names an endpoint or a credential: the local up, with the key of this folder (if any).
    local = true;
    endpoint = [localEndpoint(env), 'default'];
    try {
      const key = readFileSync(path.join(ctx.cwd, LOCAL_KEY_FILE), 'utf8').trim();
      if (key) token = [key, 'key file'];
    } catch {
      // no up has run here: the requests go without a credential
    }
  }
  let url: URL;
  try {
    url = new URL(endpoint[0]);
  } catch {
    throw new SessionError(`the endpoint ${JSON.stringify(endpoint[0])} is not a URL (http://HOST:PORT or https://HOST)`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new SessionError(`the endpoint ${endpoint[0]} is not http or https`);
  if (url.search || url.hash) throw new SessionError(`the endpoint ${endpoint[0]} has a query or fragment`);
  sources.endpoint = endpoint[1];
  if (token) sources.token = token[1];

  const account = token ? keyAccount(token[0]) : undefined;
  // Not the key's org: it is the org up served when it wrote the key, stale once the records name
  // another; a command that needs an org and was given none asks the endpoint (scope.ts).
  const org = first<string>([args.org, 'flag'], [env[`${prefix}ORG`], 'variable'], [profile?.context?.org, 'profile']);
  const gvc = first<string>([args.gvc, 'flag'], [env[`${prefix}GVC`], 'variable'], [profile?.context?.gvc, 'profile']);
  if (org) sources.org = org[1];
  if (gvc) sources.gvc = gvc[1];

  const format = profile?.format ?? {};
  const output = args.output ?? format.output ?? 'text';
  sources.output = args.output !== undefined ? 'flag' : format.output !== undefined ? 'profile' : 'default';
  const ts = args.ts ?? format.ts ?? 'iso';
  if (!(OUTPUTS as readonly string[]).includes(output)) throw new SessionError(`profile ${chosen?.name ?? ''}: format.output must be one of ${OUTPUTS.join(', ')}, not ${JSON.stringify(output)}`);
  if (!(TIMESTAMPS as readonly string[]).includes(ts)) throw new SessionError(`profile ${chosen?.name ?? ''}: format.ts must be one of ${TIMESTAMPS.join(', ')}, not ${JSON.stringify(ts)}`);
  // Colour only on a terminal, and never with NO_COLOR set (no-color.org).
  const color = (args.color ?? format.color ?? true) && ctx.stdoutIsTTY && !env.NO_COLOR;
  const timeout = profile?.request?.timeout;
  return {
    vendor,
    prefix,
    ...(chosen ? { profile: chosen } : {}),
    endpoint: url.href.replace(/\/$/, ''),
    ...(token ? { token: token[0] } : {}),
    ...(org ? { org: org[0] } : {}),
    ...(gvc ? { gvc: gvc[0] } : {}),
    insecure: args.insecure ?? profile?.request?.insecure ?? false,
    timeoutMs: typeof timeout === 'number' && timeout > 0 ? timeout * 1000 : DEFAULT_TIMEOUT_MS,
    output: output as Output,
    color,
    ts: ts as Timestamps,
    ...(args.max !== undefined ? { max: args.max } : {}),
    local,
    actor: profile?.authInfo?.email ?? (account ? `${account.name} (a service account of ${account.org})` : '<system>'),
    sources,
  };
}
