/**
 * Fixed-rate HTTP/1.1 load (wrk2-style pacing, which wrk lacks): R requests a second for T seconds on
 * a keep-alive agent of up to 64 connections, to HOST (a comma-separated list: each request to the
 * next host in turn). Requests go out on a 1 ms timer; a request sent within 2 ms of its scheduled
 * time is timed from when it was sent, a later one (the client or the event loop stalled) from when
 * it should have been sent, so a stall counts against every request it delayed. SIGTERM ends the run
 * early (the requests in flight are awaited). Prints one JSON line: sent, ok, errors, the achieved
 * rate, p50/p99/p99.9 (ms). With SAMPLES, also writes one line per request there: the wall-clock time
 * (ms since the epoch) it was scheduled for, its latency (ms) and its status (0: a socket error), so
 * another process can judge windows of the run.
 *
 *   node paced.js PORT HOST[,HOST...] RATE SECONDS [SAMPLES]
 */
import http from 'node:http';
import { writeFileSync } from 'node:fs';
import { percentiles, Samples } from '../lib/stats.js';

const [portArg, hostArg, rateArg, secondsArg, samplesFile] = process.argv.slice(2);
const hosts = (hostArg ?? '').split(',');
const port = Number(portArg);
const rate = Number(rateArg);
const seconds = Number(secondsArg);
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const latencies = new Samples();
let sent = 0;
let errors = 0;
let non200 = 0;
let firstError = '';
/** Per request, when SAMPLES is given: scheduled wall-clock time, latency, status. */
const samples: string[] = [];
/** performance.now() → wall-clock ms. */
const wallOffset = Date.now() - performance.now();

function request(scheduled: number): Promise<void> {
  sent++;
  const now = performance.now();
  const from = now - scheduled <= 2 ? now : scheduled;
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', headers: { host: hosts[sent % hosts.length] }, agent }, (res) => {
      res.resume();
      res.on('end', () => {
        if (res.statusCode === 200) latencies.push(performance.now() - from);
        else non200++;
        if (samplesFile) samples.push(`${Math.round(scheduled + wallOffset)} ${(performance.now() - from).toFixed(2)} ${res.statusCode ?? 0}`);
        resolve();
      });
    });
    req.on('error', (err) => {
      errors++;
      firstError ||= err.message;
      if (samplesFile) samples.push(`${Math.round(scheduled + wallOffset)} ${(performance.now() - from).toFixed(2)} 0`);
      resolve();
    });
    req.end();
  });
}

const started = performance.now();
const pending = new Set<Promise<void>>();
const TICK = 1;
let stopped = false;
process.once('SIGTERM', () => (stopped = true));
await new Promise<void>((resolve) => {
  const timer = setInterval(() => {
    if (stopped) {
      clearInterval(timer);
      return resolve();
    }
    const now = performance.now();
    const due = Math.min(rate * seconds, Math.floor(((now - started) / 1000) * rate));
    while (sent < due) {
      // The scheduled time of this request, not now: late sends count their lateness.
      const scheduled = started + (sent / rate) * 1000;
      const p = request(scheduled);
      pending.add(p);
      void p.then(() => pending.delete(p));
    }
    if (sent >= rate * seconds) {
      clearInterval(timer);
      resolve();
    }
  }, TICK);
});
await Promise.all(pending);
const elapsed = (performance.now() - started) / 1000;
const [p50, p99, p999] = percentiles(latencies.values(), [50, 99, 99.9]);
if (samplesFile) writeFileSync(samplesFile, samples.join('\n') + '\n');
process.stdout.write(JSON.stringify({ sent, ok: latencies.length, non200, errors, firstError, seconds: elapsed, rps: latencies.length / elapsed, p50, p99, p999 }) + '\n');
agent.destroy();
process.exit(0);
