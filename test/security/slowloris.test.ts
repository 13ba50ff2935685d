/**
 * Slowloris: clients that trickle a request head, send nothing, or stop inside the HTTP/2 preface
 * are cut by the listener's headers timeout (here 500 ms; 66 s in production) with a 408 where an
 * answer can be written, cleartext and TLS alike, while other clients are served. A slow body is
 * not a slow head: an upload that trickles after a complete head is not cut.
 */
import t from 'tap';
import net from 'node:net';
import tls from 'node:tls';
import { fileURLToPath } from 'node:url';
import { ALIAS, records, request, startPlane } from '../helpers/harness.js';
import { DEFAULT_LIMITS } from '../../src/listener/index.js';
import { startRecorder } from './fixtures.js';

const H = `api-${ALIAS}.app.localhost`;
const TIMEOUT = 500;
const TLS_DIR = fileURLToPath(new URL('../fixtures/tls/', import.meta.url));

interface Trickled {
  ms: number;
  text: string;
}

/** Open a connection, write `first`, then `every` each 100 ms until the proxy closes (≤ 5 s). */
function trickle(socket: net.Socket | tls.TLSSocket, first: string, every: string): Promise<Trickled> {
  return new Promise((resolve) => {
    const t0 = performance.now();
    let text = '';
    let timer: NodeJS.Timeout | undefined;
    const start = (): void => {
      if (first) socket.write(first);
      timer = setInterval(() => {
        if (every && !socket.destroyed) socket.write(every);
      }, 100);
    };
    socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', start);
    socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
    socket.on('error', () => undefined);
    const give = setTimeout(() => socket.destroy(), 5000);
    socket.on('close', () => {
      clearInterval(timer);
      clearTimeout(give);
      resolve({ ms: performance.now() - t0, text });
    });
  });
}

t.test('the production default stays 66 s', async (t) => {
  t.equal(DEFAULT_LIMITS.headersTimeoutMs, 66_000);
});

t.test('trickled heads, silent connections and partial prefaces are cut by the headers timeout', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), { limits: { headersTimeoutMs: TIMEOUT } });
  await plane.ready();
  const connect = (): net.Socket => net.connect(plane.port, '127.0.0.1');

  const cases: [name: string, first: string, every: string, answer: RegExp][] = [
    ['a head trickled one header every 100 ms', `GET / HTTP/1.1\r\nHost: ${H}\r\n`, 'X-A: b\r\n', /^HTTP\/1\.1 408 /],
    ['a request target trickled byte by byte', 'GET /', 'a', /^HTTP\/1\.1 408 /],
    ['a connection that sends nothing', '', '', /^$/],
    ['a connection stopped inside the HTTP/2 preface', 'PRI * HTTP/2.0\r\n', '', /^$/],
  ];
  // All at once, with a normal client served meanwhile.
  const running = cases.map(([, first, every]) => trickle(connect(), first, every));
  const served = await request(plane.port, H, '/during');
  t.equal(served.status, 200, 'another client is served while they trickle');
  const results = await Promise.all(running);
  cases.forEach(([name, , , answer], i) => {
    const r = results[i]!;
    t.ok(r.ms >= TIMEOUT - 50 && r.ms < TIMEOUT * 3, `${name}: closed after ${Math.round(r.ms)} ms`);
    t.match(r.text, answer, `${name}: ${r.text ? r.text.split('\r\n')[0] : 'closed without an answer'}`);
  });
  t.same(up.seen.map((s) => s.url), ['/during'], 'none of them reached the upstream');

  // Many at once: each is cut, none is left open.
  const many = await Promise.all(Array.from({ length: 50 }, () => trickle(connect(), `GET / HTTP/1.1\r\nHost: ${H}\r\n`, 'X-A: b\r\n')));
  t.ok(many.every((r) => r.ms < TIMEOUT * 3 && r.text.startsWith('HTTP/1.1 408')), '50 trickling clients: every one cut with 408');
  const deadline = Date.now() + 2000;
  while (plane.runtime.openConnections() > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(plane.runtime.openConnections(), 0, 'no connection left open');
});

t.test('a complete head with a slow body is not cut', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), { limits: { headersTimeoutMs: TIMEOUT } });
  await plane.ready();
  const socket = net.connect(plane.port, '127.0.0.1');
  const body = 'x'.repeat(12);
  let text = '';
  socket.on('data', (c: Buffer) => (text += c));
  await new Promise((r) => socket.once('connect', r));
  socket.write(`POST /upload HTTP/1.1\r\nHost: ${H}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`);
  for (const c of body) {
    await new Promise((r) => setTimeout(r, 100));
    socket.write(c);
  }
  await new Promise((r) => socket.once('close', r));
  t.match(text, /^HTTP\/1\.1 200 /, 'a 1.2 s upload after a complete head is served');
  t.equal(up.seen[0]?.body, body);
});

t.test('TLS: HTTP/1.1 heads trickled over TLS are cut too', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), {
    limits: { headersTimeoutMs: TIMEOUT },
    listenTls: ['127.0.0.1:0'],
    tls: { certFile: `${TLS_DIR}cert.pem`, keyFile: `${TLS_DIR}key.pem` },
  });
  await plane.ready();
  const tlsPort = plane.runtime.listeners.find((l) => l.tls)!.address.port;
  const socket = tls.connect({ port: tlsPort, host: '127.0.0.1', rejectUnauthorized: false, ALPNProtocols: ['http/1.1'] });
  const r = await trickle(socket, `GET / HTTP/1.1\r\nHost: ${H}\r\n`, 'X-A: b\r\n');
  t.ok(r.ms < TIMEOUT * 3 + 500, `closed after ${Math.round(r.ms)} ms`);
  t.match(r.text, /^HTTP\/1\.1 408 /);
  t.equal(up.seen.length, 0);
});
