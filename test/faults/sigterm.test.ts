/**
 * SIGTERM under load, on the installed command (`node bin/svcproxy.js ingress`, built by `npm run
 * build`): requests in flight complete (keep-alive clients included, their last answers say
 * `Connection: close`), new connections are refused as soon as draining starts, a request that
 * outlasts `terminationGracePeriodSeconds` is cut at the grace period instead of holding the exit,
 * and the process exits 0. The app holds its answers until the test releases them, so what is "in
 * flight at the signal" and "outlasts the grace period" holds however busy the machine is.
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ALIAS, records, startHttpServer, waitFor, yamlDocuments } from '../helpers/harness.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { eventually, send, type SendResult } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

t.test('SIGTERM under load: in-flight requests finish, new connections are refused, exit 0', async (t) => {
  // `?hold=short`: answered once the drain has been seen; `?hold=long`: never answered while the
  // process lives (only the grace period can end it).
  let held = 0;
  let releaseShort: () => void = () => undefined;
  const short = new Promise<void>((r) => (releaseShort = r));
  t.teardown(releaseShort);
  const app = await startHttpServer(t, (req, res) => {
    const hold = new URL(req.url ?? '/', 'http://x').searchParams.get('hold');
    req.resume();
    if (hold === null) return void res.end('done');
    held++;
    if (hold === 'short') void short.then(() => res.end('done'));
  });
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-faults-sigterm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const recs = records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    // 4 s: time enough, on a busy machine, between the drain being seen and the held answers passing.
    workloadSpec: { defaultOptions: { timeoutSeconds: 30 }, rolloutOptions: { terminationGracePeriodSeconds: 4 } },
  });
  writeFileSync(path.join(dir, 'config.yaml'), yamlDocuments(recs));

  const proxy = await startProxyProcess(t, ['ingress', '--config', dir, '--location', 'aws-us-east-2'], {
    // Shedding off: a busy machine can stall the child past any threshold, and this is about SIGTERM.
    extraArgs: ['--log-level', 'info', '--headers-timeout', '30s', '--max-event-loop-delay', '0', '--max-connections', '1000'],
    readyTimeoutMs: 60_000,
  });
  const { child, port, exited } = proxy;
  t.equal((await fetch(`${proxy.admin}/ready`)).status, 200, 'the ingress started and is ready');
  t.ok(await eventually(async () => (await send(port, HOST, '/')).outcome === 200, 30_000, 100), 'and answers');

  // Keep-alive clients, each with a request in flight at the signal (held at the app).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  t.teardown(() => agent.destroy());
  const warm = await Promise.all(Array.from({ length: 8 }, () => send(port, HOST, '/', { agent })));
  t.same(warm.map((r) => r.outcome), Array(8).fill(200), 'eight keep-alive connections warmed up');
  const connectionHeaders: string[] = [];
  const inFlight: Promise<SendResult>[] = Array.from({ length: 8 }, () =>
    send(port, HOST, '/?hold=short', { agent, timeoutMs: 60_000, note: (res) => (connectionHeaders.push(String(res.headers.connection)), undefined) }));
  // An HTTP/2 session with a stream in flight: it finishes, and the session is told GOAWAY.
  const session = http2.connect(`http://127.0.0.1:${port}`);
  t.teardown(() => session.destroy());
  let goaway = false;
  session.on('goaway', () => (goaway = true));
  session.on('error', () => undefined);
  const h2InFlight = new Promise<number>((resolve) => {
    const stream = session.request({ ':path': '/?hold=short', ':authority': HOST });
    let status = 0;
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.resume();
    stream.on('end', () => resolve(status));
    stream.on('error', () => resolve(-1));
    stream.end();
  });
  // And one that outlasts the grace period.
  const tooLong = send(port, HOST, '/?hold=long', { timeoutMs: 60_000 });
  await waitFor(() => held === 10, 30_000, 'the ten requests to reach the app');
  const signalled = performance.now();
  child.kill('SIGTERM');

  // Draining: a new connection is refused (from when the child has handled the signal).
  const connect = (): Promise<string> => new Promise<string>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
  let refused = '';
  t.ok(await eventually(async () => (refused = await connect()) !== 'connected', 30_000, 20), 'the drain began');
  t.equal(refused, 'ECONNREFUSED', 'a new connection during the drain is refused');
  t.equal((await send(port, HOST, '/')).outcome, 'refused', 'and so is a new request');
  t.equal(child.exitCode, null, 'while the requests in flight are still held');
  releaseShort();

  const results = await Promise.all(inFlight);
  t.same(results.map((r) => r.outcome), Array(8).fill(200), '8 in flight at the signal, 8 answered 200');
  t.same(connectionHeaders, Array(8).fill('close'), 'each of those answers closes its keep-alive connection');
  t.equal(await h2InFlight, 200, 'the HTTP/2 stream in flight is answered 200');
  t.ok(goaway, 'and its session got GOAWAY');
  const code = await exited;
  const exitMs = performance.now() - signalled;
  t.equal(code, 0, 'exit code 0');
  // The app never answers the long request: that the process exited at all shows the grace period ended it.
  t.ok(exitMs >= 3800, `exited ${Math.round(exitMs)} ms after SIGTERM: not before the 4 s grace period`);
  const cut = await tooLong;
  t.ok(cut.outcome === 'reset' || cut.outcome === 'truncated', `the request that outlasted the grace period was cut (${cut.outcome})`);
});
