/**
 * `readPlainRequestHead` (src/http1/request-line.ts): a table of heads it serves and of heads it must
 * leave to Node's server, then generated heads read both by it and by Node's own HTTP server over a
 * real socket: whenever it serves a head, method, target, fields and raw fields must be what Node's
 * server would have given the handler.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import { readPlainRequestHead } from '../../src/http1/request-line.js';

const MAX = 64 * 1024;
const read = (text: string) => readPlainRequestHead(Buffer.from(text, 'latin1'), MAX);

t.test('ordinary heads are read', async (t) => {
  const head = read('GET /a?b=1 HTTP/1.1\r\nHost: x.example\r\nX-Empty:\r\nAccept:  */* \t\r\n\r\nrest');
  t.same(head, {
    method: 'GET',
    url: '/a?b=1',
    headers: { host: 'x.example', 'x-empty': '', accept: '*/*' },
    rawHeaders: ['Host', 'x.example', 'X-Empty', '', 'Accept', '*/*'],
    end: 'GET /a?b=1 HTTP/1.1\r\nHost: x.example\r\nX-Empty:\r\nAccept:  */* \t\r\n\r\n'.length,
    bodyLength: 0,
  });
  t.equal(read('POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc')?.bodyLength, 3, 'a body framed by its length');
  t.equal(read('POST /p HTTP/1.1\r\nContent-Length:  999999999999999 \r\n\r\n')?.bodyLength, 999_999_999_999_999, 'fifteen digits');
  t.equal(read('DELETE http://x.example/p HTTP/1.1\r\n\r\n')?.url, 'http://x.example/p', 'absolute form, no fields');
  t.same(read('POST /p HTTP/1.1\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n')?.headers, { 'content-length': '0', connection: 'Keep-Alive' });
  t.equal(read('OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n')?.url, '*');
  t.equal(read('GET / HTTP/1.1\r\nX-Latin: caf\xe9\r\n\r\n')?.headers['x-latin'], 'caf\xe9', 'obs-text in a value');
});

t.test('everything unusual is left to Node', async (t) => {
  const declined: [string, string][] = [
    ['incomplete', 'GET / HTTP/1.1\r\nHost: x\r\n'],
    ['HTTP/1.0', 'GET / HTTP/1.0\r\n\r\n'],
    ['HTTP/2 text', 'GET / HTTP/2.0\r\n\r\n'],
    ['lower-case version', 'GET / http/1.1\r\n\r\n'],
    ['unknown method', 'BREW / HTTP/1.1\r\n\r\n'],
    ['CONNECT', 'CONNECT x:443 HTTP/1.1\r\n\r\n'],
    ['lower-case method', 'get / HTTP/1.1\r\n\r\n'],
    ['space in target', 'GET /a b HTTP/1.1\r\n\r\n'],
    ['two spaces', 'GET  / HTTP/1.1\r\n\r\n'],
    ['obs-text in target', 'GET /caf\xe9 HTTP/1.1\r\n\r\n'],
    ['length 00', 'POST / HTTP/1.1\r\nContent-Length: 00\r\n\r\n'],
    ['length 05', 'POST / HTTP/1.1\r\nContent-Length: 05\r\n\r\n'],
    ['length +5', 'POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n'],
    ['length -1', 'POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n'],
    ['length 1e3', 'POST / HTTP/1.1\r\nContent-Length: 1e3\r\n\r\n'],
    ['length list', 'POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n'],
    ['length of sixteen digits', 'POST / HTTP/1.1\r\nContent-Length: 1000000000000000\r\n\r\n'],
    ['two lengths', 'POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n'],
    ['length and chunked', 'POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n'],
    ['chunked', 'POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    ['upgrade', 'GET / HTTP/1.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n'],
    ['h2c upgrade', 'GET / HTTP/1.1\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\n\r\n'],
    ['connection close', 'GET / HTTP/1.1\r\nConnection: close\r\n\r\n'],
    ['expect', 'PUT / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n'],
    ['duplicate field', 'GET / HTTP/1.1\r\nX-A: 1\r\nx-a: 2\r\n\r\n'],
    ['duplicate host', 'GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n'],
    ['__proto__', 'GET / HTTP/1.1\r\n__proto__: x\r\n\r\n'],
    ['constructor', 'GET / HTTP/1.1\r\nconstructor: x\r\n\r\n'],
    ['set-cookie', 'GET / HTTP/1.1\r\nSet-Cookie: a=1\r\n\r\n'],
    ['space before colon', 'GET / HTTP/1.1\r\nHost : x\r\n\r\n'],
    ['no colon', 'GET / HTTP/1.1\r\nHost x\r\n\r\n'],
    ['empty name', 'GET / HTTP/1.1\r\n: x\r\n\r\n'],
    ['obs-fold', 'GET / HTTP/1.1\r\nX-A: 1\r\n  2\r\n\r\n'],
    ['bare LF in a value', 'GET / HTTP/1.1\r\nX-A: 1\n2\r\n\r\n'],
    ['bare CR in a value', 'GET / HTTP/1.1\r\nX-A: 1\r2\r\n\r\n'],
    ['LF line ends', 'GET / HTTP/1.1\nHost: x\n\n\r\n\r\n'],
    ['NUL in a value', 'GET / HTTP/1.1\r\nX-A: 1\x002\r\n\r\n'],
    ['DEL in a value', 'GET / HTTP/1.1\r\nX-A: 1\x7f\r\n\r\n'],
    ['non-token name', 'GET / HTTP/1.1\r\nX(A): 1\r\n\r\n'],
    ['leading blank line', '\r\nGET / HTTP/1.1\r\n\r\n'],
  ];
  for (const [name, text] of declined) t.equal(read(text), undefined, name);
  const many = `GET / HTTP/1.1\r\n${Array.from({ length: 129 }, (_, i) => `X-${i}: v\r\n`).join('')}\r\n`;
  t.equal(read(many), undefined, 'more than 128 fields');
  t.ok(read(`GET / HTTP/1.1\r\n${Array.from({ length: 128 }, (_, i) => `X-${i}: v\r\n`).join('')}\r\n`), '128 fields are read');
  const big = `GET / HTTP/1.1\r\nX-Big: ${'a'.repeat(200)}\r\n\r\n`;
  t.ok(readPlainRequestHead(Buffer.from(big), big.length), 'a head exactly at the limit');
  t.equal(readPlainRequestHead(Buffer.from(big), big.length - 1), undefined, 'a head over the limit');
});

/** What Node's server hands its request handler for `text`, or `undefined` when it answered an error. */
async function nodeReads(port: number, text: string, seen: Map<string, unknown>): Promise<unknown> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  const id = `${Math.random()}`;
  socket.end(text.replace('\r\n', `\r\nX-Probe-Id: ${id}\r\n`), 'latin1');
  socket.resume();
  await once(socket, 'close');
  return seen.get(id);
}

const NAMES = ['Host', 'host', 'Accept', 'X-Forwarded-For', 'x-request-id', 'Content-Length', 'Connection', 'User-Agent', 'Cookie', 'X-A', 'X-A', 'TE', 'Transfer-Encoding', 'Upgrade'];
const VALUES = ['x.example', '', ' padded ', '\tt\t', '0', '12', 'keep-alive', 'close', 'a, b', 'caf\xe9', 'a=1; b=2', 'x\x01y', 'chunked', 'websocket', '"q"'];
const TARGETS = ['/', '/a/b?c=d', '*', 'http://h.example/p', '/%2e%2e/x', '/a#frag', "/!$&'()*+,;=:@"];
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'get'];

function pick<T>(list: readonly T[], rnd: () => number): T {
  return list[Math.floor(rnd() * list.length)]!;
}

t.test('every head it reads, Node reads the same way', async (t) => {
  const seen = new Map<string, unknown>();
  const server = http.createServer({ requireHostHeader: false }, (req, res) => {
    const id = req.headers['x-probe-id'] as string;
    const rawHeaders = [...req.rawHeaders];
    const at = rawHeaders.indexOf('X-Probe-Id');
    rawHeaders.splice(at, 2);
    const headers = { ...req.headers };
    delete headers['x-probe-id'];
    seen.set(id, { method: req.method, url: req.url, headers, rawHeaders, version: req.httpVersion });
    req.resume();
    res.end();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  let seed = 7;
  const rnd = (): number => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  let read = 0;
  for (let i = 0; i < 300; i++) {
    let text = `${pick(METHODS, rnd)} ${pick(TARGETS, rnd)} HTTP/1.1\r\n`;
    const fields = Math.floor(rnd() * 5);
    for (let f = 0; f < fields; f++) text += `${pick(NAMES, rnd)}:${pick(VALUES, rnd)}\r\n`;
    text += '\r\n';
    const ours = readPlainRequestHead(Buffer.from(text, 'latin1'), MAX);
    if (ours === undefined) continue;
    read++;
    const node = await nodeReads(port, text, seen);
    t.same(
      { method: ours.method, url: ours.url, headers: ours.headers, rawHeaders: ours.rawHeaders, version: '1.1' },
      node,
      JSON.stringify(text),
    );
  }
  t.ok(read >= 60, `${read} of 300 generated heads were read (the rest left to Node)`);
});
