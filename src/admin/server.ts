/**
 * The admin listener: `/healthz` (the process is alive), `/ready` (configuration loaded and listeners
 * bound: 200, else 503), `/metrics` (Prometheus text), `/config` (the effective configuration with
 * secrets redacted, plus the last rejected reload's errors). It binds loopback by default and serves
 * nothing else (404). A failing metrics collection answers 500 and never takes the process down.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface AdminState {
  ready(): boolean;
  /** The effective configuration, already redacted (a promise when it is gathered from workers). */
  config(): unknown;
}

/** What `/metrics` serves: one process's `Metrics`, or the sum over `--workers` workers. */
export interface MetricsSource {
  text(): Promise<string>;
  readonly registry: { readonly contentType: string };
}

export interface AdminServer {
  readonly address: { host: string; port: number };
  close(): Promise<void>;
}

const SECRET_KEY = /(secret|password|passwd|token|credential|private|apikey|api_key|^key$)/i;

/** Replace the values of secret-looking members (and env entries with secret-looking names). */
export function redact(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(redact);
  if (value === null || typeof value !== 'object') return value;
  const out: Record<string, unknown> = {};
  const obj = value as Record<string, unknown>;
  const isEnvEntry = typeof obj.name === 'string' && 'value' in obj && Object.keys(obj).length <= 3;
  for (const [k, v] of Object.entries(obj)) {
    if (SECRET_KEY.test(k) && typeof v !== 'object') out[k] = '[redacted]';
    else if (isEnvEntry && k === 'value' && SECRET_KEY.test(obj.name as string)) out[k] = '[redacted]';
    else out[k] = redact(v);
  }
  return out;
}

export async function startAdmin(host: string, port: number, metrics: MetricsSource, state: AdminState): Promise<AdminServer> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string): void => {
      res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
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
      case '/config':
        Promise.resolve()
          .then(() => state.config())
          .then(
            (config) => send(200, 'application/json', JSON.stringify(config, null, 2) + '\n'),
            (err: Error) => send(500, 'text/plain', `config failed: ${err.message}\n`),
          );
        return;
      default:
        return send(404, 'application/json', JSON.stringify({ status: 404, message: 'no route', code: 'NO_ROUTE', details: {}, id: '' }));
    }
  });
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
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
