/**
 * Validation of `workload` records: the shape table of `spec` (containers, ports, probes, options,
 * rollout, retry policy, firewall, sidecar), the vendor tags, and the rules that need other records
 * or several members at once (the GVC and `localOptions` locations must exist, `minScale ≤ maxScale`
 * after merging, unique container names and port numbers). Reports through a `Report`; never throws.
 */
import type { Catalog } from './catalog.js';
import { locationName } from './links.js';
import type { Settings } from './model.js';
import type { RawRecord } from './records.js';
import {
  anyObject, arr, bool, exactlyOne, int, isObject, item, member, num, obj, objectAt, oneOf, str, valueAt, type Check, type Fields, type Report,
} from './schema.js';
import { checkVendorTags } from './tags.js';
import { checkGvc, checkLocationDefined, cidr, locationRef, plainName, regex, sidecar, strings, workloadLink } from './validate-common.js';
import { isScalar, parseReplicaAmount } from './values.js';

export const PROTOCOLS = ['http', 'http2', 'grpc', 'tcp'];
export const WORKLOAD_TYPES = ['serverless', 'standard', 'stateful', 'cron'];

/** Envoy's `retry_on` conditions, HTTP and gRPC (DESIGN §7); HTTP status codes are allowed too. */
export const RETRY_CONDITIONS = [
  '5xx', 'gateway-error', 'reset', 'reset-before-request', 'connect-failure', 'envoy-ratelimited', 'retriable-4xx',
  'refused-stream', 'retriable-status-codes', 'retriable-headers', 'http3-post-connect-failure',
  'cancelled', 'deadline-exceeded', 'internal', 'resource-exhausted', 'unavailable',
];

const port = int(1, 65535);
const startsWithSlash = str({ test: [(s) => s.startsWith('/'), 'must start with /'] });

const probe: Check = obj(
  {
    httpGet: obj({
      path: startsWithSlash,
      port,
      scheme: oneOf(['HTTP', 'HTTPS']),
      host: str(),
      httpHeaders: arr(obj({ name: str({ nonEmpty: true }), value: str() }, { required: ['name', 'value'] })),
    }),
    tcpSocket: obj({ port, host: str() }),
    exec: obj({ command: arr(str()) }, {
      required: ['command'],
      refine: (o, at, r) => {
        if (Array.isArray(o.command) && o.command.length === 0) r.error(member(at, 'command'), 'must not be empty');
      },
    }),
    grpc: obj({ port, service: str() }),
    initialDelaySeconds: int(0),
    periodSeconds: int(1),
    timeoutSeconds: int(1),
    successThreshold: int(1),
    failureThreshold: int(1),
  },
  {
    refine: (o, at, r) => exactlyOne(o, ['httpGet', 'tcpSocket', 'exec', 'grpc'], at, r),
  },
);

const envValue: Check = (v, at, r) => {
  if (!isScalar(v)) r.error(at, 'must be a string');
};

const container: Check = obj(
  {
    name: plainName,
    image: str(),
    command: str(),
    args: strings,
    env: arr(obj({ name: str({ nonEmpty: true }), value: envValue }, { required: ['name'] })),
    ports: arr(obj({ number: port, protocol: oneOf(PROTOCOLS) }, { required: ['number'] })),
    port,
    readinessProbe: probe,
    livenessProbe: probe,
    volumes: arr(obj({ uri: str({ nonEmpty: true }), path: startsWithSlash, recoveryPolicy: oneOf(['retain', 'recycle']) }, { required: ['uri', 'path'] })),
  },
  { required: ['name'] },
);

const OPTION_FIELDS: Fields = {
  suspend: bool,
  timeoutSeconds: int(1, 600),
  debug: bool,
  capacityAI: bool,
  spot: bool,
  multiZone: obj({ enabled: bool }),
  autoscaling: obj({ minScale: int(0), maxScale: int(0), metric: str(), target: num(0), maxConcurrency: int(0), scaleToZeroDelay: int(0) }),
};

/** A count (`1`, or `'1'` as the platform writes it) or a percentage (`25%`): values.ts `parseReplicaAmount`. */
const countOrPercent: Check = (v, at, r) => {
  if (parseReplicaAmount(v) === undefined) r.error(at, "must be an integer of at least 0 (a number, or a string of digits such as '1') or a percentage such as 25%");
};

const retryCondition: Check = (v, at, r) => {
  const code = typeof v === 'number' ? String(v) : v;
  const ok = typeof code === 'string' && (RETRY_CONDITIONS.includes(code) || /^[1-5]\d\d$/.test(code));
  if (!ok) r.error(at, `must be a retry condition (${RETRY_CONDITIONS.join(', ')}) or an HTTP status code`);
};

export const workloadShape: Check = obj({
  spec: obj({
    type: oneOf(WORKLOAD_TYPES),
    containers: arr(container),
    defaultOptions: obj(OPTION_FIELDS),
    localOptions: arr(obj({ ...OPTION_FIELDS, location: locationRef }, { required: ['location'] })),
    rolloutOptions: obj({
      minReadySeconds: num(0),
      maxUnavailableReplicas: countOrPercent,
      maxSurgeReplicas: countOrPercent,
      scalingPolicy: oneOf(['OrderedReady', 'Parallel']),
      terminationGracePeriodSeconds: num(0),
    }),
    requestRetryPolicy: obj({ attempts: int(0), retryOn: arr(retryCondition) }),
    firewallConfig: obj({
      external: obj({
        inboundAllowCIDR: arr(cidr),
        inboundBlockedCIDR: arr(cidr),
        outboundAllowCIDR: arr(cidr),
        outboundBlockedCIDR: arr(cidr),
        outboundAllowHostname: strings,
        // Egress ports (src/firewall/egress.ts). The platform's own checks are narrower (80 to 65000,
        // some of its sidecar's ports reserved); svcproxy only asks for a port number.
        outboundAllowPort: arr(obj({ protocol: oneOf(['http', 'https', 'tcp']), number: port }, { required: ['protocol', 'number'], closed: true })),
        // The external firewall's header filters (src/firewall/external.ts): regexes must compile.
        http: obj({
          inboundHeaderFilter: arr(obj({ key: str({ nonEmpty: true }), allowedValues: arr(regex), blockedValues: arr(regex) }, { required: ['key'], closed: true })),
        }),
      }),
      internal: obj({
        inboundAllowType: oneOf(['none', 'same-gvc', 'same-org', 'workload-list']),
        inboundAllowWorkload: arr(workloadLink),
      }),
    }),
    loadBalancer: obj({ replicaDirect: bool }),
    sidecar,
    identityLink: str(),
    job: anyObject,
  }),
});

function scaleOf(options: unknown, key: 'minScale' | 'maxScale'): number | undefined {
  const v = valueAt(options, 'autoscaling', key);
  return typeof v === 'number' ? v : undefined;
}

/** `minScale ≤ maxScale` in `defaultOptions`, and in each `localOptions` entry merged over it. */
function checkScale(spec: Record<string, unknown>, r: Report): void {
  const defaults = objectAt(spec, 'defaultOptions');
  const [dMin, dMax] = [scaleOf(defaults, 'minScale'), scaleOf(defaults, 'maxScale')];
  if (dMin !== undefined && dMax !== undefined && dMin > dMax) {
    r.error('spec.defaultOptions.autoscaling.minScale', `must not exceed maxScale (${dMax})`);
  }
  const locals = Array.isArray(spec.localOptions) ? spec.localOptions : [];
  locals.forEach((local, i) => {
    const [lMin, lMax] = [scaleOf(local, 'minScale'), scaleOf(local, 'maxScale')];
    const [min, max] = [lMin ?? dMin, lMax ?? dMax];
    if (min === undefined || max === undefined || min <= max || (lMin === undefined && lMax === undefined)) return;
    const at = `spec.localOptions[${i}].autoscaling`;
    if (lMin !== undefined) r.error(`${at}.minScale`, `must not exceed maxScale (${max})`);
    else r.error(`${at}.maxScale`, `must not be less than minScale (${min})`);
  });
}

function checkContainers(spec: Record<string, unknown>, r: Report): void {
  const names = new Set<string>();
  const ports = new Map<number, string>();
  const containers = Array.isArray(spec.containers) ? spec.containers : [];
  containers.forEach((c, i) => {
    if (!isObject(c)) return;
    const at = item('spec.containers', i);
    if (typeof c.name === 'string') {
      if (names.has(c.name)) r.error(member(at, 'name'), `duplicate container name ${c.name}`);
      names.add(c.name);
    }
    const declared = Array.isArray(c.ports) ? c.ports : [];
    declared.forEach((p, j) => {
      const n = isObject(p) ? p.number : undefined;
      if (typeof n !== 'number') return;
      const owner = ports.get(n);
      if (owner !== undefined) r.error(`${at}.ports[${j}].number`, `port ${n} is already declared by container ${owner}`);
      else ports.set(n, String(c.name));
    });
  });
}

/** The rules of a workload that need other records or several members. */
export function checkWorkloadRefs(record: RawRecord, catalog: Catalog, r: Report, settings: Settings): void {
  const spec = objectAt(record, 'spec');
  const gvc = checkGvc(record, catalog, r, settings.gvc);
  if (isObject(record.tags)) checkVendorTags(record.tags, settings.vendor, 'tags', r);
  checkScale(spec, r);
  checkContainers(spec, r);

  const seen = new Set<string>();
  const locals = Array.isArray(spec.localOptions) ? spec.localOptions : [];
  locals.forEach((local, i) => {
    const name = locationName(valueAt(local, 'location'));
    if (name === undefined) return;
    const at = `spec.localOptions[${i}].location`;
    if (seen.has(name)) r.error(at, `location ${name} already has options`);
    seen.add(name);
    if (checkLocationDefined(name, catalog, at, r) && gvc !== undefined && !(catalog.gvcLocations.get(gvc) ?? []).includes(name)) {
      r.warn(at, `location ${name} is not one of gvc ${gvc}'s locations (ignored)`);
    }
  });

  const allow = objectAt(spec, 'firewallConfig', 'external').inboundAllowCIDR;
  if (spec.type !== 'cron' && (!Array.isArray(allow) || allow.length === 0)) {
    r.warn('spec.firewallConfig.external.inboundAllowCIDR', 'not set: the workload accepts no external traffic');
  }
}
