/**
 * explain's steps that a running ingress does not show, over compiled records (no sockets): the
 * replicas `up` would start (`W-0..W-(minScale-1)`), a deployment replica named by DNS shown as its
 * name, a replica forced not ready, the GVC's only location, a replica's own sidecar running the
 * filters (with its listener port for `port` exclusions), a port kept out of the sidecar, tracing's
 * sampling decision from the caller's header, the timeout with where it comes from (tag, a location's
 * localOptions, defaultOptions, the default), a CONNECT, and the request parser's usage errors.
 */
import t from 'tap';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { explain, formatText, parseExplainRequest } from '../../src/explain/index.js';
import { UsageError } from '../../src/flags.js';
import { ALIAS } from '../helpers/harness.js';

function snapshot(extra: { workload?: Record<string, unknown>; tags?: Record<string, unknown>; replicas?: Record<string, unknown>[]; gvc?: Record<string, unknown> } = {}) {
  return buildSnapshot([
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'gvc', name: 'shop', alias: ALIAS, spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2'] }, ...extra.gvc } },
    {
      kind: 'workload', name: 'api', gvc: 'shop', tags: extra.tags ?? {},
      spec: {
        type: 'standard',
        containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }, { number: 9090, protocol: 'http' }] }],
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
        defaultOptions: { autoscaling: { minScale: 1, maxScale: 3 } },
        ...extra.workload,
      },
    },
    ...(extra.replicas ? [{ kind: 'deployment', name: 'api', gvc: 'shop', status: { locations: [{ name: 'aws-us-east-2', replicas: extra.replicas }] } }] : []),
  ]);
}

const URL = `http://api-${ALIAS}.app.localhost/x`;

t.test('the replicas up would start, and the GVC\'s only location', async (t) => {
  const s = snapshot({ workload: { containers: [{ name: 'app', image: 'app:1', command: 'node', args: ['app.js'], ports: [{ number: 8080 }] }], defaultOptions: { autoscaling: { minScale: 3, maxScale: 5 } } } });
  const e = await explain(s, parseExplainRequest({ url: URL }));
  t.same(e.replicas.map((r) => [r.name, r.source, r.ready]), [['api-0', 'up', 'unknown'], ['api-1', 'up', 'unknown'], ['api-2', 'up', 'unknown']]);
  t.equal(e.location?.reason, 'only');
  t.same(e.location?.candidates, [], 'one location: no candidate list, as the data plane builds none');
  t.ok(e.verdict.routes);
});

t.test('deployment replicas: a DNS name shown as the name, one forced not ready', async (t) => {
  const s = snapshot({ replicas: [{ name: 'api-0', address: '127.0.0.1:7001', ready: false }, { name: 'api-1', address: 'api.pods.example:7001' }] });
  const e = await explain(s, parseExplainRequest({ url: URL }));
  t.same(e.replicas.map((r) => [r.name, r.source, r.address, r.ready]), [['api-0', 'deployment', '127.0.0.1:7001', false], ['api-1', 'dns', 'api.pods.example:7001', 'unknown']]);
  const only = await explain(snapshot({ replicas: [{ name: 'api-0', address: '127.0.0.1:7001', ready: false }] }), parseExplainRequest({ url: URL }));
  t.same(only.verdict, { routes: false, status: 503, code: 'NO_HEALTHY_UPSTREAM', reason: 'aws-us-east-2 lists no replica that may take it (forced not ready, or not there)' });
});

t.test('a replica with its own sidecar runs the filters there, with its port', async (t) => {
  const tags = { 'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': '9', 'svc/rateLimitScheme': 'http' };
  const workload = { sidecar: { envoy: { excludedRateLimit: [{ port: 15006 }] } }, mesh: { inboundDisabledPort: 9090 } };
  const s = snapshot({ tags, workload, replicas: [{ name: 'api-0', address: '127.0.0.1:7001', sidecar: '127.0.0.1:15006' }] });
  const e = await explain(s, parseExplainRequest({ url: URL }));
  t.equal(e.filters?.runsAt, 'replica-sidecar');
  t.equal(e.replicas[0]?.hop, 'sidecar');
  const rl = e.filters?.sidecar[0];
  t.same([rl?.name, rl?.action, rl && 'excludedByRule' in rl && rl.excludedByRule], ['ratelimit', 'skipped', true], 'port 15006 is the sidecar\'s listener');
  const inProcess = await explain(snapshot({ tags, workload, replicas: [{ name: 'api-0', address: '127.0.0.1:7001' }] }), parseExplainRequest({ url: URL }));
  t.same([inProcess.filters?.runsAt, inProcess.filters?.sidecar[0]?.action], ['router', 'checked']);
});

t.test('tracing: the caller\'s decision, the ratio, x-svc-debug: trace', async (t) => {
  const s = snapshot({ gvc: { tracing: { sampling: 25, provider: { otel: { endpoint: '127.0.0.1:4317' } } } }, workload: { defaultOptions: { debug: true, autoscaling: { minScale: 1 } } }, replicas: [{ name: 'api-0', address: '127.0.0.1:7001' }] });
  const sampled = (headers: string[]) => explain(s, parseExplainRequest({ url: URL, header: headers })).then((e) => e.tracing?.sampled);
  t.match(await sampled([]), /^with probability 0\.25/);
  t.match(await sampled(['traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01']), /^yes: the caller's w3c header/);
  t.match(await sampled(['traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00']), /^no: /);
  t.match(await sampled(['x-svc-debug: trace']), /^yes: x-svc-debug: trace/);
});

t.test('the timeout and its source: the tag, localOptions of the chosen location, defaultOptions, the default', async (t) => {
  const twoLocations = (workload: Record<string, unknown>, tags: Record<string, unknown> = {}, settings = defaultSettings) => buildSnapshot([
    { kind: 'org', name: 'acme' },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'location', name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1' },
    { kind: 'gvc', name: 'shop', alias: ALIAS, spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2', '//location/gcp-us-east1'] } } },
    {
      kind: 'workload', name: 'api', gvc: 'shop', tags,
      spec: {
        type: 'standard',
        containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }] }],
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
        ...workload,
        defaultOptions: { autoscaling: { minScale: 1, maxScale: 3 }, ...(workload.defaultOptions as object) },
      },
    },
    { kind: 'deployment', name: 'api', gvc: 'shop', status: { locations: ['aws-us-east-2', 'gcp-us-east1'].map((name) => ({ name, replicas: [{ name: 'api-0', address: '127.0.0.1:7001' }] })) } },
  ], settings);
  const local = { localOptions: [{ location: '//location/aws-us-east-2', debug: true }, { location: 'gcp-us-east1', timeoutSeconds: 30 }] };
  const at = (loc: string) => `http://api-${ALIAS}.${loc}.direct.localhost/`;
  const cases: [string, ReturnType<typeof twoLocations>, string, number, string][] = [
    ['nothing set', twoLocations({}), URL, 5000, 'the default'],
    ['defaultOptions', twoLocations({ defaultOptions: { timeoutSeconds: 7 } }), URL, 7000, 'spec.defaultOptions.timeoutSeconds'],
    ['the tag', twoLocations({ defaultOptions: { timeoutSeconds: 7 } }, { 'svc/timeoutSecondsOverride': '900' }), URL, 900_000, 'tag svc/timeoutSecondsOverride'],
    ['a location with its own', twoLocations({ defaultOptions: { timeoutSeconds: 7 }, ...local }), at('gcp-us-east1'), 30_000, 'spec.localOptions[1].timeoutSeconds'],
    ['a location whose entry sets no timeout', twoLocations({ defaultOptions: { timeoutSeconds: 7 }, ...local }), at('aws-us-east-2'), 7000, 'spec.defaultOptions.timeoutSeconds'],
    ['the tag over a location\'s own', twoLocations({ ...local }, { 'svc/timeoutSecondsOverride': 2 }), at('gcp-us-east1'), 2000, 'tag svc/timeoutSecondsOverride'],
    ['another vendor\'s tag', twoLocations({}, { 'cpln/timeoutSecondsOverride': 3 }, { ...defaultSettings, vendor: 'cpln' }), URL, 3000, 'tag cpln/timeoutSecondsOverride'],
  ];
  for (const [what, s, url, ms, source] of cases) {
    const e = await explain(s, parseExplainRequest({ url }));
    t.same([e.timeoutMs, e.timeoutSource], [ms, source], `${what}: ${ms} ms (${source})`);
    t.match(formatText(e), new RegExp(`^timeout: +${ms} ms \\(${source.replace(/[.[\]()]/g, '\\$&')}\\)$`, 'm'), `${what}: the text line`);
  }
  const refused = await explain(twoLocations({}), parseExplainRequest({ url: 'http://nobody.example/' }));
  t.same([refused.timeoutMs, refused.timeoutSource], [null, null], 'refused before routing: no timeout');
});

t.test('refused before routing: CONNECT, a path that does not normalize', async (t) => {
  const s = snapshot();
  t.equal((await explain(s, parseExplainRequest({ url: URL, method: 'CONNECT' }))).verdict.code, 'NO_ROUTE');
  t.equal((await explain(s, parseExplainRequest({ url: `http://api-${ALIAS}.app.localhost/a/..;x/b` }))).verdict.code, 'BAD_REQUEST');
});

t.test('the request line: usage errors, Host from -H, default ports', async (t) => {
  for (const bad of [{ url: 'api.example.com/x' }, { url: 'ftp://x/' }, { url: 'http://u@x/' }, { url: 'http://x/', header: ['x'] }, { url: 'http://x/', header: [': v'] }, { url: 'http://x/', method: 'G T' }, { url: 'http://x/', from: 'here' }, { url: undefined }]) {
    let thrown: unknown;
    try {
      parseExplainRequest(bad);
    } catch (err) {
      thrown = err;
    }
    t.ok(thrown instanceof UsageError, `${JSON.stringify(bad)}: ${String(thrown)}`);
  }
  const r = parseExplainRequest({ url: 'https://a.example.com?q=1', header: ['Host: b.example.com', 'x-a: 1', 'X-A: 2'] });
  t.same([r.host, r.listenerPort, r.target, r.headers['x-a'], r.rawHeaders], ['b.example.com', 443, '/?q=1', '1, 2', ['Host', 'b.example.com', 'x-a', '1', 'X-A', '2']]);
  t.equal(parseExplainRequest({ url: 'http://a.example.com:8080/p#frag' }).listenerPort, 8080);
  t.equal(parseExplainRequest({ url: 'http://a.example.com:8080/p#frag' }).target, '/p');
});
