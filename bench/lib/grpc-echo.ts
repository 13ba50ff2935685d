/**
 * A one-method gRPC service with raw bytes as messages (no .proto needed): `/bench.Echo/Echo`
 * answers the request bytes. Real gRPC framing, headers and trailers on the wire, as any protobuf
 * service; the bench measures transport, not (de)serialization.
 */
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';

export const identity = (b: Buffer): Buffer => b;

/** A method whose messages are raw bytes both ways (the bench's sinks decode only what they count). */
export function rawMethod(path: string, requestStream = false): MethodDefinition<Buffer, Buffer> {
  return {
    path,
    requestStream,
    responseStream: false,
    requestSerialize: identity,
    requestDeserialize: identity,
    responseSerialize: identity,
    responseDeserialize: identity,
  };
}

export const ECHO_PATH = '/bench.Echo/Echo';

export const echoService: ServiceDefinition = { Echo: rawMethod(ECHO_PATH) };
