/**
 * The admin listener: `/healthz` (the process is alive), `/ready` (configuration loaded and listeners
 * bound: 200, else 503), `/metrics` (Prometheus text), `/config` (the effective configuration with
 * secrets redacted, plus the last rejected reload's errors), `/workloads` (each workload's health per
 * location, when the role gives it), and, when the role gives a dashboard source, the dashboard page
 * at `/` with its script and style sheet and its server-sent events at `/events` (src/admin/dashboard.ts;
 * nothing is sampled until the page is first asked for). It binds loopback by default and serves
 * nothing else (404). A failing metrics collection answers 500 and never takes the process down.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
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

export async function startAdmin(host: string, port: number, metrics: MetricsSource, state: AdminState): Promise<AdminServer> {
  const dashboard = state.dashboard ? new Dashboard(state.dashboard, state.dashboardOptions) : undefined;
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string, headers?: Readonly<Record<string, string>>): void => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store', ...headers });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
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
    switch (path) {
      case '/healthz':
        return send(200, 'text/plain', 'ok\n');
      case '/ready':
        return state.ready() ? send(200, 'text/plain', 'ready\n') : send(503, 'text/plain', 'not ready\n');
      case '/metrics':
        metrics.text().then(
          (text) => send(200, metrics.registry.contentType, text),
          (err: Error) => send(500, 'text/plain', `metrics failed: ${err.message}\n`),
        );
        return;
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
    send(404, 'application/json', JSON.stringify({ status: 404, message: 'no route', code: 'NO_ROUTE', details: {}, id: '' }));
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  return {
    address: { host: addr.address, port: addr.port },
    ...(dashboard ? { dashboard } : {}),
    close: () =>
      new Promise<void>((resolve) => {
        dashboard?.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
