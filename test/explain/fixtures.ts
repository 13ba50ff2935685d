/**
 * One realistic configuration for explain's tests, run for real: a GVC over three locations (tiers,
 * offsets, pinned latencies, the router's own), workloads with external authorization (an exclusion),
 * rate limiting (descriptors), retries, a firewall, suspensions, replica-direct names, internal names
 * and two custom domains (prefix and regex routes), every replica a loopback server that answers
 * with its own name. `liveVsExplained` sends a request to the running plane and explains the same one
 * over the plane's own snapshot, and returns both for the tests to compare.
 */
import http from 'node:http';
import { ALIAS, request, startHttpServer, startPlane, type StartedPlane, type TapLike, type SimpleResponse } from '../helpers/harness.js';
import { startEnvoyRls, type SeenRequest } from '../fixtures/ratelimit/servers.js';
import { explain, parseExplainRequest, type Explanation } from '../../src/explain/index.js';

export const OWN = 'aws-us-east-2';
export const LOCATIONS = ['aws-us-east-2', 'gcp-us-east1', 'azure-eastus'] as const;

/** Replicas per workload and location; each is a server that answers `{name: "W@LOC#i", url}`. */
const LAYOUT: Record<string, Partial<Record<(typeof LOCATIONS)[number], number>>> = {
  api: { 'aws-us-east-2': 2, 'gcp-us-east1': 1, 'azure-eastus': 1 },
  web: { 'aws-us-east-2': 1, 'gcp-us-east1': 1 },
  old: { 'aws-us-east-2': 1 },
  priv: { 'aws-us-east-2': 1 },
  flaky: { 'aws-us-east-2': 1 },
};

export interface World {
  plane: StartedPlane;
  meshPort: number;
  authChecks: string[];
  rls: { seen: SeenRequest[] };
  /** Requests each replica server got, by name. */
  hits: Map<string, number>;
}

function workload(name: string, spec: Record<string, unknown> = {}, tags: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc: 'shop', tags,
    spec: {
      type: 'standard',
      containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }] }],
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0', '::/0'] } },
      ...spec,
      defaultOptions: { autoscaling: { minScale: 1, maxScale: 3 }, ...(spec.defaultOptions as object) },
    },
  };
}

export async function startWorld(t: TapLike): Promise<World> {
  const hits = new Map<string, number>();
  const authChecks: string[] = [];
  const auth = await startHttpServer(t, (req, res) => {
    authChecks.push(`${req.method} ${req.url}`);
    res.writeHead(200).end();
  });
  const rls = await startEnvoyRls(t, () => ({ overall_code: 'OK' }));
  const deployments: Record<string, unknown>[] = [];
  for (const [name, where] of Object.entries(LAYOUT)) {
    const locations: Record<string, unknown>[] = [];
    for (const [location, count] of Object.entries(where)) {
      const replicas: Record<string, unknown>[] = [];
      for (let i = 0; i < count; i++) {
        const id = `${name}@${location}#${i}`;
        const server = await startHttpServer(t, replicaHandler(id, hits, name === 'flaky' ? 503 : 200));
        replicas.push({ name: `${name}-${i}`, address: `127.0.0.1:${server.port}` });
      }
      locations.push({ name: location, replicas });
    }
    deployments.push({ kind: 'deployment', name, gvc: 'shop', status: { locations } });
  }
  const recs: Record<string, unknown>[] = [
    { kind: 'org', name: 'acme', status: { endpointPrefix: 'acme' } },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'location', name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1', status: { latencyMs: 30 } },
    { kind: 'location', name: 'azure-eastus', provider: 'azure', region: 'eastus', status: { latencyMs: 10 } },
    {
      kind: 'gvc', name: 'shop', alias: ALIAS,
      spec: {
        staticPlacement: {
          locationLinks: LOCATIONS.map((l) => `//location/${l}`),
          // Tiered locations first (azure by its pinned 10 ms over gcp's 30), the router's own after them.
          locationOptions: [
            { locationLink: '//location/aws-us-east-2', latencyOffsetMs: 50 },
            { locationLink: '//location/gcp-us-east1', routingTier: 1 },
            { locationLink: '//location/azure-eastus', routingTier: 1 },
          ],
        },
        loadBalancer: { trustedProxies: 1 },
        aliasWorkloadLink: '//gvc/shop/workload/web',
      },
    },
    workload('api', {
      loadBalancer: { replicaDirect: true },
      defaultOptions: { debug: true, timeoutSeconds: 9 },
      requestRetryPolicy: { attempts: 2, retryOn: ['connect-failure', '503'] },
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0', '::/0'], inboundBlockedCIDR: ['198.51.100.0/24'] }, internal: { inboundAllowType: 'same-org' } },
      sidecar: { envoy: { excludedExternalAuth: [{ match: { prefix: '/health' } }], excludedRateLimit: [{ match: { prefix: '/static/' } }] } },
    }, {
      'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': String(auth.port), 'svc/externalAuthProtocol': 'http', 'svc/externalAuthScheme': 'http',
      'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': String(rls.port), 'svc/rateLimitScheme': 'http',
      'svc/rateLimitDescriptors': 'method,path,header:x-tenant', 'svc/rateLimitDomain': 'edge',
    }),
    workload('web', { localOptions: [{ location: 'gcp-us-east1', suspend: true }] }),
    workload('old', { defaultOptions: { suspend: true } }),
    workload('priv', { firewallConfig: { external: {} } }),
    workload('flaky', { requestRetryPolicy: { attempts: 2, retryOn: ['503'] } }),
    workload('gone'),
    ...deployments,
    {
      kind: 'domain', name: 'shop.example.com',
      spec: { ports: [{ number: 443, routes: [
        { prefix: '/api/', replacePrefix: '/', workloadLink: '//gvc/shop/workload/api' },
        { prefix: '/web', workloadLink: '//gvc/shop/workload/web' },
        { prefix: '/one/', replacePrefix: '/', workloadLink: '//gvc/shop/workload/api', replica: 0 },
      ] }] },
    },
    {
      kind: 'domain', name: 're.example.com',
      spec: { ports: [{ number: 443, routes: [
        { regex: '/v[0-9]+/.*', workloadLink: '//gvc/shop/workload/api' },
        { regex: '/w/.*', workloadLink: '//gvc/shop/workload/web' },
      ] }] },
    },
  ];
  const plane = await startPlane(t, recs, { location: OWN, mesh: ['127.0.0.1:0'] });
  await plane.ready();
  return { plane, meshPort: plane.runtime.meshListeners[0]!.address.port, authChecks, rls, hits };
}

function replicaHandler(id: string, hits: Map<string, number>, status: number): http.RequestListener {
  return (req, res) => {
    hits.set(id, (hits.get(id) ?? 0) + 1);
    req.resume();
    req.on('end', () => {
      const body = JSON.stringify({ name: id, url: req.url });
      res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  };
}

export interface Case {
  /** Host as sent (a port may follow). */
  readonly host: string;
  readonly path: string;
  readonly method?: string;
  readonly headers?: Record<string, string>;
  /** Sent to the mesh listener (internal names). */
  readonly mesh?: boolean;
}

export interface Outcome {
  readonly explained: Explanation;
  readonly live: SimpleResponse;
  readonly authChecked: boolean;
  readonly descriptors: { key: string; value: string }[] | undefined;
  readonly upstreamHits: number;
}

/** The request sent to the plane, and explained over the plane's own snapshot. */
export async function liveVsExplained(world: World, c: Case): Promise<Outcome> {
  const port = c.mesh ? world.meshPort : world.plane.port;
  const lines = Object.entries(c.headers ?? {}).map(([n, v]) => `${n}: ${v}`);
  const explained = await explain(world.plane.runtime.store.current, parseExplainRequest({
    url: `http://${c.host}${c.path}`, header: lines, ...(c.method ? { method: c.method } : {}),
  }), { location: OWN });
  const auth = world.authChecks.length;
  const rl = world.rls.seen.length;
  const before = [...world.hits.values()].reduce((a, b) => a + b, 0);
  const live = await request(port, c.host, c.path, { method: c.method ?? 'GET', headers: c.headers ?? {} });
  return {
    explained,
    live,
    authChecked: world.authChecks.length > auth,
    descriptors: world.rls.seen.length > rl ? world.rls.seen.at(-1)!.descriptors[0]!.entries.map((e) => ({ key: e.key, value: e.value })) : undefined,
    upstreamHits: [...world.hits.values()].reduce((a, b) => a + b, 0) - before,
  };
}

/**
 * Explain's verdict against what the plane did: forwarded or not, which workload, location and
 * replica answered with which upstream path, or the status of the proxy's own answer; whether the
 * authorization service was asked, the rate-limit descriptor it got; attempts for retries.
 */
export function differences(o: Outcome): string[] {
  const out: string[] = [];
  const e = o.explained;
  let body: { name?: string; url?: string; code?: unknown } = {};
  try {
    body = JSON.parse(o.live.body) as typeof body;
  } catch {
    out.push(`live body is not JSON: ${o.live.body.slice(0, 80)}`);
  }
  if (e.verdict.routes) {
    if (typeof body.name !== 'string') return [...out, `explain routes (${e.verdict.reason}), the plane answered ${o.live.status} itself: ${o.live.body.slice(0, 120)}`];
    const [workload, rest] = body.name.split('@') as [string, string];
    const [location, index] = rest.split('#') as [string, string];
    if (`shop/${workload}` !== e.route?.workload) out.push(`workload: explain ${e.route?.workload}, live ${workload}`);
    if (location !== e.location?.chosen) out.push(`location: explain ${e.location?.chosen}, live ${location}`);
    if (e.route?.fixedReplica !== null && e.route?.fixedReplica !== undefined && Number(index) !== e.route.fixedReplica) out.push(`replica: explain ${e.route.fixedReplica}, live ${index}`);
    if (body.url !== e.route?.upstreamPath) out.push(`upstream path: explain ${e.route?.upstreamPath}, live ${body.url}`);
    const attempts = o.live.status === 503 ? 1 + (e.retry?.attempts ?? 0) : 1;
    if (o.upstreamHits !== attempts) out.push(`attempts: explain ${attempts}, live ${o.upstreamHits}`);
  } else {
    if (typeof body.name === 'string') out.push(`explain refuses (${e.verdict.status} ${e.verdict.reason}), live forwarded to ${body.name}`);
    else if (o.live.status !== e.verdict.status) out.push(`status: explain ${e.verdict.status} (${e.verdict.reason}), live ${o.live.status} ${o.live.body.slice(0, 120)}`);
  }
  if (e.verdict.routes) {
    const auth = e.filters?.sidecar.find((f) => f.name === 'ext_authz');
    if ((auth?.action === 'checked') !== o.authChecked) out.push(`ext_authz: explain ${auth?.action ?? 'none'}, live ${o.authChecked ? 'checked' : 'not checked'}`);
    const rl = e.filters?.sidecar.find((f) => f.name === 'ratelimit');
    const want = rl && 'descriptors' in rl ? rl.descriptors : undefined;
    if (JSON.stringify(want) !== JSON.stringify(o.descriptors)) out.push(`descriptors: explain ${JSON.stringify(want)}, live ${JSON.stringify(o.descriptors)}`);
  } else if (o.authChecked || o.descriptors) {
    out.push('a refused request reached a service');
  }
  return out;
}
