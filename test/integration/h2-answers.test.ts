/**
 * An HTTP/1.1 upstream's answers to HTTP/2 clients, frame by frame: the head goes out with the
 * stream's own `respond()` (src/proxy/respond-http2.ts), so an answer that cannot have trailers ends
 * with its last DATA frame (no empty one after it), a chunked answer's trailers still reach the
 * client, bodiless answers are one HEADERS frame, and fields the proxy adds with names Node's compat
 * layer would rewrite are sent by its rules. One plane for the file.
 */
import t from 'tap';
import http from 'node:http';
import http2 from 'node:http2';
import { ALIAS, records, startHttpServer, startPlane, waitFor } from '../helpers/harness.js';
import { connectH2, FRAME, get, headersFrame, type Frame } from '../security/fixtures.js';
import { respondHttp2 } from '../../src/proxy/respond-http2.js';

const HOST = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-west-2';
const END_STREAM = 0x1;

const upstream = await startHttpServer(t, (req, res) => {
  if (req.url === '/small') {
    res.writeHead(200, { 'content-length': '2', 'x-app': 'small' });
    res.end('ok');
  } else if (req.url === '/chunked-trailers') {
    res.writeHead(200, { trailer: 'x-sum' });
    res.write('a');
    res.addTrailers({ 'x-sum': '2' });
    res.end('b');
  } else if (req.url === '/chunked') {
    res.write('a');
    res.end('b');
  } else if (req.url === '/none') {
    res.writeHead(204).end();
  } else {
    res.writeHead(200, { 'content-length': String(30_000) });
    res.end(Buffer.alloc(30_000, 'x'));
  }
});
const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] } }));
await plane.ready();

/** The frames the proxy sent on `stream` once it ended (END_STREAM or RST_STREAM). */
async function framesOf(frames: Frame[], stream: number): Promise<Frame[]> {
  const mine = (): Frame[] => frames.filter((f) => f.stream === stream);
  await waitFor(() => mine().some((f) => (f.flags & END_STREAM && (f.type === FRAME.DATA || f.type === FRAME.HEADERS)) || f.type === FRAME.RST_STREAM), 10_000, `stream ${stream} ended`);
  return mine();
}

function h2get(session: http2.ClientHttp2Session, path: string): Promise<{ headers: http2.IncomingHttpHeaders; body: string; trailers: http2.IncomingHttpHeaders | undefined }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':path': path, ':authority': HOST, te: 'trailers' });
    let headers: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    let body = '';
    stream.setEncoding('latin1');
    stream.on('response', (h) => (headers = h));
    stream.on('trailers', (h) => (trailers = h));
    stream.on('data', (c: string) => (body += c));
    stream.on('end', () => resolve({ headers, body, trailers }));
    stream.on('error', reject);
  });
}

t.test('an answer that cannot have trailers ends with its last DATA frame', async (t) => {
  const raw = await connectH2(t, plane.port);
  raw.write(headersFrame(1, get(HOST, '/small')));
  const small = await framesOf(raw.frames, 1);
  t.same(small.map((f) => [f.type, f.flags & END_STREAM]), [[FRAME.HEADERS, 0], [FRAME.DATA, END_STREAM]], 'HEADERS, then DATA with END_STREAM');
  t.equal(small[1]!.payload.toString(), 'ok');

  raw.write(headersFrame(3, [[':method', 'HEAD'], [':scheme', 'http'], [':path', '/small'], [':authority', HOST]]));
  t.same((await framesOf(raw.frames, 3)).map((f) => [f.type, f.flags & END_STREAM]), [[FRAME.HEADERS, END_STREAM]], 'HEAD: one HEADERS frame');

  raw.write(headersFrame(5, get(HOST, '/none')));
  t.same((await framesOf(raw.frames, 5)).map((f) => [f.type, f.flags & END_STREAM]), [[FRAME.HEADERS, END_STREAM]], '204: one HEADERS frame');

  raw.write(headersFrame(7, get(HOST, '/larger')));
  const large = await framesOf(raw.frames, 7);
  t.equal(large.filter((f) => f.type === FRAME.DATA).reduce((n, f) => n + f.payload.length, 0), 30_000, "a larger body whole (within the raw client's first window: it grants no more)");
  t.equal(large.at(-1)!.type, FRAME.DATA);
  t.ok(large.at(-1)!.payload.length > 0, 'its last DATA frame carries bytes and ends the stream');
});

t.test('headers and trailers over a Node client', async (t) => {
  const session = http2.connect(plane.url);
  t.teardown(() => session.destroy());
  const small = await h2get(session, '/small');
  t.equal(small.headers[':status'], 200);
  t.equal(small.headers['x-app'], 'small');
  t.ok(small.headers.date, 'a Date field, as before');
  t.equal(small.body, 'ok');
  t.equal(small.trailers, undefined);

  const withTrailers = await h2get(session, '/chunked-trailers');
  t.equal(withTrailers.body, 'ab');
  t.equal(withTrailers.trailers?.['x-sum'], '2', "a chunked answer's trailers reach the client");

  // A chunked answer's stream waits for trailers (none here) and then ends.
  const chunked = await h2get(session, '/chunked');
  t.equal(chunked.body, 'ab', 'a chunked answer whole');
  t.equal(chunked.trailers?.['x-sum'], undefined);
});

t.test("fields the proxy adds with names the compat layer rewrites go out by the compat layer's rules", async (t) => {
  const server = http2.createServer((req, res) => {
    const headers: http.OutgoingHttpHeaders = { 'x-plain': '1' };
    if (req.url === '/odd') Object.assign(headers, { 'X-Upper': 'u', connection: 'keep-alive' });
    respondHttp2(res, res.stream, 201, headers, false, true);
    res.end('done');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const session = http2.connect(`http://127.0.0.1:${(server.address() as { port: number }).port}`);
  t.teardown(() => {
    session.destroy();
    server.close();
  });
  const plain = await new Promise<http2.IncomingHttpHeaders>((resolve) => session.request({ ':path': '/plain' }).on('response', resolve).resume());
  t.equal(plain[':status'], 201);
  t.equal(plain['x-plain'], '1');
  const odd = await new Promise<http2.IncomingHttpHeaders>((resolve) => session.request({ ':path': '/odd' }).on('response', resolve).resume());
  t.equal(odd[':status'], 201);
  t.equal(odd['x-upper'], 'u', 'lower-cased');
  t.equal(odd.connection, undefined, '`connection` dropped');
});
