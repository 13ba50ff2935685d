/**
 * SIGTERM under load, on the installed command (`node bin/svcproxy.js ingress`, built by `npm run
 * build`): requests in flight complete (keep-alive clients included, their last answers say
 * `Connection: close`), new connections are refused as soon as draining starts, a request that
 * outlasts `terminationGracePeriodSeconds` is cut at the grace period instead of holding the exit,
 * and the process exits 0.
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ALIAS, records, startHttpServer, yamlDocuments } from '../helpers/harness.js';
import { startProxyProcess } from '../helpers/proxy-process.js';
import { eventually, send, sleep, type SendResult } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

t.test('SIGTERM under load: in-flight requests finish, new connections are refused, exit 0', async (t) => {
  const app = await startHttpServer(t, (req, res) => {
    const ms = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('ms') ?? '0');
    req.resume();
    const timer = setTimeout(() => res.end('done'), ms);
    res.on('close', () => clearTimeout(timer));
  });
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-faults-sigterm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const recs = records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    workloadSpec: { defaultOptions: { timeoutSeconds: 30 }, rolloutOptions: { terminationGracePeriodSeconds: 2 } },
  });
  writeFileSync(path.join(dir, 'config.yaml'), yamlDocuments(recs));

  const proxy = await startProxyProcess(t, ['ingress', '--config', dir, '--location', 'aws-us-east-2'], {
    extraArgs: ['--log-level', 'info', '--headers-timeout', '10s', '--max-event-loop-delay', '1s', '--max-connections', '1000'],
    readyTimeoutMs: 15_000,
  });
  const { child, port, exited } = proxy;
  t.equal((await fetch(`${proxy.admin}/ready`)).status, 200, 'the ingress started and is ready');
  t.ok(await eventually(async () => (await send(port, HOST, '/')).outcome === 200, 10_000, 100), 'and answers');

  // Keep-alive clients, each with a request in flight at the signal (400 ms at the app).
  const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });
  t.teardown(() => agent.destroy());
  const warm = await Promise.all(Array.from({ length: 8 }, () => send(port, HOST, '/?ms=0', { agent })));
  t.same(warm.map((r) => r.outcome), Array(8).fill(200), 'eight keep-alive connections warmed up');
  const connectionHeaders: string[] = [];
  const inFlight: Promise<SendResult>[] = Array.from({ length: 8 }, () =>
    send(port, HOST, '/?ms=400', { agent, note: (res) => (connectionHeaders.push(String(res.headers.connection)), undefined) }));
  // An HTTP/2 session with a stream in flight: it finishes, and the session is told GOAWAY.
  const session = http2.connect(`http://127.0.0.1:${port}`);
  t.teardown(() => session.destroy());
  let goaway = false;
  session.on('goaway', () => (goaway = true));
  session.on('error', () => undefined);
  const h2InFlight = new Promise<number>((resolve) => {
    const stream = session.request({ ':path': '/?ms=400', ':authority': HOST });
    let status = 0;
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.resume();
    stream.on('end', () => resolve(status));
    stream.on('error', () => resolve(-1));
    stream.end();
  });
  // And one that outlasts the 2 s grace period.
  const tooLong = send(port, HOST, '/?ms=10000', { timeoutMs: 15_000 });
  await sleep(100);
  const signalled = performance.now();
  child.kill('SIGTERM');
  await sleep(200);

  // Draining: a new connection is refused.
  const refused = await new Promise<string>((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve('connected');
    });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
  });
  t.equal(refused, 'ECONNREFUSED', 'a new connection during the drain is refused');
  t.equal((await send(port, HOST, '/')).outcome, 'refused', 'and so is a new request');

  const results = await Promise.all(inFlight);
  t.same(results.map((r) => r.outcome), Array(8).fill(200), '8 in flight at the signal, 8 answered 200');
  t.same(connectionHeaders, Array(8).fill('close'), 'each of those answers closes its keep-alive connection');
  t.equal(await h2InFlight, 200, 'the HTTP/2 stream in flight is answered 200');
  t.ok(goaway, 'and its session got GOAWAY');
  const code = await exited;
  const exitMs = performance.now() - signalled;
  t.equal(code, 0, 'exit code 0');
  t.ok(exitMs >= 1800 && exitMs < 4000, `exited ${Math.round(exitMs)} ms after SIGTERM: at the 2 s grace period, not after the 10 s request`);
  const cut = await tooLong;
  t.ok(cut.outcome === 'reset' || cut.outcome === 'truncated', `the request that outlasted the grace period was cut (${cut.outcome})`);
});
