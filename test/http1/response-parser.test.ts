/**
 * The HTTP/1.1 response parser (src/http1/response-parser.ts): a table of responses with the events
 * they must produce (framing by length, chunked with extensions and trailers, to the close, none for
 * HEAD/204/304, interim 1xx skipped, repeated fields, obs-fold, bare-LF lines, keep-alive decisions),
 * a table of malformed responses each refused with its reason, and the property that any split of
 * the bytes into reads gives the same events as one read (every split point, then random splits).
 */
import t from 'tap';
import { ResponseParser, type HeaderMap, type ResponseSink } from '../../src/http1/response-parser.js';

interface Parsed {
  status?: number;
  headers?: HeaderMap;
  body: string;
  trailers?: HeaderMap | undefined;
  complete: boolean;
  error?: string;
  keepAlive?: boolean;
  keepAliveTimeoutMs?: number | undefined;
  trailingBytes?: number;
}

/** Parse `reads` as the answer to one request; finish with the connection's end when `eof`. */
function parse(reads: Buffer[], opts: { head?: boolean; eof?: boolean; max?: number } = {}): Parsed {
  const parser = new ResponseParser(opts.max ?? 64 * 1024);
  const out: Parsed = { body: '', complete: false };
  const sink: ResponseSink = {
    onHead(status, headers) {
      out.status = status;
      out.headers = headers;
    },
    onBody(chunk) {
      out.body += chunk.toString('latin1');
    },
    onComplete(trailers) {
      out.complete = true;
      out.trailers = trailers;
      out.keepAlive = parser.keepAlive;
      out.keepAliveTimeoutMs = parser.keepAliveTimeoutMs;
      out.trailingBytes = parser.trailingBytes;
    },
  };
  parser.expect(sink, opts.head ?? false);
  for (const read of reads) {
    const err = parser.execute(read);
    if (err) {
      out.error = err.message;
      return out;
    }
  }
  if (opts.eof) {
    const err = parser.finish();
    if (err) out.error = err.message;
  }
  return out;
}

const b = (s: string): Buffer => Buffer.from(s, 'latin1');

interface Case {
  name: string;
  wire: string;
  head?: boolean;
  eof?: boolean;
  status: number;
  headers?: HeaderMap;
  body: string;
  trailers?: HeaderMap;
  keepAlive: boolean;
  keepAliveTimeoutMs?: number;
  trailingBytes?: number;
}

const CASES: Case[] = [
  { name: 'content-length', wire: 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello', status: 200, headers: { 'content-length': '5', 'content-type': 'text/plain' }, body: 'hello', keepAlive: true },
  { name: 'no reason phrase', wire: 'HTTP/1.1 404\r\ncontent-length: 0\r\n\r\n', status: 404, body: '', keepAlive: true },
  { name: 'empty reason phrase', wire: 'HTTP/1.1 200 \r\ncontent-length: 2\r\n\r\nok', status: 200, body: 'ok', keepAlive: true },
  {
    name: 'chunked with extensions and trailers',
    wire: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r\nhello\r\nA;q="a b"\r\n, world!!!\r\n0\r\nGrpc-Status: 0\r\nX-Sum: abc\r\n\r\n',
    status: 200,
    body: 'hello, world!!!',
    trailers: { 'grpc-status': '0', 'x-sum': 'abc' },
    keepAlive: true,
  },
  { name: 'chunked, upper-case hex, no trailers', wire: 'HTTP/1.1 200 OK\r\ntransfer-encoding: Chunked\r\n\r\n1F\r\n0123456789012345678901234567890\r\n0\r\n\r\n', status: 200, body: '0123456789012345678901234567890', keepAlive: true },
  { name: 'to the close (no framing)', wire: 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it, until the end', eof: true, status: 200, body: 'all of it, until the end', keepAlive: false },
  { name: 'HTTP/1.0 to the close', wire: 'HTTP/1.0 200 OK\r\n\r\nold', eof: true, status: 200, body: 'old', keepAlive: false },
  { name: 'HTTP/1.0 with keep-alive and a length', wire: 'HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi', status: 200, body: 'hi', keepAlive: true },
  { name: 'HTTP/1.0 with a length, no keep-alive', wire: 'HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nhi', status: 200, body: 'hi', keepAlive: false },
  { name: 'connection: close', wire: 'HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 1\r\n\r\nx', status: 200, body: 'x', keepAlive: false },
  { name: 'a keep-alive timeout hint', wire: 'HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 1\r\n\r\nx', status: 200, body: 'x', keepAlive: true, keepAliveTimeoutMs: 5000 },
  { name: 'HEAD: a length but no body', wire: 'HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n', head: true, status: 200, body: '', keepAlive: true },
  { name: 'HEAD: chunked but no body', wire: 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', head: true, status: 200, body: '', keepAlive: true },
  { name: '204 without framing', wire: 'HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n', status: 204, body: '', keepAlive: true },
  { name: '304 with a length of the full body', wire: 'HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n', status: 304, body: '', keepAlive: true },
  { name: 'interim 100 and 103 skipped', wire: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 3\r\n\r\nnew', status: 201, headers: { 'content-length': '3' }, body: 'new', keepAlive: true },
  { name: 'repeated fields become a list', wire: 'HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nset-cookie: b=2\r\nSET-COOKIE: c=3\r\nContent-Length: 0\r\n\r\n', status: 200, headers: { 'set-cookie': ['a=1', 'b=2', 'c=3'], 'content-length': '0' }, body: '', keepAlive: true },
  { name: 'optional whitespace trimmed, empty value kept', wire: 'HTTP/1.1 200 OK\r\nX-A:   spaced  \t\r\nX-Empty:\r\nContent-Length: 0\r\n\r\n', status: 200, headers: { 'x-a': 'spaced', 'x-empty': '', 'content-length': '0' }, body: '', keepAlive: true },
  { name: 'obs-text (latin1) kept byte for byte', wire: 'HTTP/1.1 200 OK\r\nX-Name: caf\xe9\r\nContent-Length: 0\r\n\r\n', status: 200, headers: { 'x-name': 'caf\xe9', 'content-length': '0' }, body: '', keepAlive: true },
  { name: 'OWS is spaces and tabs only: obs-text 0xA0 at the ends is kept', wire: 'HTTP/1.1 200 OK\r\nX-A: \t\xa0v\xa0 \t\r\nContent-Length: 0\r\n\r\n', status: 200, headers: { 'x-a': '\xa0v\xa0', 'content-length': '0' }, body: '', keepAlive: true },
  { name: 'a field named __proto__ is dropped', wire: 'HTTP/1.1 200 OK\r\n__proto__: x\r\nContent-Length: 0\r\n\r\n', status: 200, headers: { 'content-length': '0' }, body: '', keepAlive: true },
  { name: 'bytes after the answer are counted', wire: 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA', status: 200, body: 'ok', keepAlive: true, trailingBytes: 5 },
  { name: 'bytes after a bodiless answer are counted', wire: 'HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 200 OK\r\n', status: 204, body: '', keepAlive: true, trailingBytes: 17 },
];

t.test('responses and the events they produce', async (t) => {
  for (const c of CASES) {
    const got = parse([b(c.wire)], { head: c.head ?? false, eof: c.eof ?? false });
    t.equal(got.error, undefined, `${c.name}: no error`);
    t.equal(got.status, c.status, `${c.name}: status`);
    if (c.headers) t.same(got.headers, c.headers, `${c.name}: headers`);
    t.equal(got.body, c.body, `${c.name}: body`);
    t.ok(got.complete, `${c.name}: complete`);
    if (c.trailers) t.same(got.trailers, c.trailers, `${c.name}: trailers`);
    else t.equal(got.trailers, undefined, `${c.name}: no trailers`);
    t.equal(got.keepAlive, c.keepAlive, `${c.name}: keep-alive ${c.keepAlive}`);
    if (c.keepAliveTimeoutMs !== undefined) t.equal(got.keepAliveTimeoutMs, c.keepAliveTimeoutMs, `${c.name}: keep-alive timeout`);
    t.equal(got.trailingBytes, c.trailingBytes ?? 0, `${c.name}: trailing bytes`);
  }
});

t.test('an answer still running is not complete', async (t) => {
  const partial = parse([b('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf')]);
  t.equal(partial.status, 200);
  t.equal(partial.body, 'half');
  t.notOk(partial.complete, 'five bytes short');
  const closed = parse([b('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf')], { eof: true });
  t.match(closed.error, /closed the connection before the response was complete/, 'cut by the close: an error');
  const chunkCut = parse([b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel')], { eof: true });
  t.match(chunkCut.error, /before the response was complete/, 'a chunked body cut by the close: an error');
  const headCut = parse([b('HTTP/1.1 200 OK\r\nContent-')], { eof: true });
  t.match(headCut.error, /before the response was complete/, 'a head cut by the close: an error');
});

const BAD: [string, string, RegExp][] = [
  ['not HTTP', 'SSH-2.0-OpenSSH_9.6\r\n\r\n', /invalid status line/],
  ['HTTP/2 status line', 'HTTP/2 200\r\n\r\n', /invalid status line/],
  ['a two-digit status', 'HTTP/1.1 20 OK\r\n\r\n', /invalid status line/],
  ['a status below 100', 'HTTP/1.1 099 Hm\r\n\r\n', /invalid status/],
  ['a four-digit status', 'HTTP/1.1 2000 OK\r\n\r\n', /invalid status line/],
  ['two spaces before the status', 'HTTP/1.1  200 OK\r\n\r\n', /invalid status line/],
  ['no space after the status', 'HTTP/1.1 200OK\r\n\r\n', /invalid status line/],
  ['HTTP/1.10', 'HTTP/1.10 200 OK\r\n\r\n', /invalid status line/],
  ['a status line cut short', 'HTTP/1.1 20\r\nContent-Length: 0\r\n\r\n', /invalid status line/],
  ['a control character in the reason', 'HTTP/1.1 200 O\x01K\r\n\r\n', /invalid status line/],
  ['both length and chunked', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n', /both content-length and transfer-encoding/],
  ['differing lengths', 'HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n', /differing content-length/],
  ['differing lengths in one list', 'HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n', /differing content-length/],
  ['a negative length', 'HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n', /invalid content-length/],
  ['a hex length', 'HTTP/1.1 200 OK\r\nContent-Length: 0x10\r\n\r\n', /invalid content-length/],
  ['a length too large', 'HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n', /invalid content-length/],
  ['gzip transfer coding', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n', /unsupported transfer-encoding/],
  ['chunked twice', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n', /unsupported transfer-encoding/],
  ['transfer-encoding in HTTP/1.0', 'HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n', /HTTP\/1\.0/],
  ['a 204 with transfer-encoding', 'HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n', /204 answer with transfer-encoding/],
  ['101 without an upgrade', 'HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n', /101 answer/],
  ['a space before the colon', 'HTTP/1.1 200 OK\r\nContent-Length : 0\r\n\r\n', /invalid field name/],
  ['a field without a colon', 'HTTP/1.1 200 OK\r\nNoColon\r\n\r\n', /invalid field line/],
  ['an empty field name', 'HTTP/1.1 200 OK\r\n: value\r\n\r\n', /invalid field line/],
  ['a CR inside a value', 'HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n', /invalid value in field X-A/],
  ['a NUL inside a value', 'HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n', /invalid value in field X-A/],
  ['a fold before any field', 'HTTP/1.1 200 OK\r\n folded\r\n\r\n', /continuation line \(obs-fold\)/],
  ['a fold in content-length', 'HTTP/1.1 200 OK\r\nContent-Length: 1\r\n 0\r\n\r\n', /continuation line \(obs-fold\)/],
  ['obs-fold in any field (llhttp refuses it too)', 'HTTP/1.1 200 OK\r\nX-Long: first\r\n  second\r\nContent-Length: 0\r\n\r\n', /continuation line \(obs-fold\)/],
  ['bare LF line endings', 'HTTP/1.1 200 OK\nContent-Length: 2\nX-A: 1\n\nok', /invalid status line/],
  ['a bare LF ending a field line', 'HTTP/1.1 200 OK\r\nContent-Length: 2\nX-A: 1\r\n\r\nok', /invalid value in field Content-Length/],
  ['a bare-LF blank line after CRLF lines', 'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\nab\r\n', /invalid value in field/],
  ['a length listed twice', 'HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok', /content-length list "2, 2"/],
  ['a length sent twice', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok', /repeated content-length/],
  ['a listed length, then the same again', 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2,2\r\n\r\nok', /content-length list/],
  ['both framings on a HEAD-less 304', 'HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n', /both content-length and transfer-encoding/],
  ['both framings on an interim answer', 'HTTP/1.1 100 Continue\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', /both content-length and transfer-encoding/],
  ['an interim answer that closes', 'HTTP/1.1 100 Continue\r\nConnection: close\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n', /interim answer that closes/],
  ['chunked and a tab: another coding', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n', /unsupported transfer-encoding/],
  ['a blank after the chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2 \r\nok\r\n0\r\n\r\n', /invalid chunk size/],
  ['a blank in a chunk extension', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2; a=b\r\nok\r\n0\r\n\r\n', /invalid chunk size/],
  ['an empty chunk extension', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;\r\nok\r\n0\r\n\r\n', /invalid chunk size/],
  ['obs-text in a token extension', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a=\xe9\r\nok\r\n0\r\n\r\n', /invalid chunk size/],
  ['bytes after a quoted extension', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;a="x"y\r\nok\r\n0\r\n\r\n', /invalid chunk size/],
  ['a chunk line ending in a bare LF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\r\n0\r\n\r\n', /chunk line without CRLF/],
  ['a trailer ending in a bare LF', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\r\n', /trailer line without CRLF/],
  ['a bare CR ending a trailer value', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: a\r\r\n\r\n', /invalid value in trailer X-T/],
  ['a content-length trailer', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nContent-Length: 5\r\n\r\n', /content-length trailer/],
  ['a bad chunk size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n', /invalid chunk size/],
  ['a chunk size with 0x', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x5\r\nhello\r\n0\r\n\r\n', /invalid chunk size/],
  ['a chunk size too large', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n', /invalid chunk size/],
  ['chunk data longer than its size', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n', /longer than its size/],
  ['a bad trailer', 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nBad Trailer\r\n\r\n', /invalid trailer/],
];

t.test('malformed answers are refused with their reason', async (t) => {
  for (const [name, wire, reason] of BAD) {
    const got = parse([b(wire)]);
    t.match(got.error, reason, name);
    t.notOk(got.complete, `${name}: not delivered as complete`);
  }
});

t.test('limits: the head, a chunk line and the trailer section', async (t) => {
  const big = `HTTP/1.1 200 OK\r\nX-Big: ${'a'.repeat(2000)}\r\nContent-Length: 0\r\n\r\n`;
  t.match(parse([b(big)], { max: 1024 }).error, /head exceeds 1024 bytes/, 'a head over the limit, in one read');
  const reads = [];
  for (let i = 0; i < big.length; i += 100) reads.push(b(big.slice(i, i + 100)));
  t.match(parse(reads, { max: 1024 }).error, /head exceeds 1024 bytes/, 'and over many reads (refused before its end arrives)');
  t.equal(parse([b(big)], { max: 4096 }).error, undefined, 'the same head under a larger limit');
  const ext = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;${'e'.repeat(5000)}`;
  t.match(parse([b(ext)]).error, /chunk line or trailer section too long/, 'chunk extensions without end');
  const trailers = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n${'X-T: 1234567890\r\n'.repeat(100)}\r\n`;
  t.match(parse([b(trailers)], { max: 1024 }).error, /trailer section is too large/, 'too many trailers');
});

t.test('bytes with no request waiting are an error', async (t) => {
  const parser = new ResponseParser(1024);
  t.match(parser.execute(b('HTTP/1.1 200 OK\r\n\r\n'))?.message ?? '', /no request asked for/);
  t.match(parser.execute(b('x'))?.message ?? '', /already failed/, 'and the parser stays dead');
});

t.test('one parser, several answers in turn (a kept-alive connection)', async (t) => {
  const parser = new ResponseParser(1024);
  const seen: string[] = [];
  const sink: ResponseSink = {
    onHead: (status) => seen.push(`head ${status}`),
    onBody: (chunk) => seen.push(`body ${chunk.toString()}`),
    onComplete: () => seen.push('end'),
  };
  parser.expect(sink, false);
  t.equal(parser.execute(b('HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na')), undefined);
  parser.expect(sink, true);
  t.equal(parser.execute(b('HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n')), undefined);
  parser.expect(sink, false);
  t.equal(parser.execute(b('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nb\r\n0\r\n\r\n')), undefined);
  t.same(seen, ['head 200', 'body a', 'end', 'head 200', 'end', 'head 200', 'body b', 'end']);
});

t.test('names remembered by position: a changed order, a longer name, a new field', async (t) => {
  const parser = new ResponseParser(1024);
  const heads: HeaderMap[] = [];
  const sink: ResponseSink = { onHead: (_s, h) => heads.push(h), onBody: () => undefined, onComplete: () => undefined };
  const answers = [
    'HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nContent-Type: a/b\r\nX-A: 2\r\nContent-Length: 0\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-AB: 3\r\ncontent-type: c/d\r\nContent-Length: 0\r\nX-New: n\r\n\r\n',
    'HTTP/1.1 200 OK\r\nX-AB 4\r\n\r\n',
  ];
  for (const a of answers.slice(0, 4)) {
    parser.expect(sink, false);
    t.equal(parser.execute(Buffer.from(a, 'latin1')), undefined);
  }
  t.same(heads, [
    { 'x-a': '1', 'content-type': 'text/plain', 'content-length': '0' },
    { 'x-a': '1', 'content-type': 'text/plain', 'content-length': '0' },
    { 'content-type': 'a/b', 'x-a': '2', 'content-length': '0' },
    { 'x-ab': '3', 'content-type': 'c/d', 'content-length': '0', 'x-new': 'n' },
  ]);
  parser.expect(sink, false);
  t.match(parser.execute(Buffer.from(answers[4]!, 'latin1'))?.message ?? '', /invalid field line/, 'a remembered name without its colon is no match');
});

t.test('the keep-alive hint of each answer, also when one in between had none', async (t) => {
  const parser = new ResponseParser(1024);
  const sink: ResponseSink = { onHead: () => undefined, onBody: () => undefined, onComplete: () => undefined };
  const hints: (number | undefined)[] = [];
  for (const hint of ['Keep-Alive: timeout=5\r\n', '', 'Keep-Alive: timeout=5\r\n', 'Keep-Alive: timeout=9\r\n']) {
    parser.expect(sink, false);
    t.equal(parser.execute(Buffer.from(`HTTP/1.1 200 OK\r\n${hint}Content-Length: 0\r\n\r\n`)), undefined);
    hints.push(parser.keepAliveTimeoutMs);
  }
  t.same(hints, [5000, undefined, 5000, 9000]);
});

t.test('an abandoned answer delivers nothing more', async (t) => {
  const parser = new ResponseParser(1024);
  const seen: string[] = [];
  parser.expect({ onHead: () => seen.push('head'), onBody: () => {
    seen.push('body');
    parser.abandon();
  }, onComplete: () => seen.push('end') }, false);
  parser.execute(b('HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nab'));
  parser.execute(b('cd'));
  t.same(seen, ['head', 'body'], 'no end after the abandon');
});

/** Events in one string, for comparing splits. */
function events(reads: Buffer[], c: { head?: boolean; eof?: boolean }): string {
  const got = parse(reads, c);
  return JSON.stringify(got);
}

t.test('property: any split into reads gives the events of one read', async (t) => {
  // Bytes after the answer are counted only within its last read (in a later one they are an error).
  const all = [...CASES.filter((c) => c.trailingBytes === undefined), ...BAD.map(([name, wire]) => ({ name, wire, head: false, eof: false }))];
  let checked = 0;
  for (const c of all) {
    const wire = b(c.wire);
    const whole = events([wire], c);
    let same = true;
    // Every single split point, then every pair of split points on short responses.
    for (let i = 1; i < wire.length && same; i++) {
      same = events([wire.subarray(0, i), wire.subarray(i)], c) === whole;
      checked++;
    }
    if (wire.length <= 120) {
      for (let i = 1; i < wire.length && same; i++) {
        for (let j = i + 1; j < wire.length && same; j++) {
          same = events([wire.subarray(0, i), wire.subarray(i, j), wire.subarray(j)], c) === whole;
          checked++;
        }
      }
    }
    // Byte by byte.
    const bytes = [...wire].map((x) => Buffer.from([x]));
    if (same) same = events(bytes, c) === whole;
    t.ok(same, `${c.name}: same events for every split`);
  }
  // Random splits of a long chunked answer with trailers.
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  let body = '';
  let wire = 'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n';
  for (let i = 0; i < 200; i++) {
    const piece = String.fromCharCode(...Array.from({ length: 1 + Math.floor(random() * 300) }, () => Math.floor(random() * 256)));
    body += piece;
    wire += `${piece.length.toString(16)}${random() < 0.2 ? ';ext=1' : ''}\r\n${piece}\r\n`;
  }
  wire += '0\r\nX-Trailer: done\r\n\r\n';
  const buf = b(wire);
  const whole = events([buf], {});
  t.equal(parse([buf]).body, body, 'the long chunked body is rebuilt');
  for (let round = 0; round < 200; round++) {
    const reads: Buffer[] = [];
    for (let i = 0; i < buf.length; ) {
      const n = 1 + Math.floor(random() * (random() < 0.5 ? 8 : 2000));
      reads.push(buf.subarray(i, i + n));
      i += n;
    }
    if (events(reads, {}) !== whole) {
      t.fail(`random split ${round} differs`);
      return;
    }
  }
  t.pass(`200 random splits of a ${buf.length}-byte chunked answer agree (${checked} fixed splits checked)`);
});

t.test('the slice that ends a Content-Length body is marked last, and completion follows it at once', async (t) => {
  const trace = (reads: string[], head = false): string[] => {
    const parser = new ResponseParser(64 * 1024);
    const seen: string[] = [];
    parser.expect({
      onHead: (status) => seen.push(`head ${status}`),
      onBody: (chunk, last) => seen.push(`body ${chunk.toString('latin1')}${last ? ' last' : ''}`),
      onComplete: () => seen.push('complete'),
    }, head);
    for (const r of reads) parser.execute(b(r));
    parser.finish();
    return seen;
  };
  t.same(trace(['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello']), ['head 200', 'body hello last', 'complete'], 'head and whole body in one read');
  t.same(trace(['HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe', 'l', 'lo']), ['head 200', 'body he', 'body l', 'body lo last', 'complete'], 'body over three reads');
  t.same(trace(['HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n']), ['head 200', 'complete'], 'an empty body has no slice');
  t.same(trace(['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n']), ['head 200', 'body ok', 'complete'], 'chunked slices are never last: the end is the zero chunk');
  t.same(trace(['HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nto the end']), ['head 200', 'body to the end', 'complete'], 'a body read to the close is never last');
});
