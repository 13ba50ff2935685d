/**
 * A seeded raw-frame fuzz test of the HTTP/2 code of src/grpc/ (the seed: fixed under CI, new in
 * each local run, printed first and with every failure; FUZZ_SEED=n replays, FUZZ_CASES=n runs
 * longer, FUZZ_DEBUG=n prints the frames of client case n). A raw peer on a loopback socket
 * (./fixtures.ts) sends generated and mutated frames: valid ones (SETTINGS, PING, WINDOW_UPDATE,
 * HEADERS with CONTINUATION, DATA with padding, RST_STREAM, PRIORITY, GOAWAY), and truncated frames,
 * wrong lengths, bad padding, unknown types, frames on stream 0, on closed, idle and huge stream ids,
 * window overflows, DATA floods past the windows, CONTINUATION floods, SETTINGS with bad values and
 * HPACK garbage; to the unary client (the peer plays the server: two calls per case) and to the unary
 * server (the peer plays the client). Each case then sends a PING and ends its socket. What must hold:
 * - no crash and no uncaught exception (one would end the test file; the seed and case are printed);
 * - every call ends by an event (an answer, an error, the connection's end), never by its deadline,
 *   and every server connection closes once the peer has gone;
 * - memory bounded: the bytes a connection holds of the peer's input (an unfinished frame, a header
 *   block being continued) stay under one frame plus one header block, an answer's kept header text
 *   under the 64 KiB header list bound;
 * - the server still answers a real client after all the cases.
 */
import t from 'tap';
import { systemClock } from '../../src/deps.js';
import { H2Connection, MAX_HEADER_BLOCK } from '../../src/grpc/connection.js';
import { encodeFields } from '../../src/grpc/hpack.js';
import { RpcError, startUnaryServer } from '../../src/grpc/server.js';
import { grpcFrame, Status, UnaryChannel, type UnaryResult } from '../../src/grpc/unary.js';
import { F, fakeServer, rawClient, rawFrame, settingsFrame, T, u32, type RawPeer } from './fixtures.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('FUZZ_SEED', 20261127);
const CASES = Number(process.env.FUZZ_CASES ?? 150);
let current = 'setup';
t.comment(`seed ${SEED} (FUZZ_SEED=${SEED} replays)`);
process.on('uncaughtExceptionMonitor', (err) => console.error(`# fuzz seed ${SEED}, ${current}: uncaught ${err.stack}`));


// ---- what a connection holds, sampled after every read (test-only instrumentation) ---------------

const FRAME = 16_384;
let heldPeak = 0;
{
  const proto = H2Connection.prototype as unknown as { onData(chunk: Buffer): void };
  const onData = proto.onData;
  proto.onData = function (this: { inbox?: Buffer; continued?: { size: number } }, chunk: Buffer) {
    onData.call(this, chunk);
    heldPeak = Math.max(heldPeak, (this.inbox?.length ?? 0) + (this.continued?.size ?? 0));
  };
}
const HELD_BOUND = 9 + FRAME + MAX_HEADER_BLOCK + FRAME;

// ---- frames --------------------------------------------------------------------------------------

type Rand = ReturnType<typeof tools>;

function tools(rand: () => number) {
  const int = (n: number) => Math.floor(rand() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  const bytes = (n: number) => Buffer.from(Array.from({ length: n }, () => int(256)));
  return { rand, int, pick, bytes };
}

const RESPONSE_BLOCKS = [
  encodeFields([[':status', '200'], ['content-type', 'application/grpc']]),
  encodeFields([[':status', '200'], ['content-type', 'application/grpc'], ['grpc-status', '0']]),
  encodeFields([[':status', '200'], ['grpc-status', '13'], ['grpc-message', 'm'.repeat(300)]]),
  encodeFields([['grpc-status', '0']]),
  encodeFields([[':status', '100']]),
  encodeFields([[':status', '503']]),
  encodeFields([[':status', 'abc']]),
  Buffer.from([0x88, 0x40, 0x01, 0x61, 0x7f, 0x9a, 0x0a, ...Buffer.alloc(1000, 0x62), 0xbe, 0xbe, 0xbe]), // indexed, then referenced
];

const requestBlock = (path: string, timeout?: string) =>
  encodeFields([[':method', 'POST'], [':scheme', 'http'], [':path', path], [':authority', 'x'], ['content-type', 'application/grpc'], ...(timeout ? ([['grpc-timeout', timeout]] as const) : [])]);
const REQUEST_BLOCKS = [
  requestBlock('/fuzz.S/Echo'),
  requestBlock('/fuzz.S/Echo', '50m'),
  requestBlock('/fuzz.S/Never', '20m'),
  requestBlock('/fuzz.S/Never'),
  requestBlock('/fuzz.S/Fail'),
  requestBlock('/nope'),
  encodeFields([[':method', 'GET'], [':path', '/fuzz.S/Echo'], [':scheme', 'http']]),
  encodeFields([[':path', '/fuzz.S/Echo']]),
];

/** One frame, valid or broken, for a peer whose streams of interest are `ids`. */
function oneFrame(r: Rand, ids: readonly number[], blocks: readonly Buffer[]): Buffer {
  const id = () => (r.rand() < 0.8 ? r.pick(ids) : r.pick([0, 2, 4, 99, 0x7fffffff, 1 + 2 * r.int(50)]));
  const settings = () =>
    settingsFrame(Array.from({ length: r.int(4) }, () => [r.pick([1, 2, 3, 4, 5, 6, 7, 0x99]), r.pick([0, 1, 2, 100, 16_383, 16_384, 65_535, 2 ** 24, 2 ** 31 - 1, 2 ** 31, 2 ** 32 - 1])] as const));
  const block = () => (r.rand() < 0.85 ? r.pick(blocks) : r.bytes(1 + r.int(40)));
  switch (r.int(20)) {
    case 0:
      return settings();
    case 1:
      return rawFrame(T.SETTINGS, F.ACK, 0, r.rand() < 0.8 ? Buffer.alloc(0) : r.bytes(6));
    case 2:
      return rawFrame(T.PING, r.int(2), r.rand() < 0.9 ? 0 : 1, r.bytes(r.rand() < 0.9 ? 8 : r.int(12)));
    case 3:
      return rawFrame(T.WINDOW_UPDATE, 0, r.rand() < 0.5 ? 0 : id(), u32(r.pick([0, 1, 65_535, 2 ** 30, 2 ** 31 - 1, 2 ** 32 - 1])));
    case 4:
    case 5: {
      const b = block();
      const flags = F.END_HEADERS | (r.rand() < 0.5 ? F.END_STREAM : 0);
      return rawFrame(T.HEADERS, flags, id(), b);
    }
    case 6: {
      // A block split into HEADERS + CONTINUATION, sometimes interrupted or never ended.
      const b = block();
      const cut = r.int(b.length + 1);
      const parts = [rawFrame(T.HEADERS, r.rand() < 0.5 ? F.END_STREAM : 0, ids[0]!, b.subarray(0, cut))];
      const cont = rawFrame(T.CONTINUATION, r.rand() < 0.8 ? F.END_HEADERS : 0, r.rand() < 0.9 ? ids[0]! : id(), b.subarray(cut));
      parts.push(r.rand() < 0.9 ? cont : rawFrame(T.DATA, 0, ids[0]!, Buffer.from('x')));
      return Buffer.concat(parts);
    }
    case 7: {
      // A CONTINUATION flood: past the 64 KiB header block bound, or not.
      const n = r.pick([3, 5, 8]);
      const parts = [rawFrame(T.HEADERS, 0, ids[0]!, Buffer.alloc(100, 0xbe))];
      for (let i = 0; i < n; i++) parts.push(rawFrame(T.CONTINUATION, i === n - 1 && r.rand() < 0.3 ? F.END_HEADERS : 0, ids[0]!, r.bytes(FRAME)));
      return Buffer.concat(parts);
    }
    case 8:
    case 9: {
      const payload = r.rand() < 0.5 ? grpcFrame(r.bytes(r.int(40))) : r.bytes(r.pick([0, 1, 100, FRAME]));
      if (r.rand() < 0.3) {
        // Padded: a good pad length, or one past the frame.
        const pad = r.rand() < 0.7 ? r.int(20) : 255;
        return rawFrame(T.DATA, F.PADDED | (r.rand() < 0.5 ? F.END_STREAM : 0), id(), Buffer.concat([Buffer.from([pad]), payload, Buffer.alloc(Math.min(pad, 20))]));
      }
      return rawFrame(T.DATA, r.rand() < 0.4 ? F.END_STREAM : 0, id(), payload);
    }
    case 10: {
      // A DATA flood: up to past a stream window (1 MiB) on one stream.
      const frames: Buffer[] = [];
      const s = id();
      for (let n = r.pick([8, 70]); n > 0; n--) frames.push(rawFrame(T.DATA, 0, s, Buffer.alloc(FRAME)));
      return Buffer.concat(frames);
    }
    case 11:
      return rawFrame(T.RST_STREAM, 0, id(), u32(r.pick([0, 1, 7, 8, 2 ** 32 - 1])));
    case 12:
      return rawFrame(T.PRIORITY, 0, id(), r.bytes(r.rand() < 0.8 ? 5 : r.int(8)));
    case 13:
      return rawFrame(T.GOAWAY, 0, r.rand() < 0.9 ? 0 : 1, Buffer.concat([u32(r.pick([0, 1, 3, 2 ** 31 - 1])), u32(r.int(14)), r.bytes(r.int(10))]));
    case 14:
      return rawFrame(0x0a + r.int(0xf0), r.int(256), id(), r.bytes(r.int(30))); // unknown types
    case 15:
      return rawFrame(T.PUSH_PROMISE, F.END_HEADERS, id(), Buffer.concat([u32(2), r.pick(blocks)]));
    case 16: {
      // A frame whose length field lies (longer or shorter than what follows), or one above 16 KiB.
      const f = Buffer.from(oneFrame(r, ids, blocks));
      if (f.length < 9) return f;
      f.writeUIntBE(r.pick([0, 1, f.length, FRAME + 1, 2 ** 24 - 1]), 0, 3);
      return f;
    }
    case 17: {
      const f = oneFrame(r, ids, blocks);
      return f.subarray(0, r.int(f.length)); // truncated
    }
    case 18:
      return r.bytes(1 + r.int(30)); // garbage
    default:
      return rawFrame(T.HEADERS, F.END_HEADERS | F.PADDED | (r.rand() < 0.5 ? F.PRIORITY : 0), id(), Buffer.concat([Buffer.from([r.int(60)]), r.pick(blocks), Buffer.alloc(r.int(4))]));
  }
}

function script(r: Rand, ids: readonly number[], blocks: readonly Buffer[]): Buffer[] {
  return Array.from({ length: 1 + r.int(12) }, () => oneFrame(r, ids, blocks));
}

// ---- the client under fuzz -------------------------------------------------------------------------

t.test('the unary client against a fuzzing server', async (t) => {
  const r = tools(prng(SEED));
  let next: Buffer[] | undefined;
  const srv = await fakeServer(t, (peer) => {
    const frames = next;
    next = undefined;
    // A reconnect within the case (a call sent again elsewhere) finds a server that closes.
    if (!frames) return void peer.socket.end();
    void play(peer, frames);
  });
  async function play(peer: RawPeer, frames: Buffer[]): Promise<void> {
    if (r.rand() < 0.8) peer.send(settingsFrame());
    if (r.rand() < 0.7) await peer.next((f) => f.type === T.HEADERS);
    // The frames, a PING, and the end: a frame left unfinished may swallow the PING, and then only
    // the end tells the client that nothing more comes.
    for (const f of frames) peer.send(f);
    peer.send(rawFrame(T.PING, 0, 0, Buffer.alloc(8)));
    peer.socket.end();
  }
  let ended = 0;
  for (let c = 0; c < CASES; c++) {
    current = `client case ${c}`;
    heldPeak = 0;
    next = script(r, [1, 3], RESPONSE_BLOCKS);
    if (process.env.FUZZ_DEBUG === String(c)) for (const f of next) console.error('#', f.length, f.subarray(0, 40).toString('hex'));
    const ch = new UnaryChannel({ host: '127.0.0.1', port: srv.port, tls: false, maxResponseBytes: 1 << 20, clock: systemClock });
    const results: UnaryResult[] = await Promise.all([ch.call('/fuzz.S/A', Buffer.from('a'), 10_000), ch.call('/fuzz.S/B', Buffer.from('b'), 10_000)]);
    ch.close();
    for (const res of results) {
      if (!res.ok && res.timeout) t.fail(`seed ${SEED}, ${current}: a call ended only at its deadline (${res.message})`);
      else ended++;
      if (!res.ok && res.message.length > MAX_HEADER_BLOCK) t.fail(`seed ${SEED}, ${current}: a message of ${res.message.length} bytes kept`);
    }
    if (heldPeak > HELD_BOUND) t.fail(`seed ${SEED}, ${current}: ${heldPeak} bytes of input held`);
  }
  t.equal(ended, 2 * CASES, `${ended} calls ended by an event`);
});

// ---- the server under fuzz -------------------------------------------------------------------------

t.test('the unary server against a fuzzing client', async (t) => {
  const r = tools(prng(SEED ^ 0x9e3779b9));
  const methods = new Map([
    ['/fuzz.S/Echo', async (req: Buffer) => req],
    ['/fuzz.S/Never', () => new Promise<Buffer>(() => undefined)],
    ['/fuzz.S/Fail', async () => { throw new RpcError(Status.INVALID_ARGUMENT, 'no'); }],
  ]);
  const server = await startUnaryServer({ host: '127.0.0.1', port: 0, methods, maxMessageBytes: 1024 });
  t.teardown(() => server.close(100));
  let closed = 0;
  for (let c = 0; c < CASES; c++) {
    current = `server case ${c}`;
    heldPeak = 0;
    const peer = await rawClient(t, server.address.port);
    // rawClient sent the preface; now and then a broken one instead of frames.
    if (r.rand() < 0.03) peer.send(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
    if (r.rand() < 0.9) peer.send(settingsFrame());
    for (const f of script(r, [1, 3, 5], REQUEST_BLOCKS)) peer.send(f);
    peer.send(rawFrame(T.PING, 0, 0, Buffer.alloc(8)));
    peer.socket.end();
    // The server closes its side once ours is gone: a timer only to report a hang, never to pass.
    const hang = setTimeout(() => {
      t.fail(`seed ${SEED}, ${current}: the server kept the connection after the client left`);
      peer.socket.destroy();
    }, 10_000);
    await peer.whenClosed;
    clearTimeout(hang);
    closed++;
    if (heldPeak > HELD_BOUND) t.fail(`seed ${SEED}, ${current}: ${heldPeak} bytes of input held`);
  }
  t.equal(closed, CASES, `${closed} connections closed by the server after the client left`);
  current = 'after the server cases';
  const ch = new UnaryChannel({ host: '127.0.0.1', port: server.address.port, tls: false, maxResponseBytes: 1024, clock: systemClock });
  t.teardown(() => ch.close());
  const res = await ch.call('/fuzz.S/Echo', Buffer.from('still here'), 10_000);
  t.ok(res.ok && res.message.toString() === 'still here', 'the server still answers');
});

