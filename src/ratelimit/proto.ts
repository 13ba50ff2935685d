/**
 * The rate-limit service v3 wire format: the TypeScript shapes of its decoded messages, which the
 * client and the service encode and decode in wire.ts, and our minimal
 * `proto/envoy/service/ratelimit/v3/rls.proto` (Envoy's package, names and field numbers) loaded with
 * @grpc/proto-loader (keepCase, longs as strings, enums as strings, defaults, oneofs) at first use:
 * the reference the tests hold wire.ts and the proto file to (against Envoy's own). Loading fails
 * only when the proto files are missing from the installation, a packaging error.
 */
import { fileURLToPath } from 'node:url';
import type { ServiceDefinition } from '@grpc/grpc-js';
import type * as protoLoader from '@grpc/proto-loader';
import { protoLoader as loadProtoLoader } from '../grpc/lazy.js';

export const SERVICE_NAME = 'envoy.service.ratelimit.v3.RateLimitService';
export const SHOULD_RATE_LIMIT_PATH = `/${SERVICE_NAME}/ShouldRateLimit`;

/** src/ratelimit/ and dist/ratelimit/ both sit two levels below the package root. */
export const PROTO_ROOT = fileURLToPath(new URL('../../proto/', import.meta.url));

export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: String,
  enums: String,
  defaults: true,
  oneofs: true,
};

export type Code = 'UNKNOWN' | 'OK' | 'OVER_LIMIT';
export type Unit = 'UNKNOWN' | 'SECOND' | 'MINUTE' | 'HOUR' | 'DAY' | 'MONTH' | 'YEAR';

export interface HeaderValue {
  key: string;
  value?: string;
  raw_value?: Buffer;
}

export interface RateLimitDescriptor {
  entries: { key: string; value: string }[];
  limit?: { requests_per_unit: number; unit: Unit } | null;
}

export interface RateLimitRequest {
  domain: string;
  descriptors: RateLimitDescriptor[];
  hits_addend?: number;
}

export interface CurrentLimit {
  requests_per_unit: number;
  unit: Unit;
  name?: string;
}

export interface DescriptorStatus {
  code: Code;
  current_limit?: CurrentLimit | null;
  limit_remaining?: number;
  /** proto-loader gives int64 seconds as a string (longs: String); encoding accepts a number too. */
  duration_until_reset?: { seconds: string | number; nanos?: number } | null;
}

export interface RateLimitResponse {
  overall_code: Code;
  statuses?: DescriptorStatus[];
  response_headers_to_add?: HeaderValue[];
  request_headers_to_add?: HeaderValue[];
}

let definition: protoLoader.PackageDefinition | undefined;

export function packageDefinition(): protoLoader.PackageDefinition {
  definition ??= loadProtoLoader().loadSync('envoy/service/ratelimit/v3/rls.proto', { ...LOADER_OPTIONS, includeDirs: [PROTO_ROOT] });
  return definition;
}

export function serviceDefinition(): ServiceDefinition {
  return packageDefinition()[SERVICE_NAME] as unknown as ServiceDefinition;
}

/** A header value from the wire: `value`, else `raw_value` read as UTF-8. */
export function headerText(h: HeaderValue): string {
  if (h.value) return h.value;
  if (h.raw_value && h.raw_value.length > 0) return Buffer.from(h.raw_value).toString('utf8');
  return '';
}
