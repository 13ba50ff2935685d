/**
 * The twelve external-authorization tags (platform spec) compiled into one frozen `ExtAuthConfig`,
 * with the spec's defaults: port 443, protocol `grpc`, scheme `https`, timeout `1s`, failure allow
 * `true`, pack as bytes / remove request body / include peer certificate `false`, no path prefix,
 * no upstream header prefixes, no listen port. `svc/externalAuthAddress` turns the feature on: no
 * address, no config. Validation (src/config/tags.ts) rejects bad values at load; should one get
 * here anyway it falls back to the default and is reported in `problems`, except a bad
 * `FailureAllow`, which falls back to fail-closed (an unreadable safety switch must not open).
 */
import { isHostOrIp, parseBool, parseDuration, parsePort } from '../config/values.js';

export type ExtAuthProtocol = 'grpc' | 'http';
export type ExtAuthScheme = 'https' | 'http';

export interface ExtAuthConfig {
  /** Host name or IP address of the authorization service (TLS SNI when it is a name). */
  readonly address: string;
  readonly port: number;
  readonly protocol: ExtAuthProtocol;
  readonly scheme: ExtAuthScheme;
  /** Bound on one check (the call, not the body buffering before it). */
  readonly timeoutMs: number;
  /** Fail-open: continue (with `x-envoy-auth-failure-mode-allowed: true`) when the check errs. */
  readonly failureAllow: boolean;
  /** Send the body as `raw_body` bytes instead of the `body` string (gRPC). */
  readonly packAsBytes: boolean;
  /** Send no body; otherwise the first 8 KiB. */
  readonly removeRequestBody: boolean;
  /** Send the verified client certificate as URL-encoded PEM (`source.certificate`). */
  readonly includePeerCert: boolean;
  /** Prepended to the path of HTTP-mode checks; '' for none. */
  readonly pathPrefix: string;
  /** Lower-cased name prefixes of HTTP-mode auth-response headers copied onto the upstream request. */
  readonly upstreamHeaderPrefixes: readonly string[];
  /** Only requests for this container port are checked. */
  readonly listenPort?: number;
}

export const EXTAUTH_DEFAULTS = Object.freeze({
  port: 443,
  protocol: 'grpc' as ExtAuthProtocol,
  scheme: 'https' as ExtAuthScheme,
  timeoutMs: 1000,
  failureAllow: true,
});

export interface CompiledTags {
  readonly config: ExtAuthConfig | undefined;
  /** Values that were not understood (and what was used instead). */
  readonly problems: readonly string[];
}

/** Compile a workload's tags (`tags` as strings, `vendor` the tag prefix without `/`). */
export function compileExtAuthTags(tags: Readonly<Record<string, string>>, vendor: string): CompiledTags {
  const prefix = `${vendor}/externalAuth`;
  const problems: string[] = [];
  const get = (name: string): string | undefined => {
    const v = tags[prefix + name];
    return v === undefined ? undefined : v.trim();
  };
  const address = get('Address');
  if (address === undefined || address === '') return { config: undefined, problems };
  if (!isHostOrIp(address)) {
    // An address we cannot dial still means "authorization required": keep the filter, so every
    // check fails and the failure mode decides, instead of silently dropping authorization.
    problems.push(`${prefix}Address ${JSON.stringify(address)} is not a host name or IP address`);
  }
  const bool = (name: string, fallback: boolean): boolean => {
    const v = get(name);
    if (v === undefined) return fallback;
    const b = parseBool(v);
    if (b !== undefined) return b;
    const used = name === 'FailureAllow' ? false : fallback;
    problems.push(`${prefix}${name} ${JSON.stringify(v)} is not true or false (using ${used})`);
    return used;
  };
  const port = (name: string): number | undefined => {
    const v = get(name);
    if (v === undefined) return undefined;
    const p = parsePort(v);
    if (p === undefined) problems.push(`${prefix}${name} ${JSON.stringify(v)} is not a port`);
    return p;
  };
  const oneOf = <T extends string>(name: string, allowed: readonly T[], fallback: T): T => {
    const v = get(name);
    if (v === undefined) return fallback;
    if ((allowed as readonly string[]).includes(v)) return v as T;
    problems.push(`${prefix}${name} ${JSON.stringify(v)} is not one of ${allowed.join(', ')} (using ${fallback})`);
    return fallback;
  };

  let timeoutMs: number = EXTAUTH_DEFAULTS.timeoutMs;
  const timeout = get('Timeout');
  if (timeout !== undefined) {
    const ms = parseDuration(timeout);
    if (ms !== undefined && ms > 0) timeoutMs = ms;
    else problems.push(`${prefix}Timeout ${JSON.stringify(timeout)} is not a positive duration (using 1s)`);
  }

  let pathPrefix = get('PathPrefix') ?? '';
  if (pathPrefix !== '' && !pathPrefix.startsWith('/')) {
    problems.push(`${prefix}PathPrefix ${JSON.stringify(pathPrefix)} does not start with / (using /${pathPrefix})`);
    pathPrefix = `/${pathPrefix}`;
  }
  // "/auth/" + "/x" would give "//x": the prefix's trailing slash is dropped.
  if (pathPrefix.endsWith('/')) pathPrefix = pathPrefix.slice(0, -1);

  const prefixes = (get('UpstreamHeaderPrefixes') ?? '')
    .split(',')
    .map((p) => p.trim().toLowerCase())
    .filter((p) => p !== '');

  const listenPort = port('ListenPort');
  const config: ExtAuthConfig = Object.freeze({
    address,
    port: port('Port') ?? EXTAUTH_DEFAULTS.port,
    protocol: oneOf<ExtAuthProtocol>('Protocol', ['grpc', 'http'], EXTAUTH_DEFAULTS.protocol),
    scheme: oneOf<ExtAuthScheme>('Scheme', ['https', 'http'], EXTAUTH_DEFAULTS.scheme),
    timeoutMs,
    failureAllow: bool('FailureAllow', EXTAUTH_DEFAULTS.failureAllow),
    packAsBytes: bool('PackAsBytes', false),
    removeRequestBody: bool('RemoveRequestBody', false),
    includePeerCert: bool('IncludePeerCert', false),
    pathPrefix,
    upstreamHeaderPrefixes: Object.freeze(prefixes),
    ...(listenPort !== undefined ? { listenPort } : {}),
  });
  return { config, problems };
}

/** `host:port` for dialing (`[v6]:port` for an IPv6 address). */
export function authority(config: Pick<ExtAuthConfig, 'address' | 'port'>): string {
  return config.address.includes(':') ? `[${config.address}]:${config.port}` : `${config.address}:${config.port}`;
}
