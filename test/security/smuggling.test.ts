/**
 * Request smuggling and malformed HTTP/1.1 on raw sockets: every framing the proxy and an upstream
 * could read differently (Content-Length with Transfer-Encoding, two Content-Lengths, obs-fold,
 * bare LF, bad chunk sizes, unknown transfer codings, CR/LF/NUL in headers, two Hosts) is answered
 * 400 (501 for a coding it does not speak) and the connection closed; the upstream sees at most one
 * request and never the one smuggled behind it. A bad chunk in a body that is already being
 * streamed cuts that request without splicing an error answer into the response under way.
 * Oversized header blocks get 431, request targets over 16 KiB 414.
 */
import t from 'tap';
import { ALIAS, records, startPlane, waitFor } from '../helpers/harness.js';
import { raw, startRecorder } from './fixtures.js';

const H = `api-${ALIAS}.app.localhost`;
const SMUGGLED = `GET /smuggled HTTP/1.1\r\nHost: ${H}\r\n\r\n`;

t.test('ambiguous framing and malformed heads: 400 and closed, never forwarded', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const post = (headers: string, body: string): string => `POST /x HTTP/1.1\r\nHost: ${H}\r\n${headers}\r\n${body}`;
  // `status`: the answer; a list when either is right. `body`: the error is in the body, which may
  // already be on its way upstream: at most that one request, and it must be cut.
  const cases: [name: string, bytes: string, status: number | number[], body?: 'body'][] = [
    ['Content-Length with Transfer-Encoding', post('Content-Length: 4\r\nTransfer-Encoding: chunked\r\n', `0\r\n\r\n${SMUGGLED}`), 400],
    ['Transfer-Encoding with Content-Length', post('Transfer-Encoding: chunked\r\nContent-Length: 40\r\n', `0\r\n\r\n${SMUGGLED}`), 400],
    ['two Content-Lengths', post('Content-Length: 4\r\nContent-Length: 40\r\n', `abcd${SMUGGLED}`), 400],
    ['two equal Content-Lengths', post('Content-Length: 4\r\nContent-Length: 4\r\n', 'abcd'), 400],
    ['a Content-Length list', post('Content-Length: 4, 4\r\n', 'abcd'), 400],
    ['a signed Content-Length', post('Content-Length: +4\r\n', 'abcd'), 400],
    ['a Content-Length in hex', post('Content-Length: 0x4\r\n', 'abcd'), 400],
    ['obs-fold', `GET / HTTP/1.1\r\nHost: ${H}\r\nX-A: a\r\n b\r\n\r\n`, 400],
    ['obs-fold hiding Transfer-Encoding', post('Transfer-Encoding:\r\n chunked\r\nContent-Length: 3\r\n', 'abc'), 400],
    ['bare LF line ends', `GET / HTTP/1.1\nHost: ${H}\n\n`, 400],
    ['a bare LF ending one header', `GET / HTTP/1.1\r\nHost: ${H}\r\nX-A: b\n\r\n`, 400],
    ['a bare CR in a header value', `GET / HTTP/1.1\r\nHost: ${H}\r\nX-A: a\rb\r\n\r\n`, 400],
    ['a NUL in a header value', `GET / HTTP/1.1\r\nHost: ${H}\r\nX-A: a\0b\r\n\r\n`, 400],
    ['a NUL in a header name', `GET / HTTP/1.1\r\nHost: ${H}\r\nX-\0A: b\r\n\r\n`, 400],
    ['a space before the colon', post('Transfer-Encoding : chunked\r\n', `0\r\n\r\n${SMUGGLED}`), 400],
    ['a control character in the target', `GET /a\x01b HTTP/1.1\r\nHost: ${H}\r\n\r\n`, 400],
    ['Transfer-Encoding: xchunked', post('Transfer-Encoding: xchunked\r\n', `0\r\n\r\n${SMUGGLED}`), [400, 501]],
    ['chunked not the last coding', post('Transfer-Encoding: chunked, gzip\r\n', '4\r\nabcd\r\n0\r\n\r\n'), 400],
    ['a coding the proxy does not speak', post('Transfer-Encoding: gzip, chunked\r\n', '4\r\nabcd\r\n0\r\n\r\n'), 501],
    ['two Transfer-Encoding lines', post('Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n', '4\r\nabcd\r\n0\r\n\r\n'), 501],
    ['a chunk size with 0x', post('Transfer-Encoding: chunked\r\n', `0x4\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`), 400, 'body'],
    ['a negative chunk size', post('Transfer-Encoding: chunked\r\n', `-1\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`), 400, 'body'],
    ['an overflowing chunk size', post('Transfer-Encoding: chunked\r\n', `fffffffffffffffffff\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`), 400, 'body'],
    ['a chunk size with a space', post('Transfer-Encoding: chunked\r\n', `4 \r\nabcd\r\n0\r\n\r\n${SMUGGLED}`), 400, 'body'],
    ['a bare LF in a chunk extension', post('Transfer-Encoding: chunked\r\n', `4;a\nb\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`), 400, 'body'],
    ['a chunk longer than its size', post('Transfer-Encoding: chunked\r\n', `2\r\nabcd\r\n0\r\n\r\n${SMUGGLED}`), 400, 'body'],
    ['two Host headers', `GET / HTTP/1.1\r\nHost: ${H}\r\nHost: evil.example\r\n\r\n`, 400],
    ['two Host headers, the foreign one first', `GET / HTTP/1.1\r\nHost: evil.example\r\nHost: ${H}\r\n\r\n`, 400],
  ];
  // Each case's target carries its number: a request the proxy forwarded can reach the upstream after
  // the client has its 400 (the upstream reads it on a later turn), so what the upstream saw is
  // told apart by case, and judged once the proxy has nothing left in flight.
  const tagged = (bytes: string, i: number): string => bytes.replace(/^(POST \/x|GET \/) /, (_m, start: string) => `${start}?case=${i} `);
  for (const [i, [name, bytes, status]] of cases.entries()) {
    const answer = await raw(plane.port, tagged(bytes, i));
    const allowed = Array.isArray(status) ? status : [status];
    t.ok(answer.statuses.length === 1 && allowed.includes(answer.statuses[0]!), `${name}: ${allowed.join(' or ')}, one answer (${answer.statuses.join(',')})`);
    t.ok(answer.closed, `${name}: connection closed`);
    t.match(answer.text, /"code":"(BAD_REQUEST|NOT_IMPLEMENTED)"/, `${name}: in the error shape`);
  }
  await waitFor(() => plane.runtime.dataplane.requestsInFlight === 0, 30_000, 'nothing in flight');
  await waitFor(() => up.seen.every((s) => s.closed), 30_000, 'every forwarded request to end');
  let forwarded = 0;
  for (const [i, [name, , , phase]] of cases.entries()) {
    const seen = up.seen.filter((s) => new URL(s.url, 'http://x').searchParams.get('case') === String(i));
    if (phase === 'body') {
      // The head was fine, so the request may have started upstream before its body went bad.
      t.ok(seen.length <= 1, `${name}: at most one request forwarded (${seen.length})`);
      if (seen.length === 1) {
        forwarded++;
        t.ok(seen[0]!.aborted, `${name}: and that one was cut, never completed`);
      }
    } else {
      t.equal(seen.length, 0, `${name}: nothing forwarded`);
    }
  }
  t.equal(up.seen.filter((s) => new URL(s.url, 'http://x').searchParams.get('case') === null).length, 0, 'every request the upstream saw is one of the cases');
  t.comment(`${cases.length} malformed requests sent, ${cases.length} answered 4xx/501 and closed, ${forwarded} started upstream (and cut)`);
  t.notOk(up.seen.some((s) => s.url === '/smuggled'), 'the smuggled request never reached the upstream');

  // The control: a well-framed pipelined pair is two requests, both answered, in order.
  const pair = await raw(plane.port, `${post('Transfer-Encoding: chunked\r\n', '4\r\nabcd\r\n0\r\n\r\n')}GET /second HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`);
  t.same(pair.statuses, [200, 200], 'a correctly framed pipelined pair: two answers');
});

t.test('a bad chunk in a body already streaming upstream: that request is cut, nothing spliced in', async (t) => {
  // Answers at once, before the request body ends (as a streaming app does).
  const eager = await startRecorder(t, (req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('streaming;');
    req.on('data', () => res.write('got;'));
    req.on('error', () => undefined);
    req.on('end', () => res.end('end'));
    return false;
  });
  // Waits for the whole body before answering.
  const patient = await startRecorder(t);
  for (const [name, up, answered] of [['the answer had started', eager, true], ['nothing was answered yet', patient, false]] as const) {
    const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
    await plane.ready();
    const answer = await raw(plane.port, [
      `POST /upload HTTP/1.1\r\nHost: ${H}\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n`,
      `zz\r\n${SMUGGLED}`,
    ], { gapMs: 300, waitMs: 30_000, ...(answered ? { before: (received: string) => received.includes('streaming;') } : {}) });
    t.ok(answer.closed, `${name}: the connection is closed`);
    t.equal(up.seen.length, 1, `${name}: the upstream saw one request`);
    t.equal(up.seen[0]?.url, '/upload');
    t.notOk(up.seen.some((s) => s.url === '/smuggled'), `${name}: never the smuggled one`);
    if (answered) {
      t.same(answer.statuses, [200], 'one status line: no 400 spliced into the answer under way');
      t.notMatch(answer.text, /bad request/);
    } else {
      t.same(answer.statuses, [400], 'a 400 when nothing was answered yet');
    }
    await waitFor(() => up.seen[0]?.closed === true, 30_000, `${name}: the upstream request to end`);
    t.ok(up.seen[0]?.aborted, `${name}: the upstream request was cut, not completed with a partial body`);
    t.equal(plane.runtime.dataplane.requestsInFlight, 0);
  }
});

t.test('oversized header blocks and request targets: 431 and 414', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const big = await raw(plane.port, `GET / HTTP/1.1\r\nHost: ${H}\r\nX-Big: ${'a'.repeat(70 * 1024)}\r\n\r\n`);
  t.same(big.statuses, [431], 'a 70 KiB header: 431');
  t.match(big.text, /"code":"HEADERS_TOO_LARGE"/);
  t.ok(big.closed);
  const many = await raw(plane.port, `GET / HTTP/1.1\r\nHost: ${H}\r\n${Array.from({ length: 3000 }, (_, i) => `X-H${i}: ${'v'.repeat(20)}\r\n`).join('')}\r\n`);
  t.same(many.statuses, [431], '3000 headers (~90 KiB): 431');
  const long = await raw(plane.port, `GET /${'a'.repeat(20 * 1024)} HTTP/1.1\r\nHost: ${H}\r\nConnection: close\r\n\r\n`);
  t.same(long.statuses, [414], 'a 20 KiB target: 414');
  t.match(long.text, /"code":"URI_TOO_LONG"/);
  const huge = await raw(plane.port, `GET /${'a'.repeat(70 * 1024)} HTTP/1.1\r\nHost: ${H}\r\n\r\n`);
  t.same(huge.statuses, [431], 'a 70 KiB target overflows the head: 431');
  t.equal(up.seen.length, 0, 'none forwarded');
  const fine = await raw(plane.port, `GET /${'a'.repeat(8 * 1024)} HTTP/1.1\r\nHost: ${H}\r\nX-Big: ${'b'.repeat(32 * 1024)}\r\nConnection: close\r\n\r\n`);
  t.same(fine.statuses, [200], 'an 8 KiB target with a 32 KiB header is served');
});
