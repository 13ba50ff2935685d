/**
 * Integration-test harness: real servers on loopback port 0, a real data plane started in-process
 * from raw records (the same records a user writes in YAML), cleanup registered before anything can
 * fail. `records()` builds the usual org/location/gvc/workload/deployment set for one upstream.
 */
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import jsyaml from 'js-yaml';
import { Runtime, type RuntimeOptions } from '../../src/roles/runtime.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import type { Settings } from '../../src/config/model.js';

export interface TapLike {
  teardown(fn: () => unknown): void;
}

export const ALIAS = 'abcdefghij123';

export async function startHttpServer(t: TapLike, handler: http.RequestListener): Promise<{ server: http.Server; port: number; url: string }> {
  const server = http.createServer(handler);
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return { server, port, url: `http://127.0.0.1:${port}` };
}

/**
 * An h2c server on loopback port 0. Its sessions are tracked (`sessions`, open ones) and destroyed in
 * teardown with the server, so a test never waits for an idle client session to go away.
 */
export async function startH2Server(
  t: TapLike,
  onStream: (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => void,
  options: http2.ServerOptions = {},
): Promise<{ server: http2.Http2Server; port: number; sessions: Set<http2.ServerHttp2Session>; connections: () => number }> {
  const server = http2.createServer(options);
  const sessions = new Set<http2.ServerHttp2Session>();
  let connections = 0;
  server.on('connection', () => connections++);
  server.on('session', (s) => {
    sessions.add(s);
    s.on('close', () => sessions.delete(s));
  });
  server.on('stream', onStream);
  t.teardown(() => {
    for (const s of sessions) s.destroy();
    server.close();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as AddressInfo).port, sessions, connections: () => connections };
}

export interface RecordOptions {
  workload?: string;
  gvc?: string;
  alias?: string;
  locations?: string[];
  /** Per location, the app addresses (`host:port`) of its replicas. */
  replicas: Record<string, string[]>;
  workloadSpec?: Record<string, unknown>;
  tags?: Record<string, unknown>;
  ports?: { number: number; protocol?: string }[];
  type?: string;
  extra?: Record<string, unknown>[];
  gvcSpec?: Record<string, unknown>;
}

/** Records as one multi-document YAML file's text. */
export function yamlDocuments(docs: readonly unknown[]): string {
  return docs.map((d) => jsyaml.dump(d, { lineWidth: -1 })).join('---\n');
}

/** A typical record set: one org, the locations, one GVC, one workload and its deployment. */
export function records(opts: RecordOptions): Record<string, unknown>[] {
  const gvc = opts.gvc ?? 'shop';
  const workload = opts.workload ?? 'api';
  const locations = opts.locations ?? Object.keys(opts.replicas);
  const out: Record<string, unknown>[] = [
    { kind: 'org', name: 'acme', status: { endpointPrefix: 'acme' } },
    ...locations.map((name) => {
      const [provider, ...rest] = name.split('-');
      return { kind: 'location', name, provider, region: rest.join('-') };
    }),
    {
      kind: 'gvc',
      name: gvc,
      alias: opts.alias ?? ALIAS,
      spec: { staticPlacement: { locationLinks: locations.map((l) => `//location/${l}`) }, ...opts.gvcSpec },
    },
    {
      kind: 'workload',
      name: workload,
      gvc,
      tags: opts.tags ?? {},
      spec: {
        type: opts.type ?? 'standard',
        containers: [{ name: 'app', image: 'app:1', ports: (opts.ports ?? [{ number: 8080, protocol: 'http' }]) }],
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0', '::/0'] } },
        ...opts.workloadSpec,
        defaultOptions: { autoscaling: { minScale: 1, maxScale: 3 }, ...(opts.workloadSpec?.defaultOptions as object) },
      },
    },
    {
      kind: 'deployment',
      name: workload,
      gvc,
      status: {
        locations: Object.entries(opts.replicas).map(([name, addresses]) => ({
          name,
          replicas: addresses.map((address, i) => ({ name: `${workload}-${i}`, address })),
        })),
      },
    },
    ...(opts.extra ?? []),
  ];
  return out;
}

export interface StartedPlane {
  runtime: Runtime;
  port: number;
  url: string;
  adminUrl: string;
  /** Resolves when every listed deployment replica is ready. */
  ready(): Promise<void>;
}

export async function startPlane(
  t: TapLike,
  recs: Record<string, unknown>[] | undefined,
  opts: Partial<RuntimeOptions> & { settings?: Partial<Settings> } = {},
): Promise<StartedPlane> {
  const runtime = await Runtime.start({
    role: 'ingress',
    settings: { ...defaultSettings, ...opts.settings },
    ...(recs ? { records: recs } : {}),
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: silentLogger(),
    watch: false,
    ...opts,
    // Load shedding off unless a test asks for it: a busy CI machine can stall a test process past
    // the production threshold, and a shed 503 would fail tests that are about something else.
    limits: { maxEventLoopDelayMs: 0, ...opts.limits },
  } as RuntimeOptions);
  t.teardown(() => runtime.stop(0));
  const port = runtime.listeners[0]!.address.port;
  return {
    runtime,
    port,
    url: `http://127.0.0.1:${port}`,
    adminUrl: `http://127.0.0.1:${runtime.admin!.address.port}`,
    ready: () => waitFor(() => runtime.replicas.all().every((r) => r.ready), 30_000, 'replicas ready'),
  };
}

/**
 * A standalone sidecar for replica `api-0` of `shop/api` in front of the app, and an ingress whose
 * deployment record sends that replica's traffic through the sidecar (ingress → sidecar → app).
 * `sidecar`: more options for the sidecar's plane.
 */
export async function startSidecarBehindIngress(
  t: TapLike,
  base: Record<string, unknown>[],
  appPort: number,
  opts: { location?: string; sidecar?: Partial<RuntimeOptions> } = {},
): Promise<{ sidecar: StartedPlane; ingress: StartedPlane }> {
  const location = opts.location ?? 'aws-us-east-2';
  const sidecar = await startPlane(t, base, {
    role: 'sidecar',
    ...opts.sidecar,
    sidecar: { workload: 'shop/api', location, replica: 'api-0', app: `127.0.0.1:${appPort}` },
  });
  const withSidecar = base.map((r) =>
    r.kind === 'deployment'
      ? { ...r, status: { locations: [{ name: location, replicas: [{ name: 'api-0', address: `127.0.0.1:${appPort}`, sidecar: `127.0.0.1:${sidecar.port}` }] }] } }
      : r,
  );
  const ingress = await startPlane(t, withSidecar, { location });
  return { sidecar, ingress };
}

/** Polls `check` every 20 ms; `timeoutMs` is a hang guard (a busy machine is slow, not wrong). */
export async function waitFor(check: () => boolean, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface SimpleResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One HTTP/1.1 request to the plane with a chosen Host header. */
export function request(
  port: number,
  host: string,
  path = '/',
  init: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string | Buffer } = {},
): Promise<SimpleResponse> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: init.method ?? 'GET', headers: { host, ...init.headers }, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks).toString() }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(init.body);
  });
}

/** An upstream that answers with JSON describing what it received. */
export function echoHandler(name = 'upstream'): http.RequestListener {
  return (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.stringify({ name, method: req.method, url: req.url, headers: req.headers, body: Buffer.concat(chunks).toString() });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
  };
}
