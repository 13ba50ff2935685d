/**
 * gRPC unary load: N calls kept in flight on one channel for T seconds (each finished call starts
 * the next), 64-byte messages. Prints one JSON line: calls, seconds, rps, p50/p99 latency (ms), errors.
 *
 *   node grpc-load.js PORT AUTHORITY CONCURRENCY SECONDS
 */
import * as grpc from '@grpc/grpc-js';
import { ECHO_PATH, identity } from '../lib/grpc-echo.js';
import { percentiles, Samples } from '../lib/stats.js';

const [portArg, authority, concurrencyArg, secondsArg] = process.argv.slice(2);
const concurrency = Number(concurrencyArg);
const seconds = Number(secondsArg);
const client = new grpc.Client(`127.0.0.1:${portArg}`, grpc.credentials.createInsecure(), {
  'grpc.default_authority': authority!,
});
const payload = Buffer.alloc(64, 0x61);
const latencies = new Samples();
let errors = 0;
let firstError = '';
let stopAt = 0;

await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 5000, (err) => (err ? reject(err) : resolve())));
const started = performance.now();
stopAt = started + seconds * 1000;

function loop(resolve: () => void): void {
  const t0 = performance.now();
  if (t0 >= stopAt) return resolve();
  client.makeUnaryRequest(ECHO_PATH, identity, identity, payload, (err) => {
    const t1 = performance.now();
    if (err) {
      errors++;
      firstError ||= err.message;
    } else latencies.push(t1 - t0);
    loop(resolve);
  });
}

await Promise.all(Array.from({ length: concurrency }, () => new Promise<void>((resolve) => loop(resolve))));
const elapsed = (performance.now() - started) / 1000;
const [p50, p99] = percentiles(latencies.values(), [50, 99]);
process.stdout.write(JSON.stringify({ requests: latencies.length, seconds: elapsed, rps: latencies.length / elapsed, p50, p99, errors, firstError }) + '\n');
client.close();
process.exit(0);
