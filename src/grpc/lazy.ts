/**
 * @grpc/grpc-js and @grpc/proto-loader (with protobuf.js under it) loaded when a feature first needs
 * them: an access-log service stream, the ext_authz and rate-limit wire definitions, a gRPC health
 * probe. Together they are several megabytes of heap that a sidecar without those features would
 * otherwise carry, and every full garbage collection marks.
 */
import { createRequire } from 'node:module';
import type * as Grpc from '@grpc/grpc-js';
import type * as ProtoLoader from '@grpc/proto-loader';

const require = createRequire(import.meta.url);

export function grpcJs(): typeof Grpc {
  return require('@grpc/grpc-js') as typeof Grpc;
}

export function protoLoader(): typeof ProtoLoader {
  return require('@grpc/proto-loader') as typeof ProtoLoader;
}
