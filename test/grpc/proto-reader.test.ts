/**
 * The protobuf reader's varints (src/grpc/proto-reader.ts) against protobufjs (the decoder under
 * @grpc/proto-loader), seeded (the seed: fixed under CI, new in each local run, printed with every
 * failure; PROTO_SEED=n replays):
 * - random 64-bit values, spread over every magnitude with the 2^53..2^64 range and negative int64
 *   and int32 (ten-byte varints) well represented, encoded by protobufjs: int64, uint64, int32 and
 *   uint32 read the same values as protobufjs, and `varint()` is exact up to 2^53 - 1 and refuses
 *   anything above it with a ProtoError (it rounded before);
 * - random and mutated byte strings (over-long eleven-byte varints, ten-byte ones with bits past 64,
 *   truncated ones): accepted exactly when protobufjs accepts them, with the same values and the same
 *   number of bytes read;
 * - an unknown varint field above 2^53 is skipped, as protobufjs skips it.
 */
import t from 'tap';
import { createRequire } from 'node:module';
import { ProtoError, ProtoReader } from '../../src/grpc/proto-reader.js';
import { prng, testSeed } from '../helpers/seed.js';

const require = createRequire(import.meta.url);
const pb = require('protobufjs/minimal') as {
  Reader: { create(b: Uint8Array): PbReader };
  Writer: { create(): PbWriter };
  util: { Long: { fromString(s: string, unsigned?: boolean): unknown } };
};
interface PbReader {
  pos: number;
  int64(): { toString(): string };
  uint64(): { toString(): string };
  int32(): number;
  uint32(): number;
  skipType(wire: number): PbReader;
}
interface PbWriter {
  uint64(v: unknown): PbWriter;
  int32(v: number): PbWriter;
  uint32(v: number): PbWriter;
  finish(): Uint8Array;
}

const SEED = testSeed('PROTO_SEED', 20261127);
t.comment(`seed ${SEED} (PROTO_SEED=${SEED} replays)`);


const rand = prng(SEED);
const int = (n: number) => Math.floor(rand() * n);
/** A random unsigned 64-bit value of a random bit length (1..64), so every magnitude is tried. */
const u64 = (): bigint => {
  let v = 0n;
  for (let i = 0; i < 4; i++) v = (v << 16n) | BigInt(int(0x10000));
  return v >> BigInt(int(64));
};

/** What a reader gives for one varint, or the error's kind: ours and protobufjs's side by side. */
function ours(bytes: Uint8Array, read: 'int64' | 'uint64' | 'int32' | 'uint32' | 'varint'): string {
  const r = new ProtoReader(bytes);
  try {
    return `${String(r[read]())} @${r.pos}`;
  } catch (err) {
    if (!(err instanceof ProtoError)) throw err;
    return 'error';
  }
}

/**
 * protobufjs's reading. Its 32-bit readers take a shortcut: a varint longer than five bytes is taken
 * to be ten bytes long (a sign-extended negative), so on six to nine bytes they read past the varint
 * or throw, and they accept eleven. Protobuf's own decoders (C++, Go) read the whole varint and keep
 * its low 32 bits, and so do we: `int32` and `uint32` are compared with protobufjs's 64-bit reading,
 * cut to 32 bits (and with its 32-bit readers directly where the shortcut holds, `direct`).
 */
function theirs(bytes: Uint8Array, read: 'int64' | 'uint64' | 'int32' | 'uint32', direct = false): string {
  const r = pb.Reader.create(bytes);
  try {
    if (direct || read === 'int64' || read === 'uint64') return `${r[read]().toString()} @${r.pos}`;
    const v = BigInt(r.int64().toString());
    return `${read === 'int32' ? BigInt.asIntN(32, v) : BigInt.asUintN(32, v)} @${r.pos}`;
  } catch {
    return 'error';
  }
}

const varintOf = (v: bigint): Uint8Array => pb.Writer.create().uint64(pb.util.Long.fromString(BigInt.asUintN(64, v).toString(), true)).finish();
const READS = ['int64', 'uint64', 'int32', 'uint32'] as const;

t.test('random 64-bit values: int64, uint64, int32, uint32 as protobufjs reads them', async (t) => {
  const values: bigint[] = [0n, 1n, 2n ** 53n - 1n, 2n ** 53n, 2n ** 53n + 1n, 2n ** 63n - 1n, 2n ** 63n, 2n ** 64n - 1n, -1n, -(2n ** 31n), -(2n ** 63n)];
  for (let i = 0; i < 4000; i++) {
    const v = u64();
    values.push(i % 4 === 0 ? -v : v); // negatives: ten-byte varints
  }
  let wrong = 0;
  for (const v of values) {
    const bytes = varintOf(v);
    for (const read of READS) {
      const a = ours(bytes, read);
      const b = theirs(bytes, read);
      if (a !== b && wrong++ < 10) t.equal(a, b, `seed ${SEED}: ${read} of ${v} (${Buffer.from(bytes).toString('hex')})`);
      if ((read === 'int32' || read === 'uint32') && (bytes.length <= 5 || bytes.length === 10)) {
        const c = theirs(bytes, read, true);
        if (a !== c && wrong++ < 10) t.equal(a, c, `seed ${SEED}: ${read} of ${v}, protobufjs's 32-bit reader`);
      }
    }
    // varint(): exact up to 2^53 - 1, refused above.
    const u = BigInt.asUintN(64, v);
    const expect = u <= BigInt(Number.MAX_SAFE_INTEGER) ? `${u} @${bytes.length}` : 'error';
    const got = ours(bytes, 'varint');
    if (got !== expect && wrong++ < 10) t.equal(got, expect, `seed ${SEED}: varint of ${u}`);
  }
  // Negative int32s as protobufjs writes them (sign-extended to ten bytes).
  for (let i = 0; i < 1000; i++) {
    const v = -1 - int(2 ** 31);
    const bytes = pb.Writer.create().int32(v).finish();
    const a = ours(bytes, 'int32');
    if (a !== `${v} @10` && wrong++ < 10) t.equal(a, `${v} @10`, `seed ${SEED}: int32 ${v}`);
  }
  t.equal(wrong, 0, `${values.length} values x 5 readers and 1000 negative int32s agree`);
  const big = ours(varintOf(2n ** 60n), 'varint');
  t.equal(big, 'error');
  t.throws(() => new ProtoReader(varintOf(2n ** 60n)).varint(), /varint above 2\^53 - 1/, 'a clear error, not a rounded number');
});

t.test('random and mutated bytes: accepted exactly when protobufjs accepts, same value, same length', async (t) => {
  let wrong = 0;
  let rejected = 0;
  let lenient = 0;
  const cases = 20_000;
  for (let i = 0; i < cases; i++) {
    let bytes: Uint8Array;
    switch (int(4)) {
      case 0: {
        // A valid varint with a byte changed, cut short, or a byte added.
        const b = Buffer.from(varintOf(u64()));
        const at = int(b.length);
        const m = int(3);
        if (m === 0) b[at] = int(256);
        bytes = m === 1 ? b.subarray(0, at) : m === 2 ? Buffer.concat([b.subarray(0, at), Buffer.from([0x80 | int(128)]), b.subarray(at)]) : b;
        break;
      }
      case 1:
        // Ten to twelve bytes with continuation bits: ten-byte varints with bits past 64, over-long ones.
        bytes = Buffer.from(Array.from({ length: 10 + int(3) }, (_, k) => (k < 9 + int(3) ? 0x80 | int(128) : int(256))));
        break;
      default:
        bytes = Buffer.from(Array.from({ length: int(13) }, () => (rand() < 0.8 ? 0x80 | int(128) : int(128))));
    }
    for (const read of READS) {
      const a = ours(bytes, read);
      let b = theirs(bytes, read);
      // protobufjs reads a varint within four bytes of the buffer's end as four bytes long, whatever
      // its continuation bits and even past the end: a truncated varint it takes for a number. We
      // refuse it, as protobuf's C++ decoder does.
      const at = /@(\d+)$/.exec(b);
      const end = at ? Number(at[1]) : 0;
      if (at && (end > bytes.length || bytes[end - 1]! >= 0x80)) {
        b = 'error';
        lenient++;
      }
      if (a === 'error') rejected++;
      if (a !== b && wrong++ < 10) t.equal(a, b, `seed ${SEED}: ${read} of ${Buffer.from(bytes).toString('hex')}`);
    }
  }
  t.equal(wrong, 0, `${cases} byte strings x 4 readers agree (${rejected} rejections, ${lenient} of them truncated varints protobufjs reads)`);
  // The named edges.
  const eleven = Buffer.from('ffffffffffffffffffff01', 'hex');
  t.equal(ours(eleven, 'int64'), 'error', 'an eleven-byte varint is refused');
  t.equal(theirs(eleven, 'int64'), 'error', 'as protobufjs refuses it');
  const past64 = Buffer.from('ffffffffffffffffff7f', 'hex');
  t.equal(ours(past64, 'uint64'), theirs(past64, 'uint64'), 'bits past 64 of a ten-byte varint dropped, as protobufjs drops them');
});

t.test('an unknown varint field above 2^53 is skipped', async (t) => {
  // field 9 (varint) = 2^63 + 5, then field 1 (length-delimited) = "ok"
  const bytes = Buffer.concat([Buffer.from([9 << 3]), varintOf(2n ** 63n + 5n), Buffer.from([0x0a, 2]), Buffer.from('ok')]);
  const r = new ProtoReader(bytes);
  r.skip(r.key());
  const p = pb.Reader.create(bytes);
  p.uint32();
  p.skipType(0);
  t.equal(r.pos, p.pos, 'the same bytes skipped as protobufjs');
  t.equal(r.key(), 0x0a);
  t.equal(r.string(), 'ok');
});

t.test('bool: any varint but zero is true, whatever its size (as protobuf.js and C++ read it)', async (t) => {
  const cases: [string, number[], boolean][] = [
    ['0', [0x00], false],
    ['1', [0x01], true],
    ['2^32 (low 32 bits zero)', [0x80, 0x80, 0x80, 0x80, 0x10], true],
    ['2^63', [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01], true],
    ['zero in ten bytes', [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], false],
  ];
  for (const [name, bytes, want] of cases) t.equal(new ProtoReader(Buffer.from(bytes)).bool(), want, name);
  t.throws(() => new ProtoReader(Buffer.from([0x80])).bool(), ProtoError, 'truncated');
});
