/**
 * Envoy's own protos, as @grpc/grpc-js-xds ships them (envoy-api and its imports), for the test
 * servers and the conformance tests: the include folders, the loader options every fixture decodes
 * them with (snake_case fields, longs and enums as strings, defaults and oneof names filled in), and
 * a memoized load per file.
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';

const require = createRequire(import.meta.url);
const ENVOY_DEPS = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');

export const ENVOY_INCLUDE_DIRS = ['envoy-api', 'googleapis', 'xds', 'protoc-gen-validate'].map((d) => path.join(ENVOY_DEPS, d));

export const ENVOY_LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true } as const;

const loaded = new Map<string, protoLoader.PackageDefinition>();

/** One of Envoy's original .proto files (e.g. `envoy/service/ratelimit/v3/rls.proto`) and its imports. */
export function loadEnvoyProto(file: string): protoLoader.PackageDefinition {
  let definition = loaded.get(file);
  if (!definition) {
    definition = protoLoader.loadSync(file, { ...ENVOY_LOADER_OPTIONS, includeDirs: ENVOY_INCLUDE_DIRS });
    loaded.set(file, definition);
  }
  return definition;
}
