/**
 * Fault-suite helpers: a load generator that counts every request it sends and how each was
 * answered (by phase, so a test can say what happened before, during and after a fault), and
 * upstreams that misbehave on purpose (reset mid-body, black hole). Everything is loopback, every
 * loop is bounded in count and time, and cleanup is registered with the test first.
 */
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import type { TapLike } from '../helpers/harness.js';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** How one request ended: an HTTP status, or how it failed. */
export type Outcome = number | 'reset' | 'truncated' | 'refused' | 'timeout' | 'error';

export interface Result {
  readonly phase: string;
  readonly outcome: Outcome;
  readonly ms: number;
  /** Set when the request asked for it (`SendResult.note`): e.g. which replica answered. */
  readonly note?: string;
}

export interface SendResult {
  outcome: Outcome;
  note?: string;
}

export interface Tally {
  sent: number;
  answered: number;
  /** Outcome → count. */
  by: Record<string, number>;
  maxMs: number;
}

export function tally(results: readonly Result[]): Tally {
  const by: Record<string, number> = {};
  let maxMs = 0;
  let answered = 0;
  for (const r of results) {
    by[String(r.outcome)] = (by[String(r.outcome)] ?? 0) + 1;
    if (typeof r.outcome === 'number') answered++;
    maxMs = Math.max(maxMs, r.ms);
  }
  return { sent: results.length, answered, by, maxMs: Math.round(maxMs) };
}

/**
 * Steady load: `concurrency` workers, each sending one request at a time with a short pause
 * between them, until `stop()`, `maxRequests` in all, or `maxMs`. `phase` labels what is sent next.
 */
export class Load {
  phase = 'before';
  readonly results: Result[] = [];
  private stopped = false;
  private sent = 0;
  /** Requests in flight, by the phase they were sent in. */
  private readonly inFlight = new Map<string, number>();
  private readonly workers: Promise<void>[] = [];

  constructor(
    private readonly send: () => Promise<SendResult>,
    opts: { concurrency?: number; pauseMs?: number; maxRequests?: number; maxMs?: number } = {},
  ) {
    const { concurrency = 4, pauseMs = 10, maxRequests = 4000, maxMs = 20_000 } = opts;
    const deadline = Date.now() + maxMs;
    for (let w = 0; w < concurrency; w++) {
      this.workers.push((async () => {
        while (!this.stopped && this.sent < maxRequests && Date.now() < deadline) {
          this.sent++;
          const phase = this.phase;
          const t0 = performance.now();
          this.inFlight.set(phase, (this.inFlight.get(phase) ?? 0) + 1);
          const r = await this.send();
          this.inFlight.set(phase, this.inFlight.get(phase)! - 1);
          this.results.push({ phase, outcome: r.outcome, ms: performance.now() - t0, ...(r.note !== undefined ? { note: r.note } : {}) });
          await sleep(pauseMs);
        }
      })());
    }
  }

  /** Results so far of one phase (or all). */
  of(phase?: string): Result[] {
    return phase === undefined ? this.results : this.results.filter((r) => r.phase === phase);
  }

  /** Wait until `n` more results of the current phase arrived (bounded by `maxMs`, a hang guard only). */
  async settle(n: number, maxMs = 30_000): Promise<void> {
    const phase = this.phase;
    const start = this.of(phase).length;
    const deadline = Date.now() + maxMs;
    while (this.of(phase).length < start + n && Date.now() < deadline) await sleep(10);
  }

  /** Wait until no request sent in `phase` is still in flight (bounded by `maxMs`, a hang guard only). */
  async quiesce(phase: string, maxMs = 30_000): Promise<void> {
    const deadline = Date.now() + maxMs;
    while ((this.inFlight.get(phase) ?? 0) > 0 && Date.now() < deadline) await sleep(5);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.workers);
  }
}

/**
 * One HTTP/1.1 request on a new connection; resolves with its outcome (never rejects). A body
 * shorter than its Content-Length is `truncated`; `timeoutMs` bounds the whole exchange.
 */
export function send(
  port: number,
  host: string,
  path = '/',
  init: { method?: string; headers?: http.OutgoingHttpHeaders; body?: string | Buffer; timeoutMs?: number; agent?: http.Agent; note?: (res: http.IncomingMessage, body: string) => string | undefined } = {},
): Promise<SendResult> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (r: SendResult): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve(r);
    };
    const req = http.request(
      { host: '127.0.0.1', port, path, method: init.method ?? 'GET', headers: { host, ...init.headers }, agent: init.agent ?? false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = Buffer.concat(chunks).toString();
          const note = init.note?.(res, body);
          finish({ outcome: res.statusCode ?? 0, ...(note !== undefined ? { note } : {}) });
        });
        res.on('aborted', () => finish({ outcome: 'truncated' }));
        res.on('error', () => finish({ outcome: 'truncated' }));
      },
    );
    const timer = setTimeout(() => {
      req.destroy();
      finish({ outcome: 'timeout' });
    }, init.timeoutMs ?? 30_000);
    req.on('error', (err: NodeJS.ErrnoException) => {
      finish({ outcome: err.code === 'ECONNREFUSED' ? 'refused' : err.code === 'ECONNRESET' || err.message === 'socket hang up' ? 'reset' : 'error' });
    });
    req.end(init.body);
  });
}

/** An HTTP upstream whose handler the test can swap at any time; counts the sockets it holds. */
export async function startSwitchableServer(t: TapLike, initial: http.RequestListener): Promise<{ port: number; set(handler: http.RequestListener): void; sockets(): number }> {
  let handler = initial;
  const server = http.createServer((req, res) => handler(req, res));
  const open = new Set<net.Socket>();
  server.on('connection', (s) => {
    open.add(s);
    s.once('close', () => open.delete(s));
  });
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, set: (h) => (handler = h), sockets: () => open.size };
}

/** Accepts connections and never answers (nor reads): a black-holed upstream. */
export async function startBlackHole(t: TapLike): Promise<{ port: number; sockets(): number; accepted(): number }> {
  const open = new Set<net.Socket>();
  let accepted = 0;
  const server = net.createServer((s) => {
    accepted++;
    open.add(s);
    s.on('error', () => undefined);
    s.once('close', () => open.delete(s));
  });
  t.teardown(() => new Promise<void>((resolve) => {
    for (const s of open) s.destroy();
    server.close(() => resolve());
  }));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as net.AddressInfo).port, sockets: () => open.size, accepted: () => accepted };
}

/** Poll until `check()` or `timeoutMs` (a hang guard); returns whether it became true. */
export async function eventually(check: () => boolean | Promise<boolean>, timeoutMs = 30_000, everyMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(everyMs);
  }
}

/**
 * A gRPC authorization server (Envoy's own external_auth.proto) on a fixed loopback port that can
 * be killed and started again on the same port, as a crashed and restarted service would be.
 */
export async function startRestartableGrpcAuth(
  t: TapLike,
  port: number,
  answer: () => Record<string, unknown>,
): Promise<{ calls(): number; stop(): void; start(): Promise<void> }> {
  const grpc = await import('@grpc/grpc-js');
  const { envoyAuthDefinition } = await import('../fixtures/extauth/servers.js');
  const pkg = grpc.loadPackageDefinition(envoyAuthDefinition()) as unknown as {
    envoy: { service: { auth: { v3: { Authorization: { service: import('@grpc/grpc-js').ServiceDefinition } } } } };
  };
  let server: import('@grpc/grpc-js').Server | undefined;
  let calls = 0;
  const start = async (): Promise<void> => {
    const s = new grpc.Server();
    s.addService(pkg.envoy.service.auth.v3.Authorization.service, {
      Check: (_call: unknown, callback: (err: null, res: unknown) => void) => {
        calls++;
        callback(null, answer());
      },
    });
    // The port was just released by the previous instance: retry briefly while the OS lets go of it.
    for (let attempt = 0; ; attempt++) {
      try {
        await new Promise<void>((resolve, reject) => s.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
        break;
      } catch (err) {
        if (attempt >= 20) throw err;
        await sleep(50);
      }
    }
    server = s;
  };
  const stop = (): void => {
    server?.forceShutdown();
    server = undefined;
  };
  t.teardown(stop);
  await start();
  return { calls: () => calls, stop, start };
}

/**
 * An HTTP/1.1 app that writes exact bytes: for each request head it reads, the answer `answers`
 * holds for its path (`/ok` for any other), as text or written by a function given the socket.
 */
export async function startRawApp(
  t: TapLike,
  answers: Readonly<Record<string, string | ((socket: net.Socket) => void)>>,
): Promise<{ port: number; connections: () => number }> {
  let connections = 0;
  const server = net.createServer((socket) => {
    connections++;
    let pending = '';
    socket.on('error', () => undefined);
    socket.on('data', (d) => {
      pending += d.toString('latin1');
      const end = pending.indexOf('\r\n\r\n');
      if (end < 0) return;
      const path = /^\S+ (\S+)/.exec(pending)![1]!;
      pending = pending.slice(end + 4);
      const answer = answers[path] ?? answers['/ok']!;
      if (typeof answer === 'string') socket.write(answer);
      else answer(socket);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  return { port: (server.address() as net.AddressInfo).port, connections: () => connections };
}
