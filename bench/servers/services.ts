/**
 * The outside services some svcproxy rows call, each in its own process:
 *
 *   node services.js authz PORT STATS_PORT APP_ROOT  Envoy ext_authz v3 gRPC server with messages
 *        from Envoy's own external_auth.proto (shipped in @grpc/grpc-js-xds): answers OK, except
 *        PERMISSION_DENIED when the request carries `x-bench-deny` (so the bench can prove the filter
 *        is really in the path). It stands in for an auth server in Go or C++, which costs a few µs a
 *        check: it serves gRPC on svcproxy's own unary HTTP/2 server (APP_ROOT/dist/grpc/server.js,
 *        the one `svcproxy ratelimit` listens with: ~12 µs a call, against ~45 µs on `node:http2`
 *        and ~60 µs on a grpc-js server), and finds the header by walking the CheckRequest's wire
 *        format (attributes → request → http → headers) instead of decoding the whole message with
 *        protobuf.js (~15 µs), so the row measures the proxy rather than the stand-in.
 *   node services.js otlp PORT STATS_PORT APP_ROOT  an OTLP/gRPC trace sink: accepts
 *        `opentelemetry.proto.collector.trace.v1.TraceService/Export` and answers an empty
 *        ExportTraceServiceResponse without decoding the spans. It stands in for an OpenTelemetry
 *        Collector, whose gRPC server (grpc-go) grows its HTTP/2 flow-control windows by
 *        bandwidth-delay estimation (from 64 KiB up to megabytes), so a warmed-up collector takes a
 *        batch of spans (~200 KB) in one go. It serves on svcproxy's unary HTTP/2 server (1 MiB
 *        stream windows, like the auth server): a grpc-js server keeps node:http2's fixed 64 KiB
 *        stream window, so each export took several WINDOW_UPDATE round trips that a collector
 *        would not ask for (629 against 314 µs of the exporting process's CPU per 200 KB export,
 *        one at a time), and spent 4–5 µs of the shared cores per traced request.
 *   node services.js als PORT STATS_PORT    an Envoy access-log service sink:
 *        `envoy.service.accesslog.v3.AccessLogService/StreamAccessLogs` (client streaming), counting
 *        the HTTP entries of every message by walking the protobuf wire format (field 2 `http_logs`,
 *        its repeated field 1 `log_entry`) without decoding the entries themselves
 *
 * `GET http://127.0.0.1:STATS_PORT/` answers `{"calls": N, "bytes": B, "entries": E}` (calls:
 * exports, checks, or access-log messages; entries: access-log entries).
 */
import http from 'node:http';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { rawMethod } from '../lib/grpc-echo.js';
import { eachField } from '../lib/wire.js';

const [kind, portArg, statsArg, appRoot] = process.argv.slice(2);

/** What the bench uses of svcproxy's `startUnaryServer` (dist/grpc/server.js of the build under test). */
type StartUnaryServer = (opts: {
  host: string;
  port: number;
  methods: ReadonlyMap<string, (request: Buffer) => Promise<Buffer>>;
  maxMessageBytes: number;
}) => Promise<unknown>;

const stats = { calls: 0, bytes: 0, entries: 0, streams: 0 };

function listenStats(): void {
  http.createServer((_req, res) => res.end(JSON.stringify(stats))).listen(Number(statsArg), '127.0.0.1', () => {
    process.stdout.write(`${kind} listening on ${portArg}\n`);
  });
}

function bind(server: grpc.Server): void {
  server.bindAsync(`127.0.0.1:${Number(portArg)}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    listenStats();
  });
}

/** One method on svcproxy's unary gRPC server of the build under test (APP_ROOT/dist/grpc/server.js), then the stats port. */
async function serveUnary(root: string, method: string, maxMessageBytes: number, handler: (request: Buffer) => Promise<Buffer>): Promise<void> {
  const { startUnaryServer } = (await import(pathToFileURL(path.join(root, 'dist', 'grpc', 'server.js')).href)) as { startUnaryServer: StartUnaryServer };
  await startUnaryServer({ host: '127.0.0.1', port: Number(portArg), methods: new Map([[method, handler]]), maxMessageBytes });
  listenStats();
}

const DENY = Buffer.from('x-bench-deny');

/** Fields `path` down from the top of `buf`, each a length-delimited message; `last` gets the innermost ones. */
function within(buf: Buffer, path: readonly number[], last: (value: Buffer) => void): void {
  const [field, ...rest] = path;
  eachField(buf, (f, v) => {
    if (f !== field || !Buffer.isBuffer(v)) return;
    if (rest.length === 0) last(v);
    else within(v, rest, last);
  });
}

/** Does the CheckRequest's HTTP request carry header `name`? attributes 1 → request 4 → http 2 → headers 3 (map entries, key 1). */
function hasHeader(check: Buffer, name: Buffer): boolean {
  let found = false;
  within(check, [1, 4, 2, 3], (entry) => eachField(entry, (f, v) => void (f === 1 && Buffer.isBuffer(v) && v.equals(name) && (found = true))));
  return found;
}

if ((kind === 'authz' || kind === 'otlp') && !appRoot) {
  process.stderr.write(`usage: services.js ${kind} PORT STATS_PORT APP_ROOT\n`);
  process.exit(2);
} else if (kind === 'authz') {
  const require = createRequire(import.meta.url);
  const deps = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
  const definition = protoLoader.loadSync('envoy/service/auth/v3/external_auth.proto', {
    keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
    includeDirs: ['envoy-api', 'googleapis', 'xds', 'protoc-gen-validate'].map((d) => path.join(deps, d)),
  });
  const loaded = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { auth: { v3: { Authorization: { service: grpc.ServiceDefinition } } } } };
  };
  const check = loaded.envoy.service.auth.v3.Authorization.service['Check']!;
  const allow = check.responseSerialize({ status: { code: 0 }, ok_response: {} });
  const deny = check.responseSerialize({ status: { code: 7 }, denied_response: { status: { code: 'Forbidden' }, body: 'denied by bench' } });
  await serveUnary(appRoot, check.path, 4 << 20, async (request) => {
    stats.calls++;
    return hasHeader(request, DENY) ? deny : allow;
  });
} else if (kind === 'otlp') {
  const empty = Buffer.alloc(0);
  await serveUnary(appRoot, '/opentelemetry.proto.collector.trace.v1.TraceService/Export', 64 << 20, async (request) => {
    stats.calls++;
    stats.bytes += request.length;
    return empty;
  });
} else if (kind === 'als') {
  const server = new grpc.Server({ 'grpc.max_receive_message_length': 64 * 1024 * 1024 });
  server.addService(
    { StreamAccessLogs: rawMethod('/envoy.service.accesslog.v3.AccessLogService/StreamAccessLogs', true) },
    {
      StreamAccessLogs: (call: grpc.ServerReadableStream<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => {
        stats.streams++;
        call.on('data', (message: Buffer) => {
          stats.calls++;
          stats.bytes += message.length;
          stats.entries += httpLogEntries(message);
        });
        call.on('end', () => callback(null, Buffer.alloc(0)));
        call.on('error', () => undefined);
      },
    },
  );
  bind(server);
} else {
  process.stderr.write('usage: services.js authz|otlp PORT STATS_PORT APP_ROOT | als PORT STATS_PORT\n');
  process.exit(2);
}

process.on('SIGTERM', () => process.exit(0));

/**
 * Occurrences of field `inner` in the length-delimited fields `outer` of a message (tag by tag, the
 * values skipped by wire type): in a StreamAccessLogsMessage, the entries of `http_logs` (field 2,
 * `HTTPAccessLogEntries`, whose `log_entry` is field 1).
 */
function httpLogEntries(buf: Buffer, outer = 2, inner = 1): number {
  let count = 0;
  eachField(buf, (field, value) => {
    if (field === outer && Buffer.isBuffer(value)) eachField(value, (f) => void (f === inner && count++));
  });
  return count;
}
