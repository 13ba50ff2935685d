/**
 * Listener limits: at most `maxConnections` connections at once (beyond, new ones are closed on
 * accept and counted in `svcproxy_overload_connections_rejected_total`; room frees as others
 * close), `maxRequestsPerConnection` HTTP/1.1 requests per connection (the last answer says
 * `Connection: close`), the idle timeout (an idle HTTP/1.1 keep-alive connection is closed; an HTTP/2
 * session with no open stream gets GOAWAY, one with a quiet open stream is kept), the flags that set
 * them (and the shedding threshold), and their defaults.
 */
import t from 'tap';
import net from 'node:net';
import http2 from 'node:http2';
import { DEFAULT_LIMITS } from '../../src/listener/index.js';
import { DEFAULT_MAX_EVENT_LOOP_DELAY_MS } from '../../src/proxy/overload.js';
import { parseFlags } from '../../src/cli.js';
import { limitsFrom } from '../../src/flags.js';
import { ALIAS, records, request, startHttpServer, startPlane, echoHandler, waitFor } from '../helpers/harness.js';

const H = `api-${ALIAS}.app.localhost`;

/** `promise`, or `fallback` after `ms`; the timer is cleared either way (it would hold the process open). */
async function within<T>(promise: Promise<T>, ms: number, fallback: T): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([promise, new Promise<T>((r) => (timer = setTimeout(() => r(fallback), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

function open(port: number): Promise<{ socket: net.Socket; closed: Promise<string> }> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => (text += c));
    socket.on('error', () => undefined);
    const closed = new Promise<string>((r) => socket.once('close', () => r(text)));
    socket.once('connect', () => resolve({ socket, closed }));
  });
}

t.test('maxConnections: the connection past the limit is closed on accept; room frees up', async (t) => {
  const app = await startHttpServer(t, echoHandler());
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }), { limits: { maxConnections: 5 } });
  await plane.ready();
  const held = await Promise.all(Array.from({ length: 5 }, () => open(plane.port)));
  t.teardown(() => held.forEach((h) => h.socket.destroy()));
  await waitFor(() => plane.runtime.openConnections() === 5, 30_000, 'five connections accepted');
  t.equal(plane.runtime.openConnections(), 5, 'five connections held open');

  const extra = await open(plane.port);
  extra.socket.write(`GET / HTTP/1.1\r\nHost: ${H}\r\n\r\n`);
  // Served instead, it would stay open for the 65 s idle timeout: 20 s tells the two apart on a busy machine.
  const text = await within(extra.closed, 20_000, 'still open');
  t.equal(text, '', 'the sixth is closed at once, unanswered');
  const refused = await request(plane.port, H, '/').then((r) => r.status, (e: NodeJS.ErrnoException) => e.code);
  t.not(refused, 200, `a request on a new connection fails while the listener is full (${refused})`);

  held[0]!.socket.destroy();
  held[1]!.socket.destroy();
  await waitFor(() => plane.runtime.openConnections() <= 3, 30_000, 'the two closed connections to leave the count');
  t.equal((await request(plane.port, H, '/')).status, 200, 'once two close, a new client is served');
  const metrics = await (await fetch(`${plane.adminUrl}/metrics`)).text();
  const rejected = Number(/svcproxy_overload_connections_rejected_total (\d+)/.exec(metrics)?.[1]);
  t.ok(rejected >= 2, `counted in svcproxy_overload_connections_rejected_total (${rejected})`);
});

t.test('maxRequestsPerConnection: the last answer closes the connection', async (t) => {
  const app = await startHttpServer(t, echoHandler());
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }), { limits: { maxRequestsPerConnection: 3 } });
  await plane.ready();
  const { socket, closed } = await open(plane.port);
  const statuses: string[] = [];
  let buffer = '';
  socket.on('data', (c: Buffer) => {
    buffer += c;
    for (let m; (m = /^HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n/.exec(buffer)); ) {
      const length = Number(/content-length: (\d+)/i.exec(m[0])?.[1] ?? 0);
      if (buffer.length < m[0].length + length) break;
      statuses.push(`${m[1]} ${/connection: (\S+)/i.exec(m[0])?.[1]}`);
      buffer = buffer.slice(m[0].length + length);
    }
  });
  for (let i = 0; i < 3; i++) {
    socket.write(`GET /${i} HTTP/1.1\r\nHost: ${H}\r\n\r\n`);
    await waitFor(() => statuses.length > i, 30_000, `answer ${i + 1}`);
  }
  await within(closed, 30_000, '');
  t.same(statuses, ['200 keep-alive', '200 keep-alive', '200 close'], 'three answers, the third with Connection: close');
  t.ok(socket.destroyed || socket.readableEnded, 'and the connection is closed');
});

t.test('the flags and their defaults', async (t) => {
  t.same(DEFAULT_LIMITS, { headersTimeoutMs: 66_000, idleTimeoutMs: 65_000, maxConnections: 16_384, maxRequestsPerConnection: 0, maxConcurrentStreams: 1000, maxStreamResetsPerSecond: 200 });
  t.equal(DEFAULT_MAX_EVENT_LOOP_DELAY_MS, 250);
  const flags = (argv: string[]) => parseFlags(['ingress', ...argv], {}).flags;
  t.equal(limitsFrom(flags([])), undefined, 'no flag: the defaults');
  t.same(limitsFrom(flags(['--headers-timeout', '1.5s', '--idle-timeout', '2m', '--max-connections', '100', '--max-requests-per-connection', '0', '--max-concurrent-streams', '50', '--max-event-loop-delay', '0'])), {
    headersTimeoutMs: 1500, idleTimeoutMs: 120_000, maxConnections: 100, maxRequestsPerConnection: 0, maxConcurrentStreams: 50, maxEventLoopDelayMs: 0,
  });
  t.same(limitsFrom(parseFlags(['ingress'], { SVCPROXY_HEADERS_TIMEOUT: '20s', SVCPROXY_MAX_EVENT_LOOP_DELAY: '500ms' }).flags), { headersTimeoutMs: 20_000, maxEventLoopDelayMs: 500 }, 'and from SVCPROXY_* variables');
  for (const bad of [['--headers-timeout', 'soon'], ['--headers-timeout', '0'], ['--idle-timeout', '0'], ['--max-connections=-1'], ['--max-connections', '1.5'], ['--max-concurrent-streams', '0'], ['--max-event-loop-delay', 'x']]) {
    t.throws(() => limitsFrom(flags(bad)), { message: new RegExp(`^${bad[0]!.split('=')[0]} must be`) }, `${bad.join(' ')}: a usage error`);
  }
});

t.test('idleTimeout: idle HTTP/1.1 and HTTP/2 connections are closed; a session with an open stream is kept', async (t) => {
  // The app answers /slow after 900 ms: a stream open and quiet for longer than the idle timeout.
  const app = await startHttpServer(t, (req, res) => {
    setTimeout(() => res.end('late'), req.url === '/slow' ? 900 : 0);
  });
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }), { limits: { idleTimeoutMs: 300 } });
  await plane.ready();

  const h1 = await open(plane.port);
  h1.socket.write(`GET / HTTP/1.1\r\nHost: ${H}\r\n\r\n`);
  const started = Date.now();
  const text = await within(h1.closed, 30_000, 'still open');
  t.match(text, /^HTTP\/1\.1 200/, 'HTTP/1.1: answered, then closed while idle');
  t.ok(Date.now() - started >= 250, 'not before the idle timeout');

  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.destroy());
  session.on('error', () => undefined);
  let goaway = false;
  session.on('goaway', () => (goaway = true));
  const get = (path: string) => new Promise<string>((resolve, reject) => {
    const stream = session.request({ ':path': path, ':authority': H });
    let body = '';
    stream.on('data', (c: Buffer) => (body += c));
    stream.on('end', () => resolve(body));
    stream.on('error', reject);
    stream.end();
  });
  t.equal(await get('/slow'), 'late', 'HTTP/2: a stream quiet for 900 ms is not cut by a 300 ms idle timeout');
  t.notOk(goaway, 'no GOAWAY while the stream was open');
  const closed = await within(new Promise<boolean>((r) => session.once('close', () => r(true))), 30_000, false);
  t.ok(closed, 'then, idle, the session is closed');
  t.ok(goaway, 'with GOAWAY');
});
