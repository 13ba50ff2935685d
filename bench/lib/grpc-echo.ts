/**
 * A one-method gRPC service with raw bytes as messages (no .proto needed): `/bench.Echo/Echo`
 * answers the request bytes. Real gRPC framing, headers and trailers on the wire, as any protobuf
 * service; the bench measures transport, not (de)serialization.
 */
import type { ServiceDefinition } from '@grpc/grpc-js';

const identity = (b: Buffer): Buffer => b;

export const ECHO_PATH = '/bench.Echo/Echo';

export const echoService: ServiceDefinition = {
  Echo: {
    path: ECHO_PATH,
    requestStream: false,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  },
};

export { identity };
