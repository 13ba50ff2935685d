/**
 * The unary client's own HTTP/2 connection (src/grpc/session.ts, through UnaryChannel) against real
 * peers on port 0: node:http2 servers (nghttp2) for what a conforming server does that a small gRPC
 * answer never needs (flow control in both directions beyond the default windows, CONTINUATION frames,
 * HPACK's dynamic table with Huffman strings and evictions, SETTINGS_MAX_CONCURRENT_STREAMS, GOAWAY
 * with streams above its last id), and raw TCP servers for what no conforming server sends (a broken
 * header block, a peer that does not speak HTTP/2).
 */
import t from 'tap';
import http2 from 'node:http2';
import net from 'node:net';
import { systemClock } from '../../src/deps.js';
import { Status, UnaryChannel, type UnaryResult } from '../../src/grpc/unary.js';
import { startH2Server, type TapLike } from '../helpers/harness.js';

const PATH = '/test.Echo/Call';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const grpcFrame = (payload: Buffer): Buffer => {
  const b = Buffer.alloc(5 + payload.length);
  b.writeUInt32BE(payload.length, 1);
  payload.copy(b, 5);
  return b;
};

/** A node:http2 server whose handler gets the whole request message. */
function h2Server(t: TapLike, settings: http2.Settings, onCall: (stream: http2.ServerHttp2Stream, message: Buffer, session: http2.ServerHttp2Session) => void) {
  return startH2Server(
    t,
    (stream) => {
      stream.on('error', () => undefined);
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => onCall(stream, Buffer.concat(chunks).subarray(5), stream.session as http2.ServerHttp2Session));
    },
    { settings, maxSessionMemory: 64 },
  );
}

function ok(stream: http2.ServerHttp2Stream, reply: Buffer, trailers: Record<string, string> = { 'grpc-status': '0' }): void {
  stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
  stream.once('wantTrailers', () => stream.sendTrailers(trailers));
  stream.end(grpcFrame(reply));
}

function channel(t: TapLike, port: number, maxResponseBytes = 1024): UnaryChannel {
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes, clock: systemClock });
  t.teardown(() => ch.close());
  return ch;
}

const text = (r: UnaryResult): string => (r.ok ? r.message.toString() : `failed ${r.code}: ${r.message}`);

t.test('flow control: a request far above the server window, and answers above our stream window', async (t) => {
  // The server grants 1 KiB per stream: the 300 KiB request goes out as the WINDOW_UPDATEs allow.
  const srv = await h2Server(t, { initialWindowSize: 1024 }, (stream, message) => {
    ok(stream, message.length === 300 * 1024 ? Buffer.alloc(3 * 1024 * 1024 + 7, 0x61) : Buffer.from(`got ${message.length}`));
  });
  const ch = channel(t, srv.port, 4 * 1024 * 1024);
  const results = await Promise.all([1, 2, 3].map(() => ch.call(PATH, Buffer.alloc(300 * 1024, 0x62), 10_000)));
  for (const r of results) {
    t.ok(r.ok, r.ok ? 'answered' : text(r));
    // 3 MiB: three times our 1 MiB stream window, so our WINDOW_UPDATEs must have gone out.
    if (r.ok) t.equal(r.message.length, 3 * 1024 * 1024 + 7);
  }
  t.equal(srv.connections(), 1);
});

t.test('HPACK: Huffman strings and the dynamic table over many answers, with evictions', async (t) => {
  const printable = Array.from({ length: 95 }, (_, i) => String.fromCharCode(32 + i)).join('');
  const message = (n: number) => `${n}:${printable.slice(n % 95)}${printable.slice(0, n % 95)}`;
  // Every answer adds new header values (nghttp2 indexes them), so the 4 KiB table keeps evicting.
  const srv = await h2Server(t, {}, (stream, req) => {
    const n = Number(req.toString());
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', [`x-pad-${n % 7}`]: 'v'.repeat(300 + n), 'grpc-status': '5', 'grpc-message': encodeURIComponent(message(n)) }, { endStream: true });
  });
  const ch = channel(t, srv.port);
  for (let round = 0; round < 4; round++) {
    const ns = Array.from({ length: 50 }, (_, i) => round * 50 + i);
    const results = await Promise.all(ns.map((n) => ch.call(PATH, Buffer.from(String(n)), 5000)));
    const wrong = results.filter((r, i) => r.ok || r.code !== 5 /* NOT_FOUND */ || r.message !== message(ns[i]!));
    t.equal(wrong.length, 0, `round ${round}: every status and message decoded${wrong[0] ? ` (first wrong: ${text(wrong[0])})` : ''}`);
  }
});

t.test('CONTINUATION: a trailer block larger than a frame', async (t) => {
  const long = 'x'.repeat(40_000);
  const srv = await h2Server(t, {}, (stream) => ok(stream, Buffer.from('body'), { 'grpc-status': '3', 'grpc-message': long }));
  const ch = channel(t, srv.port);
  const r = await ch.call(PATH, Buffer.from('x'), 5000);
  t.notOk(r.ok);
  if (!r.ok) {
    t.equal(r.code, 3);
    t.equal(r.message, long);
  }
});

t.test('SETTINGS_MAX_CONCURRENT_STREAMS: calls beyond it wait for a free stream', async (t) => {
  let open = 0;
  let most = 0;
  const srv = await h2Server(t, { maxConcurrentStreams: 2 }, (stream, message) => {
    open++;
    most = Math.max(most, open);
    setTimeout(() => {
      open--;
      ok(stream, message);
    }, 5);
  });
  const ch = channel(t, srv.port);
  await ch.call(PATH, Buffer.from('warm'), 5000); // the server's SETTINGS are known from here on
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => ch.call(PATH, Buffer.from(String(i)), 5000)));
  t.same(results.map(text), Array.from({ length: 20 }, (_, i) => String(i)));
  t.equal(most, 2, 'never more than the server allowed');
});

t.test('GOAWAY with streams above its last id: those are sent again on a new connection', async (t) => {
  let first = true;
  const held: http2.ServerHttp2Stream[] = [];
  const srv = await h2Server(t, {}, (stream, message, session) => {
    if (!first) return ok(stream, Buffer.from(`new:${message}`));
    held.push(stream);
    if (held.length < 3) return;
    first = false;
    // Only the first stream will be processed: the other two were never seen, as far as the client knows.
    session.goaway(http2.constants.NGHTTP2_NO_ERROR, held[0]!.id!);
    ok(held[0]!, Buffer.from(`old:${held[0]!.id}`));
  });
  const ch = channel(t, srv.port);
  const results = await Promise.all(['a', 'b', 'c'].map((m) => ch.call(PATH, Buffer.from(m), 5000)));
  t.same(results.map(text), ['old:1', 'new:b', 'new:c']);
  t.equal(srv.connections(), 2);
});

/** A raw TCP server that answers the client's preface with `reply`, recording what it got. */
async function rawPeer(t: TapLike, reply: (socket: net.Socket) => void) {
  const got: Buffer[] = [];
  let firstClosed!: () => void;
  /** The first connection's end: everything the client sent on it has been read by then. */
  const closed = new Promise<void>((r) => (firstClosed = r));
  const server = net.createServer((socket) => {
    socket.on('data', (d) => got.push(d));
    socket.on('error', () => undefined);
    socket.on('close', () => firstClosed());
    socket.once('data', () => reply(socket));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => server.close());
  return { port: (server.address() as net.AddressInfo).port, got: () => Buffer.concat(got), closed };
}

const rawFrame = (type: number, flags: number, id: number, payload: Buffer): Buffer => {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(id, 5);
  return Buffer.concat([h, payload]);
};

/** GOAWAY frames in what the client sent: their error codes. */
function goAwayCodes(bytes: Buffer): number[] {
  const codes: number[] = [];
  let at = 24; // the preface
  while (at + 9 <= bytes.length) {
    const len = bytes.readUIntBE(at, 3);
    if (bytes[at + 3] === 7) codes.push(bytes.readUInt32BE(at + 13));
    at += 9 + len;
  }
  return codes;
}

t.test('a header block that does not decode: COMPRESSION_ERROR, the call fails, the next call reconnects', async (t) => {
  let connections = 0;
  const peer = await rawPeer(t, (socket) => {
    connections++;
    // SETTINGS, then HEADERS on stream 1 indexing entry 70 of an empty dynamic table.
    socket.write(Buffer.concat([rawFrame(4, 0, 0, Buffer.alloc(0)), rawFrame(1, 0x4, 1, Buffer.from([0x80 | 70]))]));
  });
  const ch = channel(t, peer.port);
  const r = await ch.call(PATH, Buffer.from('x'), 2000);
  t.notOk(r.ok);
  if (!r.ok) {
    t.equal(r.code, Status.UNAVAILABLE);
    t.match(r.message, /header block: index 70/);
    t.equal(r.timeout, false, 'at once, not at the deadline');
  }
  await peer.closed;
  t.same(goAwayCodes(peer.got()), [9], 'GOAWAY(COMPRESSION_ERROR) sent');
  await sleep(150); // past the first reconnect backoff
  await ch.call(PATH, Buffer.from('x'), 2000);
  t.equal(connections, 2, 'the next call opened a new connection');
});

t.test('a peer that does not speak HTTP/2: PROTOCOL_ERROR at once', async (t) => {
  const peer = await rawPeer(t, (socket) => socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n'));
  const ch = channel(t, peer.port);
  const r = await ch.call(PATH, Buffer.from('x'), 2000);
  t.notOk(r.ok);
  if (!r.ok) {
    t.equal(r.code, Status.UNAVAILABLE);
    t.equal(r.timeout, false);
  }
});

t.test('PUSH_PROMISE while push is off: PROTOCOL_ERROR', async (t) => {
  const peer = await rawPeer(t, (socket) => socket.write(Buffer.concat([rawFrame(4, 0, 0, Buffer.alloc(0)), rawFrame(5, 0x4, 1, Buffer.from([0, 0, 0, 2, 0x82]))])));
  const ch = channel(t, peer.port);
  const r = await ch.call(PATH, Buffer.from('x'), 2000);
  t.notOk(r.ok);
  await peer.closed;
  t.same(goAwayCodes(peer.got()), [1]);
});
