/**
 * One readiness check of each kind, run once against one address: HTTP GET (200–399 passes, as in
 * Kubernetes), TCP connect, exec (exit status 0 passes) and the standard gRPC health check
 * (`grpc.health.v1.Health/Check` answering SERVING). Every check takes an AbortSignal that the
 * probe loop fires at `timeoutSeconds`; an aborted, refused, reset or otherwise failed check
 * resolves `false`, it never rejects, and it releases its socket or child process when aborted.
 * HTTPS probes do not verify the certificate (Kubernetes does not either).
 */
import { spawn } from 'node:child_process';
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import type * as ProtoLoader from '@grpc/proto-loader';
import type { HostPort } from '../routing/replicas.js';

/** Bracket IPv6 literals for URLs and `Host` headers. */
function hostForUrl(host: string): string {
  return host.includes(':') && !host.startsWith('[') ? `[${host}]` : host;
}

export interface HttpCheck {
  readonly path: string;
  readonly scheme: 'HTTP' | 'HTTPS';
  readonly headers: readonly { readonly name: string; readonly value: string }[];
}

export function checkHttp(target: HostPort, check: HttpCheck, signal: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const headers: Record<string, string> = { 'user-agent': 'svcproxy-probe', accept: '*/*' };
    for (const { name, value } of check.headers) headers[name.toLowerCase()] = value;
    const request = check.scheme === 'HTTPS' ? httpsRequest : httpRequest;
    const path = check.path.startsWith('/') ? check.path : `/${check.path}`;
    const req = request(
      {
        host: target.host,
        port: target.port,
        method: 'GET',
        path,
        headers,
        signal,
        agent: false,
        rejectUnauthorized: false,
      },
      (res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        // Drain, so the socket closes; the body does not matter.
        res.resume();
        res.on('error', () => undefined);
        resolve(status >= 200 && status < 400);
      },
    );
    req.on('error', () => resolve(false));
    req.end();
  });
}

/**
 * What tells a check that its time is up: an AbortSignal, or the probe loop's lighter
 * `CheckDeadline` (which `checkTcp` takes).
 */
export interface CheckAbort {
  readonly aborted: boolean;
  addEventListener(type: 'abort', listener: () => void, options?: { once?: boolean }): void;
  removeEventListener(type: 'abort', listener: () => void): void;
}

/**
 * A one-shot abort for one TCP check, in place of an AbortController: a router checking 10,000
 * replicas makes one per check, and an AbortController with its EventTarget listener cost a quarter
 * to a third of a TCP check's user time (131–160 against 98–128 µs a check, connect and close
 * included, in alternating runs on a slow 2-core machine). One listener at most; `abort()` runs it
 * once.
 */
export class CheckDeadline implements CheckAbort {
  aborted = false;
  private listener: (() => void) | undefined;

  addEventListener(_type: 'abort', listener: () => void): void {
    this.listener = listener;
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    if (this.listener === listener) this.listener = undefined;
  }

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    const listener = this.listener;
    this.listener = undefined;
    listener?.();
  }
}

export function checkTcp(target: HostPort, signal: CheckAbort): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve(false);
    const socket = connect({ host: target.host, port: target.port });
    let settled = false;
    const done = (ok: boolean): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      // An orderly close, not a reset: an app whose sockets have no 'error' listener (a bare Node
      // net server) dies of an ECONNRESET. The price is a socket in TIME_WAIT per check for a minute,
      // which holds no descriptor; each replica's address has its own range of ephemeral ports.
      socket.destroy();
      resolve(ok);
    };
    // The timeout is a timer, and timers run before I/O in each turn of the event loop: when this
    // process is busy, a connection that succeeded in time may still be waiting to be reported.
    // Let one I/O phase pass first, so the prober's own lag never marks a healthy replica not ready.
    const onAbort = (): void => void setImmediate(() => done(false));
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export function checkExec(
  command: readonly string[],
  env: Readonly<Record<string, string | undefined>> | undefined,
  signal: AbortSignal,
): Promise<boolean> {
  return new Promise((resolve) => {
    const [file, ...args] = command;
    if (file === undefined || signal.aborted) return resolve(false);
    // No shell, as Kubernetes' exec probe: `sh -c ...` must be written out by the user.
    const child = spawn(file, args, { env: env as NodeJS.ProcessEnv | undefined, stdio: 'ignore', signal, killSignal: 'SIGKILL' });
    let settled = false;
    const done = (ok: boolean): void => {
      if (settled) return;
      settled = true;
      resolve(ok);
    };
    child.once('error', () => done(false));
    child.once('exit', (code) => done(code === 0));
  });
}

/** `grpc.health.v1` as a protobuf.js JSON descriptor, so no .proto file has to ship beside us. */
const HEALTH_PROTO: Parameters<typeof ProtoLoader.fromJSON>[0] = {
  nested: {
    grpc: {
      nested: {
        health: {
          nested: {
            v1: {
              nested: {
                HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
                HealthCheckResponse: {
                  fields: { status: { type: 'ServingStatus', id: 1 } },
                  nested: {
                    ServingStatus: { values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2, SERVICE_UNKNOWN: 3 } },
                  },
                },
                Health: {
                  methods: { Check: { requestType: 'HealthCheckRequest', responseType: 'HealthCheckResponse', comment: '' } },
                },
              },
            },
          },
        },
      },
    },
  },
};

interface HealthClient {
  Check(
    request: { service: string },
    options: { deadline: Date },
    callback: (error: Error | null, response?: { status?: string }) => void,
  ): { cancel(): void };
  close(): void;
}

type HealthClientFactory = (address: string) => HealthClient;
let healthClientFactory: Promise<HealthClientFactory> | undefined;

/** Loads grpc-js only when a gRPC probe is configured: most workloads never pay for it. */
function loadHealthClientFactory(): Promise<HealthClientFactory> {
  healthClientFactory ??= (async () => {
    const grpc = await import('@grpc/grpc-js');
    const protoLoader = await import('@grpc/proto-loader');
    const definition = protoLoader.fromJSON(HEALTH_PROTO, { enums: String, defaults: true });
    const service = definition['grpc.health.v1.Health'] as unknown as import('@grpc/grpc-js').ServiceDefinition;
    const Client = grpc.makeClientConstructor(service, 'grpc.health.v1.Health');
    return (address: string) => new Client(address, grpc.credentials.createInsecure()) as unknown as HealthClient;
  })();
  return healthClientFactory;
}

/**
 * One gRPC health check. The client is created and closed per check: probes run once per period,
 * and a fresh channel also catches a server that accepts connections but no longer answers.
 */
export async function checkGrpc(target: HostPort, service: string, deadline: Date, signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return false;
  const factory = await loadHealthClientFactory();
  if (signal.aborted) return false;
  const client = factory(`${hostForUrl(target.host)}:${target.port}`);
  try {
    return await new Promise<boolean>((resolve) => {
      const call = client.Check({ service }, { deadline }, (error, response) => {
        signal.removeEventListener('abort', onAbort);
        resolve(!error && response?.status === 'SERVING');
      });
      const onAbort = (): void => {
        call.cancel();
        resolve(false);
      };
      signal.addEventListener('abort', onAbort, { once: true });
    });
  } finally {
    client.close();
  }
}
