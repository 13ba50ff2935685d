import t from 'tap';
import { defaultSettings } from '../../src/config/index.js';
import { toSourced } from '../../src/config/snapshot.js';
import { validate } from '../../src/config/validate.js';
import { baseRecords, find, setPath, type Rec } from '../fixtures/config/base.js';

interface Case {
  /** The record to change, `kind/name` of the base set. */
  readonly record: string;
  /** Dotted path → new value (`undefined` deletes). */
  readonly set?: Readonly<Record<string, unknown>>;
  /** Records added to the base set. */
  readonly add?: readonly Rec[];
  /** Exactly the errors expected (a trailing `…` matches any rest of the line). */
  readonly errors: readonly string[];
  readonly warnings?: readonly string[];
}

function run(c: Case, settings = defaultSettings) {
  const records = baseRecords();
  const target = find(records, c.record);
  for (const [path, value] of Object.entries(c.set ?? {})) setPath(target, path, value);
  records.push(...structuredClone([...(c.add ?? [])]));
  return validate(toSourced(records), settings);
}

/** `actual`, with each line that an expected `prefix…` line matches replaced by that line. */
function normalize(actual: readonly string[], expected: readonly string[]): string[] {
  return actual.map((a, i) => {
    const e = expected[i];
    return e !== undefined && e.endsWith('…') && a.startsWith(e.slice(0, -1)) ? e : a;
  });
}

const LOC_FORMS = '//location/NAME or /org/ORG/location/NAME';
const NOT_DEFINED = "which is not defined (no location record, and not one of the platform's locations";
const WL_FORMS = '//workload/NAME, //gvc/GVC/workload/NAME or /org/ORG/gvc/GVC/workload/NAME';
const TERMS = 'spec.staticPlacement.locationQuery.spec.terms[0]';
const ENVOY = 'spec.sidecar.envoy';
const C0 = 'spec.containers[0]';

const CASES: Readonly<Record<string, Case>> = {
  // ---- common fields
  'name too long': { record: 'workload/spare', set: { name: 'a'.repeat(65) }, errors: [`workload/${'a'.repeat(65)}: name: must be at most 64 characters`] },
  'name with capitals': {
    record: 'workload/spare', set: { name: 'Spare' },
    errors: ['workload/Spare: name: must be lowercase letters, digits and hyphens, starting and ending with a letter or digit'],
  },
  'name ending in a hyphen': { record: 'workload/spare', set: { name: 'spare-' }, errors: ['workload/spare-: name: must be lowercase letters, digits and hyphens, starting and ending with a letter or digit'] },
  // gcp-us-east1 is one of the platform's own locations: the links to it still resolve without the record.
  'name not a string': { record: 'location/gcp-us-east1', set: { name: 42 }, errors: ['location/42: name: must be a string'] },
  'name not a string, a location of no platform': {
    record: 'location/gcp-us-east1', set: { name: 42 },
    add: [{ kind: 'location', name: 'lab-1', provider: 'lab', region: '1' }, { kind: 'gvc', name: 'lab', spec: { staticPlacement: { locationLinks: ['//location/lab-2'] } } }],
    errors: ['location/42: name: must be a string', `gvc/lab: spec.staticPlacement.locationLinks[0]: points to location lab-2, ${NOT_DEFINED}; did you mean "lab-1"?)`],
  },
  'name missing': { record: 'workload/spare', set: { name: undefined }, errors: ['workload/?: name: is required'] },
  'kind missing': { record: 'workload/spare', set: { kind: undefined }, errors: ['?/spare: kind: is required'] },
  'kind not a string': { record: 'workload/spare', set: { kind: 7 }, errors: ['7/spare: kind: must be a string'] },
  'description too long': { record: 'workload/spare', set: { description: 'x'.repeat(251) }, errors: ['workload/spare: description: must be at most 250 characters'] },
  'description at the limit': { record: 'workload/spare', set: { description: 'x'.repeat(250) }, errors: [] },
  'tag value an object': { record: 'gvc/demo', set: { 'tags.team': { a: 1 } }, errors: ['gvc/demo: tags.team: must be a string, number or boolean'] },
  'tags not an object': { record: 'gvc/demo', set: { tags: ['a'] }, errors: ['gvc/demo: tags: must be an object'] },
  'platform kind svcproxy does not read': {
    record: 'org/acme', add: [{ kind: 'secret', name: 's' }], errors: [],
    warnings: ['secret/s: kind: "secret" is a platform kind svcproxy does not read; not checked'],
  },
  'a platform kind svcproxy does not read: its common members are checked': {
    record: 'org/acme', add: [{ kind: 'secret', name: 'Bad Name', description: 'x'.repeat(251), tags: { a: [1] } }],
    errors: [
      'secret/Bad Name: name: must be lowercase letters, digits and hyphens, starting and ending with a letter or digit',
      'secret/Bad Name: description: must be at most 250 characters',
      'secret/Bad Name: tags.a: must be a string, number or boolean',
    ],
    warnings: ['secret/Bad Name: kind: "secret" is a platform kind svcproxy does not read; not checked'],
  },
  'misspelt kind': {
    record: 'org/acme', add: [{ kind: 'wrokload', name: 'w' }, { kind: 'Workload', name: 'v' }, { kind: 'frobnicator', name: 'f' }],
    errors: [
      'wrokload/w: kind: "wrokload" is not a platform kind (did you mean "workload"?)',
      'Workload/v: kind: "Workload" is not a platform kind (did you mean "workload"?)',
      'frobnicator/f: kind: "frobnicator" is not a platform kind (svcproxy reads org, location, gvc, workload, domain, deployment)',
    ],
  },
  'a rate-limit rules document among records': {
    record: 'org/acme', add: [{ domain: 'shop', descriptors: [] }],
    errors: ['?/?: kind: is required (this is a rate-limit rules document: `svcproxy ratelimit --config` reads it)'],
  },
  'duplicate workload': { record: 'org/acme', add: [{ kind: 'workload', name: 'spare', gvc: 'demo' }], errors: ['workload/spare: name: duplicate: also defined in inline'] },
  'same workload name in another gvc': {
    record: 'org/acme', add: [{ kind: 'gvc', name: 'other', spec: { staticPlacement: { locationLinks: ['//location/aws-us-west-2'] } } }, { kind: 'workload', name: 'spare', gvc: 'other', spec: { type: 'cron' } }], errors: [],
  },
  'duplicate domain, other case and a trailing dot': { record: 'org/acme', add: [{ kind: 'domain', name: 'Example.COM.' }], errors: ['domain/Example.COM.: name: duplicate: also defined in inline'] },
  'second org': { record: 'org/acme', add: [{ kind: 'org', name: 'other' }], errors: ['org/other: name: only one org record is allowed (org/acme is in inline)'] },

  // ---- org and location
  'org endpoint prefix': { record: 'org/acme', set: { 'status.endpointPrefix': 'Bad_Prefix' }, errors: ['org/acme: status.endpointPrefix: must be a DNS label: lowercase letters, digits and hyphens'] },
  'location latency negative': { record: 'location/gcp-us-east1', set: { 'status.latencyMs': -1 }, errors: ['location/gcp-us-east1: status.latencyMs: must be a number of at least 0'] },
  'location provider empty': { record: 'location/gcp-us-east1', set: { provider: '' }, errors: ['location/gcp-us-east1: provider: must not be empty'] },

  // ---- gvc
  'alias too short': { record: 'gvc/demo', set: { alias: 'abc' }, errors: ['gvc/demo: alias: must be exactly 13 lowercase letters or digits'] },
  'alias with capitals': { record: 'gvc/demo', set: { alias: 'ABCDEFGHIJKLM' }, errors: ['gvc/demo: alias: must be exactly 13 lowercase letters or digits'] },
  'alias taken': {
    record: 'gvc/demo', set: { alias: 'aaaaaaaaaaaaa' }, add: [{ kind: 'gvc', name: 'two', alias: 'aaaaaaaaaaaaa', spec: { staticPlacement: { locationLinks: ['//location/aws-us-west-2'] } } }],
    errors: ['gvc/two: alias: aaaaaaaaaaaaa is already the alias of gvc demo'],
  },
  'naming format enum': { record: 'gvc/demo', set: { 'spec.endpointNamingFormat': 'short' }, errors: ['gvc/demo: spec.endpointNamingFormat: must be one of default, legacy, org'] },
  'org naming with the org prefix': {
    record: 'gvc/demo', set: { 'spec.endpointNamingFormat': 'org' }, add: [],
    errors: [],
  },
  'location link malformed': {
    record: 'gvc/demo', set: { 'spec.staticPlacement.locationLinks[0]': 'aws-us-west-2' },
    errors: [`gvc/demo: spec.staticPlacement.locationLinks[0]: must be a location link (${LOC_FORMS})`],
  },
  'location link to a workload': {
    record: 'gvc/demo', set: { 'spec.staticPlacement.locationLinks[0]': '//gvc/demo/workload/api' },
    errors: [`gvc/demo: spec.staticPlacement.locationLinks[0]: must be a location link (${LOC_FORMS})`],
  },
  'location link to nothing': {
    record: 'gvc/demo', set: { 'spec.staticPlacement.locationLinks[2]': '//location/mars' },
    errors: ['gvc/demo: spec.staticPlacement.locationLinks[2]: points to location mars, which is not defined (no location record, and not one of the platform\'s locations)'],
  },
  'location link of another org': {
    record: 'gvc/demo', set: { 'spec.staticPlacement.locationLinks[0]': '/org/other/location/aws-us-west-2' },
    errors: ['gvc/demo: spec.staticPlacement.locationLinks[0]: points to org other, but the org record is acme'],
  },
  'location link absolute': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationLinks[0]': '/org/acme/location/aws-us-west-2' }, errors: [] },
  'query match enum': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationQuery.spec.match': 'some' }, errors: ['gvc/demo: spec.staticPlacement.locationQuery.spec.match: must be one of all, any, none'] },
  'term op enum': {
    record: 'gvc/demo', set: { [`${TERMS}.op`]: 'like', [`${TERMS}.property`]: 'provider' },
    errors: [`gvc/demo: ${TERMS}.op: must be one of =, >, >=, <, <=, !=, ~, =~, exists, !exists, contains`],
  },
  'term unknown member': {
    record: 'gvc/demo', set: { [`${TERMS}.property`]: 'provider', [`${TERMS}.extra`]: 1 },
    errors: [`gvc/demo: ${TERMS}.extra: unknown member (allowed: op, property, rel, tag, value)`],
  },
  'term value an object': {
    record: 'gvc/demo', set: { [`${TERMS}.property`]: 'provider', [`${TERMS}.value`]: { a: 1 } },
    errors: [`gvc/demo: ${TERMS}.value: must be a string, number or boolean`],
  },
  'term without a subject': { record: 'gvc/demo', set: { [`${TERMS}.value`]: 'aws' }, errors: [`gvc/demo: ${TERMS}: must have exactly one of property, rel, tag`] },
  'term property not a string': { record: 'gvc/demo', set: { [`${TERMS}.property`]: 5 }, errors: [`gvc/demo: ${TERMS}.property: must be a string`] },
  'terms not an array': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationQuery.spec.terms': {} }, errors: ['gvc/demo: spec.staticPlacement.locationQuery.spec.terms: must be an array'] },
  'sort order enum': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationQuery.spec.sort.order': 'up' }, errors: ['gvc/demo: spec.staticPlacement.locationQuery.spec.sort.order: must be one of asc, desc'] },
  'location options unknown member': {
    record: 'gvc/demo', set: { 'spec.staticPlacement.locationOptions[0].weight': 3 },
    errors: ['gvc/demo: spec.staticPlacement.locationOptions[0].weight: unknown member (allowed: locationLink, routingTier, latencyOffsetMs, latencyToleranceMs)'],
  },
  'routing tier not an integer': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationOptions[0].routingTier': 1.5 }, errors: ['gvc/demo: spec.staticPlacement.locationOptions[0].routingTier: must be an integer'] },
  'latency offset a string': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationOptions[0].latencyOffsetMs': '5' }, errors: ['gvc/demo: spec.staticPlacement.locationOptions[0].latencyOffsetMs: must be an integer'] },
  'latency tolerance negative': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationOptions[0].latencyToleranceMs': -1 }, errors: ['gvc/demo: spec.staticPlacement.locationOptions[0].latencyToleranceMs: must be an integer of at least 0'] },
  'location options without a link': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationOptions[0].locationLink': undefined }, errors: ['gvc/demo: spec.staticPlacement.locationOptions[0].locationLink: is required'] },
  'location options to nothing': { record: 'gvc/demo', set: { 'spec.staticPlacement.locationOptions[0].locationLink': '//location/mars' }, errors: ['gvc/demo: spec.staticPlacement.locationOptions[0].locationLink: points to location mars, which is not defined (no location record, and not one of the platform\'s locations)'] },
  'alias workload link to nothing': { record: 'gvc/demo', set: { 'spec.aliasWorkloadLink': '//workload/nope' }, errors: ['gvc/demo: spec.aliasWorkloadLink: points to workload nope, which is not defined in gvc demo'] },
  'alias workload link malformed': { record: 'gvc/demo', set: { 'spec.aliasWorkloadLink': 'api' }, errors: [`gvc/demo: spec.aliasWorkloadLink: must be a workload link (${WL_FORMS})`] },
  'alias workload of another gvc': { record: 'gvc/demo', set: { 'spec.aliasWorkloadLink': '//gvc/other/workload/api' }, errors: ['gvc/demo: spec.aliasWorkloadLink: must point to a workload of this GVC, not of gvc other'] },
  'tracing sampling over 100': { record: 'gvc/demo', set: { 'spec.tracing.sampling': 150 }, errors: ['gvc/demo: spec.tracing.sampling: must be a number from 0 to 100'] },
  'tracing two vendors': {
    record: 'gvc/demo', set: { 'spec.tracing.provider': { otel: { endpoint: 'c:4317' }, lightstep: { endpoint: 'x' }, datadog: { endpoint: 'y' } } },
    errors: ['gvc/demo: spec.tracing.provider: at most one tracing-vendor member besides otel and controlplane (found lightstep, datadog)'],
  },
  'tracing otel endpoint': {
    record: 'gvc/demo', set: { 'spec.tracing.provider.otel.endpoint': 'collector' },
    errors: ['gvc/demo: spec.tracing.provider.otel.endpoint: must be host:port (OTLP/gRPC) or an http:// or https:// URL (OTLP/HTTP)'],
  },
  'tracing custom tag shape': { record: 'gvc/demo', set: { 'spec.tracing.customTags.env': { literal: {} } }, errors: ['gvc/demo: spec.tracing.customTags.env: must be a string or {literal: {value: STRING}}'] },
  'tracing legacy vendor endpoint': { record: 'gvc/demo', set: { 'spec.tracing.lightstep.endpoint': 5 }, errors: ['gvc/demo: spec.tracing.lightstep.endpoint: must be a string'] },
  'sidecar unknown member': {
    record: 'gvc/demo', set: { [`${ENVOY}.filters`]: [] },
    errors: [`gvc/demo: ${ENVOY}.filters: unknown member (allowed: accessLog, clusters, excludedExternalAuth, excludedRateLimit)`],
  },
  'sidecar proxy other than envoy': { record: 'gvc/demo', set: { 'spec.sidecar.nginx': {} }, errors: ['gvc/demo: spec.sidecar.nginx: unknown member (allowed: envoy)'] },
  'access log name': { record: 'gvc/demo', set: { [`${ENVOY}.accessLog[0].name`]: 'file' }, errors: [`gvc/demo: ${ENVOY}.accessLog[0].name: must be one of envoy.access_loggers.http_grpc`] },
  'access log api version': {
    record: 'gvc/demo', set: { [`${ENVOY}.accessLog[0].typed_config.common_config.transport_api_version`]: 'V4' },
    errors: [`gvc/demo: ${ENVOY}.accessLog[0].typed_config.common_config.transport_api_version: must be one of AUTO, V2, V3`],
  },
  'access log buffer size': { record: 'gvc/demo', set: { [`${ENVOY}.accessLog[0].typed_config.common_config.buffer_size_bytes`]: 1.5 }, errors: [`gvc/demo: ${ENVOY}.accessLog[0].typed_config.common_config.buffer_size_bytes: must be an integer of at least 0`] },
  'access log flush interval': { record: 'gvc/demo', set: { [`${ENVOY}.accessLog[0].typed_config.common_config.buffer_flush_interval`]: 'soon' }, errors: [`gvc/demo: ${ENVOY}.accessLog[0].typed_config.common_config.buffer_flush_interval: must be a duration such as 1s or 0.5s, or {seconds, nanos}`] },
  'cluster type': { record: 'gvc/demo', set: { [`${ENVOY}.clusters[0].type`]: 'DNS' }, errors: [`gvc/demo: ${ENVOY}.clusters[0].type: must be one of STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST`] },
  'cluster transport socket without a name': {
    record: 'gvc/demo', set: { [`${ENVOY}.clusters[0].transport_socket`]: { typed_config: {} } },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.name: is required`],
  },
  'cluster TLS context of another type': {
    record: 'gvc/demo', set: { [`${ENVOY}.clusters[0].transport_socket`]: { name: 'envoy.transport_sockets.tls', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext' } } },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config["@type"]: must be one of type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`],
  },
  'cluster TLS sni not a string': {
    record: 'gvc/demo', set: { [`${ENVOY}.clusters[0].transport_socket`]: { name: 'envoy.transport_sockets.tls', typed_config: { sni: 42 } } },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.sni: must be a string`],
  },
  'cluster TLS trusted_ca with two sources': {
    record: 'gvc/demo',
    set: { [`${ENVOY}.clusters[0].transport_socket`]: { name: 'envoy.transport_sockets.tls', typed_config: { common_tls_context: { validation_context: { trusted_ca: { filename: '/ca.pem', inline_string: 'x' } } } } } },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.common_tls_context.validation_context.trusted_ca: must have exactly one of filename, inline_string, inline_bytes (found filename, inline_string)`],
  },
  'cluster TLS trusted_ca not an object': {
    record: 'gvc/demo',
    set: { [`${ENVOY}.clusters[0].transport_socket`]: { name: 'envoy.transport_sockets.tls', typed_config: { common_tls_context: { validation_context: { trusted_ca: '/ca.pem' } } } } },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.common_tls_context.validation_context.trusted_ca: must be an object`],
  },
  'cluster TLS two client certificates': {
    record: 'gvc/demo',
    set: {
      [`${ENVOY}.clusters[0].transport_socket`]: {
        name: 'envoy.transport_sockets.tls',
        typed_config: { common_tls_context: { tls_certificates: [{ certificate_chain: { filename: '/a.pem' }, private_key: { filename: '/a.key' } }, { certificate_chain: { filename: '/b.pem' }, private_key: { filename: '/b.key' } }] } },
      },
    },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.common_tls_context.tls_certificates: at most one certificate in a client (upstream) TLS context`],
  },
  'cluster TLS client certificate without its key, its chain from two sources': {
    record: 'gvc/demo',
    set: {
      [`${ENVOY}.clusters[0].transport_socket`]: {
        name: 'envoy.transport_sockets.tls',
        typed_config: { common_tls_context: { tls_certificates: [{ certificate_chain: { filename: '/a.pem', inline_string: 'x' } }] } },
      },
    },
    errors: [
      `gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.common_tls_context.tls_certificates[0].private_key: is required`,
      `gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.common_tls_context.tls_certificates[0].certificate_chain: must have exactly one of filename, inline_string, inline_bytes (found filename, inline_string)`,
    ],
  },
  'cluster TLS client certificates not an array': {
    record: 'gvc/demo',
    set: { [`${ENVOY}.clusters[0].transport_socket`]: { name: 'envoy.transport_sockets.tls', typed_config: { common_tls_context: { tls_certificates: { certificate_chain: { filename: '/a.pem' } } } } } },
    errors: [`gvc/demo: ${ENVOY}.clusters[0].transport_socket.typed_config.common_tls_context.tls_certificates: must be an array`],
  },
  'cluster TLS transport socket well formed': {
    record: 'gvc/demo',
    set: {
      [`${ENVOY}.clusters[0].transport_socket`]: {
        name: 'envoy.transport_sockets.tls',
        typed_config: {
          '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
          sni: 'als.internal',
          common_tls_context: {
            validation_context: { trusted_ca: { filename: '/ca.pem' } },
            tls_certificates: [{ certificate_chain: { filename: '/client.pem' }, private_key: { inline_string: 'KEY' } }],
          },
        },
      },
    },
    errors: [],
  },
  'exclusion port a string': { record: 'workload/api', set: { [`${ENVOY}.excludedExternalAuth[0].port`]: '8080' }, errors: [`workload/api: ${ENVOY}.excludedExternalAuth[0].port: must be an integer from 1 to 65535`] },
  'exclusion svcPort fractional': { record: 'workload/api', set: { [`${ENVOY}.excludedExternalAuth[0].svcPort`]: 1.5 }, errors: [`workload/api: ${ENVOY}.excludedExternalAuth[0].svcPort: must be an integer from 1 to 65535`] },
  'exclusion match not an object': { record: 'workload/api', set: { [`${ENVOY}.excludedExternalAuth[0].match`]: '/public' }, errors: [`workload/api: ${ENVOY}.excludedExternalAuth[0].match: must be an object`] },
  'exclusion match two kinds': {
    record: 'workload/api', set: { [`${ENVOY}.excludedExternalAuth[0].match.path`]: '/x' },
    errors: [`workload/api: ${ENVOY}.excludedExternalAuth[0].match: must have exactly one of prefix, path, safe_regex (found prefix, path)`],
  },
  'exclusion match unknown member': {
    record: 'workload/api', set: { [`${ENVOY}.excludedExternalAuth[0].match.prefx`]: '/x' },
    errors: [`workload/api: ${ENVOY}.excludedExternalAuth[0].match.prefx: unknown member (did you mean "prefix"? allowed: prefix, path, safe_regex, headers, query_parameters, case_sensitive)`],
  },
  'exclusion regex does not compile': {
    record: 'workload/api', set: { [`${ENVOY}.excludedExternalAuth[0].match`]: { safe_regex: { regex: '(' } } },
    errors: [`workload/api: ${ENVOY}.excludedExternalAuth[0].match.safe_regex.regex: does not compile: …`],
  },
  'rate-limit exclusion has no svcPort': {
    record: 'workload/api', set: { [`${ENVOY}.excludedRateLimit[0]`]: { match: { prefix: '/' }, svcPort: 80 } },
    errors: [`workload/api: ${ENVOY}.excludedRateLimit[0].svcPort: unknown member (allowed: match, port)`],
  },
  'empty exclusion': { record: 'workload/api', set: { [`${ENVOY}.excludedRateLimit[0]`]: {} }, errors: [`workload/api: ${ENVOY}.excludedRateLimit[0]: must have at least one of match, port`] },

  // ---- workload
  'timeout zero': { record: 'workload/api', set: { 'spec.defaultOptions.timeoutSeconds': 0 }, errors: ['workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600'] },
  'timeout over 600': { record: 'workload/api', set: { 'spec.defaultOptions.timeoutSeconds': 601 }, errors: ['workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600'] },
  'timeout fractional': { record: 'workload/api', set: { 'spec.defaultOptions.timeoutSeconds': 1.5 }, errors: ['workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600'] },
  'timeout in local options': { record: 'workload/api', set: { 'spec.localOptions[0].timeoutSeconds': 700 }, errors: ['workload/api: spec.localOptions[0].timeoutSeconds: must be an integer from 1 to 600'] },
  'timeout override over 3600': { record: 'workload/api', set: { 'tags.svc/timeoutSecondsOverride': 3601 }, errors: ['workload/api: tags.svc/timeoutSecondsOverride: must be a number of seconds greater than 0 and at most 3600'] },
  'timeout override zero': { record: 'workload/api', set: { 'tags.svc/timeoutSecondsOverride': '0' }, errors: ['workload/api: tags.svc/timeoutSecondsOverride: must be a number of seconds greater than 0 and at most 3600'] },
  'timeout override text': { record: 'workload/api', set: { 'tags.svc/timeoutSecondsOverride': '10m' }, errors: ['workload/api: tags.svc/timeoutSecondsOverride: must be a number of seconds greater than 0 and at most 3600'] },
  'timeout override at 3600': { record: 'workload/api', set: { 'tags.svc/timeoutSecondsOverride': '3600' }, errors: [] },
  'port protocol enum': { record: 'workload/api', set: { [`${C0}.ports[0].protocol`]: 'udp' }, errors: [`workload/api: ${C0}.ports[0].protocol: must be one of http, http2, grpc, tcp`] },
  'port number too high': { record: 'workload/api', set: { [`${C0}.ports[0].number`]: 70000 }, errors: [`workload/api: ${C0}.ports[0].number: must be an integer from 1 to 65535`] },
  'port number missing': { record: 'workload/api', set: { [`${C0}.ports[0].number`]: undefined }, errors: [`workload/api: ${C0}.ports[0].number: is required`] },
  'port declared twice': {
    record: 'workload/api', set: { 'spec.containers[1]': { name: 'side', ports: [{ number: 8080 }] } },
    errors: ['workload/api: spec.containers[1].ports[0].number: port 8080 is already declared by container main'],
  },
  'container name twice': { record: 'workload/api', set: { 'spec.containers[1]': { name: 'main' } }, errors: ['workload/api: spec.containers[1].name: duplicate container name main'] },
  'container name missing': { record: 'workload/api', set: { [`${C0}.name`]: undefined }, errors: [`workload/api: ${C0}.name: is required`] },
  'container env value': { record: 'workload/api', set: { [`${C0}.env[0]`]: { name: 'A', value: { x: 1 } } }, errors: [`workload/api: ${C0}.env[0].value: must be a string`] },
  'workload type enum': { record: 'workload/api', set: { 'spec.type': 'batch' }, errors: ['workload/api: spec.type: must be one of serverless, standard, stateful, cron'] },
  'probe with two actions': {
    record: 'workload/api', set: { [`${C0}.readinessProbe.tcpSocket`]: { port: 8080 } },
    errors: [`workload/api: ${C0}.readinessProbe: must have exactly one of httpGet, tcpSocket, exec, grpc (found httpGet, tcpSocket)`],
  },
  'probe scheme': { record: 'workload/api', set: { [`${C0}.readinessProbe.httpGet.scheme`]: 'https' }, errors: [`workload/api: ${C0}.readinessProbe.httpGet.scheme: must be one of HTTP, HTTPS`] },
  'probe period zero': { record: 'workload/api', set: { [`${C0}.readinessProbe.periodSeconds`]: 0 }, errors: [`workload/api: ${C0}.readinessProbe.periodSeconds: must be an integer of at least 1`] },
  'probe exec empty': { record: 'workload/api', set: { [`${C0}.livenessProbe`]: { exec: { command: [] } } }, errors: [`workload/api: ${C0}.livenessProbe.exec.command: must not be empty`] },
  'protocol tag enum': { record: 'workload/api', set: { 'tags.svc/protocol': 'udp' }, errors: ['workload/api: tags.svc/protocol: must be one of http, http2, grpc, tcp'] },
  'boolean tag yes': { record: 'workload/api', set: { 'tags.svc/publishNotReadyAddresses': 'yes' }, errors: ['workload/api: tags.svc/publishNotReadyAddresses: must be true or false'] },
  'boolean tag 1': { record: 'workload/api', set: { 'tags.svc/tracingDisabled': 1 }, errors: ['workload/api: tags.svc/tracingDisabled: must be true or false'] },
  'boolean tag TRUE': { record: 'workload/api', set: { 'tags.svc/externalAuthFailureAllow': 'TRUE' }, errors: ['workload/api: tags.svc/externalAuthFailureAllow: must be true or false'] },
  'boolean tags as booleans and strings': { record: 'workload/api', set: { 'tags.svc/externalAuthFailureAllow': false, 'tags.svc/tracingDisabled': 'true' }, errors: [] },
  'auth protocol': { record: 'workload/api', set: { 'tags.svc/externalAuthProtocol': 'rest' }, errors: ['workload/api: tags.svc/externalAuthProtocol: must be one of grpc, http'] },
  'auth scheme': { record: 'workload/api', set: { 'tags.svc/externalAuthScheme': 'ftp' }, errors: ['workload/api: tags.svc/externalAuthScheme: must be one of https, http'] },
  'rate-limit scheme': { record: 'workload/api', set: { 'tags.svc/rateLimitAddress': 'rl', 'tags.svc/rateLimitScheme': 'HTTP' }, errors: ['workload/api: tags.svc/rateLimitScheme: must be one of https, http'] },
  'auth port zero': { record: 'workload/api', set: { 'tags.svc/externalAuthPort': 0 }, errors: ['workload/api: tags.svc/externalAuthPort: must be a port number from 1 to 65535'] },
  'listen port too high': { record: 'workload/api', set: { 'tags.svc/externalAuthListenPort': '65536' }, errors: ['workload/api: tags.svc/externalAuthListenPort: must be a port number from 1 to 65535'] },
  'auth address with a port': { record: 'workload/api', set: { 'tags.svc/externalAuthAddress': 'auth:9000' }, errors: ['workload/api: tags.svc/externalAuthAddress: must be a host name or an IP address, without a port'] },
  'auth timeout not a duration': {
    record: 'workload/api', set: { 'tags.svc/externalAuthTimeout': '1 sec' },
    errors: ['workload/api: tags.svc/externalAuthTimeout: must be a positive duration such as 200ms, 1s, 1.5s or 1m (a bare number is seconds)'],
  },
  'auth timeout in Go syntax': { record: 'workload/api', set: { 'tags.svc/externalAuthTimeout': '1m30.5s' }, errors: [] },
  'auth timeout bare seconds': { record: 'workload/api', set: { 'tags.svc/externalAuthTimeout': 2 }, errors: [] },
  'auth path prefix': { record: 'workload/api', set: { 'tags.svc/externalAuthPathPrefix': 'auth' }, errors: ['workload/api: tags.svc/externalAuthPathPrefix: must be a path starting with /'] },
  'rate-limit descriptors': {
    record: 'workload/api', set: { 'tags.svc/rateLimitAddress': 'rl', 'tags.svc/rateLimitDescriptors': 'authority, cookie' },
    errors: ['workload/api: tags.svc/rateLimitDescriptors: unknown descriptor "cookie" (allowed: authority, host, authorization, path, method, remote_address, header:NAME)'],
  },
  'mesh cidr tag': { record: 'workload/api', set: { 'tags.svc/disableServiceMeshOutboundCIDR': '10.0.0.0/8,300.1.1.1' }, errors: ['workload/api: tags.svc/disableServiceMeshOutboundCIDR: must be CIDR ranges or addresses, comma-separated'] },
  'misspelt vendor tags': {
    record: 'workload/api', set: { 'tags.svc/timout': '5', 'tags.svc/ext_authz_address': 'auth', 'tags.svc/protocl': 'http' }, errors: [],
    warnings: [
      'workload/api: tags.svc/timout: unknown svc/ tag (did you mean svc/timeoutSecondsOverride? ignored)',
      'workload/api: tags.svc/ext_authz_address: unknown svc/ tag (did you mean svc/externalAuthAddress? ignored)',
      'workload/api: tags.svc/protocl: unknown svc/ tag (did you mean svc/protocol? ignored)',
    ],
  },
  'unknown vendor tag': { record: 'workload/api', set: { 'tags.svc/fancy': 'x', 'tags.cpln/protocol': 'udp' }, errors: [], warnings: ['workload/api: tags.svc/fancy: unknown svc/ tag (ignored)'] },
  'auth tags without the address': {
    record: 'workload/api', set: { 'tags.svc/externalAuthAddress': undefined, 'tags.svc/externalAuthPort': 9000 }, errors: [],
    warnings: ['workload/api: tags.svc/externalAuthAddress: not set, so svc/externalAuthPort has no effect'],
  },
  'retry attempts negative': { record: 'workload/api', set: { 'spec.requestRetryPolicy.attempts': -1 }, errors: ['workload/api: spec.requestRetryPolicy.attempts: must be an integer of at least 0'] },
  'retry on unknown condition': {
    record: 'workload/api', set: { 'spec.requestRetryPolicy.retryOn': ['5xx', 'sometimes', 503, 5] },
    errors: [
      'workload/api: spec.requestRetryPolicy.retryOn[1]: must be a retry condition (…',
      'workload/api: spec.requestRetryPolicy.retryOn[3]: must be a retry condition (…',
    ],
  },
  'retry on not an array': { record: 'workload/api', set: { 'spec.requestRetryPolicy.retryOn': '5xx' }, errors: ['workload/api: spec.requestRetryPolicy.retryOn: must be an array'] },
  'min scale negative': { record: 'workload/api', set: { 'spec.defaultOptions.autoscaling.minScale': -1 }, errors: ['workload/api: spec.defaultOptions.autoscaling.minScale: must be an integer of at least 0'] },
  'max scale fractional': { record: 'workload/api', set: { 'spec.defaultOptions.autoscaling.maxScale': 2.5 }, errors: ['workload/api: spec.defaultOptions.autoscaling.maxScale: must be an integer of at least 0'] },
  'min above max': { record: 'workload/api', set: { 'spec.defaultOptions.autoscaling.minScale': 4 }, errors: ['workload/api: spec.defaultOptions.autoscaling.minScale: must not exceed maxScale (3)'] },
  'local min above default max': { record: 'workload/api', set: { 'spec.localOptions[0].autoscaling.minScale': 5 }, errors: ['workload/api: spec.localOptions[0].autoscaling.minScale: must not exceed maxScale (3)'] },
  'local max below default min': {
    record: 'workload/api', set: { 'spec.localOptions[0].autoscaling': { maxScale: 0 } },
    errors: ['workload/api: spec.localOptions[0].autoscaling.maxScale: must not be less than minScale (1)'],
  },
  'grace period negative': { record: 'workload/api', set: { 'spec.rolloutOptions.terminationGracePeriodSeconds': -1 }, errors: ['workload/api: spec.rolloutOptions.terminationGracePeriodSeconds: must be a number of at least 0'] },
  'scaling policy': { record: 'workload/api', set: { 'spec.rolloutOptions.scalingPolicy': 'Serial' }, errors: ['workload/api: spec.rolloutOptions.scalingPolicy: must be one of OrderedReady, Parallel'] },
  'max surge': { record: 'workload/api', set: { 'spec.rolloutOptions.maxSurgeReplicas': 'half' }, errors: ["workload/api: spec.rolloutOptions.maxSurgeReplicas: must be an integer of at least 0 (a number, or a string of digits such as '1') or a percentage such as 25%"] },
  'allow CIDR prefix too long': {
    record: 'workload/api', set: { 'spec.firewallConfig.external.inboundAllowCIDR': ['10.0.0.0/33', '2001:db8::/48', '::1'] },
    errors: ['workload/api: spec.firewallConfig.external.inboundAllowCIDR[0]: must be an IPv4 or IPv6 address or CIDR range'],
  },
  'blocked CIDR not an address': { record: 'workload/api', set: { 'spec.firewallConfig.external.inboundBlockedCIDR': ['evil.com'] }, errors: ['workload/api: spec.firewallConfig.external.inboundBlockedCIDR[0]: must be an IPv4 or IPv6 address or CIDR range'] },
  'allow CIDR not an array': { record: 'workload/api', set: { 'spec.firewallConfig.external.inboundAllowCIDR': '0.0.0.0/0' }, errors: ['workload/api: spec.firewallConfig.external.inboundAllowCIDR: must be an array'] },
  'no external firewall': {
    record: 'workload/spare', set: { 'spec.firewallConfig': undefined }, errors: [],
    warnings: ['workload/spare: spec.firewallConfig.external.inboundAllowCIDR: not set: the workload accepts no external traffic'],
  },
  'outbound ports': {
    record: 'workload/api',
    set: { 'spec.firewallConfig.external.outboundAllowPort': [{ protocol: 'https', number: 443 }, { protocol: 'tcp', number: 5432 }, { protocol: 'http', number: 1 }, { protocol: 'http', number: 65535 }] },
    errors: [],
  },
  'outbound port shape': {
    record: 'workload/api',
    set: {
      'spec.firewallConfig.external.outboundAllowPort': [
        { protocol: 'udp', number: 53 }, { protocol: 'tcp', number: 0 }, { protocol: 'tcp', number: 65536 }, { protocol: 'tcp', number: 80.5 },
        { protocol: 'tcp', number: '80' }, { number: 80 }, { protocol: 'http' }, { protocol: 'http', number: 80, host: 'x' }, 443,
      ],
    },
    errors: [
      'workload/api: spec.firewallConfig.external.outboundAllowPort[0].protocol: must be one of http, https, tcp',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[1].number: must be an integer from 1 to 65535',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[2].number: must be an integer from 1 to 65535',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[3].number: must be an integer from 1 to 65535',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[4].number: must be an integer from 1 to 65535',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[5].protocol: is required',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[6].number: is required',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[7].host: unknown member (allowed: protocol, number)',
      'workload/api: spec.firewallConfig.external.outboundAllowPort[8]: must be an object',
    ],
  },
  'outbound ports not an array': {
    record: 'workload/api', set: { 'spec.firewallConfig.external.outboundAllowPort': { protocol: 'tcp', number: 80 } },
    errors: ['workload/api: spec.firewallConfig.external.outboundAllowPort: must be an array'],
  },
  'internal allow type': { record: 'workload/api', set: { 'spec.firewallConfig.internal.inboundAllowType': 'all' }, errors: ['workload/api: spec.firewallConfig.internal.inboundAllowType: must be one of none, same-gvc, same-org, workload-list'] },
  'gvc to nothing': { record: 'workload/spare', set: { gvc: 'nope' }, errors: ['workload/spare: gvc: points to gvc nope, which is not defined'] },
  'gvc missing, and several gvcs': { record: 'workload/spare', set: { gvc: undefined }, add: [{ kind: 'gvc', name: 'other' }], errors: ['workload/spare: gvc: is required: name the GVC here, or pass --gvc NAME as to cpln apply (the records define 2 gvcs: demo, other)'] },
  'gvc malformed link': { record: 'workload/spare', set: { gvc: '//location/demo' }, errors: ['workload/spare: gvc: must be a GVC name or link (//gvc/NAME or /org/ORG/gvc/NAME)'] },
  'gvc from a link': { record: 'workload/spare', set: { gvc: undefined, links: [{ rel: 'gvc', href: '/org/acme/gvc/demo' }] }, errors: [] },
  'gvc from the self link': { record: 'workload/spare', set: { gvc: undefined, links: [{ rel: 'self', href: '/org/acme/gvc/demo/workload/spare' }] }, errors: [] },
  'local options location to nothing': { record: 'workload/api', set: { 'spec.localOptions[0].location': 'mars' }, errors: ['workload/api: spec.localOptions[0].location: points to location mars, which is not defined (no location record, and not one of the platform\'s locations)'] },
  'local options location malformed': { record: 'workload/api', set: { 'spec.localOptions[0].location': '//gvc/mars' }, errors: [`workload/api: spec.localOptions[0].location: must be a location name or link (${LOC_FORMS})`] },
  'local options location as a link': { record: 'workload/api', set: { 'spec.localOptions[0].location': '//location/gcp-us-east1' }, errors: [] },
  'local options twice': {
    record: 'workload/api', set: { 'spec.localOptions[1]': { location: '//location/gcp-us-east1' } },
    errors: ['workload/api: spec.localOptions[1].location: location gcp-us-east1 already has options'],
  },
  'local options without a location': { record: 'workload/api', set: { 'spec.localOptions[0].location': undefined }, errors: ['workload/api: spec.localOptions[0].location: is required'] },
  'replica direct not a boolean': { record: 'workload/api', set: { 'spec.loadBalancer.replicaDirect': 'yes' }, errors: ['workload/api: spec.loadBalancer.replicaDirect: must be true or false'] },
  'suspend not a boolean': { record: 'workload/api', set: { 'spec.defaultOptions.suspend': 'true' }, errors: ['workload/api: spec.defaultOptions.suspend: must be true or false'] },

  // ---- domain
  'route with prefix and regex': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].regex': '/.*' }, errors: ['domain/example.com: spec.ports[0].routes[0]: must have exactly one of prefix, regex (found prefix, regex)'] },
  'route with neither': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].prefix': undefined }, errors: ['domain/example.com: spec.ports[0].routes[0]: must have exactly one of prefix, regex'] },
  'route regex does not compile': {
    record: 'domain/example.com', set: { 'spec.ports[0].routes[1].prefix': undefined, 'spec.ports[0].routes[1].regex': '/a[' },
    errors: ['domain/example.com: spec.ports[0].routes[1].regex: does not compile: …'],
  },
  'route prefix without a slash': { record: 'domain/example.com', set: { 'spec.ports[0].routes[1].prefix': 'v1' }, errors: ['domain/example.com: spec.ports[0].routes[1].prefix: must start with /'] },
  'route prefix twice': { record: 'domain/example.com', set: { 'spec.ports[0].routes[1].prefix': '/' }, errors: ['domain/example.com: spec.ports[0].routes[1].prefix: duplicate prefix / on this port'] },
  'route replacePrefix on a regex': {
    record: 'domain/example.com', set: { 'spec.ports[0].routes[1].prefix': undefined, 'spec.ports[0].routes[1].regex': '/s.*', 'spec.ports[0].routes[1].replacePrefix': '/' },
    errors: ['domain/example.com: spec.ports[0].routes[1].replacePrefix: needs a prefix route'],
  },
  'route to nothing': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].workloadLink': '//workload/nope' }, errors: ['domain/example.com: spec.ports[0].routes[0].workloadLink: points to workload nope in gvc demo, which is not defined'] },
  'route link malformed': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].workloadLink': 'api' }, errors: [`domain/example.com: spec.ports[0].routes[0].workloadLink: must be a workload link (${WL_FORMS})`] },
  'route link missing': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].workloadLink': undefined }, errors: ['domain/example.com: spec.ports[0].routes[0].workloadLink: is required'] },
  'route relative link without a gvc': {
    record: 'domain/example.com', set: { 'spec.gvcLink': undefined, 'spec.ports[0].routes[1].workloadLink': '//gvc/demo/workload/spare' },
    errors: ["domain/example.com: spec.ports[0].routes[0].workloadLink: a //workload/NAME link needs the domain's spec.gvcLink"],
  },
  'route port not declared': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].port': 9999 }, errors: ['domain/example.com: spec.ports[0].routes[0].port: is not a port of workload api (declared: 8080)'] },
  'route replica negative': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].replica': -1 }, errors: ['domain/example.com: spec.ports[0].routes[0].replica: must be an integer of at least 0'] },
  'route header value': { record: 'domain/example.com', set: { 'spec.ports[0].routes[0].headers.request.set.x-a': ['a'] }, errors: ['domain/example.com: spec.ports[0].routes[0].headers.request.set.x-a: must be a string'] },
  'gvc link to nothing': {
    record: 'domain/example.com', set: { 'spec.gvcLink': '//gvc/nope' },
    errors: [
      'domain/example.com: spec.gvcLink: points to gvc nope, which is not defined',
      'domain/example.com: spec.ports[0].routes[0].workloadLink: points to workload api in gvc nope, which is not defined',
    ],
  },
  'gvc link malformed': { record: 'domain/example.com', set: { 'spec.gvcLink': 'demo' }, errors: ['domain/example.com: spec.gvcLink: must be a gvc link (//gvc/NAME or /org/ORG/gvc/NAME)', "domain/example.com: spec.ports[0].routes[0].workloadLink: a //workload/NAME link needs the domain's spec.gvcLink"] },
  'domain port listed twice': { record: 'domain/example.com', set: { 'spec.ports[1]': { number: 443 } }, errors: ['domain/example.com: spec.ports[1].number: port 443 is listed twice'] },
  'domain name not a host': { record: 'domain/example.com', set: { name: 'bad_host.com' }, errors: ['domain/bad_host.com: name: must be a host name (letters, digits and hyphens in dot-separated labels)'] },

  // ---- deployment
  'replica address without a port': { record: 'deployment/api', set: { 'status.locations[0].replicas[0].address': '127.0.0.1' }, errors: ['deployment/api: status.locations[0].replicas[0].address: must be host:port (a host name or IP address, and a port from 1 to 65535)'] },
  'replica address port zero': { record: 'deployment/api', set: { 'status.locations[0].replicas[0].address': 'localhost:0' }, errors: ['deployment/api: status.locations[0].replicas[0].address: must be host:port (a host name or IP address, and a port from 1 to 65535)'] },
  'replica sidecar address': { record: 'deployment/api', set: { 'status.locations[0].replicas[0].sidecar': 'http://x:1' }, errors: ['deployment/api: status.locations[0].replicas[0].sidecar: must be host:port (a host name or IP address, and a port from 1 to 65535)'] },
  'replica ready': { record: 'deployment/api', set: { 'status.locations[0].replicas[0].ready': 'no' }, errors: ['deployment/api: status.locations[0].replicas[0].ready: must be true or false'] },
  'replica name missing': { record: 'deployment/api', set: { 'status.locations[0].replicas[0].name': undefined }, errors: ['deployment/api: status.locations[0].replicas[0].name: is required'] },
  'replica name twice': { record: 'deployment/api', set: { 'status.locations[0].replicas[1]': { name: 'api-0', address: 'h:1' } }, errors: ['deployment/api: status.locations[0].replicas[1].name: duplicate replica name api-0 in this location'] },
  'deployment location to nothing': { record: 'deployment/api', set: { 'status.locations[0].name': 'mars' }, errors: ['deployment/api: status.locations[0].name: points to location mars, which is not defined (no location record, and not one of the platform\'s locations)'] },
  'deployment workload to nothing': { record: 'deployment/api', set: { name: 'ghost' }, errors: ['deployment/ghost: name: names workload ghost, which is not defined in gvc demo'] },
  'deployment gvc to nothing': { record: 'deployment/api', set: { gvc: 'nope' }, errors: ['deployment/api: gvc: points to gvc nope, which is not defined'] },
};

t.test('the base configuration is valid and warns of nothing', async (t) => {
  const result = validate(toSourced(baseRecords()), defaultSettings);
  t.same({ errors: result.errors, warnings: result.warnings }, { errors: [], warnings: [] });
});

for (const [name, c] of Object.entries(CASES)) {
  t.test(name, async (t) => {
    const result = run(c);
    t.same(normalize(result.errors, c.errors), c.errors, 'errors');
    for (const w of c.warnings ?? []) t.ok(result.warnings.includes(w), `warns: ${w}`, { found: result.warnings });
  });
}

t.test('org naming needs the org prefix', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'gvc/demo'), 'spec.endpointNamingFormat', 'org');
  setPath(find(records, 'org/acme'), 'status', undefined);
  t.same(validate(toSourced(records), defaultSettings).errors, ['gvc/demo: spec.endpointNamingFormat: org needs an org record with status.endpointPrefix']);
  const noOrg = baseRecords().filter((r) => r.kind !== 'org');
  setPath(find(noOrg, 'gvc/demo'), 'spec.endpointNamingFormat', 'org');
  t.same(validate(toSourced(noOrg), defaultSettings).errors, ['gvc/demo: spec.endpointNamingFormat: org needs an org record with status.endpointPrefix']);
});

t.test('every error is collected, in record order', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'workload/api'), 'spec.defaultOptions.timeoutSeconds', 0);
  setPath(find(records, 'workload/api'), 'tags.svc/protocol', 'udp');
  setPath(find(records, 'gvc/demo'), 'spec.endpointNamingFormat', 'x');
  setPath(find(records, 'deployment/api'), 'status.locations[0].replicas[0].address', 'nope');
  t.same(validate(toSourced(records), defaultSettings).errors, [
    'gvc/demo: spec.endpointNamingFormat: must be one of default, legacy, org',
    'workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600',
    'workload/api: tags.svc/protocol: must be one of http, http2, grpc, tcp',
    'deployment/api: status.locations[0].replicas[0].address: must be host:port (a host name or IP address, and a port from 1 to 65535)',
  ]);
});

t.test('the vendor prefix comes from the settings', async (t) => {
  const records = baseRecords();
  const api = find(records, 'workload/api');
  setPath(api, 'tags', { 'cpln/protocol': 'udp', 'cpln/fancy': '1', 'svc/protocol': 'also-ignored', 'cpln/externalAuthAddress': 'auth' });
  const result = validate(toSourced(records), { ...defaultSettings, vendor: 'cpln' });
  t.same(result.errors, ['workload/api: tags.cpln/protocol: must be one of http, http2, grpc, tcp']);
  t.same(result.warnings, ['workload/api: tags.cpln/fancy: unknown cpln/ tag (ignored)']);
});

t.test('a location query is evaluated for the links that depend on it', async (t) => {
  const records = baseRecords();
  const gvc = find(records, 'gvc/demo');
  setPath(gvc, 'spec.staticPlacement', {
    locationQuery: { kind: 'location', spec: { match: 'all', terms: [{ op: '=', property: 'provider', value: 'gcp' }] } },
  });
  const result = validate(toSourced(records), defaultSettings);
  t.same(result.errors, []);
  t.same(result.warnings, ["deployment/api: status.locations[0].name: location aws-us-west-2 is not one of gvc demo's locations: its replicas get no traffic"]);
});
