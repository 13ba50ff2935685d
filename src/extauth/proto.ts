/**
 * The ext_authz v3 wire format, loaded once from the project's minimal protos (proto/, Envoy's own
 * package, message names and field numbers) with @grpc/proto-loader: keepCase (snake_case field
 * names, as in Envoy's docs), longs as strings, enums as names, defaults and oneof names filled in.
 * Loading fails loudly at startup (a missing proto/ folder is a broken install), never per request.
 */
import { fileURLToPath } from 'node:url';
import type * as protoLoader from '@grpc/proto-loader';
import { protoLoader as loadProtoLoader } from '../grpc/lazy.js';

/** proto/ at the package root: two levels up from src/extauth/ and from dist/extauth/. */
export const PROTO_DIR = fileURLToPath(new URL('../../proto/', import.meta.url));

export const LOADER_OPTIONS: protoLoader.Options = Object.freeze({
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
});

export interface AuthWire {
  readonly definition: protoLoader.PackageDefinition;
  readonly check: protoLoader.MethodDefinition<object, CheckResponseObject>;
  /** `envoy.type.v3.StatusCode` name → number (enums arrive as names). */
  readonly statusCodes: ReadonlyMap<string, number>;
}

let loaded: AuthWire | undefined;

/** The loaded definitions (memoized: they are immutable). */
export function authWire(): AuthWire {
  if (loaded) return loaded;
  const definition = loadProtoLoader().loadSync('envoy/service/auth/v3/external_auth.proto', { ...LOADER_OPTIONS, includeDirs: [PROTO_DIR] });
  const service = definition['envoy.service.auth.v3.Authorization'] as protoLoader.ServiceDefinition;
  const check = service.Check as protoLoader.MethodDefinition<object, CheckResponseObject>;
  const statusEnum = definition['envoy.type.v3.StatusCode'] as protoLoader.EnumTypeDefinition;
  const statusCodes = new Map<string, number>();
  for (const v of (statusEnum.type as { value: { name: string; number: number }[] }).value) statusCodes.set(v.name, v.number);
  loaded = Object.freeze({ definition, check, statusCodes });
  return loaded;
}

// ---- decoded shapes (what proto-loader's deserializer gives with LOADER_OPTIONS) ----

export interface HeaderValueObject {
  key: string;
  value: string;
  raw_value?: Buffer;
}

export interface HeaderValueOptionObject {
  header: HeaderValueObject | null;
  /** google.protobuf.BoolValue: null when unset. */
  append: { value: boolean } | null;
  append_action: string | number;
  keep_empty_value: boolean;
}

export interface CheckResponseObject {
  status: { code: number; message: string } | null;
  http_response?: 'denied_response' | 'ok_response';
  denied_response?: {
    status: { code: string | number } | null;
    headers: HeaderValueOptionObject[];
    body: string;
  } | null;
  ok_response?: {
    headers: HeaderValueOptionObject[];
    headers_to_remove: string[];
    response_headers_to_add: HeaderValueOptionObject[];
    query_parameters_to_set: { key: string; value: string }[];
    query_parameters_to_remove: string[];
  } | null;
}
