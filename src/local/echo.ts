/**
 * The demo's app, runnable as `node dist/local/echo.js`: an HTTP server on `$PORT` that answers
 * every request with what it received as JSON (`method`, `path`, `query`, `headers`, the first
 * 64 KiB of `body` as text, and which `workload`, `location` and `replica` answered), plus a few
 * helpers for trying the proxy: `GET /healthz`, `/delay?ms=N` (answer after N ms, at most 10 min),
 * `/status/NNN` (answer with that status), `/bytes/N` (stream N bytes, at most 1 GiB). Out-of-range
 * values get 400. It listens on every interface unless `$HOST` is set. On SIGTERM or SIGINT it stops accepting, lets in-flight requests finish and
 * exits 0; it exits 1 when it cannot listen.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { fileURLToPath } from 'node:url';
import { realpathSync } from 'node:fs';

export const MAX_ECHO_BODY = 64 * 1024;
const MAX_DELAY_MS = 10 * 60 * 1000;
const MAX_BYTES = 1024 * 1024 * 1024;

export interface EchoIdentity {
  readonly workload?: string;
  readonly location?: string;
  readonly replica?: string;
}

/** Reads the body, keeping the first `MAX_ECHO_BODY` bytes and draining the rest. */
function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let kept = 0;
    req.on('data', (chunk: Buffer) => {
      if (kept >= MAX_ECHO_BODY) return;
      const part = chunk.subarray(0, MAX_ECHO_BODY - kept);
      chunks.push(part);
      kept += part.length;
    });
    req.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.once('error', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

function queryObject(params: URLSearchParams): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [key, value] of params) {
    const seen = out[key];
    out[key] = seen === undefined ? value : Array.isArray(seen) ? [...seen, value] : [seen, value];
  }
  return out;
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

/** Streams `count` bytes, honouring backpressure so a slow client does not fill our memory. */
function streamBytes(res: ServerResponse, count: number): void {
  const block = Buffer.alloc(64 * 1024, 'abcdefghijklmnopqrstuvwxyz');
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': count });
  let left = count;
  const pump = (): void => {
    while (left > 0) {
      const n = Math.min(left, block.length);
      left -= n;
      if (!res.write(n === block.length ? block : block.subarray(0, n))) {
        res.once('drain', pump);
        return;
      }
    }
    res.end();
  };
  res.once('close', () => (left = 0));
  pump();
}

function intOrUndefined(text: string | null | undefined): number | undefined {
  if (text === null || text === undefined || !/^\d{1,12}$/.test(text)) return undefined;
  return Number(text);
}

export function echoHandler(identity: EchoIdentity): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://echo.invalid');
      const body = await readBody(req);
      const echo = {
        method: req.method,
        path: url.pathname,
        query: queryObject(url.searchParams),
        headers: req.headers,
        body,
        workload: identity.workload,
        location: identity.location,
        replica: identity.replica,
      };
      if (url.pathname === '/healthz') return sendJson(res, 200, { status: 'ok' });
      if (url.pathname === '/delay') {
        const ms = intOrUndefined(url.searchParams.get('ms') ?? '0');
        if (ms === undefined || ms > MAX_DELAY_MS) return sendJson(res, 400, { error: `ms must be 0-${MAX_DELAY_MS}` });
        // A client that went away stops the wait; nobody is left to answer.
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          res.once('close', () => {
            clearTimeout(timer);
            resolve();
          });
        });
        if (res.destroyed || res.writableEnded) return;
        return sendJson(res, 200, echo);
      }
      const status = /^\/status\/([^/]+)$/.exec(url.pathname);
      if (status) {
        const code = intOrUndefined(status[1]);
        if (code === undefined || code < 200 || code > 599) return sendJson(res, 400, { error: 'status must be 200-599' });
        if (code === 204 || code === 304) {
          res.writeHead(code);
          return res.end();
        }
        return sendJson(res, code, echo);
      }
      const bytes = /^\/bytes\/([^/]+)$/.exec(url.pathname);
      if (bytes) {
        const count = intOrUndefined(bytes[1]);
        if (count === undefined || count > MAX_BYTES) return sendJson(res, 400, { error: `bytes must be 0-${MAX_BYTES}` });
        return streamBytes(res, count);
      }
      sendJson(res, 200, echo);
    })().catch(() => {
      if (!res.headersSent) sendJson(res, 500, { error: 'echo failed' });
      else res.destroy();
    });
  };
}

/** Starts the echo server on `port` (0: any free port) of `host`; resolves once it listens. */
export function startEcho(port: number, identity: EchoIdentity = {}, host?: string): Promise<Server> {
  const server = createServer(echoHandler(identity));
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

function isMain(): boolean {
  const entry = process.argv[1];
  if (entry === undefined) return false;
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (isMain()) {
  const env = process.env;
  const identity: EchoIdentity = {
    workload: env.SVC_WORKLOAD ?? env.CPLN_WORKLOAD,
    location: env.SVC_LOCATION ?? env.CPLN_LOCATION,
    replica: env.SVC_REPLICA ?? env.CPLN_REPLICA,
  };
  const port = Number(env.PORT ?? 8080);
  // All interfaces, as on the platform, unless HOST narrows it.
  startEcho(port, identity, env.HOST || undefined).then(
    (server) => {
      process.stdout.write(`echo listening on ${port}\n`);
      const shutdown = (): void => {
        server.close(() => process.exit(0));
        server.closeIdleConnections();
      };
      process.once('SIGTERM', shutdown);
      process.once('SIGINT', shutdown);
    },
    (error: unknown) => {
      process.stderr.write(`echo: cannot listen on ${port}: ${String(error)}\n`);
      process.exit(1);
    },
  );
}
