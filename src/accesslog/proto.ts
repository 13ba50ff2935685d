/**
 * The access-log service v3 wire format: our minimal `proto/envoy/service/accesslog/v3/als.proto`
 * (Envoy's package, names and field numbers), loaded once with @grpc/proto-loader, and the shapes of
 * the messages svcproxy writes (snake_case names, enums by name, int64 as numbers or strings).
 * Loading fails only when proto/ is missing from the installation (a packaging error), at first use.
 */
import { fileURLToPath } from 'node:url';
import type * as protoLoader from '@grpc/proto-loader';
import { protoLoader as loadProtoLoader } from '../grpc/lazy.js';

export const SERVICE_NAME = 'envoy.service.accesslog.v3.AccessLogService';
export const STREAM_PATH = `/${SERVICE_NAME}/StreamAccessLogs`;

/** proto/ at the package root: two levels up from src/accesslog/ and from dist/accesslog/. */
export const PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url));

export const LOADER_OPTIONS: protoLoader.Options = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };

export interface SocketAddressMessage {
  socket_address: { address: string; port_value: number };
}

export interface DurationMessage {
  seconds: number;
  nanos: number;
}

export interface HttpAccessLogEntry {
  common_properties: Record<string, unknown>;
  protocol_version: 'PROTOCOL_UNSPECIFIED' | 'HTTP10' | 'HTTP11' | 'HTTP2' | 'HTTP3';
  request: Record<string, unknown>;
  response: Record<string, unknown>;
}

export interface NodeMessage {
  id: string;
  cluster: string;
  locality?: { region: string };
  user_agent_name: string;
  user_agent_version: string;
}

export interface StreamAccessLogsMessage {
  identifier?: { node: NodeMessage; log_name: string };
  http_logs: { log_entry: HttpAccessLogEntry[] };
}

let definition: protoLoader.PackageDefinition | undefined;

export function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= loadProtoLoader().loadSync('envoy/service/accesslog/v3/als.proto', { ...LOADER_OPTIONS, includeDirs: [PROTO_ROOT] });
  return definition;
}

export function streamMethod(): protoLoader.MethodDefinition<StreamAccessLogsMessage, object> {
  const service = packageDefinition()[SERVICE_NAME] as protoLoader.ServiceDefinition;
  return service.StreamAccessLogs as protoLoader.MethodDefinition<StreamAccessLogsMessage, object>;
}
