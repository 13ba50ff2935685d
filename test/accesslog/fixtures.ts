/**
 * Access-log test fixtures: Envoy's own accesslog protos (als.proto and its imports, shipped in
 * @grpc/grpc-js-xds) for a real gRPC access-log server that records every stream and message it
 * receives, restartable on the same loopback port, plaintext or TLS; and records with `sidecar.envoy`
 * access logs.
 */
import * as grpc from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { loadEnvoyProto } from '../helpers/envoy-protos.js';
import type { TapLike } from '../helpers/harness.js';

export type { TapLike } from '../helpers/harness.js';

export const SERVICE = 'envoy.service.accesslog.v3.AccessLogService';

/** Envoy's original envoy/service/accesslog/v3/als.proto and its imports. */
export function envoyAls(): protoLoader.PackageDefinition {
  return loadEnvoyProto('envoy/service/accesslog/v3/als.proto');
}

/** A decoded `StreamAccessLogsMessage` (Envoy's proto, loader options above). */
export interface AlsMessage {
  identifier: { node: Record<string, unknown>; log_name: string } | null;
  log_entries?: string;
  http_logs?: { log_entry: Record<string, any>[] } | null;
}

export interface AlsServer {
  port: number;
  /** Every stream opened, with its messages in order. */
  streams: AlsMessage[][];
  entries(): Record<string, any>[];
  stop(): Promise<void>;
  /** Start again on the same port. */
  restart(): Promise<void>;
}

/**
 * An access-log server on loopback; with `tls`, it serves TLS with that certificate, and with
 * `tls.clientCa` it also requires a client certificate that chains to that CA.
 */
export async function startAlsServer(t: TapLike, port = 0, opts: { tls?: { cert: Buffer; key: Buffer; clientCa?: Buffer } } = {}): Promise<AlsServer> {
  let server: grpc.Server;
  const state: AlsServer = {
    port,
    streams: [],
    entries: () => state.streams.flat().flatMap((m) => m.http_logs?.log_entry ?? []),
    stop: async () => {
      server.forceShutdown();
      await new Promise((r) => setTimeout(r, 20));
    },
    restart: async () => {
      await listen();
    },
  };
  const listen = async (): Promise<void> => {
    server = new grpc.Server();
    server.addService(envoyAls()[SERVICE] as unknown as grpc.ServiceDefinition, {
      StreamAccessLogs: (call: grpc.ServerReadableStream<AlsMessage, unknown>, callback: grpc.sendUnaryData<unknown>) => {
        const messages: AlsMessage[] = [];
        state.streams.push(messages);
        call.on('data', (m: AlsMessage) => messages.push(m));
        call.on('end', () => callback(null, {}));
        call.on('error', () => undefined);
      },
    });
    const credentials = opts.tls
      ? grpc.ServerCredentials.createSsl(opts.tls.clientCa ?? null, [{ cert_chain: opts.tls.cert, private_key: opts.tls.key }], opts.tls.clientCa !== undefined)
      : grpc.ServerCredentials.createInsecure();
    state.port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`127.0.0.1:${state.port}`, credentials, (err, p) => (err ? reject(err) : resolve(p))),
    );
  };
  await listen();
  t.teardown(() => server.forceShutdown());
  return state;
}

export function cluster(name: string, port: number, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    name,
    type: 'STATIC',
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }],
    },
    ...extra,
  };
}

export function accessLog(clusterName: string, extra: { logName?: string; flush?: string; bytes?: number; typed?: Record<string, unknown>; excludedWorkloads?: string[] } = {}): Record<string, unknown> {
  return {
    name: 'envoy.access_loggers.http_grpc',
    ...(extra.excludedWorkloads ? { excludedWorkloads: extra.excludedWorkloads } : {}),
    typed_config: {
      common_config: {
        log_name: extra.logName ?? 'edge',
        grpc_service: { envoy_grpc: { cluster_name: clusterName } },
        transport_api_version: 'V3',
        ...(extra.flush ? { buffer_flush_interval: extra.flush } : {}),
        ...(extra.bytes !== undefined ? { buffer_size_bytes: extra.bytes } : {}),
      },
      ...extra.typed,
    },
  };
}

export async function waitUntil(check: () => boolean, timeoutMs = 30_000, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
