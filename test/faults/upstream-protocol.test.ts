/**
 * An HTTP/1.1 app that breaks the protocol, through the whole proxy: a raw `net` upstream writes
 * exact bytes per path. Malformed answers before any header reached the client (ambiguous framing,
 * a NUL in a field, an unasked 101, a head past 64 KiB) are `502` `UPSTREAM_PROTOCOL_ERROR` (as Envoy answers a protocol error); a body that goes
 * bad after the head is cut short (never completed, never spliced); odd but valid answers (interim
 * 1xx, trailers, HTTP/1.0 to the close, stray bytes after a complete answer) are delivered whole.
 * After each, the proxy serves the next request.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { startRawApp } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

const ANSWERS: Record<string, string | ((s: net.Socket) => void)> = {
  '/ok': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '/ambiguous': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n',
  '/nul': 'HTTP/1.1 200 OK\r\nX-Bad: a\x00b\r\nContent-Length: 2\r\n\r\nok',
  '/switching': 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n',
  '/huge-head': `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(70 * 1024)}\r\nContent-Length: 2\r\n\r\nok`,
  '/bad-chunk': (s) => {
    s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n');
    setTimeout(() => s.write('zz\r\nHTTP/1.1 200 OK\r\n\r\n'), 30);
  },
  '/interim': 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </style.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfinal',
  '/trailers': 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-checksum\r\n\r\n4\r\nbody\r\n0\r\nx-checksum: abc123\r\n\r\n',
  '/http10': (s) => {
    s.end('HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nread until the close');
  },
  '/stray': 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nrightHTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged',
};

interface Got {
  status: number | 'cut';
  body: string;
  headers?: http.IncomingHttpHeaders;
  trailers?: NodeJS.Dict<string>;
}

function get(port: number, path: string): Promise<Got> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers: { host: HOST, te: 'trailers' }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('latin1');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers, trailers: res.trailers }));
      res.on('aborted', () => resolve({ status: 'cut', body }));
      res.on('error', () => resolve({ status: 'cut', body }));
    });
    req.on('error', () => resolve({ status: 'cut', body: '' }));
    req.end();
  });
}

t.test('an app that breaks HTTP/1.1: clean answers, and the proxy serves on', async (t) => {
  const app = await startRawApp(t, ANSWERS);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] } }));
  await plane.ready();

  for (const path of ['/ambiguous', '/nul', '/switching', '/huge-head']) {
    const got = await get(plane.port, path);
    t.equal(got.status, 502, `${path}: 502`);
    t.equal(JSON.parse(got.body).code, 'UPSTREAM_PROTOCOL_ERROR', `${path}: code UPSTREAM_PROTOCOL_ERROR`);
    t.equal((await get(plane.port, '/ok')).body, 'ok', `${path}: the next request is served`);
  }

  const cut = await get(plane.port, '/bad-chunk');
  t.equal(cut.status, 'cut', 'a body that goes bad after the head: the answer is cut short');
  t.equal(cut.body, 'hello', 'after the good bytes; nothing after them is spliced in');

  const interim = await get(plane.port, '/interim');
  t.same([interim.status, interim.body], [200, 'final'], 'interim 100 and 103: the final answer');

  const trailers = await get(plane.port, '/trailers');
  t.same([trailers.status, trailers.body], [200, 'body'], 'a chunked body with trailers');
  t.equal(trailers.trailers?.['x-checksum'], 'abc123', 'its trailer reaches an HTTP/1.1 client that accepts them');

  const old = await get(plane.port, '/http10');
  t.same([old.status, old.body], [200, 'read until the close'], 'HTTP/1.0 with a body to the close: delivered whole');
  t.equal(old.headers?.['content-length'], undefined, 'reframed for the client');

  const before = app.connections();
  const stray = await get(plane.port, '/stray');
  t.same([stray.status, stray.body], [200, 'right'], 'stray bytes after a complete answer: only the answer');
  const next = await get(plane.port, '/next');
  t.equal(next.body, 'ok', 'the next request gets its own answer, not the stray bytes');
  t.ok(app.connections() > before, 'on a new upstream connection');

  t.equal(plane.runtime.dataplane.requestsInFlight, 0, 'nothing left in flight');
  t.same(plane.runtime.replicas.all().map((r) => r.outstanding), [0], 'no outstanding count leaked');
});
