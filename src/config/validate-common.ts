/**
 * Shape tables shared by several kinds: links, CIDRs, `host:port`, `spec.tracing` (org and GVC) and
 * `spec.sidecar.envoy` (GVC and workload), plus the whole `org` and `location` tables. Each is a
 * `Check` from schema.ts, so it reports every problem at its path and never throws.
 */
import type { Catalog } from './catalog.js';
import { GVC_LINK_FORMS, LOCATION_LINK_FORMS, WORKLOAD_LINK_FORMS, linkOfKind, locationName } from './links.js';
import { workloadGvc, type RawRecord } from './records.js';
import {
  all, anyObject, arr, bool, checkMember, exactlyOne, int, isAbsent, isObject, mapOf, member, num, obj, oneOf, str, type Check, type Fields, type Report,
} from './schema.js';
import { PLATFORM_LOCATION_NAMES } from './platform-locations.js';
import { didYouMean } from './suggest.js';
import { count } from '../summary.js';
import { NAME_MAX, NAME_PATTERN, NAME_RULE, isAddressOrCidr, isScalar, parseDuration, parseHostPort, regexError } from './values.js';

export const strings: Check = arr(str());

/** A record or container name (values.ts `NAME_PATTERN`, at most 64 characters). */
export const plainName: Check = str({ max: NAME_MAX, test: [(s) => NAME_PATTERN.test(s), NAME_RULE] });

const linkCheck = (kind: string, forms: string): Check => (v, at, r) => {
  if (!linkOfKind(v, kind)) r.error(at, `must be a ${kind} link (${forms})`);
};
export const locationLink = linkCheck('location', LOCATION_LINK_FORMS);
export const workloadLink = linkCheck('workload', WORKLOAD_LINK_FORMS);
export const gvcLink = linkCheck('gvc', GVC_LINK_FORMS);

/** A location as a plain name or a location link. */
export const locationRef: Check = (v, at, r) => {
  if (locationName(v) === undefined) r.error(at, `must be a location name or link (${LOCATION_LINK_FORMS})`);
};

export const cidr: Check = (v, at, r) => {
  if (typeof v !== 'string' || !isAddressOrCidr(v)) r.error(at, 'must be an IPv4 or IPv6 address or CIDR range');
};

export const hostPort: Check = (v, at, r) => {
  if (typeof v !== 'string' || !parseHostPort(v)) r.error(at, 'must be host:port (a host name or IP address, and a port from 1 to 65535)');
};

export const regex: Check = (v, at, r) => {
  if (typeof v !== 'string') return r.error(at, 'must be a string');
  const problem = regexError(v);
  if (problem !== undefined) r.error(at, `does not compile: ${problem}`);
};

const durationObject: Check = obj({ seconds: int(0), nanos: int(0, 999_999_999) }, { closed: true });

/** A protobuf duration: a string (`1s`, `0.5s`, Go syntax) or `{seconds, nanos}`. */
const protoDuration: Check = (v, at, r) => {
  if (typeof v !== 'string') return durationObject(v, at, r);
  if (parseDuration(v) === undefined) r.error(at, 'must be a duration such as 1s or 0.5s, or {seconds, nanos}');
};

/** `a, b, c` of the first few names, then how many more. */
function someNames(names: readonly string[], shown = 5): string {
  const more = names.length - shown;
  return `${names.slice(0, shown).join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

/**
 * The GVC of a workload or deployment (`gvc`, or its links): given, well-formed and defined. A record
 * that names none was placed in the default GVC (applied.ts) unless there was none to place it in:
 * then it needs `--gvc`, as `cpln apply` does. `flagGvc` is `--gvc`, named when it is the undefined one.
 */
export function checkGvc(record: RawRecord, catalog: Catalog, r: Report, flagGvc?: string): string | undefined {
  const gvc = workloadGvc(record);
  if (gvc === undefined) {
    if (record.gvc === undefined || record.gvc === null) {
      const gvcs = [...catalog.gvcs.keys()];
      const defined = gvcs.length === 0 ? 'the records define no gvc' : `the records define ${count(gvcs.length, 'gvc')}: ${someNames(gvcs)}`;
      r.error('gvc', `is required: name the GVC here, or pass --gvc NAME as to cpln apply (${defined})`);
    } else {
      r.error('gvc', `must be a GVC name or link (${GVC_LINK_FORMS})`);
    }
    return undefined;
  }
  if (!catalog.gvcs.has(gvc)) {
    r.error('gvc', `points to gvc ${gvc}, which is not defined${gvc === flagGvc ? ' (--gvc names it: the records need a gvc record of that name)' : ''}`);
    return undefined;
  }
  return gvc;
}

/**
 * A location a record links by name: a location record, or one of the platform's own locations
 * (catalog.ts adds those that records link); otherwise an error at `at`, with the nearest known name.
 */
export function checkLocationDefined(name: string, catalog: Catalog, at: string, r: Report): boolean {
  if (catalog.locations.has(name)) return true;
  const hint = didYouMean(name, [...catalog.locations.keys(), ...PLATFORM_LOCATION_NAMES]);
  r.error(at, `points to location ${name}, which is not defined (no location record, and not one of the platform's locations${hint === '' ? '' : `; ${hint}`})`);
  return false;
}

/** An absolute link names its org: when there is an org record, it must be that one. */
export function checkLinkOrg(link: { readonly org?: string } | undefined, catalog: Catalog, at: string, r: Report): void {
  const org = catalog.org?.name;
  if (link?.org !== undefined && typeof org === 'string' && link.org !== org) {
    r.error(at, `points to org ${link.org}, but the org record is ${org}`);
  }
}

// ---- tracing ---------------------------------------------------------------------------------

const otelEndpoint: Check = str({
  nonEmpty: true,
  test: [
    (s) => parseHostPort(s) !== undefined || /^https?:\/\/[^/\s]+(?:\/\S*)?$/.test(s),
    'must be host:port (OTLP/gRPC) or an http:// or https:// URL (OTLP/HTTP)',
  ],
});
const vendorTracer: Check = obj({ endpoint: str({ nonEmpty: true }), credentials: str() });

const customTag: Check = (v, at, r) => {
  if (isScalar(v)) return;
  const literal = isObject(v) && isObject(v.literal) ? v.literal : undefined;
  if (!literal || !isScalar(literal.value)) r.error(at, 'must be a string or {literal: {value: STRING}}');
};

const PROVIDER_OWN = ['otel', 'controlplane'];
const provider: Check = obj(
  { otel: obj({ endpoint: otelEndpoint }, { required: ['endpoint'] }), controlplane: anyObject },
  {
    refine: (o, at, r) => {
      const vendors = Object.keys(o).filter((k) => !PROVIDER_OWN.includes(k));
      if (vendors.length > 1) r.error(at, `at most one tracing-vendor member besides otel and controlplane (found ${vendors.join(', ')})`);
      for (const k of vendors) vendorTracer(o[k], member(at, k), r);
    },
  },
);

const TRACING_OWN = ['sampling', 'customTags', 'provider'];
export const tracing: Check = obj(
  { sampling: num(0, 100), customTags: mapOf(customTag), provider },
  {
    refine: (o, at, r) => {
      // Any other member is the legacy `spec.tracing.<vendor>` form.
      const legacy = Object.keys(o).filter((k) => !TRACING_OWN.includes(k));
      if (legacy.length > 1) r.error(at, `at most one tracing-vendor member (found ${legacy.join(', ')})`);
      for (const k of legacy) vendorTracer(o[k], member(at, k), r);
    },
  },
);

// ---- sidecar.envoy ---------------------------------------------------------------------------

const ACCESS_LOG_NAME = 'envoy.access_loggers.http_grpc';

const accessLog: Check = obj({
  priority: num(),
  name: oneOf([ACCESS_LOG_NAME]),
  excludedWorkloads: strings,
  typed_config: obj({
    common_config: obj({
      log_name: str(),
      grpc_service: anyObject,
      transport_api_version: oneOf(['AUTO', 'V2', 'V3']),
      buffer_flush_interval: protoDuration,
      buffer_size_bytes: int(0),
      filter_state_objects_to_log: strings,
      grpc_stream_retry_policy: anyObject,
    }),
    additional_request_headers_to_log: strings,
    additional_response_headers_to_log: strings,
    additional_response_trailers_to_log: strings,
  }),
});

export const TLS_TRANSPORT_SOCKET = 'envoy.transport_sockets.tls';
export const UPSTREAM_TLS_CONTEXT = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';

/** Envoy's `DataSource` as the TLS context reads a CA: one of a file, inline text or base64 bytes. */
const dataSource: Check = obj(
  { filename: str({ nonEmpty: true }), inline_string: str({ nonEmpty: true }), inline_bytes: str({ nonEmpty: true, test: [(s) => /^[A-Za-z0-9+/_-]+=*$/.test(s), 'must be base64'] }) },
  { refine: (o, at, r) => exactlyOne(o, ['filename', 'inline_string', 'inline_bytes'], at, r) },
);

/** A client certificate: its chain and private key, both required (Envoy's `TlsCertificate`). */
const tlsCertificate: Check = obj({ certificate_chain: dataSource, private_key: dataSource }, { required: ['certificate_chain', 'private_key'] });

/**
 * `UpstreamTlsContext`, the members svcproxy reads (`sni`, `common_tls_context.validation_context
 * .trusted_ca`, `common_tls_context.tls_certificates`); Envoy's other members pass unchecked, and the
 * access-log client says which it ignores. A client context has at most one certificate, as in Envoy.
 */
const upstreamTlsContext: Check = obj({
  '@type': oneOf([UPSTREAM_TLS_CONTEXT]),
  sni: str({ max: 255 }),
  common_tls_context: obj({
    validation_context: obj({ trusted_ca: dataSource }),
    tls_certificates: all(arr(tlsCertificate), (v, at, r) => {
      if (Array.isArray(v) && v.length > 1) r.error(at, 'at most one certificate in a client (upstream) TLS context');
    }),
  }),
});

/** A cluster's `transport_socket`: any named socket; the TLS one's typed_config is checked. */
const transportSocket: Check = obj(
  { name: str({ nonEmpty: true }), typed_config: anyObject },
  {
    required: ['name'],
    refine: (o, at, r) => {
      if (o.name === TLS_TRANSPORT_SOCKET) checkMember(o, 'typed_config', at, r, upstreamTlsContext);
    },
  },
);

const cluster: Check = obj({
  name: str({ nonEmpty: true }),
  excludedWorkloads: strings,
  type: oneOf(['STATIC', 'STRICT_DNS', 'LOGICAL_DNS', 'EDS', 'ORIGINAL_DST']),
  load_assignment: obj({ cluster_name: str(), endpoints: arr(), policy: anyObject }),
  transport_socket: transportSocket,
});

const named: Check = obj({ name: str({ nonEmpty: true }) }, { required: ['name'] });

/** Envoy's route match, the subset the exclusion matcher implements (DESIGN §7). */
const routeMatch: Check = obj(
  {
    prefix: str({ test: [(s) => s.startsWith('/'), 'must start with /'] }),
    path: str({ test: [(s) => s.startsWith('/'), 'must start with /'] }),
    safe_regex: obj({ regex, google_re2: anyObject }, { required: ['regex'], closed: true }),
    headers: arr(named),
    query_parameters: arr(named),
    case_sensitive: bool,
  },
  {
    closed: true,
    refine: (o, at, r) => exactlyOne(o, ['prefix', 'path', 'safe_regex'], at, r),
  },
);

const port = int(1, 65535);
const exclusion = (withSvcPort: boolean): Check => {
  const fields: Fields = withSvcPort ? { match: routeMatch, port, svcPort: port } : { match: routeMatch, port };
  const names = Object.keys(fields).join(', ');
  return obj(fields, {
    closed: true,
    refine: (o, at, r) => {
      // An empty entry would exclude every request from the filter: say what it matches.
      if (Object.keys(fields).every((k) => isAbsent(o[k]))) r.error(at, `must have at least one of ${names}`);
    },
  });
};

export const sidecar: Check = obj(
  {
    envoy: obj(
      {
        accessLog: arr(accessLog),
        clusters: arr(cluster),
        excludedExternalAuth: arr(exclusion(true)),
        excludedRateLimit: arr(exclusion(false)),
      },
      { closed: true },
    ),
  },
  { closed: true },
);

// ---- org and location ------------------------------------------------------------------------

export const orgShape: Check = obj({
  spec: obj({ tracing }),
  status: obj({
    endpointPrefix: str({ test: [(s) => NAME_PATTERN.test(s) && s.length <= 63, 'must be a DNS label: lowercase letters, digits and hyphens'] }),
  }),
});

export const locationShape: Check = obj({
  provider: str({ nonEmpty: true }),
  region: str({ nonEmpty: true }),
  spec: obj({ enabled: bool }),
  status: obj({ latencyMs: num(0) }),
});
