/**
 * Tracing test fixtures: real OTLP receivers built from the OTLP trace service proto (test/tracing/otlp,
 * the upstream opentelemetry-proto messages): an OTLP/gRPC server on @grpc/grpc-js and an OTLP/HTTP
 * server decoding protobuf bodies with the same definitions. Both listen on loopback port 0, collect
 * every span they receive in a flat, test-friendly shape, and stop in teardown.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import type { SpanSink } from '../../src/tracing/otlp.js';

export interface TapLike {
  teardown(fn: () => unknown): void;
}

const OTLP_DIR = fileURLToPath(new URL('./otlp/', import.meta.url));
const SERVICE = 'opentelemetry.proto.collector.trace.v1.TraceService';

let definition: protoLoader.PackageDefinition | undefined;
function otlp(): protoLoader.PackageDefinition {
  definition ??= protoLoader.loadSync('opentelemetry/proto/collector/trace/v1/trace_service.proto', {
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true, includeDirs: [OTLP_DIR],
  });
  return definition;
}

function exportMethod(): protoLoader.MethodDefinition<unknown, unknown> {
  return (otlp()[SERVICE] as protoLoader.ServiceDefinition).Export as protoLoader.MethodDefinition<unknown, unknown>;
}

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: string;
  attributes: Record<string, unknown>;
  status: string;
  resource: Record<string, unknown>;
  startNs: bigint;
  endNs: bigint;
}

interface AnyValue {
  value?: string;
  string_value?: string;
  bool_value?: boolean;
  int_value?: string;
  double_value?: number;
  array_value?: { values: AnyValue[] };
}

function anyValue(v: AnyValue | null | undefined): unknown {
  if (!v || !v.value) return undefined;
  switch (v.value) {
    case 'string_value': return v.string_value;
    case 'bool_value': return v.bool_value;
    case 'int_value': return Number(v.int_value);
    case 'double_value': return v.double_value;
    case 'array_value': return v.array_value?.values.map(anyValue);
    default: return undefined;
  }
}

function attributes(list: { key: string; value: AnyValue }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const kv of list ?? []) out[kv.key] = anyValue(kv.value);
  return out;
}

const hex = (b: Buffer | undefined): string => (b && b.length > 0 ? Buffer.from(b).toString('hex') : '');

interface DecodedRequest {
  resource_spans: {
    resource: { attributes: { key: string; value: AnyValue }[] } | null;
    scope_spans: {
      spans: {
        trace_id: Buffer; span_id: Buffer; parent_span_id: Buffer; trace_state: string; name: string; kind: string;
        start_time_unix_nano: string; end_time_unix_nano: string; attributes: { key: string; value: AnyValue }[];
        status: { code: string } | null;
      }[];
    }[];
  }[];
}

function flatten(request: DecodedRequest): ReceivedSpan[] {
  const out: ReceivedSpan[] = [];
  for (const rs of request.resource_spans) {
    const resource = attributes(rs.resource?.attributes);
    for (const ss of rs.scope_spans) {
      for (const s of ss.spans) {
        out.push({
          traceId: hex(s.trace_id),
          spanId: hex(s.span_id),
          parentSpanId: hex(s.parent_span_id),
          traceState: s.trace_state,
          name: s.name,
          kind: s.kind,
          attributes: attributes(s.attributes),
          status: s.status?.code ?? 'STATUS_CODE_UNSET',
          resource,
          startNs: BigInt(s.start_time_unix_nano),
          endNs: BigInt(s.end_time_unix_nano),
        });
      }
    }
  }
  return out;
}

/** The spans of one `ExportTraceServiceRequest`, decoded with the upstream proto definitions. */
export function decodeExport(body: Buffer): ReceivedSpan[] {
  return flatten(exportMethod().requestDeserialize(body) as DecodedRequest);
}

/** An exporter for tracer and telemetry tests without sockets: every request decoded as a receiver would. */
export function memorySink(): SpanSink & { spans: ReceivedSpan[]; exports: number; shutdowns: number } {
  const sink = {
    spans: [] as ReceivedSpan[],
    exports: 0,
    shutdowns: 0,
    export: async (request: Buffer): Promise<void> => {
      sink.exports++;
      sink.spans.push(...decodeExport(request));
    },
    shutdown: async (): Promise<void> => void sink.shutdowns++,
  };
  return sink;
}

export interface Receiver {
  readonly port: number;
  /** What to put in `provider.otel.endpoint`. */
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  /** `authorization` of each export request ('' when absent). */
  readonly authorizations: string[];
  /** Export requests received. */
  exports: number;
  close(): Promise<void>;
}

/** An OTLP/gRPC receiver (`endpoint` is `127.0.0.1:PORT`). */
export async function startOtlpGrpc(t: TapLike, port = 0): Promise<Receiver> {
  const server = new grpc.Server();
  const receiver = {
    port: 0,
    endpoint: '',
    spans: [] as ReceivedSpan[],
    authorizations: [] as string[],
    exports: 0,
    close: async (): Promise<void> => {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
      server.forceShutdown();
    },
  };
  server.addService(otlp()[SERVICE] as unknown as grpc.ServiceDefinition, {
    Export: (call: grpc.ServerUnaryCall<DecodedRequest, unknown>, callback: grpc.sendUnaryData<unknown>) => {
      receiver.exports++;
      receiver.authorizations.push(String(call.metadata.get('authorization')[0] ?? ''));
      receiver.spans.push(...flatten(call.request));
      callback(null, {});
    },
  });
  receiver.port = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
  );
  receiver.endpoint = `127.0.0.1:${receiver.port}`;
  t.teardown(() => server.forceShutdown());
  return receiver;
}

/** An OTLP/HTTP receiver decoding protobuf bodies (`endpoint` is `http://127.0.0.1:PORT`). */
export async function startOtlpHttp(t: TapLike): Promise<Receiver & { paths: string[] }> {
  const paths: string[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      paths.push(req.url ?? '');
      receiver.exports++;
      receiver.authorizations.push(String(req.headers.authorization ?? ''));
      try {
        receiver.spans.push(...flatten(exportMethod().requestDeserialize(Buffer.concat(chunks)) as DecodedRequest));
      } catch {
        res.writeHead(400).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  const close = (): Promise<void> => new Promise((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });
  t.teardown(close);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  const receiver = { port, endpoint: `http://127.0.0.1:${port}`, spans: [] as ReceivedSpan[], authorizations: [] as string[], exports: 0, close, paths };
  return receiver;
}

export async function waitForSpans(receiver: { spans: ReceivedSpan[] }, count: number, timeoutMs = 30_000, filter: (s: ReceivedSpan) => boolean = () => true): Promise<ReceivedSpan[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const matching = receiver.spans.filter(filter);
    if (matching.length >= count) return matching;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${count} spans (have ${matching.length})`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** `spec.tracing` with an OTLP endpoint. */
export function tracingSpec(endpoint: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { tracing: { sampling: 100, provider: { otel: { endpoint } }, ...extra } };
}

export const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
export const PARENT_ID = '00f067aa0ba902b7';
