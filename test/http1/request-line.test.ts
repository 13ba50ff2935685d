/**
 * `readPlainRequestHead` (src/http1/request-line.ts): a table of heads it serves and of heads it must
 * leave to Node's server, then generated heads read both by it and by Node's own HTTP server over a
 * real socket: whenever it serves a head, method, target, fields and raw fields must be what Node's
 * server would have given the handler. Then the other direction on mutated heads (duplicate fields,
 * obs-fold, bare CR/LF, NUL and control bytes, other versions, absolute-form targets, userinfo in
 * Host, Transfer-Encoding variants, underscores in names, overlong heads, random byte edits): every
 * head Node's server (as the listener configures it) refuses, the quick reader must decline, so the
 * quick path never serves what Node would answer with an error. Seeded; `SEED=n` replays a run.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { once } from 'node:events';
import type { Duplex } from 'node:stream';
import { readPlainRequestHead } from '../../src/http1/request-line.js';
import { prng, testSeed } from '../helpers/seed.js';

const MAX = 64 * 1024;
const SEED = testSeed('SEED', 20261127);
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
    close: false,
  });
  t.equal(read('POST /p HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc')?.bodyLength, 3, 'a body framed by its length');
  t.equal(read('POST /p HTTP/1.1\r\nContent-Length:  999999999999999 \r\n\r\n')?.bodyLength, 999_999_999_999_999, 'fifteen digits');
  t.equal(read('DELETE http://x.example/p HTTP/1.1\r\n\r\n')?.url, 'http://x.example/p', 'absolute form, no fields');
  t.same(read('POST /p HTTP/1.1\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n')?.headers, { 'content-length': '0', connection: 'Keep-Alive' });
  t.equal(read('OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n')?.url, '*');
  t.equal(read('GET / HTTP/1.1\r\nX-Latin: caf\xe9\r\n\r\n')?.headers['x-latin'], 'caf\xe9', 'obs-text in a value');
  // RFC 9110 §7.8: without `upgrade` in Connection, Upgrade asks for nothing (llhttp agrees; test below).
  t.same(read('POST /x HTTP/1.1\r\nUpgrade: websocket\r\nContent-Length: 5\r\n\r\nhello')?.headers, { upgrade: 'websocket', 'content-length': '5' }, 'an Upgrade field alone');
  t.equal(read('GET / HTTP/1.1\r\nConnection: keep-alive\r\nUpgrade: h2c\r\n\r\n')?.url, '/', 'an Upgrade field beside Connection: keep-alive');
  // The client's last request: served, and marked so its answer closes the connection.
  t.equal(read('GET / HTTP/1.1\r\nConnection: close\r\n\r\n')?.close, true, 'Connection: close');
  t.equal(read('GET / HTTP/1.1\r\nConnection:  Close \r\n\r\n')?.close, true, 'Connection: Close, padded');
  t.equal(read('GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n')?.close, false, 'Connection: keep-alive');
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
    ['upgrade, keep-alive', 'GET / HTTP/1.1\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n'],
    ['h2c upgrade', 'GET / HTTP/1.1\r\nUpgrade: h2c\r\nHTTP2-Settings: AAA\r\n\r\n'],
    ['connection close and keep-alive', 'GET / HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n'],
    ['connection close, te', 'GET / HTTP/1.1\r\nConnection: close, TE\r\n\r\n'],
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
    ['a bare word target (llhttp refuses it)', 'GET x HTTP/1.1\r\n\r\n'],
    ['authority form outside CONNECT (llhttp refuses it)', 'GET x.example:443 HTTP/1.1\r\n\r\n'],
    ['a scheme without its colon', 'GET http//x.example/ HTTP/1.1\r\n\r\n'],
    ['userinfo in an absolute target', 'GET http://u:p@x.example/ HTTP/1.1\r\n\r\n'],
    ['another scheme', 'GET ftp://x.example/ HTTP/1.1\r\n\r\n'],
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

/**
 * Node's own HTTP/1.1 server as the oracle: what it hands its request handler for each probe (by its
 * X-Probe-Id), `'an upgrade'` when llhttp took the head for one (it has an 'upgrade' listener, as the
 * proxy's listener has), nothing when it answered an error.
 */
async function nodeOracle(t: { teardown(fn: () => unknown): void }): Promise<{ port: number; seen: Map<string, unknown> }> {
  const seen = new Map<string, unknown>();
  const server = http.createServer({ requireHostHeader: false, maxHeaderSize: MAX }, (req, res) => {
    const id = req.headers['x-probe-id'] as string;
    const rawHeaders = [...req.rawHeaders];
    rawHeaders.splice(rawHeaders.indexOf('X-Probe-Id'), 2);
    const headers = { ...req.headers };
    delete headers['x-probe-id'];
    seen.set(id, { method: req.method, url: req.url, headers, rawHeaders, version: req.httpVersion });
    req.resume();
    res.end();
  });
  server.on('clientError', (_err, socket) => socket.destroy());
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
    seen.set(req.headers['x-probe-id'] as string, 'an upgrade');
    socket.destroy();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  return { port: (server.address() as net.AddressInfo).port, seen };
}

const NAMES = ['Host', 'host', 'Accept', 'X-Forwarded-For', 'x-request-id', 'Content-Length', 'Connection', 'User-Agent', 'Cookie', 'X-A', 'X-A', 'TE', 'Transfer-Encoding', 'Upgrade'];
const VALUES = ['x.example', '', ' padded ', '\tt\t', '0', '12', 'keep-alive', 'close', 'a, b', 'caf\xe9', 'a=1; b=2', 'x\x01y', 'chunked', 'websocket', '"q"', 'upgrade', 'Upgrade, keep-alive', 'h2c'];
const TARGETS = ['/', '/a/b?c=d', '*', 'http://h.example/p', '/%2e%2e/x', '/a#frag', "/!$&'()*+,;=:@"];
const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'TRACE', 'get'];

function pick<T>(list: readonly T[], rnd: () => number): T {
  return list[Math.floor(rnd() * list.length)]!;
}

t.test('every head it reads, Node reads the same way', async (t) => {
  const { port, seen } = await nodeOracle(t);
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


const VERSIONS = ['HTTP/1.1', 'HTTP/1.1', 'HTTP/2.0', 'HTTP/1.0', 'HTTP/1.2', 'HTTP/0.9', 'HTTP/1.10', 'http/1.1', 'HTTP/1.1 ', 'HTTP/1', ''];
const WILD_TARGETS = [
  '/', '/a?b=c', 'http://x.example/p', 'http://user:pw@x.example/p', 'https://x.example', 'HTTP://X.EXAMPLE/', '//x.example/p', 'x', '*',
  '/a\tb', '/%00', '/a\x7f', '/caf\xe9', '/a#b', 'x.example:443', '/' + 'a'.repeat(300),
];
const WILD_FIELDS: [string, string][] = [
  ['Host', 'x.example'], ['Host', 'user@x.example'], ['Host', 'user:pw@x.example:8080'], ['Host', 'x.example:bad'], ['Host', '[::1]:8080'],
  ['Host', 'a b'], ['Host', ''], ['Host', 'x.example, y.example'], ['Content-Length', '5'], ['Content-Length', '5 '], ['Content-Length', '5,5'],
  ['Content-Length', '+5'], ['Content-Length', '0005'], ['Content-Length', '0'], ['Transfer-Encoding', 'chunked'], ['Transfer-Encoding', 'gzip, chunked'],
  ['Transfer-Encoding', 'Chunked'], ['Transfer-Encoding', 'chunked\t'], ['Transfer-Encoding', 'identity'], ['TE', 'trailers'], ['TE', 'gzip'],
  ['Content_Length', '5'], ['Transfer_Encoding', 'chunked'], ['X_A', '1'], ['X-A', '1'], ['X-A', '2'], ['Connection', 'keep-alive'],
  ['Connection', 'close'], ['Expect', '100-continue'], ['Upgrade', 'h2c'], ['X-Ctl', 'a\x01b'], ['X-Nul', 'a\x00b'], ['X-Del', 'a\x7f'],
  ['X-Latin', 'caf\xe9'], ['Accept', '*/*'], ['Cookie', 'a=1'], ['X-Sp', ' v '],
];
const EDITS = ['\x00', '\x01', '\x7f', '\r', '\n', '\r\n', '\r\n ', '\r\n\t', ' ', '\t', ':', ',', '@', '_', '\xff', 'a'];

/** A head as a client might send it, then one to three edits that make it odd or wrong. */
function mutatedHead(rnd: () => number): string {
  const method = pick(['GET', 'GET', 'POST', 'HEAD', 'PUT', 'DELETE', 'OPTIONS', 'PATCH', 'CONNECT', 'get', 'G ET'], rnd);
  let text = `${method} ${pick(WILD_TARGETS, rnd)} ${pick(VERSIONS, rnd)}\r\n`;
  for (let f = Math.floor(rnd() * 6); f > 0; f--) {
    const [name, value] = pick(WILD_FIELDS, rnd);
    text += `${name}:${rnd() < 0.8 ? ' ' : ''}${value}\r\n`;
  }
  if (rnd() < 0.03) text += `X-Big: ${'b'.repeat(rnd() < 0.5 ? 70 * 1024 : 60 * 1024)}\r\n`;
  text += '\r\n';
  for (let n = Math.floor(rnd() * 3); n > 0; n--) {
    const end = text.length - 2;
    const at = Math.floor(rnd() * end);
    const line = text.indexOf('\r\n', Math.floor(rnd() * end));
    switch (Math.floor(rnd() * 5)) {
      case 0:
        text = text.slice(0, at) + pick(EDITS, rnd) + text.slice(at);
        break;
      case 1:
        text = text.slice(0, at) + text.slice(at + 1);
        break;
      case 2: {
        // A field line twice.
        const start = text.lastIndexOf('\r\n', line - 1) + 2;
        if (start > 1 && line > start) text = text.slice(0, line + 2) + text.slice(start, line + 2) + text.slice(line + 2);
        break;
      }
      case 3:
        // A line ending as a bare LF or a bare CR, or a folded line.
        if (line >= 0 && line < end) text = text.slice(0, line) + pick(['\n', '\r', '\r\n ', '\r\n\t'], rnd) + text.slice(line + 2);
        break;
      default:
        text = text.slice(0, at) + pick(EDITS, rnd) + text.slice(at + 1);
    }
  }
  return text;
}

t.test(`every head Node's server refuses, the quick reader declines (seed ${SEED})`, async (t) => {
  const { port, seen } = await nodeOracle(t);
  const rnd = prng(SEED);
  const served: string[] = [];
  const total = 12_000;
  for (let i = 0; i < total; i++) {
    const text = mutatedHead(rnd);
    if (readPlainRequestHead(Buffer.from(text, 'latin1'), MAX) !== undefined) served.push(text);
  }
  let alike = 0;
  for (let i = 0; i < served.length; i += 20) {
    const batch = served.slice(i, i + 20);
    const node = await Promise.all(batch.map((text) => nodeReads(port, text, seen)));
    batch.forEach((text, j) => {
      const ours = readPlainRequestHead(Buffer.from(text, 'latin1'), MAX)!;
      const mine = { method: ours.method, url: ours.url, headers: ours.headers, rawHeaders: ours.rawHeaders, version: '1.1' };
      if (JSON.stringify(node[j]) === JSON.stringify(mine)) alike++;
      else t.fail(`seed ${SEED}: the quick reader serves ${JSON.stringify(text.slice(0, 300))}, Node ${node[j] === undefined ? 'refuses it' : `reads ${JSON.stringify(node[j])}`}`);
    });
  }
  t.equal(alike, served.length, `${served.length} of ${total} mutated heads served by the quick reader, each read alike by Node; the rest declined`);
  t.ok(served.length >= 100 && served.length < total / 2, 'both sides exercised');
});

const UPGRADE_VALUES = ['websocket', 'WebSocket', 'h2c', 'websocket, h2c', 'HTTP/2.0', '', 'x'];
const CONNECTION_VALUES = [
  'Upgrade', 'upgrade', 'UPGRADE', 'keep-alive', 'Keep-Alive', 'keep-alive, Upgrade', 'Upgrade, keep-alive', 'close', 'upgrade, close',
  'Upgrade, HTTP2-Settings', 'upgradex', 'x-upgrade', 'up grade', ' upgrade', 'upgrade ', ',upgrade', 'upgrade,', 'upgrade\t', 'keep-alive\t', 'te',
];

t.test(`Upgrade and Connection combinations: the quick reader serves exactly what llhttp reads as an ordinary request (seed ${SEED})`, async (t) => {
  // The oracle is Node's own server with an 'upgrade' listener, as the proxy's listener has: llhttp
  // decides what is an upgrade (an Upgrade field and `upgrade` among the Connection options).
  const { port, seen } = await nodeOracle(t);
  const rnd = prng(SEED + 35);
  const heads: string[] = [];
  for (let i = 0; i < 600; i++) {
    const fields: string[] = ['Host: x.example'];
    for (let n = Math.floor(rnd() * 3); n > 0; n--) fields.push(`Upgrade: ${pick(UPGRADE_VALUES, rnd)}`);
    for (let n = Math.floor(rnd() * 2.4); n > 0; n--) fields.push(`Connection: ${pick(CONNECTION_VALUES, rnd)}`);
    if (rnd() < 0.2) fields.push('Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==');
    const body = rnd() < 0.5 ? 'hello' : '';
    if (body || rnd() < 0.2) fields.push(`Content-Length: ${body.length}`);
    // Shuffled, so Connection comes before Upgrade as often as after.
    for (let j = fields.length - 1; j > 0; j--) {
      const k = Math.floor(rnd() * (j + 1));
      [fields[j], fields[k]] = [fields[k]!, fields[j]!];
    }
    heads.push(`${pick(['GET', 'POST', 'PUT', 'OPTIONS'], rnd)} /u HTTP/1.1\r\n${fields.map((f) => `${f}\r\n`).join('')}\r\n${body}`);
  }
  const counts = { upgrades: 0, ordinary: 0, servedWithUpgrade: 0 };
  for (let i = 0; i < heads.length; i += 20) {
    const batch = heads.slice(i, i + 20);
    const node = await Promise.all(batch.map((text) => nodeReads(port, text, seen)));
    batch.forEach((text, j) => {
      const verdict = node[j];
      const ours = readPlainRequestHead(Buffer.from(text, 'latin1'), MAX);
      if (verdict === 'an upgrade') counts.upgrades++;
      else if (verdict !== undefined) counts.ordinary++;
      if (ours !== undefined) {
        const mine = { method: ours.method, url: ours.url, headers: ours.headers, rawHeaders: ours.rawHeaders, version: '1.1' };
        if (ours.headers.upgrade !== undefined) counts.servedWithUpgrade++;
        t.same(verdict, mine, `seed ${SEED}: served by the quick reader, so Node must read it as this ordinary request: ${JSON.stringify(text)}`);
        return;
      }
      // Declined: fine unless it is ordinary and plain (one Upgrade line at most, no Connection but keep-alive or close).
      if (verdict === undefined || verdict === 'an upgrade') return;
      const lines = (name: string) => text.split('\r\n').filter((l) => l.toLowerCase().startsWith(`${name}:`));
      const connection = lines('connection');
      const plain = lines('upgrade').length <= 1 && (connection.length === 0 || (connection.length === 1 && /^connection: (?:keep-alive|close)\s*$/i.test(connection[0]!)));
      if (plain) t.fail(`seed ${SEED}: an ordinary request with an informational Upgrade was declined: ${JSON.stringify(text)}`);
    });
  }
  t.ok(counts.upgrades > 50 && counts.ordinary > 50 && counts.servedWithUpgrade > 20, `both kinds exercised: ${JSON.stringify(counts)}`);
});
