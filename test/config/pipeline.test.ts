import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { defaultSettings, loadSnapshot } from '../../src/config/index.js';

const FIXTURES = join(import.meta.dirname, '../fixtures/config');

/** The 1-based line of the first `needle` in a file. */
function lineOf(file: string, needle: string): number {
  const text = readFileSync(file, 'utf8');
  return text.slice(0, text.indexOf(needle)).split('\n').length;
}

t.test('a folder of YAML and JSON files compiles', async (t) => {
  const result = await loadSnapshot([join(FIXTURES, 'valid')], defaultSettings, 3);
  if (!result.ok) return t.fail(result.errors.join('\n'));
  const s = result.snapshot;
  t.equal(s.generation, 3);
  t.same([...s.workloads.keys()], ['demo/api', 'demo/web-app']);
  t.same([...s.domains.keys()], ['www.example.com']);
  t.same(s.gvcs.get('demo')?.locations, ['aws-us-west-2', 'gcp-us-east1']);
  t.equal(s.workloads.get('demo/api')?.timeoutMs, 900_000);
  // Warnings name the record's file, and its line where the reading knew it (YAML; JSON has none).
  const dir = join(FIXTURES, 'valid');
  t.same(s.warnings, [
    `${join(dir, '20-workloads.json')}: workload/web-app: spec.firewallConfig.external.inboundAllowCIDR: not set: the workload accepts no external traffic`,
    `${join(dir, '30-domain.yaml')}:${lineOf(join(dir, '30-domain.yaml'), 'kind: secret')}: secret/s1: kind: "secret" is a platform kind svcproxy does not read; not checked`,
  ]);
});

t.test('a file that breaks many rules: every error, each at its path', async (t) => {
  const result = await loadSnapshot([join(FIXTURES, 'invalid')]);
  t.equal(result.ok, false);
  if (result.ok) return;
  const T = 'spec.staticPlacement.locationQuery.spec.terms[0]';
  // Every error starts with the file and a line (which line: validate-messages.test.ts).
  const file = join(FIXTURES, 'invalid', 'records.yaml');
  for (const e of result.errors) t.ok(e.startsWith(`${file}:`) && /^:\d+: /.test(e.slice(file.length)), e);
  t.same(result.errors.map((e) => e.slice(e.indexOf(': ') + 2).replace(/does not compile: .*/, 'does not compile: …')), [
    'gvc/demo: alias: must be exactly 13 lowercase letters or digits',
    'gvc/demo: spec.endpointNamingFormat: must be one of default, legacy, org',
    'gvc/demo: spec.staticPlacement.locationQuery.spec.match: must be one of all, any, none',
    `gvc/demo: ${T}.op: must be one of =, >, >=, <, <=, !=, ~, =~, exists, !exists, contains`,
    `gvc/demo: ${T}.weight: unknown member (allowed: op, property, rel, tag, value)`,
    'gvc/demo: spec.staticPlacement.locationOptions[0].routingTier: must be an integer',
    'gvc/demo: spec.staticPlacement.locationOptions[0].priority: unknown member (allowed: locationLink, routingTier, latencyOffsetMs, latencyToleranceMs)',
    'gvc/demo: spec.tracing.sampling: must be a number from 0 to 100',
    'gvc/demo: spec.tracing.provider: at most one tracing-vendor member besides otel and controlplane (found lightstep, datadog)',
    'gvc/demo: spec.sidecar.envoy.accessLog[0].name: must be one of envoy.access_loggers.http_grpc',
    'gvc/demo: spec.sidecar.envoy.clusters[0].type: must be one of STATIC, STRICT_DNS, LOGICAL_DNS, EDS, ORIGINAL_DST',
    'gvc/demo: spec.staticPlacement.locationLinks[1]: points to location mars, which is not defined (no location record, and not one of the platform\'s locations)',
    'workload/api: spec.type: must be one of serverless, standard, stateful, cron',
    'workload/api: spec.containers[0].ports[0].number: must be an integer from 1 to 65535',
    'workload/api: spec.containers[0].ports[0].protocol: must be one of http, http2, grpc, tcp',
    'workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600',
    'workload/api: spec.requestRetryPolicy.attempts: must be an integer of at least 0',
    'workload/api: spec.requestRetryPolicy.retryOn[0]: must be a retry condition (5xx, gateway-error, reset, reset-before-request, connect-failure, envoy-ratelimited, retriable-4xx, refused-stream, retriable-status-codes, retriable-headers, http3-post-connect-failure, cancelled, deadline-exceeded, internal, resource-exhausted, unavailable) or an HTTP status code',
    'workload/api: spec.rolloutOptions.terminationGracePeriodSeconds: must be a number of at least 0',
    'workload/api: spec.firewallConfig.external.inboundAllowCIDR[0]: must be an IPv4 or IPv6 address or CIDR range',
    'workload/api: tags.svc/timeoutSecondsOverride: must be a number of seconds greater than 0 and at most 3600',
    'workload/api: tags.svc/protocol: must be one of http, http2, grpc, tcp',
    'workload/api: tags.svc/externalAuthTimeout: must be a positive duration such as 200ms, 1s, 1.5s or 1m (a bare number is seconds)',
    'workload/api: tags.svc/publishNotReadyAddresses: must be true or false',
    'workload/api: spec.defaultOptions.autoscaling.minScale: must not exceed maxScale (2)',
    'domain/example.com: spec.ports[0].routes[0]: must have exactly one of prefix, regex (found prefix, regex)',
    'domain/example.com: spec.ports[0].routes[1].regex: does not compile: …',
    'domain/example.com: spec.ports[0].routes[2].prefix: must start with /',
    'domain/example.com: spec.ports[0].routes[2].workloadLink: must be a workload link (//workload/NAME, //gvc/GVC/workload/NAME or /org/ORG/gvc/GVC/workload/NAME)',
    'domain/example.com: spec.ports[0].routes[1].workloadLink: points to workload ghost in gvc demo, which is not defined',
    'deployment/api: status.locations[0].replicas[0].address: must be host:port (a host name or IP address, and a port from 1 to 65535)',
    'deployment/api: status.locations[0].name: points to location mars, which is not defined (no location record, and not one of the platform\'s locations)',
  ]);
  t.ok(result.warnings.some((w) => w.endsWith(': workload/api: tags.svc/somethingNew: unknown svc/ tag (ignored)')));
});

t.test('a parse error stops the load before validation', async (t) => {
  const dir = t.testdir({ 'a.yaml': 'kind: gvc\nname: g\nspec: [\n', 'b.yaml': 'kind: workload\nname: w\ngvc: g\n' });
  const result = await loadSnapshot([dir]);
  t.equal(result.ok, false);
  if (!result.ok) t.match(result.errors, [new RegExp(`^${join(dir, 'a.yaml')}: line \\d+: `)]);
  if (!result.ok) t.equal(result.errors.length, 1, 'no "gvc g is not defined" from the file that did parse');
});
