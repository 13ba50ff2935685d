/**
 * The quick HTTP/1.1 path for clients (src/http1/downstream.ts) against Node's own HTTP server, both
 * on real sockets: the same handler answers the same request through each, and the bytes on the
 * wire must be the same (Date aside): status line, Date/Connection/Keep-Alive, framing (length,
 * chunked, none for HEAD/204/304), trailers, encodings, closing; the same exceptions for bad fields.
 * Then the connection's own behaviour: pipelined requests in order, the hand-over to Node's server
 * at the first request it does not serve (a body, a split head, a malformed head), the idle timeout,
 * a client that leaves mid-request, and backpressure.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { createHash } from 'node:crypto';
import { serveHttp1 } from '../../src/http1/downstream.js';

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => void;

interface Pair {
  node: number;
  quick: number;
  /** Requests each path's handler saw. */
  served: { node: number; quick: number };
  handler: Handler;
}

const IDLE_MS = 65_000;

/** Node's server and the quick path (handing over to a Node server) around one shared handler. */
async function pair(t: Test, idleTimeoutMs = IDLE_MS): Promise<Pair> {
  const p: Pair = { node: 0, quick: 0, served: { node: 0, quick: 0 }, handler: (_req, res) => res.end() };
  const node = http.createServer({ requireHostHeader: false }, (req, res) => {
    p.served.node++;
    p.handler(req, res);
  });
  node.keepAliveTimeout = idleTimeoutMs;
  const fallback = http.createServer({ requireHostHeader: false }, (req, res) => p.handler(req, res));
  fallback.keepAliveTimeout = idleTimeoutMs;
  const quick = net.createServer({ noDelay: true }, (socket) => {
    socket.once('data', (first: Buffer) =>
      serveHttp1(socket, first, {
        idleTimeoutMs,
        maxHeadBytes: 64 * 1024,
        onRequest: (req, res) => {
          p.served.quick++;
          p.handler(req, res);
        },
        handOver: (s) => fallback.emit('connection', s),
      }),
    );
  });
  node.listen(0, '127.0.0.1');
  quick.listen(0, '127.0.0.1');
  await Promise.all([once(node, 'listening'), once(quick, 'listening')]);
  t.teardown(() => {
    node.closeAllConnections();
    node.close();
    fallback.closeAllConnections();
    quick.close();
  });
  p.node = (node.address() as net.AddressInfo).port;
  p.quick = (quick.address() as net.AddressInfo).port;
  return p;
}

/** Send `text` (in `parts` when given), read until the server closes or `waitMs` passes. */
async function exchange(port: number, text: string | string[], waitMs = 3000): Promise<string> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  let out = '';
  socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
  const closed = once(socket, 'close');
  for (const part of Array.isArray(text) ? text : [text]) {
    socket.write(part, 'latin1');
    await new Promise((r) => setTimeout(r, 30));
  }
  const timer = setTimeout(() => socket.destroy(), waitMs);
  await closed;
  clearTimeout(timer);
  return out;
}

const normalize = (s: string): string => s.replace(/\r\n(date|Date): [^\r]*/g, '\r\n$1: <date>');
/** A request whose answer closes the connection, ending each exchange (the quick path serves it too). */
const CLOSE = 'GET /close HTTP/1.1\r\nConnection: close\r\n\r\n';

interface Case {
  name: string;
  method?: string;
  handler: Handler;
}

const cases: Case[] = [
  { name: 'length and text', handler: (_q, s) => s.writeHead(200, { 'content-type': 'text/plain', 'content-length': 2 }).end('ok') },
  { name: 'HEAD with a length', method: 'HEAD', handler: (_q, s) => s.writeHead(200, { 'content-length': 2 }).end('ok') },
  { name: 'HEAD without a length', method: 'HEAD', handler: (_q, s) => { s.writeHead(200, { 'content-type': 'text/plain' }); s.write('abc'); s.end(); } },
  { name: 'HEAD with chunked asked for', method: 'HEAD', handler: (_q, s) => s.writeHead(200, { 'transfer-encoding': 'chunked' }).end() },
  { name: 'chunked buffers', handler: (_q, s) => { s.writeHead(200, { 'content-type': 'text/plain' }); s.write(Buffer.from('abc')); s.end(Buffer.from('def')); } },
  { name: 'chunked, empty end', handler: (_q, s) => { s.writeHead(200, {}); s.write('abc'); s.end(); } },
  { name: 'chunked, headers only', handler: (_q, s) => s.writeHead(200, {}).end() },
  { name: '204', handler: (_q, s) => s.writeHead(204, { 'x-a': '1' }).end() },
  { name: '304', handler: (_q, s) => s.writeHead(304, { etag: '"x"' }).end() },
  { name: '204 with chunked asked for', handler: (_q, s) => s.writeHead(204, { 'transfer-encoding': 'chunked' }).end() },
  { name: 'implicit head with a body', handler: (_q, s) => s.end('implicit') },
  { name: 'implicit 404, no body', handler: (_q, s) => { s.statusCode = 404; s.end(); } },
  { name: 'implicit utf8 body', handler: (_q, s) => s.end('h\u00e9llo \u2603') },
  { name: 'implicit big buffer', handler: (_q, s) => s.end(Buffer.alloc(70_000, 'b')) },
  { name: 'latin1 text, chunked', handler: (_q, s) => { s.writeHead(200, {}); s.end('caf\u00e9', 'latin1'); } },
  { name: 'utf8 text with length', handler: (_q, s) => s.writeHead(200, { 'content-length': 7 }).end('\u2603\u2603x'.slice(0, 2) + 'x') },
  { name: 'arrays', handler: (_q, s) => s.writeHead(200, { 'set-cookie': ['a=1', 'b=2'], 'x-multi': ['1', '2'], 'content-length': 1 }).end('x') },
  { name: 'cookie array joined', handler: (_q, s) => s.writeHead(200, { cookie: ['a=1', 'b=2'], 'content-length': 0 }).end() },
  { name: 'own Date kept', handler: (_q, s) => s.writeHead(200, { Date: 'Mon, 01 Jan 2024 00:00:00 GMT', 'content-length': 0 }).end() },
  { name: 'connection close field', handler: (_q, s) => s.writeHead(200, { connection: 'close', 'content-length': 1 }).end('x') },
  { name: 'connection keep-alive field', handler: (_q, s) => s.writeHead(200, { connection: 'keep-alive', 'content-length': 1 }).end('x') },
  { name: 'shouldKeepAlive false', handler: (_q, s) => { s.shouldKeepAlive = false; s.writeHead(200, { 'content-length': 1 }).end('x'); } },
  { name: 'own keep-alive field', handler: (_q, s) => s.writeHead(200, { 'keep-alive': 'timeout=3', 'content-length': 1 }).end('x') },
  { name: 'trailers', handler: (_q, s) => { s.writeHead(200, { 'transfer-encoding': 'chunked', trailer: 'x-t' }); s.write('ab'); s.addTrailers({ 'x-t': 'v', 'x-u': 'w' }); s.end(); } },
  { name: 'trailers after a last chunk', handler: (_q, s) => { s.writeHead(200, {}); s.addTrailers({ 'grpc-status': '0' }); s.end(Buffer.from('zz')); } },
  { name: 'unknown status', handler: (_q, s) => s.writeHead(599, { 'content-length': 0 }).end() },
  { name: 'own status message', handler: (_q, s) => { s.statusMessage = 'Fine Thanks'; s.writeHead(200, { 'content-length': 0 }).end(); } },
  { name: 'number value', handler: (_q, s) => s.writeHead(200, { 'x-num': 5, 'content-length': 0 }).end() },
  { name: 'obs-text value', handler: (_q, s) => s.writeHead(200, { 'x-l': 'caf\u00e9', 'content-length': 0 }).end() },
  { name: 'empty writes', handler: (_q, s) => { s.writeHead(200, { 'content-length': 1 }); s.write(''); s.write(Buffer.alloc(0)); s.end('x'); } },
  { name: 'write before writeHead', handler: (_q, s) => { s.statusCode = 201; s.write('a'); s.end('b'); } },
];

function errorCode(fn: () => void): string {
  try {
    fn();
    return 'none';
  } catch (err) {
    return (err as { code?: string }).code ?? 'no code';
  }
}

const throwing: Case[] = [
  { name: 'bad value', handler: (_q, s) => s.writeHead(200, { 'x-a': 'a\nb' }) },
  { name: 'bad name', handler: (_q, s) => s.writeHead(200, { 'x a': '1' }) },
  { name: 'undefined value', handler: (_q, s) => s.writeHead(200, { 'x-a': undefined as unknown as string }) },
  { name: 'status 99', handler: (_q, s) => s.writeHead(99, {}) },
  { name: 'status 1000', handler: (_q, s) => s.writeHead(1000, {}) },
  { name: 'twice', handler: (_q, s) => { s.writeHead(200, {}); s.writeHead(200, {}); } },
  { name: 'bad status message', handler: (_q, s) => { s.statusMessage = 'a\rb'; s.writeHead(200, {}); } },
  { name: 'trailer field without chunked', handler: (_q, s) => s.writeHead(200, { trailer: 'x', 'content-length': 0 }) },
];

t.test('the same bytes as Node\'s server', async (t) => {
  const p = await pair(t);
  for (const c of cases) {
    p.handler = (req, res) => (req.url === '/close' ? res.end() : c.handler(req, res));
    const request = `${c.method ?? 'GET'} /x HTTP/1.1\r\nHost: h\r\n\r\n${CLOSE}`;
    const before = { ...p.served };
    const [viaNode, viaQuick] = await Promise.all([exchange(p.node, request), exchange(p.quick, request)]);
    t.ok(p.served.quick > before.quick, `${c.name}: served on the quick path`);
    t.equal(normalize(viaQuick), normalize(viaNode), c.name);
  }
  for (const c of throwing) {
    const codes: string[] = [];
    p.handler = (req, res) => {
      if (req.url !== '/close') codes.push(errorCode(() => c.handler(req, res)));
      res.destroy();
    };
    await exchange(p.node, 'GET /x HTTP/1.1\r\n\r\n');
    await exchange(p.quick, 'GET /x HTTP/1.1\r\n\r\n');
    t.equal(codes.length, 2, `${c.name}: both handlers ran`);
    t.equal(codes[1], codes[0], `${c.name}: ${codes[0]}`);
    t.not(codes[0], 'none', `${c.name} throws`);
  }
});

t.test('pipelined requests are answered in order, the unusual one by Node\'s server', async (t) => {
  const p = await pair(t);
  let n = 0;
  p.handler = (req, res) => {
    const id = ++n;
    req.resume();
    // The first answer is the slowest: order must come from the connection, not from timing.
    setTimeout(() => res.writeHead(200, { 'content-length': String(req.url!.length + 2) }).end(`${req.url}#${id}`), id === 1 ? 60 : 0);
  };
  const before = { ...p.served };
  const out = await exchange(p.quick, 'GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\nPOST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\nGET /d HTTP/1.1\r\nConnection: close\r\n\r\n');
  t.match(out, /^HTTP\/1\.1 200 OK[^]*\/a#1HTTP\/1\.1 200 OK[^]*\/b#2HTTP\/1\.1 200 OK[^]*\/c#3HTTP\/1\.1 200 OK[^]*Connection: close[^]*\/d#4$/);
  t.equal(p.served.quick - before.quick, 2, 'two on the quick path');
});

t.test('Connection: close on the quick path: the answer says so, the connection ends, nothing after it is served', async (t) => {
  const p = await pair(t);
  p.handler = (req, res) => res.writeHead(200, { 'content-length': req.url!.length }).end(req.url);
  for (const value of ['close', 'Close', 'CLOSE']) {
    const request = ['GET /a HTTP/1.1\r\nHost: h\r\n\r\n', `GET /last HTTP/1.1\r\nConnection: ${value}\r\n\r\n`];
    const before = { ...p.served };
    const [viaNode, viaQuick] = await Promise.all([exchange(p.node, request), exchange(p.quick, request)]);
    t.equal(normalize(viaQuick), normalize(viaNode), `Connection: ${value}: the same bytes as Node's server`);
    t.match(viaQuick, /\/aHTTP\/1\.1 200 OK\r\n[^]*\r\nConnection: close\r\n\r\n\/last$/, 'the last answer says Connection: close');
    t.equal(p.served.quick - before.quick, 2, 'both served on the quick path');
  }
  // A close request with a body: the body is read, then the connection ends.
  const withBody = await exchange(p.quick, 'POST /b HTTP/1.1\r\nConnection: close\r\nContent-Length: 3\r\n\r\nxyz');
  t.match(withBody, /^HTTP\/1\.1 200 OK\r\n[^]*Connection: close\r\n\r\n\/b$/);
  // A request sent behind the last one is not served (RFC 9112 §9.6). Node's own server answers
  // this one way or another by timing: llhttp refuses data after close, and the error destroys the
  // connection, with the last answer when it was still in flight.
  const behind = 'GET /a HTTP/1.1\r\n\r\nGET /last HTTP/1.1\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\n\r\n';
  const before = p.served.quick;
  t.match(await exchange(p.quick, behind), /\/aHTTP\/1\.1 200 OK\r\n[^]*\r\nConnection: close\r\n\r\n\/last$/, 'a request behind the last one gets no answer');
  t.equal(p.served.quick - before, 2, 'nor reaches the handler');
});

t.test('a head split across reads, and a malformed one, go to Node\'s server', async (t) => {
  const p = await pair(t);
  p.handler = (req, res) => res.writeHead(200, { 'content-length': req.url!.length }).end(req.url);
  const before = { ...p.served };
  const split = await exchange(p.quick, ['GET /first HTTP/1.1\r\n\r\nGET /spl', 'it HTTP/1.1\r\nConnection: close\r\n\r\n']);
  t.match(split, /\/firstHTTP\/1\.1 200 OK[^]*\/split$/);
  t.equal(p.served.quick - before.quick, 1);
  const bad = await exchange(p.quick, 'GET /ok HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\nX: a\x01b\r\n\r\n');
  t.match(bad, /\/okHTTP\/1\.1 400 Bad Request\r\n/, 'Node\'s server answers the malformed head');
});

t.test('idle connections close after the idle time, busy ones do not', async (t) => {
  const p = await pair(t, 100);
  p.handler = (req, res) => setTimeout(() => res.writeHead(200, { 'content-length': 0 }).end(), req.url === '/slow' ? 1600 : 0);
  const socket = net.connect(p.quick, '127.0.0.1');
  await once(socket, 'connect');
  let out = '';
  socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
  const closed = once(socket, 'close');
  const started = performance.now();
  socket.write('GET /slow HTTP/1.1\r\n\r\n');
  await closed;
  const elapsed = performance.now() - started;
  t.match(out, /^HTTP\/1\.1 200 OK\r\n[^]*Keep-Alive: timeout=0\r\n/, 'the slow answer arrived');
  t.ok(elapsed >= 1600 + 1000, `closed ${Math.round(elapsed)} ms after the request: after the answer plus the idle time`);
});

t.test('a client that leaves mid-request closes its response', async (t) => {
  const p = await pair(t);
  let res!: http.ServerResponse;
  const seen = new Promise<void>((resolve) => {
    p.handler = (_req, r) => {
      res = r;
      resolve();
    };
  });
  const socket = net.connect(p.quick, '127.0.0.1');
  socket.write('GET / HTTP/1.1\r\n\r\n');
  await seen;
  t.equal((res.socket as net.Socket & { _httpMessage?: unknown })._httpMessage, res, 'the answer in flight is on the socket');
  const closed = once(res, 'close');
  socket.destroy();
  await closed;
  t.ok(res.destroyed);
  t.notOk(res.writableEnded);
});

t.test('backpressure: write says when to wait, drain says when to go on', async (t) => {
  const p = await pair(t);
  const chunk = Buffer.alloc(64 * 1024, 'z');
  const total = 256;
  let refused = 0;
  let drained = 0;
  p.handler = (_req, res) => {
    res.writeHead(200, { 'content-length': chunk.length * total });
    let sent = 0;
    const pump = (): void => {
      while (sent < total) {
        sent++;
        if (sent === total) return void res.end(chunk);
        if (!res.write(chunk)) {
          refused++;
          res.once('drain', () => {
            drained++;
            pump();
          });
          return;
        }
      }
    };
    pump();
  };
  const socket = net.connect(p.quick, '127.0.0.1');
  socket.write('GET / HTTP/1.1\r\n\r\n');
  socket.pause();
  await until(() => refused >= 1);
  t.ok(refused >= 1, 'a write was refused while the client did not read');
  let bytes = 0;
  const done = new Promise<void>((resolve) =>
    socket.on('data', (d: Buffer) => {
      bytes += d.length;
      if (bytes >= chunk.length * total) resolve();
    }),
  );
  socket.resume();
  await done;
  socket.destroy();
  t.equal(drained, refused, 'every refused write was followed by drain');
  t.ok(bytes > chunk.length * total, 'head and every byte of the body arrived');
});

t.test('between requests the socket says no answer is in flight', async (t) => {
  const p = await pair(t);
  const states: unknown[] = [];
  p.handler = (req, res) => {
    const socket = req.socket as net.Socket & { _httpMessage?: unknown };
    states.push(socket._httpMessage === res);
    res.writeHead(200, { 'content-length': 0 }).end();
    states.push(socket._httpMessage);
  };
  await exchange(p.quick, 'GET / HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n', 300);
  t.same(states, [true, null, true, null]);
});

t.test('a client that sends its request and closes its side still gets an answer already written', async (t) => {
  const p = await pair(t);
  const big = Buffer.alloc(8 * 1024 * 1024, 'q');
  p.handler = (_req, res) => res.writeHead(200, { 'content-length': big.length }).end(big);
  for (const port of [p.node, p.quick]) {
    const socket = net.connect(port, '127.0.0.1');
    await once(socket, 'connect');
    socket.end('GET / HTTP/1.1\r\n\r\n');
    let bytes = 0;
    socket.on('data', (d: Buffer) => (bytes += d.length));
    await once(socket, 'close');
    t.ok(bytes > big.length, `${port === p.quick ? 'quick path' : 'Node'}: all ${big.length} body bytes arrived (${bytes} bytes in all)`);
  }
});

/** Reads the whole body, then answers with its length and its first and last bytes. */
const echoBody: Handler = (req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const text = `${req.method} ${body.length} ${body.subarray(0, 8).toString()}|${body.subarray(-8).toString()} complete=${req.complete}`;
    res.writeHead(200, { 'content-length': Buffer.byteLength(text) }).end(text);
  });
};

t.test('bodies framed by their length: the same answers as Node\'s server', async (t) => {
  const p = await pair(t);
  p.handler = (req, res) => (req.url === '/close' ? res.end() : echoBody(req, res));
  const body = 'hello, body';
  const requests: [string, string | string[]][] = [
    ['body in the head\'s write', `POST /x HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n${body}${CLOSE}`],
    ['body in pieces', [`PUT /x HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\nhel`, 'lo, b', `ody${CLOSE}`]],
    ['two bodies pipelined', `POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcPATCH /b HTTP/1.1\r\nContent-Length: 4\r\n\r\nwxyz${CLOSE}`],
    ['length 0, then a body', `POST /a HTTP/1.1\r\nContent-Length: 0\r\n\r\nPOST /b HTTP/1.1\r\nContent-Length: 2\r\n\r\nok${CLOSE}`],
  ];
  for (const [name, request] of requests) {
    const before = p.served.quick;
    const [viaNode, viaQuick] = await Promise.all([exchange(p.node, request), exchange(p.quick, request)]);
    t.ok(p.served.quick > before, `${name}: served on the quick path`);
    t.equal(normalize(viaQuick), normalize(viaNode), name);
  }
});

t.test('a large body with a slow reader: backpressure, every byte once', async (t) => {
  const p = await pair(t);
  const size = 8 * 1024 * 1024;
  let paused = 0;
  p.handler = (req, res) => {
    let bytes = 0;
    const hash = createHash('sha256');
    req.on('data', (c: Buffer) => {
      bytes += c.length;
      hash.update(c);
      // A slow consumer: stop now and then, as an upstream that is behind would.
      if (bytes % (1024 * 1024) < c.length) {
        req.pause();
        paused++;
        setTimeout(() => req.resume(), 20);
      }
    });
    req.on('end', () => {
      const text = `${bytes} ${hash.digest('hex')}`;
      res.writeHead(200, { 'content-length': text.length }).end(text);
    });
  };
  const body = Buffer.alloc(size);
  for (let i = 0; i < size; i++) body[i] = i % 251;
  const expected = createHash('sha256').update(body).digest('hex');
  const socket = net.connect(p.quick, '127.0.0.1');
  await once(socket, 'connect');
  let out = '';
  socket.on('data', (d: Buffer) => (out += d.toString('latin1')));
  socket.write(`POST / HTTP/1.1\r\nContent-Length: ${size}\r\n\r\n`);
  socket.write(body);
  await waitForText(() => out, /\r\n\r\n\d+ [0-9a-f]{64}$/);
  socket.destroy();
  t.ok(out.endsWith(`\r\n\r\n${size} ${expected}`), 'every byte arrived, in order');
  t.ok(paused >= 4, `the reader paused ${paused} times`);
});

/** Polls until `check()` holds; 30 s is a hang guard, not a bound on how soon. */
async function until(check: () => boolean, ms = 30_000): Promise<void> {
  for (const end = Date.now() + ms; !check(); ) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

async function waitForText(get: () => string, pattern: RegExp, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!pattern.test(get())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${pattern}: ${JSON.stringify(get().slice(-200))}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

t.test('an answer before the body was read: the rest is dropped and the next request served', async (t) => {
  const p = await pair(t);
  p.handler = (req, res) => {
    if (req.method === 'POST') res.writeHead(403, { 'content-length': 6 }).end('denied');
    else res.writeHead(200, { 'content-length': req.url!.length }).end(req.url);
  };
  const body = 'z'.repeat(300_000);
  const request = [`POST /x HTTP/1.1\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 1000)}`, body.slice(1000), `GET /after HTTP/1.1\r\n\r\n${CLOSE}`];
  const before = p.served.quick;
  const [viaNode, viaQuick] = await Promise.all([exchange(p.node, request), exchange(p.quick, request)]);
  t.equal(normalize(viaQuick), normalize(viaNode));
  t.match(viaQuick, /denied[^]*\/after/, 'the request after the dropped body was answered');
  t.equal(p.served.quick - before, 3, 'all three on the quick path');
});

t.test('a client that leaves mid-body aborts its request', async (t) => {
  const p = await pair(t);
  const events: string[] = [];
  const seen = new Promise<void>((resolve) => {
    p.handler = (req, res) => {
      req.on('data', () => events.includes('data') || events.push('data'));
      req.on('aborted', () => events.push('aborted'));
      req.on('error', (err: Error & { code?: string }) => events.push(`error ${err.code}`));
      req.on('close', () => {
        events.push('close');
        resolve();
      });
      res.on('close', () => events.push('res close'));
    };
  });
  const socket = net.connect(p.quick, '127.0.0.1');
  await once(socket, 'connect');
  socket.write('POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly part');
  await until(() => events.includes('data'));
  socket.destroy();
  await seen;
  await until(() => events.includes('res close'));
  t.same(events.filter((e) => e !== 'res close'), ['data', 'aborted', 'error ECONNRESET', 'close']);
  t.ok(events.includes('res close'), 'the response closed too');
});

t.test('body bytes go through push, where a counter may wrap it', async (t) => {
  const p = await pair(t);
  let counted = 0;
  let ended = false;
  p.handler = (req, res) => {
    const push = req.push;
    req.push = function counting(this: typeof req, chunk: unknown, encoding?: BufferEncoding): boolean {
      if (chunk === null) ended = true;
      else counted += (chunk as Buffer).length;
      return push.call(this, chunk, encoding);
    };
    echoBody(req, res);
  };
  await exchange(p.quick, `POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab`, 100).catch(() => undefined);
  const out = await exchange(p.quick, ['POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab', `cde${CLOSE}`]);
  t.match(out, /POST 5 abcde\|abcde complete=true/);
  t.equal(counted, 5 + 2, 'the five bytes of the second request, and the two the first had before it was cut');
  t.ok(ended);
});
