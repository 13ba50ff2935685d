/**
 * The admin listener: `/healthz` (the process is alive), `/ready` (configuration loaded and listeners
 * bound: 200, else 503), `/metrics` (Prometheus text), `/config` (the effective configuration with
 * secrets redacted, plus the last rejected reload's errors), `/workloads` (each workload's health per
 * location, when the role gives it), and, when the role gives a dashboard source, the dashboard page
 * at `/` with its script and style sheet and its server-sent events at `/events` (src/admin/dashboard.ts;
 * nothing is sampled until the page is first asked for). It binds loopback by default and serves
 * nothing else (404). A failing metrics collection answers 500 and never takes the process down.
 * Beside it a role may run a status listener (`/healthz`, `/ready`) and a metrics listener
 * (`/metrics`), for a cluster's probes and Prometheus, so the admin itself can stay on loopback.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseHostPort } from '../address.js';
import { Dashboard, type DashboardOptions, type DashboardSource } from './dashboard.js';
import { DASHBOARD_CSS, DASHBOARD_HTML, DASHBOARD_JS, PAGE_HEADERS } from './dashboard-page.js';

export interface AdminState {
  ready(): boolean;
  /** The effective configuration, already redacted (a promise when it is gathered from workers). */
  config(): unknown;
  /** `/workloads`: health, ready and total replicas, version per workload and location (DESIGN §10); absent: 404. */
  workloads?(): unknown;
  /** `/` and `/events`: what the dashboard samples; absent: both 404. */
  dashboard?: DashboardSource;
  /** The dashboard's timing and bounds (tests); default 1 s samples, 5 min kept, 16 pages. */
  dashboardOptions?: DashboardOptions;
}

/** What `/metrics` serves: one process's `Metrics`, or the sum over `--workers` workers. */
export interface MetricsSource {
  text(): Promise<string>;
  readonly registry: { readonly contentType: string };
}

export interface AdminServer {
  readonly address: { host: string; port: number };
  /** The dashboard's sampler, when the role has one. */
  readonly dashboard?: Dashboard;
  close(): Promise<void>;
}

const SECRET_KEY = /(secret|password|passwd|token|credential|private|apikey|api_key|^key$)/i;

export const REDACTED = '[redacted]';

/**
 * Members of a secret record's `data` that are not sensitive, by secret type: how a payload or a
 * password is encoded. Every other member of `data` is (opaque `payload`; userpass `username` and
 * `password`; keypair `secretKey`, `publicKey`, `passphrase`; tls `key`, `cert`, `chain`; aws and ecr
 * `accessKey`, `secretKey`, `roleArn`, `externalId`; azure-connector `url`, `code`; nats-account
 * `accountId`, `privateKey`; every value of a dictionary), and so is a `data` that is not an object
 * (gcp, azure-sdk and docker keep a JSON text there). An allow list, so a type or member svcproxy
 * does not know is hidden, never shown.
 */
const SECRET_PLAIN: Readonly<Record<string, readonly string[]>> = { opaque: ['encoding'], userpass: ['encoding'] };

/**
 * A `secret` record as the platform's GET answers it, without its sensitive content: name, type,
 * description, tags, links and the other common fields stay; every value of `data` is replaced by
 * `[redacted]` (its member names stay, as `kubectl describe secret` shows the keys), except the
 * encoding of opaque and userpass secrets.
 */
function redactSecret(record: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(record)) out[k] = k === 'data' ? redactSecretData(record.type, v) : redact(v);
  return out;
}

function redactSecretData(type: unknown, data: unknown): unknown {
  if (data === undefined || data === null) return data;
  if (typeof data !== 'object' || Array.isArray(data)) return REDACTED;
  const plain = typeof type === 'string' ? SECRET_PLAIN[type] ?? [] : [];
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(data)) out[k] = plain.includes(k) && typeof v === 'string' ? v : REDACTED;
  return out;
}

function isSecretRecord(obj: Readonly<Record<string, unknown>>): boolean {
  return typeof obj.kind === 'string' && obj.kind.toLowerCase() === 'secret';
}

/**
 * Replace the values of secret-looking members (and env entries with secret-looking names), and the
 * sensitive content of `secret` records (DESIGN §3: `/config` shows secrets redacted).
 */
export function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redact);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  const obj = value as Record<string, unknown>;
  if (isSecretRecord(obj)) return redactSecret(obj);
  const isEnvEntry = typeof obj.name === 'string' && 'value' in obj && Object.keys(obj).length <= 3;
  for (const [k, v] of Object.entries(obj)) {
    if (SECRET_KEY.test(k) && typeof v !== 'object') out[k] = REDACTED;
    else if (isEnvEntry && k === 'value' && SECRET_KEY.test(obj.name as string)) out[k] = REDACTED;
    else out[k] = redact(v);
  }
  return out;
}

type Send = (status: number, type: string, body: string, headers?: Readonly<Record<string, string>>) => void;

function sender(req: http.IncomingMessage, res: http.ServerResponse): Send {
  return (status, type, body, headers) => {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...headers });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
}

/** `/healthz` and `/ready`, the same on the admin and the status listener; false for any other path. */
function probe(path: string, ready: () => boolean, send: Send): boolean {
  if (path === '/healthz') send(200, 'text/plain', 'ok\n');
  else if (path === '/ready') {
    if (ready()) send(200, 'text/plain', 'ready\n');
    else send(503, 'text/plain', 'not ready\n');
  } else return false;
  return true;
}

function sendMetrics(metrics: MetricsSource, send: Send): void {
  metrics.text().then(
    (text) => send(200, metrics.registry.contentType, text),
    (err: Error) => send(500, 'text/plain', `metrics failed: ${err.message}\n`),
  );
}

function notFound(send: Send): void {
  send(404, 'application/json', JSON.stringify({ status: 404, message: 'no route', code: 'NO_ROUTE', details: {}, id: '' }));
}

/** An HTTP/1.1 server on `host:port` that answers with `handle(path, send, req, res)`. */
async function serve(
  host: string,
  port: number,
  handle: (path: string, send: Send, req: http.IncomingMessage, res: http.ServerResponse) => void,
  onClose?: () => void,
): Promise<AdminServer> {
  const server = http.createServer((req, res) => handle((req.url ?? '/').split('?')[0]!, sender(req, res), req, res));
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  return {
    address: { host: addr.address, port: addr.port },
    close: () =>
      new Promise<void>((resolve) => {
        onClose?.();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

export async function startAdmin(host: string, port: number, metrics: MetricsSource, state: AdminState): Promise<AdminServer> {
  const dashboard = state.dashboard ? new Dashboard(state.dashboard, state.dashboardOptions) : undefined;
  const listener = await serve(host, port, (path, send, req, res) => {
    if (dashboard) {
      switch (path) {
        case '/':
          dashboard.touch();
          return send(200, 'text/html; charset=utf-8', DASHBOARD_HTML, PAGE_HEADERS);
        case '/dashboard.js':
          return send(200, 'text/javascript; charset=utf-8', DASHBOARD_JS, PAGE_HEADERS);
        case '/dashboard.css':
          return send(200, 'text/css; charset=utf-8', DASHBOARD_CSS, PAGE_HEADERS);
        case '/events':
          return dashboard.attach(req, res);
        case '/favicon.ico':
          // Browsers ask for it; no icon, and no 404 in the page's console.
          res.writeHead(204, { 'cache-control': 'max-age=86400' });
          return res.end();
      }
    }
    if (probe(path, state.ready, send)) return;
    switch (path) {
      case '/metrics':
        return sendMetrics(metrics, send);
      case '/workloads':
        if (!state.workloads) break;
        try {
          return send(200, 'application/json', JSON.stringify(state.workloads(), null, 2) + '\n');
        } catch (err) {
          return send(500, 'text/plain', `workloads failed: ${(err as Error).message}\n`);
        }
      case '/config':
        Promise.resolve()
          .then(() => state.config())
          .then(
            (config) => send(200, 'application/json', JSON.stringify(config, null, 2) + '\n'),
            (err: Error) => send(500, 'text/plain', `config failed: ${err.message}\n`),
          );
        return;
    }
    // Unknown paths, and `/workloads` of a role that has none.
    notFound(send);
  }, () => dashboard?.close());
  return { address: listener.address, ...(dashboard ? { dashboard } : {}), close: listener.close };
}

/**
 * The status listener (`--status`): `/healthz` and `/ready` only, as the admin answers them, and 404
 * for every other path. It is what a cluster's probes reach (Istio's 15021) while the admin, whose
 * `/config` shows the topology, stays on loopback.
 */
export async function startStatus(host: string, port: number, ready: () => boolean): Promise<AdminServer> {
  return serve(host, port, (path, send) => {
    if (!probe(path, ready, send)) notFound(send);
  });
}

/** The metrics listener (`--metrics`): `/metrics` only, as the admin answers it; 404 elsewhere (Istio's 15090). */
export async function startMetrics(host: string, port: number, metrics: MetricsSource): Promise<AdminServer> {
  return serve(host, port, (path, send) => {
    if (path === '/metrics') sendMetrics(metrics, send);
    else notFound(send);
  });
}

/** Where the admin, status and metrics listeners bind; an absent one is not started. */
export interface AdminAddresses {
  readonly admin?: { readonly host: string; readonly port: number } | undefined;
  readonly status?: { readonly host: string; readonly port: number } | undefined;
  readonly metrics?: { readonly host: string; readonly port: number } | undefined;
}

/** The addresses of a role's `--admin`, `--status` and `--metrics` flags (`host:port`), parsed. */
export function adminAddresses(flags: { readonly admin?: string | undefined; readonly status?: string | undefined; readonly metrics?: string | undefined }): AdminAddresses {
  const at = (address: string | undefined) => (address ? parseHostPort(address) : undefined);
  return { admin: at(flags.admin), status: at(flags.status), metrics: at(flags.metrics) };
}

/** A role's admin listener and its status and metrics listeners, closed together. */
export interface AdminListeners {
  readonly admin?: AdminServer;
  readonly status?: AdminServer;
  readonly metrics?: AdminServer;
  close(): Promise<void>;
}

/**
 * Starts the listeners `addresses` names, all from the same state and metrics. When one cannot bind
 * (an address in use), those already started are closed and the error is thrown.
 */
export async function startAdminListeners(addresses: AdminAddresses, metrics: MetricsSource, state: AdminState): Promise<AdminListeners> {
  const started: { admin?: AdminServer; status?: AdminServer; metrics?: AdminServer } = {};
  const close = async (): Promise<void> => {
    await Promise.all([started.admin?.close(), started.status?.close(), started.metrics?.close()]);
  };
  try {
    if (addresses.admin) started.admin = await startAdmin(addresses.admin.host, addresses.admin.port, metrics, state);
    if (addresses.status) started.status = await startStatus(addresses.status.host, addresses.status.port, state.ready);
    if (addresses.metrics) started.metrics = await startMetrics(addresses.metrics.host, addresses.metrics.port, metrics);
  } catch (err) {
    await close();
    throw err;
  }
  return { ...started, close };
}
