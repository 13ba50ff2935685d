/**
 * Rate-limit service load: `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` calls, N kept
 * in flight for T seconds (each finished call starts the next), spread over C channels (each its own
 * HTTP/2 connection; channel i goes to the i-th port of the list, round robin). Each call carries one
 * descriptor `{user: uNNN}` of K distinct values in turn, so the service counts K keys, not one hot
 * key. Requests are encoded once, up front, with Envoy's own rls.proto (shipped in
 * @grpc/grpc-js-xds); answers are read from the wire: a call counts only when the overall code is OK
 * and its descriptor status has a `current_limit` (the rule matched, so the store counted it);
 * anything else is an error. Prints one JSON line: requests, seconds, rps, p50/p99 (ms), errors.
 *
 *   node rls-load.js PORT[,PORT...] DOMAIN KEY CONCURRENCY SECONDS CHANNELS KEYS
 *   node rls-load.js PORT[,PORT...] DOMAIN KEY check     one call per port, answers decoded in full
 */
import { createRequire } from 'node:module';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { percentiles, Samples } from '../lib/stats.js';
import { eachField } from '../lib/wire.js';
import { identity } from '../lib/grpc-echo.js';

const [portsArg, domain, key, concurrencyArg, secondsArg, channelsArg, keysArg] = process.argv.slice(2);
const ports = portsArg!.split(',').map(Number);

const require = createRequire(import.meta.url);
const deps = path.join(path.dirname(require.resolve('@grpc/grpc-js-xds/package.json')), 'deps');
const definition = protoLoader.loadSync('envoy/service/ratelimit/v3/rls.proto', {
  keepCase: true, longs: String, enums: String, defaults: true, oneofs: true,
  includeDirs: ['envoy-api', 'googleapis', 'xds', 'protoc-gen-validate'].map((d) => path.join(deps, d)),
});
const method = (definition['envoy.service.ratelimit.v3.RateLimitService'] as unknown as grpc.ServiceDefinition).ShouldRateLimit!;

const request = (i: number): Buffer => method.requestSerialize({ domain, descriptors: [{ entries: [{ key, value: `u${i}` }] }] });

/** The top-level fields of a message: number → list of (varint value | length-delimited bytes). */
function fields(buf: Buffer): Map<number, (number | Buffer)[]> {
  const out = new Map<number, (number | Buffer)[]>();
  eachField(buf, (field, value) => {
    const list = out.get(field) ?? [];
    list.push(value);
    out.set(field, list);
  });
  return out;
}

/** Why an answer does not count: overall_code (1) must be OK (1), its one status (2) must carry current_limit (2). */
function wrongAnswer(buf: Buffer): string | undefined {
  const f = fields(buf);
  const code = f.get(1)?.[0] ?? 0;
  if (code !== 1) return `overall_code ${code === 2 ? 'OVER_LIMIT' : code}`;
  const status = f.get(2)?.[0];
  if (!(status instanceof Buffer)) return 'no descriptor status';
  if (!fields(status).has(2)) return 'no current_limit: no rule matched, nothing was counted';
  return undefined;
}

const client = (port: number): grpc.Client =>
  // A local subchannel pool: every channel its own connection, even to the same port.
  new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), { 'grpc.use_local_subchannel_pool': 1 });

if (concurrencyArg === 'check') {
  const out: unknown[] = [];
  for (const port of ports) {
    const c = client(port);
    const answer = await new Promise<unknown>((resolve, reject) =>
      c.makeUnaryRequest(method.path, identity, method.responseDeserialize, request(0), (err, res) => (err ? reject(err) : resolve(res))),
    );
    out.push(answer);
    c.close();
  }
  process.stdout.write(JSON.stringify(out) + '\n');
  process.exit(0);
}

const concurrency = Number(concurrencyArg);
const seconds = Number(secondsArg);
const channels = Math.max(ports.length, Number(channelsArg));
const keys = Math.max(1, Number(keysArg));
const requests = Array.from({ length: keys }, (_, i) => request(i));
const clients = Array.from({ length: channels }, (_, i) => client(ports[i % ports.length]!));
const latencies = new Samples();
let errors = 0;
let firstError = '';
let next = 0;

await Promise.all(clients.map((c) => new Promise<void>((resolve, reject) => c.waitForReady(Date.now() + 5000, (err) => (err ? reject(err) : resolve())))));
const started = performance.now();
const stopAt = started + seconds * 1000;

function loop(c: grpc.Client, resolve: () => void): void {
  const t0 = performance.now();
  if (t0 >= stopAt) return resolve();
  const body = requests[next++ % keys]!;
  c.makeUnaryRequest(method.path, identity, identity, body, (err, res) => {
    const t1 = performance.now();
    const wrong = err ? err.message : wrongAnswer(res!);
    if (wrong) {
      errors++;
      firstError ||= wrong;
    } else latencies.push(t1 - t0);
    loop(c, resolve);
  });
}

await Promise.all(Array.from({ length: concurrency }, (_, i) => new Promise<void>((resolve) => loop(clients[i % channels]!, resolve))));
const elapsed = (performance.now() - started) / 1000;
const [p50, p99] = percentiles(latencies.values(), [50, 99]);
process.stdout.write(JSON.stringify({ requests: latencies.length, seconds: elapsed, rps: latencies.length / elapsed, p50, p99, errors, firstError }) + '\n');
for (const c of clients) c.close();
process.exit(0);
