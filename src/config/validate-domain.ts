/**
 * Validation of `domain` and `deployment` records: their shape tables and the rules that need other
 * records (a route's workload and the domain's GVC must exist, a route's port must be one the
 * workload declares; a deployment's workload and locations must exist). Reports through a `Report`;
 * never throws.
 */
import type { Catalog } from './catalog.js';
import { linkOfKind, locationName, workloadRef } from './links.js';
import type { RawRecord } from './records.js';
import type { Settings } from './model.js';
import {
  anyObject, arr, bool, exactlyOne, int, isAbsent, isObject, item, mapOf, member, obj, objectAt, oneOf, str, type Check, type Report,
} from './schema.js';
import { discoveredNameOf } from '../discovery/names.js';
import { checkGvc, checkLinkOrg, checkLocationDefined, gvcLink, hostPort, locationRef, regex, workloadLink } from './validate-common.js';
import { isScalar } from './values.js';

const headerValue: Check = (v, at, r) => {
  if (!isScalar(v)) r.error(at, 'must be a string');
};

const route: Check = obj(
  {
    prefix: str({ test: [(s) => s.startsWith('/'), 'must start with /'] }),
    regex,
    replacePrefix: str(),
    workloadLink,
    port: int(1, 65535),
    replica: int(0),
    hostPrefix: str(),
    headers: obj({ request: obj({ set: mapOf(headerValue) }) }),
  },
  {
    required: ['workloadLink'],
    refine: (o, at, r) => {
      exactlyOne(o, ['prefix', 'regex'], at, r);
      if (!isAbsent(o.replacePrefix) && isAbsent(o.prefix)) r.error(member(at, 'replacePrefix'), 'needs a prefix route');
    },
  },
);

export const domainShape: Check = obj({
  spec: obj({
    gvcLink,
    dnsMode: oneOf(['cname', 'ns']),
    certChallengeType: str(),
    acceptAllHosts: bool,
    ports: arr(obj(
      { number: int(1, 65535), protocol: oneOf(['http', 'http2', 'tcp']), routes: arr(route), cors: anyObject, tls: anyObject },
      { required: ['number'] },
    )),
  }),
});

/** Port numbers a workload declares (`ports[].number`, or a container's deprecated `port`). */
export function declaredPorts(workload: RawRecord | undefined): number[] {
  const spec = objectAt(workload, 'spec');
  const out: number[] = [];
  for (const c of Array.isArray(spec.containers) ? spec.containers : []) {
    if (!isObject(c)) continue;
    if (Array.isArray(c.ports)) {
      for (const p of c.ports) if (isObject(p) && typeof p.number === 'number') out.push(p.number);
    } else if (typeof c.port === 'number') out.push(c.port);
  }
  return out;
}

function checkRoute(routeRecord: Record<string, unknown>, at: string, domainGvc: string | undefined, catalog: Catalog, r: Report): void {
  const ref = workloadRef(routeRecord.workloadLink, domainGvc);
  if (!ref) return;
  const here = member(at, 'workloadLink');
  checkLinkOrg(ref, catalog, here, r);
  if (ref.gvc === undefined) return r.error(here, 'a //workload/NAME link needs the domain\'s spec.gvcLink');
  const workload = catalog.workloads.get(`${ref.gvc}/${ref.name}`);
  if (!workload) return r.error(here, `points to workload ${ref.name} in gvc ${ref.gvc}, which is not defined`);
  const ports = declaredPorts(workload);
  if (typeof routeRecord.port === 'number' && ports.length > 0 && !ports.includes(routeRecord.port)) {
    r.error(member(at, 'port'), `is not a port of workload ${ref.name} (declared: ${ports.join(', ')})`);
  }
}

export function checkDomainRefs(record: RawRecord, catalog: Catalog, r: Report): void {
  const spec = objectAt(record, 'spec');
  const link = linkOfKind(spec.gvcLink, 'gvc');
  if (link) {
    checkLinkOrg(link, catalog, 'spec.gvcLink', r);
    if (!catalog.gvcs.has(link.name)) r.error('spec.gvcLink', `points to gvc ${link.name}, which is not defined`);
  }
  const numbers = new Set<number>();
  (Array.isArray(spec.ports) ? spec.ports : []).forEach((p, i) => {
    if (!isObject(p)) return;
    const at = item('spec.ports', i);
    if (typeof p.number === 'number') {
      if (numbers.has(p.number)) r.error(member(at, 'number'), `port ${p.number} is listed twice`);
      numbers.add(p.number);
    }
    const prefixes = new Set<string>();
    (Array.isArray(p.routes) ? p.routes : []).forEach((rt, j) => {
      if (!isObject(rt)) return;
      const routeAt = item(member(at, 'routes'), j);
      if (typeof rt.prefix === 'string') {
        // Two routes with one prefix: the second could never match.
        if (prefixes.has(rt.prefix)) r.error(member(routeAt, 'prefix'), `duplicate prefix ${rt.prefix} on this port`);
        prefixes.add(rt.prefix);
      }
      checkRoute(rt, routeAt, link?.name, catalog, r);
    });
  });
}

const replica: Check = obj(
  { name: str({ nonEmpty: true }), address: hostPort, sidecar: hostPort, mesh: hostPort, ready: bool },
  { required: ['name', 'address'] },
);

export const deploymentShape: Check = obj({
  status: obj({
    locations: arr(obj(
      { name: locationRef, replicas: arr(replica) },
      { required: ['name'] },
    )),
  }),
});

export function checkDeploymentRefs(record: RawRecord, catalog: Catalog, r: Report, settings: Settings): void {
  const gvc = checkGvc(record, catalog, r, settings.gvc);
  if (gvc !== undefined && !catalog.workloads.has(`${gvc}/${String(record.name)}`)) {
    r.error('name', `names workload ${String(record.name)}, which is not defined in gvc ${gvc}`);
  }
  const status = objectAt(record, 'status');
  const seen = new Set<string>();
  (Array.isArray(status.locations) ? status.locations : []).forEach((loc, i) => {
    if (!isObject(loc)) return;
    const at = item('status.locations', i);
    const name = locationName(loc.name);
    if (name !== undefined) {
      if (seen.has(name)) r.error(member(at, 'name'), `location ${name} is listed twice`);
      seen.add(name);
      if (checkLocationDefined(name, catalog, member(at, 'name'), r) && gvc !== undefined && !(catalog.gvcLocations.get(gvc) ?? []).includes(name)) {
        r.warn(member(at, 'name'), `location ${name} is not one of gvc ${gvc}'s locations: its replicas get no traffic`);
      }
    }
    const names = new Set<string>();
    (Array.isArray(loc.replicas) ? loc.replicas : []).forEach((rep, j) => {
      const n = isObject(rep) ? rep.name : undefined;
      if (typeof n !== 'string') return;
      if (names.has(n)) r.error(`${at}.replicas[${j}].name`, `duplicate replica name ${n} in this location`);
      names.add(n);
      const rp = rep as { address?: unknown; sidecar?: unknown; mesh?: unknown };
      if (typeof rp.address !== 'string') return;
      const dns = discoveredNameOf({ address: rp.address, ...(typeof rp.sidecar === 'string' ? { sidecar: rp.sidecar } : {}), ...(typeof rp.mesh === 'string' ? { mesh: rp.mesh } : {}) });
      if (dns.error) r.error(`${at}.replicas[${j}]`, dns.error);
    });
  });
}
