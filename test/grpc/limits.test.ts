/**
 * The bounds the HTTP/2 code of src/grpc/ keeps against a peer that breaks the protocol, each against
 * a raw peer on a loopback socket (./fixtures.ts) or node:http2: DATA past the window of a stream we
 * reset (the client cancelling an answer too large, the server answering a call early) is
 * FLOW_CONTROL_ERROR on both sides; an answer's header list past 64 KiB resets that stream only,
 * with HPACK's table kept in step; the peer's SETTINGS_MAX_HEADER_LIST_SIZE is honoured when sending
 * (a request fails locally, a failure's message is left out); DATA on an idle stream is a
 * PROTOCOL_ERROR; a PING flood from a peer that does not read ends the connection, and PINGs to a
 * slow reader of a large answer do not.
 * Each case waits for the frame it expects or for a PING's ACK that proves the peer carried on.
 */
import t from 'tap';
import http2 from 'node:http2';
import { systemClock } from '../../src/deps.js';
import { encodeFields, HpackDecoder } from '../../src/grpc/hpack.js';
import { startUnaryServer } from '../../src/grpc/server.js';
import { Status, UnaryChannel, type UnaryResult } from '../../src/grpc/unary.js';
import { startH2Server, type TapLike } from '../helpers/harness.js';
import { dataFrames, F, fakeServer, rawClient, rawFrame, settingsFrame, T } from './fixtures.js';

const PATH = '/test.Echo/Call';
const FLOW_CONTROL_ERROR = 3;
const ENHANCE_YOUR_CALM = 0xb;

function channel(t: TapLike, port: number, maxResponseBytes = 1024): UnaryChannel {
  const ch = new UnaryChannel({ host: '127.0.0.1', port, tls: false, maxResponseBytes, clock: systemClock });
  t.teardown(() => ch.close());
  return ch;
}

const failure = (r: UnaryResult) => (r.ok ? { code: 0, message: `OK ${r.message.length} bytes`, timeout: false } : r);

t.test('client: DATA on a cancelled stream past the window it had left is FLOW_CONTROL_ERROR', async (t) => {
  const srv = await fakeServer(t, (peer) => {
    peer.send(settingsFrame());
    void (async () => {
      const h = await peer.next((f) => f.type === T.HEADERS);
      if (!h) return;
      // 2000 bytes of answer against a 1024-byte bound: the client cancels the stream.
      peer.send(rawFrame(T.HEADERS, F.END_HEADERS, h.id, Buffer.from([0x88])), rawFrame(T.DATA, 0, h.id, Buffer.alloc(2000)));
      if (!(await peer.next((f) => f.type === T.RST_STREAM && f.id === h.id))) return;
      // The stream had 1 MiB - 2000 bytes of window left; the peer sends past it.
      peer.send(dataFrames(h.id, (1 << 20) + 16_384));
      outcome = await peer.ping();
      peer.socket.end(); // the client closes too, whatever it did
    })();
  });
  let outcome = '';
  const r = failure(await channel(t, srv.port).call(PATH, Buffer.from('x'), 10_000));
  t.equal(r.code, Status.RESOURCE_EXHAUSTED);
  await srv.peers[0]!.whenClosed;
  t.equal(outcome, 'goaway', 'GOAWAY before the PING was answered');
  t.same(srv.peers[0]!.goAwayCodes(), [FLOW_CONTROL_ERROR]);
});

t.test('client: DATA within what a cancelled stream had left is ignored, the connection carries on', async (t) => {
  let outcome = '';
  const srv = await fakeServer(t, (peer) => {
    peer.send(settingsFrame());
    void (async () => {
      const h = await peer.next((f) => f.type === T.HEADERS);
      if (!h) return;
      peer.send(rawFrame(T.HEADERS, F.END_HEADERS, h.id, Buffer.from([0x88])), rawFrame(T.DATA, 0, h.id, Buffer.alloc(2000)));
      if (!(await peer.next((f) => f.type === T.RST_STREAM && f.id === h.id))) return;
      peer.send(dataFrames(h.id, (1 << 20) - 2000));
      outcome = await peer.ping();
      peer.socket.end();
    })();
  });
  await channel(t, srv.port).call(PATH, Buffer.from('x'), 10_000);
  await srv.peers[0]!.whenClosed;
  t.equal(outcome, 'ack');
  t.same(srv.peers[0]!.goAwayCodes(), []);
});

t.test('client: an answer header list above 64 KiB resets that stream only; HPACK stays in step', async (t) => {
  const long = 'x'.repeat(4000);
  const srv = await fakeServer(t, (peer) => {
    peer.send(settingsFrame());
    void (async () => {
      const first = await peer.next((f) => f.type === T.HEADERS);
      if (!first) return;
      // :status 200, grpc-status 0 (literal, new name), grpc-message of 4000 bytes added to the
      // table (index 62), then that entry indexed 19 more times: 20 x 4044 bytes of header list.
      const block = Buffer.concat([
        Buffer.from([0x88]),
        encodeFields([['grpc-status', '0']]),
        Buffer.from([0x40, 12]), Buffer.from('grpc-message'), literalLength(4000), Buffer.from(long),
        Buffer.alloc(19, 0xbe),
      ]);
      // A PING behind it: its ACK comes after anything the client answers to the block.
      peer.send(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, first.id, block), rawFrame(T.PING, 0, 0, Buffer.alloc(8)));
      const second = await peer.next((f) => f.type === T.HEADERS && f.id !== first.id);
      if (!second) return;
      // Trailers-only NOT_FOUND whose message is the table's entry 62: decoded only if the table kept it.
      peer.send(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, second.id, Buffer.concat([Buffer.from([0x88]), encodeFields([['grpc-status', '5']]), Buffer.from([0xbe])])));
    })();
  });
  const ch = channel(t, srv.port);
  const r = failure(await ch.call(PATH, Buffer.from('x'), 10_000));
  t.equal(r.code, Status.RESOURCE_EXHAUSTED, r.message.slice(0, 80));
  t.match(r.message, /answer header list above 65536 bytes/);
  const rst = await srv.peers[0]!.next((f) => f.type === T.RST_STREAM || (f.type === T.PING && (f.flags & F.ACK) !== 0));
  t.equal(rst?.type === T.RST_STREAM && rst.payload.readUInt32BE(0), ENHANCE_YOUR_CALM, 'RST_STREAM(ENHANCE_YOUR_CALM)');
  const r2 = failure(await ch.call(PATH, Buffer.from('y'), 10_000));
  t.equal(r2.code, 5);
  t.equal(r2.message, long, 'the next answer on the connection decodes against the same table');
  t.equal(srv.peers.length, 1, 'one connection');
});

/** An HPACK string length prefix (7-bit prefix, no Huffman). */
function literalLength(n: number): Buffer {
  const out = [0x7f];
  n -= 127;
  while (n >= 128) {
    out.push((n & 0x7f) | 0x80);
    n >>>= 7;
  }
  out.push(n);
  return Buffer.from(out);
}

t.test("client: a request above the server's SETTINGS_MAX_HEADER_LIST_SIZE fails locally, never sent", async (t) => {
  const seen: string[] = [];
  const srv = await startH2Server(
    t,
    (stream, headers) => {
      seen.push(String(headers[':path']));
      stream.on('error', () => undefined);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '0' }, { endStream: true });
    },
    { settings: { maxHeaderListSize: 1000 } },
  );
  const ch = channel(t, srv.port);
  // The first call learns the server's SETTINGS (before them the limit is unknown: unlimited).
  await ch.call(PATH, Buffer.from('warm'), 10_000);
  const longPath = `/test.Echo/${'M'.repeat(1000)}`;
  const r = failure(await ch.call(longPath, Buffer.from('x'), 10_000));
  t.equal(r.code, Status.INTERNAL);
  t.match(r.message, /request header list of \d+ bytes is above the server's SETTINGS_MAX_HEADER_LIST_SIZE of 1000/);
  t.equal(r.timeout, false);
  await ch.call(PATH, Buffer.from('after'), 10_000);
  t.same(seen, [PATH, PATH], 'the long request never reached the server; the connection carries on');
  t.equal(srv.connections(), 1);
});

t.test('client: DATA on an idle stream is PROTOCOL_ERROR', async (t) => {
  const srv = await fakeServer(t, (peer) => {
    peer.send(settingsFrame());
    void peer.next((f) => f.type === T.HEADERS).then((h) => h && peer.send(rawFrame(T.DATA, 0, 2, Buffer.from('x'))));
  });
  const r = failure(await channel(t, srv.port).call(PATH, Buffer.from('x'), 10_000));
  t.equal(r.code, Status.UNAVAILABLE);
  t.match(r.message, /DATA on idle stream 2/);
  await srv.peers[0]!.whenClosed;
  t.same(srv.peers[0]!.goAwayCodes(), [1]);
});

async function server(t: TapLike) {
  const s = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, async (req: Buffer) => req]]), maxMessageBytes: 1024 });
  t.teardown(() => s.close(100));
  return s.address.port;
}

const request = (path: string) =>
  encodeFields([[':method', 'POST'], [':scheme', 'http'], [':path', path], [':authority', 'x'], ['content-type', 'application/grpc']]);

t.test('server: DATA on a call answered early, past the window it had left, is FLOW_CONTROL_ERROR', async (t) => {
  const port = await server(t);
  for (const [extra, expect] of [[16_384, 'goaway'], [-16_384, 'ack']] as const) {
    const c = await rawClient(t, port);
    // An unknown method is answered at once, before the request ends: RST_STREAM(NO_ERROR) follows.
    c.send(settingsFrame(), rawFrame(T.HEADERS, F.END_HEADERS, 1, request('/no.Such/Method')));
    t.ok(await c.next((f) => f.type === T.RST_STREAM && f.id === 1), 'the call was answered and reset');
    c.send(dataFrames(1, (1 << 20) + extra));
    t.equal(await c.ping(), expect, `${extra > 0 ? 'past' : 'within'} the window`);
    t.same(c.goAwayCodes(), expect === 'goaway' ? [FLOW_CONTROL_ERROR] : []);
    c.socket.destroy();
  }
});

t.test("server: a failure honours the client's SETTINGS_MAX_HEADER_LIST_SIZE", async (t) => {
  const port = await server(t);
  const path = `/no.Such/${'m'.repeat(300)}`;
  const answer = async (limit: number) => {
    const c = await rawClient(t, port);
    c.send(settingsFrame([[6, limit]]), rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, request(path)));
    const f = await c.next((f) => (f.type === T.HEADERS || f.type === T.RST_STREAM) && f.id === 1);
    c.socket.destroy();
    if (!f || f.type === T.RST_STREAM) return f ? `RST_STREAM ${f.payload.readUInt32BE(0)}` : 'closed';
    const fields: string[] = [];
    new HpackDecoder().decode(f.payload, (n, v) => fields.push(`${n}: ${v.length > 40 ? `${v.slice(0, 20)}…(${v.length})` : v}`));
    return fields.join('; ');
  };
  t.match(await answer(100_000), /grpc-status: 12; grpc-message: unknown method/, 'room: the message is sent');
  t.equal(await answer(300), ':status: 200; content-type: application/grpc; grpc-status: 12', 'no room for the message: the status alone');
  t.equal(await answer(100), 'RST_STREAM 2', 'no room for the status: INTERNAL_ERROR');
});

t.test('server: PINGs from a client that does not read its answers end the connection', async (t) => {
  const port = await server(t);
  const c = await rawClient(t, port);
  c.send(settingsFrame());
  c.socket.pause();
  // 64 MiB of PINGs at most: the answers (as many bytes) cannot all wait in the socket buffers.
  const batch = Buffer.concat(Array.from({ length: 4096 }, () => rawFrame(T.PING, 0, 0, Buffer.alloc(8))));
  let sent = 0;
  while (!c.closed && sent < 64 << 20) {
    if (!c.send(batch)) await new Promise<void>((r) => {
      c.socket.once('drain', r);
      c.socket.once('close', r);
    });
    sent += batch.length;
  }
  if (!c.closed) c.socket.destroy();
  await c.whenClosed;
  t.ok(sent < 64 << 20, `the server closed the connection after ${(sent / 2 ** 20).toFixed(1)} MiB of PINGs`);
});

t.test('server: PINGs from a slow reader of a large answer are answered, the answer arrives whole', async (t) => {
  const big = Buffer.alloc(32 << 20, 0x62);
  const s = await startUnaryServer({ host: '127.0.0.1', port: 0, methods: new Map([[PATH, async () => big]]), maxMessageBytes: 1024 });
  t.teardown(() => s.close(100));
  const c = await rawClient(t, s.address.port);
  // Windows wide enough for the whole answer: it backs up in the server's socket, not in flow control.
  c.send(settingsFrame([[4, 2 ** 31 - 1]]), rawFrame(T.WINDOW_UPDATE, 0, 0, Buffer.from([0x7f, 0xff, 0, 0])));
  c.send(rawFrame(T.HEADERS, F.END_HEADERS, 1, request(PATH)), rawFrame(T.DATA, F.END_STREAM, 1, Buffer.from([0, 0, 0, 0, 1, 0x78])));
  await c.next((f) => f.type === T.HEADERS && f.id === 1);
  c.socket.pause(); // the answer has begun: most of its 32 MiB now waits in the server's socket
  for (let i = 0; i < 20; i++) c.send(rawFrame(T.PING, 0, 0, Buffer.from(`ping${String(i).padStart(4, '0')}`)));
  c.socket.resume();
  let acks = 0;
  const end = await c.next((f) => f.type === T.GOAWAY || (f.type === T.PING && (f.flags & F.ACK) !== 0 && ++acks === 20));
  t.equal(end?.type, T.PING, 'all 20 PINGs answered, no GOAWAY');
  const trailers = await c.next((f) => f.type === T.HEADERS && f.id === 1 && (f.flags & F.END_STREAM) !== 0);
  const body = c.frames.filter((f) => f.type === T.DATA && f.id === 1).reduce((n, f) => n + f.payload.length, 0);
  t.ok(trailers, 'the answer ended with its trailers');
  t.equal(body, big.length + 5, 'the whole answer');
});
