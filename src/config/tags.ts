/**
 * The workload tags that carry behaviour (`svc/…`, with the vendor prefix from the settings: `cpln/…`
 * under `--vendor cpln`), one table row per tag with the rule its value must meet, and the tag
 * checks of validation. An unknown vendor tag close to a known one gets a "did you mean" (suggest.ts). Values may be strings, numbers or booleans and are judged in their string
 * form (`true` and `"true"` agree). An unknown vendor tag is a warning, not an error: the platform
 * adds tags over time and a newer record must still load. Tags without the vendor prefix are free.
 */
import type { Report } from './schema.js';
import { member } from './schema.js';
import { didYouMean } from './suggest.js';
import {
  isAddressOrCidr, isHostOrIp, isScalar, parseBool, parseDuration, parsePort, parseSeconds, scalarText, type Scalar,
} from './values.js';

/** A rule on a tag value: the error message when the value breaks it. */
type TagRule = (value: Scalar) => string | undefined;

const boolean: TagRule = (v) => (parseBool(v) === undefined ? 'must be true or false' : undefined);
const port: TagRule = (v) => (parsePort(v) === undefined ? 'must be a port number from 1 to 65535' : undefined);
const host: TagRule = (v) => (isHostOrIp(scalarText(v)) ? undefined : 'must be a host name or an IP address, without a port');
const text: TagRule = (v) => (scalarText(v).trim() === '' ? 'must not be empty' : undefined);
const enumOf = (...values: string[]): TagRule => (v) =>
  values.includes(scalarText(v)) ? undefined : `must be one of ${values.join(', ')}`;

const timeoutOverride: TagRule = (v) => {
  const s = parseSeconds(v);
  return s !== undefined && s > 0 && s <= 3600 ? undefined : 'must be a number of seconds greater than 0 and at most 3600';
};
const duration: TagRule = (v) => {
  const ms = typeof v === 'boolean' ? undefined : parseDuration(v);
  return ms !== undefined && ms > 0 ? undefined : 'must be a positive duration such as 200ms, 1s, 1.5s or 1m (a bare number is seconds)';
};
const cidrs: TagRule = (v) =>
  scalarText(v).split(',').every((c) => isAddressOrCidr(c.trim())) ? undefined : 'must be CIDR ranges or addresses, comma-separated';
const path: TagRule = (v) => (scalarText(v).startsWith('/') ? undefined : 'must be a path starting with /');
const HEADER_TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const headerPrefixes: TagRule = (v) =>
  scalarText(v).split(',').every((p) => HEADER_TOKEN.test(p.trim())) ? undefined : 'must be header-name prefixes, comma-separated';

/** `svc/rateLimitDescriptors` entries (DESIGN §7). */
const DESCRIPTOR = /^(?:authority|host|authorization|path|method|remote_address|header:[!#$%&'*+.^_`|~0-9A-Za-z-]+)$/;
const descriptors: TagRule = (v) => {
  const bad = scalarText(v).split(',').map((d) => d.trim()).filter((d) => !DESCRIPTOR.test(d));
  return bad.length === 0
    ? undefined
    : `unknown descriptor ${bad.map((d) => JSON.stringify(d)).join(', ')} (allowed: authority, host, authorization, path, method, remote_address, header:NAME)`;
};

/** Tag name without the vendor prefix → rule. */
export const TAG_RULES: Readonly<Record<string, TagRule>> = {
  publishNotReadyAddresses: boolean,
  protocol: enumOf('http', 'http2', 'grpc', 'tcp'),
  bypassProxyOutbound: boolean,
  disableServiceMeshInboundPort: port,
  disableServiceMeshOutboundPort: port,
  multiZone: boolean,
  skipLocationEndpointHeaders: boolean,
  discoverCrossGvcReplicas: boolean,
  tracingDisabled: boolean,
  largeDisk: boolean,
  timeoutSecondsOverride: timeoutOverride,
  disableServiceMesh: boolean,
  disableServiceMeshOutboundCIDR: cidrs,
  k8sClusterRole: text,
  ignore: boolean,
  externalAuthAddress: host,
  externalAuthPort: port,
  externalAuthProtocol: enumOf('grpc', 'http'),
  externalAuthScheme: enumOf('https', 'http'),
  externalAuthTimeout: duration,
  externalAuthFailureAllow: boolean,
  externalAuthPackAsBytes: boolean,
  externalAuthRemoveRequestBody: boolean,
  externalAuthIncludePeerCert: boolean,
  externalAuthPathPrefix: path,
  externalAuthUpstreamHeaderPrefixes: headerPrefixes,
  externalAuthListenPort: port,
  rateLimitAddress: host,
  rateLimitPort: port,
  rateLimitDomain: text,
  rateLimitScheme: enumOf('https', 'http'),
  rateLimitDescriptors: descriptors,
  // svcproxy's extension (DESIGN §7): fail open when the rate-limit service fails.
  rateLimitFailureAllow: boolean,
};

const TAG_NAMES: readonly string[] = Object.keys(TAG_RULES);

/** Checks a record's `tags`: every value a scalar. */
export function checkTagValues(tags: unknown, at: string, r: Report): void {
  if (typeof tags !== 'object' || tags === null || Array.isArray(tags)) return r.error(at, 'must be an object');
  for (const [key, value] of Object.entries(tags)) {
    if (!isScalar(value)) r.error(member(at, key), 'must be a string, number or boolean');
  }
}

/**
 * Checks the vendor tags of a workload against `TAG_RULES`; unknown ones are warnings, and so are
 * external-authorization or rate-limit tags without the address that turns the feature on.
 */
export function checkVendorTags(tags: Readonly<Record<string, unknown>>, vendor: string, at: string, r: Report): void {
  const prefix = `${vendor}/`;
  for (const [key, value] of Object.entries(tags)) {
    if (!key.startsWith(prefix) || !isScalar(value)) continue;
    const rule = TAG_RULES[key.slice(prefix.length)];
    if (!rule) {
      const hint = didYouMean(key.slice(prefix.length), TAG_NAMES, (name) => `${prefix}${name}`);
      r.warn(member(at, key), `unknown ${prefix} tag (${hint === '' ? '' : `${hint} `}ignored)`);
      continue;
    }
    const problem = rule(value);
    if (problem) r.error(member(at, key), problem);
  }
  // Said once per load or reload, where the configuration's warnings are logged (not per request).
  const ignore = tags[`${prefix}ignore`];
  if (isScalar(ignore) && parseBool(ignore) === true) {
    r.warn(member(at, `${prefix}ignore`), 'true: the workload is ignored (svcproxy up starts none of its replicas; its host names answer 404)');
  }
  for (const feature of ['externalAuth', 'rateLimit']) {
    const address = `${prefix}${feature}Address`;
    const others = Object.keys(tags).filter((k) => k.startsWith(`${prefix}${feature}`) && k !== address);
    if (tags[address] === undefined && others.length > 0) {
      r.warn(member(at, address), `not set, so ${others.join(', ')} ${others.length === 1 ? 'has' : 'have'} no effect`);
    }
  }
}

/** Every tag with its value as a string. */
export function tagStrings(tags: Readonly<Record<string, unknown>> | undefined): Readonly<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(tags ?? {})) if (isScalar(value)) out[key] = scalarText(value);
  return Object.freeze(out);
}
