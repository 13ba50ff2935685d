/**
 * The HPACK decoder (src/grpc/hpack.ts) against nghttp2, the HTTP/2 library inside node:http2, on
 * seeded generated and mutated input (the seed: fixed under CI, new in each local run, printed with
 * every failure; HPACK_SEED=n replays):
 * - generated: a node:http2 server answers random header lists (names and values of every printable
 *   and latin1 byte, repeated names, sensitive fields nghttp2 sends never-indexed, values long enough
 *   for CONTINUATION, trailers) and lowers the table size mid-connection; a raw client on a loopback
 *   socket (./fixtures.ts) decodes every block in wire order with one decoder per connection, and must
 *   get each list back exactly: nghttp2's encoder chooses Huffman, indexing and evictions itself;
 * - mutated: blocks nghttp2 wrote, with bytes flipped, cut or inserted, sent by a raw server to a
 *   node:http2 client: our decoder must reject a block (HpackError) exactly when nghttp2 ends the
 *   connection with COMPRESSION_ERROR.
 */
import t from 'tap';
import http2 from 'node:http2';
import { encodeFields, HpackDecoder, HpackError } from '../../src/grpc/hpack.js';
import { startH2Server, type TapLike } from '../helpers/harness.js';
import { F, fakeServer, rawClient, rawFrame, settingsFrame, T, type Frame, type RawPeer } from './fixtures.js';
import { prng, testSeed } from '../helpers/seed.js';

const SEED = testSeed('HPACK_SEED', 20261127);
/** Mutated blocks, each on a connection of its own (HPACK_MUTATIONS=n for a longer run). */
const CASES = Number(process.env.HPACK_MUTATIONS ?? 300);
t.comment(`seed ${SEED} (HPACK_SEED=${SEED} replays)`);


const TOKEN = 'abcdefghijklmnopqrstuvwxyz0123456789-_!#$%&\'*+.^`|~';
const COMMON = ['x-a', 'x-trace', 'cache-control', 'content-type', 'location', 'set-cookie', 'etag', 'vary', 'www-authenticate', 'grpc-message'];

const SINGLE = new Set(['date', 'cache-control', 'content-type', 'location', 'etag', 'grpc-message']);

type List = [string, string][];

function generator(rand: () => number) {
  const int = (n: number) => Math.floor(rand() * n);
  const value = (): string => {
    const len = rand() < 0.05 ? 2000 + int(20_000) : int(rand() < 0.5 ? 12 : 200);
    const kind = int(4);
    let s = '';
    for (let i = 0; i < len; i++) {
      // Printable ASCII mostly; tabs, latin1 bytes above 0x7f, and runs of one character (Huffman's short codes).
      if (kind === 0) s += 'aaaa0000'[int(8)];
      else s += String.fromCharCode(rand() < 0.9 ? 0x20 + int(95) : rand() < 0.5 ? 0x09 : 0x80 + int(128));
    }
    return s.trim() === s ? s : `v${s.trim()}v`;
  };
  const name = (): string => (rand() < 0.5 ? COMMON[int(COMMON.length)]! : `x-${Array.from({ length: 1 + int(20) }, () => TOKEN[int(TOKEN.length)]).join('')}`);
  const list = (): List => {
    const out: List = [['date', value()]];
    const n = int(rand() < 0.2 ? 40 : 8);
    // At most ~48 KiB: node:http2 refuses to send a header block above 64 KiB.
    let size = 0;
    for (let i = 0; i < n && size < 24_000; i++) {
      const f: [string, string] = [name(), value()];
      // node:http2 takes one value only for the fields HTTP defines so (etag, location, ...).
      if (SINGLE.has(f[0]) && out.some(([n]) => n === f[0])) continue;
      size += f[0].length + f[1].length;
      out.push(f);
    }
    return out;
  };
  return { int, list, value };
}

/** A node:http2 headers object for a list: repeated names become arrays (sent as one field each, in order). */
function toHeaders(list: List, status?: number): { headers: http2.OutgoingHttpHeaders; order: List } {
  const headers: http2.OutgoingHttpHeaders = status === undefined ? {} : { ':status': status };
  for (const [n, v] of list) {
    const had = headers[n];
    headers[n] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [String(had), v];
  }
  // Fields go out grouped by name in the order names first appear.
  const order: List = status === undefined ? [] : [[':status', String(status)]];
  for (const n of Object.keys(headers)) if (n !== ':status') for (const v of ([] as unknown[]).concat(headers[n])) order.push([n, String(v)]);
  return { headers, order };
}

/** Header blocks in wire order from the frames a raw peer received (HEADERS + CONTINUATION joined). */
function blocks(frames: readonly Frame[]): { id: number; block: Buffer }[] {
  const out: { id: number; block: Buffer }[] = [];
  let open: { id: number; parts: Buffer[] } | undefined;
  for (const f of frames) {
    if (f.type !== T.HEADERS && f.type !== T.CONTINUATION) continue;
    let p = f.payload;
    if (f.type === T.HEADERS) {
      let start = 0;
      let end = p.length;
      if (f.flags & F.PADDED) {
        start = 1;
        end -= p[0]!;
      }
      if (f.flags & F.PRIORITY) start += 5;
      p = p.subarray(start, end);
      open = { id: f.id, parts: [] };
    }
    open!.parts.push(p);
    if (f.flags & F.END_HEADERS) out.push({ id: open!.id, block: Buffer.concat(open!.parts) });
  }
  return out;
}

const request = (i: number) => encodeFields([[':method', 'GET'], [':scheme', 'http'], [':path', `/${i}`], [':authority', 'x']]);

t.test('generated: header lists nghttp2 encodes decode to the same lists', async (t) => {
  const g = generator(prng(SEED));
  const answers = new Map<string, { headers: List; trailers: List | undefined; sensitive: string[] }>();
  const srv = await startH2Server(t, (stream, headers) => {
    stream.on('error', () => undefined);
    const a = answers.get(String(headers[':path']))!;
    const { headers: h } = toHeaders(a.headers, 200);
    if (a.sensitive.length) (h as Record<symbol, unknown>)[http2.sensitiveHeaders] = a.sensitive;
    if (!a.trailers) return stream.respond(h, { endStream: true });
    stream.respond(h, { waitForTrailers: true });
    stream.once('wantTrailers', () => stream.sendTrailers(toHeaders(a.trailers!).headers));
    stream.end();
  });
  let checked = 0;
  for (let conn = 0; conn < 6; conn++) {
    const tableSize = [4096, 256, 0, 1000, 4096, 64][conn]!;
    answers.clear();
    const expected = new Map<number, List[]>();
    const n = 40;
    for (let i = 0; i < n; i++) {
      const headers = g.list();
      const more = g.int(3) === 0 ? g.list().slice(1) : [];
      const trailers = more.length > 0 ? more : undefined; // no trailer fields: no trailer block
      const sensitive = headers.filter(() => g.int(6) === 0).map(([n]) => n);
      answers.set(`/${i}`, { headers, trailers, sensitive });
      const lists = [toHeaders(headers, 200).order];
      if (trailers) lists.push(toHeaders(trailers).order);
      expected.set(2 * i + 1, lists);
    }
    const c = await rawClient(t, srv.port);
    c.send(settingsFrame([[1, tableSize]]));
    const sendRange = (from: number, to: number) => {
      for (let i = from; i < to; i++) c.send(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 2 * i + 1, request(i)));
    };
    sendRange(0, n / 2);
    await lastAnswers(c, n / 2);
    // The table lowered mid-connection: nghttp2 starts its next block with a size update.
    const lower = Math.floor(tableSize / 2);
    c.send(settingsFrame([[1, lower]]));
    sendRange(n / 2, n);
    await lastAnswers(c, n);
    const d = new HpackDecoder(tableSize);
    const got = new Map<number, List[]>();
    for (const { id, block } of blocks(c.frames)) {
      const list: List = [];
      try {
        d.decode(block, (name, value) => list.push([name, value]));
      } catch (err) {
        t.fail(`seed ${SEED}, connection ${conn}, stream ${id}: ${(err as Error).message}`);
        break;
      }
      got.set(id, [...(got.get(id) ?? []), list]);
    }
    for (const [id, lists] of expected) {
      const same = JSON.stringify(got.get(id)) === JSON.stringify(lists);
      if (!same) t.same(got.get(id), lists, `seed ${SEED}, connection ${conn} (table ${tableSize}), stream ${id}`);
      else checked += lists.length;
    }
    c.socket.destroy();
  }
  t.ok(checked > 200, `${checked} header blocks decoded as sent`);
});

/**
 * Wait until the answers (and trailers) of the first `n` streams have ended. A block that ends the
 * stream may go on in CONTINUATION frames: the stream has ended once that block's END_HEADERS came.
 */
async function lastAnswers(c: RawPeer, n: number): Promise<void> {
  const ended = new Set<number>();
  const endingBlock = new Set<number>();
  await c.next((f) => {
    if (f.type === T.HEADERS && f.flags & F.END_STREAM && !(f.flags & F.END_HEADERS)) endingBlock.add(f.id);
    else if (f.type === T.CONTINUATION && f.flags & F.END_HEADERS && endingBlock.delete(f.id)) ended.add(f.id);
    else if (((f.type === T.HEADERS || f.type === T.DATA) && f.flags & F.END_STREAM) || f.type === T.RST_STREAM) ended.add(f.id);
    return ended.size >= n;
  }, 0);
}

/** A block mutated: bytes flipped, cut short, inserted, or a random one from scratch. */
function mutate(rand: () => number, block: Buffer): Buffer {
  const int = (n: number) => Math.floor(rand() * n);
  const b = Buffer.from(block);
  switch (int(5)) {
    case 0:
      for (let k = 1 + int(3); k > 0 && b.length; k--) b[int(b.length)] ^= 1 << int(8);
      return b;
    case 1:
      return b.subarray(0, int(b.length));
    case 2: {
      const at = int(b.length + 1);
      return Buffer.concat([b.subarray(0, at), Buffer.from(Array.from({ length: 1 + int(4) }, () => int(256))), b.subarray(at)]);
    }
    case 3:
      b[int(b.length)] = [0x80, 0xff, 0x7f, 0x3f, 0x20, 0x1f, 0x0f, 0x00][int(8)]!;
      return b;
    default:
      return Buffer.from(Array.from({ length: 1 + int(24) }, () => int(256)));
  }
}

t.test('mutated: our decoder rejects a block exactly when nghttp2 does', async (t) => {
  const rand = prng(SEED ^ 0x5eed);
  const g = generator(rand);
  // Blocks nghttp2 wrote for a fresh connection (table empty, 4096 bytes), to mutate.
  const seeds: Buffer[] = [];
  const src = await startH2Server(t, (stream) => {
    stream.on('error', () => undefined);
    stream.respond(toHeaders(g.list().map(([n, v]) => [n, v.slice(0, 60)] as [string, string]), 200).headers, { endStream: true });
  });
  for (let i = 0; i < 10; i++) {
    const c = await rawClient(t, src.port);
    c.send(settingsFrame(), rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, 1, request(i)));
    await c.next((f) => f.type === T.HEADERS && (f.flags & F.END_STREAM) !== 0);
    seeds.push(...blocks(c.frames).map((b) => b.block));
    c.socket.destroy();
  }
  // Each mutated block goes to a node:http2 client as the answer to its request, on a connection of its own.
  let block: Buffer = Buffer.alloc(0);
  let arrived: (peer: RawPeer) => void = () => undefined;
  const srv = await fakeServer(t, (peer) => {
    const mine = block;
    arrived(peer);
    peer.send(settingsFrame());
    void peer.next((f) => f.type === T.HEADERS).then((h) => {
      if (h) peer.send(rawFrame(T.HEADERS, F.END_HEADERS | F.END_STREAM, h.id, mine), rawFrame(T.PING, 0, 0, Buffer.alloc(8)));
    });
  });
  let agreed = 0;
  let rejected = 0;
  // The edges first: the RFC's decoding errors and the limits decoders choose themselves.
  const value127 = 'v'.repeat(127);
  const edges = [
    '88', '80', 'be', '3fe11f', '3fe21f', '20', '2088', '8820', '3f00', '0f', '4085', '008100', '0081ff', '0082ffff', '0084ffffffff',
    `01ff80808080800${'0'}${Buffer.from(value127).toString('hex')}`, // a length with redundant continuation bytes (127 + 0)
    `01ff8080800${'0'}${Buffer.from(value127).toString('hex')}`,
    'ffffffffff0f', 'ff808080808000', '7fffffffff0f', '01ffffffffff0f',
  ].map((hex) => Buffer.from(hex, 'hex'));
  const total = edges.length + CASES;
  for (let i = 0; i < total; i++) {
    block = i < edges.length ? edges[i]! : mutate(rand, seeds[i % seeds.length]!);
    let ours = 'accepted';
    try {
      new HpackDecoder().decode(block, () => undefined);
    } catch (err) {
      if (!(err instanceof HpackError)) throw err;
      ours = 'rejected';
    }
    const peer = new Promise<RawPeer>((resolve) => (arrived = resolve));
    const client = http2.connect(`http://127.0.0.1:${srv.port}`);
    client.on('error', () => undefined);
    const req = client.request({ ':path': '/' });
    req.on('error', () => undefined);
    req.resume();
    // nghttp2 answers the PING behind the block only if the block did not end the connection.
    const f = await (await peer).next((f) => f.type === T.GOAWAY || (f.type === T.PING && (f.flags & F.ACK) !== 0));
    const theirs = f === undefined ? 'closed' : f.type === T.GOAWAY ? (f.payload.readUInt32BE(4) === 9 ? 'rejected' : `GOAWAY ${f.payload.readUInt32BE(4)}`) : 'accepted';
    client.destroy();
    if (ours !== theirs) t.equal(ours, theirs, `seed ${SEED}, case ${i}: block ${block.toString('hex')}`);
    else agreed++;
    if (ours === 'rejected') rejected++;
  }
  t.equal(agreed, total, `${agreed} of ${total} agreed (${rejected} rejected by both)`);
});
