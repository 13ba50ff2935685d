import t from 'tap';
import {
  ConfigError, buildSnapshot, compileRecords, defaultSettings, generatedAlias, type Snapshot,
} from '../../src/config/index.js';
import { baseRecords, find, setPath, type Rec } from '../fixtures/config/base.js';

function snapshotOf(change: (records: Rec[]) => void = () => undefined, settings = defaultSettings): Snapshot {
  const records = baseRecords();
  change(records);
  return buildSnapshot(records, settings, 7);
}

const workload = (s: Snapshot, key = 'demo/api') => {
  const w = s.workloads.get(key);
  if (!w) throw new Error(`no workload ${key}`);
  return w;
};

t.test('GVC alias: generated from the name, stable, 13 lowercase alphanumerics', async (t) => {
  // Pinned: these values are part of the host names users bookmark; they must never change.
  t.equal(generatedAlias('demo'), 'h4k7mbsurf1u2');
  t.equal(generatedAlias('production'), generatedAlias('production'));
  for (const name of ['a', 'demo', 'x'.repeat(64), 'prod-eu', 'ünïcode']) t.match(generatedAlias(name), /^[a-z0-9]{13}$/, name);
  t.not(generatedAlias('demo'), generatedAlias('demo2'));
  t.equal(snapshotOf().gvcs.get('demo')?.alias, 'h4k7mbsurf1u2');
  t.equal(snapshotOf((r) => setPath(find(r, 'gvc/demo'), 'alias', 'abcdefghij123')).gvcs.get('demo')?.alias, 'abcdefghij123', 'a given alias wins');
});

t.test('canonical host per naming format', async (t) => {
  const host = (format: string | undefined, settings = defaultSettings) =>
    workload(snapshotOf((r) => setPath(find(r, 'gvc/demo'), 'spec.endpointNamingFormat', format), settings)).canonicalHost;
  t.equal(host(undefined), 'api-h4k7mbsurf1u2.app.localhost');
  t.equal(host('default'), 'api-h4k7mbsurf1u2.app.localhost');
  t.equal(host('org'), 'api-h4k7mbsurf1u2.acme1.app.localhost');
  t.equal(host('legacy'), 'api-demo.app.localhost');
  t.equal(host('default', { ...defaultSettings, appDomain: 'Apps.Example.COM.' }), 'api-h4k7mbsurf1u2.apps.example.com');
});

t.test('domain routes: host lower-cased, prefix routes longest first, regex routes in written order', async (t) => {
  const s = snapshotOf((r) => {
    const d = find(r, 'domain/example.com');
    setPath(d, 'name', 'WWW.Example.COM.');
    setPath(d, 'spec.ports', [
      { number: 443, routes: ['/', '/api', '/api/v2', '/b', '/ab'].map((prefix) => ({ prefix, workloadLink: '//workload/api' })) },
      {
        number: 8443,
        routes: [
          { prefix: '/', workloadLink: '//workload/spare' },
          { regex: '/api/[0-9]+', workloadLink: '//workload/api', headers: { request: { set: { 'X-Version': 2 } } } },
          { prefix: '/api', replacePrefix: '/', workloadLink: '//workload/api', port: 8080, replica: 0 },
        ],
      },
    ]);
  });
  t.same([...s.domains.keys()], ['www.example.com']);
  const d = s.domains.get('www.example.com');
  t.equal(d?.gvc, 'demo');
  t.same(d?.ports[0]?.routes.map((r) => r.prefix), ['/api/v2', '/api', '/ab', '/b', '/']);
  const written = d?.ports[1]?.routes ?? [];
  t.same(written.map((r) => r.prefix ?? r.regex?.source), ['/', '^(?:\\/api\\/[0-9]+)$', '/api']);
  t.same(written.map((r) => r.workload), ['demo/spare', 'demo/api', 'demo/api']);
  t.same(written[1]?.setHeaders, [['x-version', '2']]);
  t.same(written[2], { prefix: '/api', replacePrefix: '/', workload: 'demo/api', port: 8080, replica: 0, setHeaders: [] });
  const re = written[1]?.regex as RegExp;
  t.ok(re.test('/api/12'));
  t.notOk(re.test('/api/12/x'), 'anchored at the end');
  t.notOk(re.test('/x/api/12'), 'anchored at the start');
});

t.test('workload options: localOptions merged over defaultOptions, one entry per GVC location', async (t) => {
  const w = workload(snapshotOf((r) => {
    const api = find(r, 'workload/api');
    setPath(api, 'spec.defaultOptions', { timeoutSeconds: 20, debug: true, autoscaling: { minScale: 1, maxScale: 4 } });
    setPath(api, 'spec.localOptions', [{ location: '//location/gcp-us-east1', suspend: true, autoscaling: { minScale: 3 } }]);
  }));
  t.same(w.defaultOptions, { suspend: false, timeoutSeconds: 20, minScale: 1, maxScale: 4, debug: true });
  t.same([...w.locationOptions.keys()], ['aws-us-west-2', 'gcp-us-east1']);
  t.same(w.locationOptions.get('aws-us-west-2'), w.defaultOptions);
  t.same(w.locationOptions.get('gcp-us-east1'), { suspend: true, timeoutSeconds: 20, minScale: 3, maxScale: 4, debug: true });
  t.equal(w.globallySuspended, false);
  t.equal(w.timeoutMs, 20_000);
});

t.test('defaults', async (t) => {
  const w = workload(snapshotOf(), 'demo/spare');
  t.equal(w.type, 'serverless');
  t.equal(w.timeoutMs, 5000);
  t.same(w.defaultOptions, { suspend: false, timeoutSeconds: 5, minScale: 1, maxScale: 5, debug: false });
  t.same(w.retryPolicy, {
    attempts: 2,
    retryOn: ['connect-failure', 'refused-stream', 'unavailable', 'cancelled', 'resource-exhausted', 'retriable-status-codes'],
  });
  t.equal(w.terminationGracePeriodSeconds, 90);
  t.same(w.primaryPort, { number: 3000, protocol: 'http' });
  t.equal(w.replicaDirect, false);
  t.equal(w.publishNotReadyAddresses, false);
  t.same(w.containers[0], { name: 'main', args: [], env: [], ports: [{ number: 3000, protocol: 'http' }], volumes: [] });
  const probe = workload(snapshotOf()).containers[0]?.readinessProbe;
  t.same(probe, {
    kind: 'http', path: '/healthz', port: 8080, scheme: 'HTTP', httpHeaders: [],
    initialDelaySeconds: 0, periodSeconds: 10, timeoutSeconds: 1, successThreshold: 1, failureThreshold: 3,
  });
  const s = snapshotOf();
  t.same(s.gvcs.get('demo')?.locationOptions.get('gcp-us-east1'), { routingTier: 1, latencyOffsetMs: 0 });
  t.equal(s.gvcs.get('demo')?.trustedProxies, 0);
  t.equal(s.generation, 7);
  t.same(s.warnings, []);
});

t.test('the request timeout: svc/timeoutSecondsOverride, else timeoutSeconds', async (t) => {
  const w = workload(snapshotOf((r) => setPath(find(r, 'workload/api'), 'tags.svc/timeoutSecondsOverride', '1800')));
  t.equal(w.timeoutMs, 1_800_000);
  t.equal(w.tags['svc/timeoutSecondsOverride'], '1800');
});

t.test('tags, protocols, probes, retry policy, suspension', async (t) => {
  const w = workload(snapshotOf((r) => {
    const api = find(r, 'workload/api');
    setPath(api, 'tags', { 'svc/protocol': 'grpc', 'svc/publishNotReadyAddresses': true, count: 3 });
    setPath(api, 'spec.containers', [
      { name: 'main', ports: [{ number: 8080 }, { number: 8081, protocol: 'http2' }], readinessProbe: { tcpSocket: {}, periodSeconds: 2 } },
      { name: 'side', port: 9000, env: [{ name: 'N', value: 5 }], livenessProbe: { exec: { command: ['true'] } } },
    ]);
    setPath(api, 'spec.requestRetryPolicy', { attempts: 0, retryOn: [503, 'reset'] });
    setPath(api, 'spec.defaultOptions.autoscaling', { maxScale: 0 });
    setPath(api, 'spec.localOptions', []);
    setPath(api, 'spec.rolloutOptions.terminationGracePeriodSeconds', 30);
    setPath(api, 'spec.loadBalancer.replicaDirect', true);
  }));
  t.same(w.tags, { 'svc/protocol': 'grpc', 'svc/publishNotReadyAddresses': 'true', count: '3' });
  t.equal(w.publishNotReadyAddresses, true);
  t.same(w.containers.map((c) => c.ports), [[{ number: 8080, protocol: 'grpc' }, { number: 8081, protocol: 'http2' }], [{ number: 9000, protocol: 'grpc' }]]);
  t.same(w.containers[0]?.readinessProbe?.kind, 'tcp');
  t.same(w.containers[0]?.readinessProbe?.port, 8080, 'a probe port defaults to the container\'s first port');
  t.same(w.containers[0]?.readinessProbe?.periodSeconds, 2);
  t.same(w.containers[1]?.livenessProbe?.command, ['true']);
  t.same(w.containers[1]?.env, [{ name: 'N', value: '5' }]);
  t.same(w.retryPolicy, { attempts: 0, retryOn: ['503', 'reset'] });
  t.equal(w.globallySuspended, true);
  t.same(w.defaultOptions, { suspend: false, timeoutSeconds: 10, minScale: 0, maxScale: 0, debug: false });
  t.equal(w.terminationGracePeriodSeconds, 30);
  t.equal(w.replicaDirect, true);
});

t.test('vendor cpln: cpln/ tags are the ones that count', async (t) => {
  const settings = { ...defaultSettings, vendor: 'cpln' };
  const s = snapshotOf((r) => {
    setPath(find(r, 'workload/api'), 'tags', { 'cpln/protocol': 'http2', 'cpln/timeoutSecondsOverride': 900, 'svc/protocol': 'tcp' });
  }, settings);
  const w = workload(s);
  t.same(w.primaryPort, { number: 8080, protocol: 'http' }, 'ports[].protocol still wins');
  t.equal(workload(snapshotOf((r) => setPath(find(r, 'workload/spare'), 'tags.cpln/protocol', 'http2'), settings), 'demo/spare').primaryPort?.protocol, 'http2');
  t.equal(w.timeoutMs, 900_000);
  t.equal(s.settings.vendor, 'cpln');
});

t.test('org, locations, deployments', async (t) => {
  const s = snapshotOf((r) => {
    setPath(find(r, 'org/acme'), 'spec.tracing', { sampling: 5, customTags: { a: 'x', b: { literal: { value: 'y' } } }, provider: { otel: { endpoint: 'http://c:4318' }, controlplane: {} } });
    setPath(find(r, 'location/gcp-us-east1'), 'provider', undefined);
    setPath(find(r, 'location/gcp-us-east1'), 'region', undefined);
    setPath(find(r, 'deployment/api'), 'status.locations', [
      { name: 'aws-us-west-2', replicas: [{ name: 'a0', address: 'h:1' }, { name: 'a1', address: 'h:2', sidecar: 'h:3', ready: false }] },
      { name: '//location/gcp-us-east1', replicas: [{ name: 'g0', address: 'h:4', ready: true }] },
    ]);
  });
  t.same(s.org?.endpointPrefix, 'acme1');
  t.same(s.org?.tracing?.customTags, { a: 'x', b: 'y' });
  t.equal(s.org?.tracing?.otelEndpoint, 'http://c:4318');
  t.equal(s.org?.tracing?.controlplane, true);
  t.equal(s.gvcs.get('demo')?.tracing?.sampling, 5, 'a GVC without tracing takes the org\'s');
  t.same(s.locations.get('gcp-us-east1'), { name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1', latencyMs: 20 });
  t.same(s.deployments.get('demo/api'), [
    { name: 'a0', index: 0, location: 'aws-us-west-2', address: 'h:1', forcedNotReady: false },
    { name: 'a1', index: 1, location: 'aws-us-west-2', address: 'h:2', sidecar: 'h:3', forcedNotReady: true },
    { name: 'g0', index: 0, location: 'gcp-us-east1', address: 'h:4', forcedNotReady: false },
  ]);
  t.equal(snapshotOf((r) => r.splice(0, 1)).org, undefined, 'no org record: no org');
});

t.test('GVC locations from a location query', async (t) => {
  const placed = (query: unknown) => snapshotOf((r) => {
    setPath(find(r, 'gvc/demo'), 'spec.staticPlacement', { locationQuery: query });
    setPath(find(r, 'workload/api'), 'spec.localOptions', []);
    r.splice(r.findIndex((x) => x.kind === 'deployment'), 1);
  }).gvcs.get('demo')?.locations;
  t.same(placed({ spec: { terms: [{ property: 'provider', value: 'gcp' }] } }), ['gcp-us-east1']);
  t.same(placed({ spec: { match: 'none', terms: [{ property: 'provider', value: 'gcp' }] } }), ['aws-us-west-2']);
  t.same(placed({ spec: { match: 'any', terms: [{ property: 'region', op: '=~', value: '^us-' }] } }), ['aws-us-west-2', 'gcp-us-east1']);
  t.same(placed({ spec: { terms: [{ property: 'name', op: 'exists' }], sort: { by: 'name', order: 'desc' } } }), ['gcp-us-east1', 'aws-us-west-2']);
  t.same(placed({ spec: { terms: [{ property: 'region', op: '>', value: 'us-east1' }] } }), ['aws-us-west-2'], 'an ordering term is judged (it used to select every location)');
  t.same(placed({ spec: { terms: [{ rel: 'org', value: 'nothing' }] } }), [], 'a rel term is judged: no location links to that org');
});

t.test('the snapshot is frozen; the caller\'s records are not', async (t) => {
  const records = baseRecords();
  const s = buildSnapshot(records);
  t.ok(Object.isFrozen(s));
  t.ok(Object.isFrozen(s.records[0]));
  t.ok(Object.isFrozen(workload(s).firewallConfig));
  t.notOk(Object.isFrozen(records[0]));
  t.equal(s.records.length, records.length);
});

t.test('invalid records: compileRecords answers errors, buildSnapshot throws', async (t) => {
  const records = baseRecords();
  setPath(find(records, 'workload/api'), 'spec.defaultOptions.timeoutSeconds', 0);
  const result = compileRecords(records);
  t.same(result, { ok: false, errors: ['workload/api: spec.defaultOptions.timeoutSeconds: must be an integer from 1 to 600'], warnings: [] });
  t.throws(() => buildSnapshot(records), ConfigError);
  const bad = compileRecords(baseRecords(), { ...defaultSettings, vendor: 'Bad/', appDomain: 'x y' });
  t.same(bad.ok ? [] : bad.errors, ['settings: vendor: must be lowercase letters, digits and hyphens', 'settings: appDomain: must be a host name']);
});

t.test('warnings travel with the snapshot', async (t) => {
  const s = snapshotOf((r) => {
    setPath(find(r, 'workload/spare'), 'spec.firewallConfig', undefined);
    setPath(find(r, 'workload/spare'), 'tags.svc/newThing', 'x');
    r.push({ kind: 'secret', name: 'ignored' });
  });
  t.same(s.warnings, [
    'workload/spare: tags.svc/newThing: unknown svc/ tag (ignored)',
    'workload/spare: spec.firewallConfig.external.inboundAllowCIDR: not set: the workload accepts no external traffic',
    'secret/ignored: kind: "secret" is a platform kind svcproxy does not read; not checked',
  ]);
  t.equal(s.records.length, baseRecords().length + 1);
});
