/**
 * The rate-limit service's wire code (src/ratelimit/wire.ts) against proto-loader: requests decode
 * to the same objects (defaults, enum names, an enum number the proto does not name, unknown fields
 * of every wire type skipped, several descriptors, non-ASCII), malformed bytes are refused, and
 * responses encode to the same bytes (with and without a limit name, zero remaining, seconds as a
 * number or a string, headers to add with text or raw values), and responses decode as the proxy
 * needs them (large and negative durations, raw header values, fields of newer services skipped).
 */
import t from 'tap';
import { ProtoError } from '../../src/grpc/proto-reader.js';
import { ProtoWriter } from '../../src/grpc/proto-writer.js';
import { serviceDefinition, type RateLimitRequest, type RateLimitResponse } from '../../src/ratelimit/proto.js';
import { decodeRateLimitRequest, decodeRateLimitResponse, encodeRateLimitResponse } from '../../src/ratelimit/wire.js';

const method = serviceDefinition().ShouldRateLimit!;

t.test('requests decode to what proto-loader gives', async (t) => {
  const requests: [string, RateLimitRequest][] = [
    ['one entry', { domain: 'edge', descriptors: [{ entries: [{ key: 'remote_address', value: '10.0.0.1' }] }], hits_addend: 1 }],
    ['defaults', { domain: '', descriptors: [] }],
    ['several descriptors, non-ASCII, long values', { domain: 'dömain', descriptors: [{ entries: [{ key: 'a', value: 'ü'.repeat(300) }, { key: 'b', value: '' }] }, { entries: [] }] }],
    ['a limit override', { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: 4_000_000_000, unit: 'YEAR' } }], hits_addend: 7 }],
  ];
  for (const [name, request] of requests) {
    const bytes = method.requestSerialize(request);
    t.same(decodeRateLimitRequest(bytes), method.requestDeserialize(bytes), name);
  }
  // Fields a newer client may send (a descriptor's hits_addend wrapper, anything unknown): skipped.
  const w = new ProtoWriter(256);
  w.string(1, 'edge');
  w.fixed32(9, 0xdeadbeef);
  const d = w.begin(2);
  w.entry(1, 'k', 'v');
  const hits = w.begin(3);
  w.uint(1, 5);
  w.end(hits);
  const limit = w.begin(2);
  w.uint(1, 10);
  w.uint(2, 9); // a unit this proto does not name
  w.uint(7, 1);
  w.end(limit);
  w.double(8, 1.5);
  w.end(d);
  w.uint(3, 2);
  w.string(15, 'unknown');
  const odd = Buffer.from(w.view());
  t.same(decodeRateLimitRequest(odd), method.requestDeserialize(odd), 'unknown fields skipped, an unnamed enum number kept');
});

t.test('64-bit varints in 32-bit fields and negative enums decode as proto-loader reads them', async (t) => {
  const varint = (n: bigint): number[] => {
    const out: number[] = [];
    let v = BigInt.asUintN(64, n);
    do {
      out.push(Number(v & 0x7fn) | (v > 0x7fn ? 0x80 : 0));
      v >>= 7n;
    } while (v > 0n);
    return out;
  };
  const limit = [0x08, ...varint((1n << 60n) + 10n), 0x10, ...varint(-1n)];
  const entry = [0x0a, 1, 0x6b, 0x12, 1, 0x76];
  const descriptor = [0x0a, entry.length, ...entry, 0x12, limit.length, ...limit];
  const bytes = Buffer.from([0x0a, 1, 0x64, 0x12, descriptor.length, ...descriptor, 0x18, ...varint((1n << 58n) + 7n)]);
  // protobuf.js reads a uint32 varint longer than five bytes as ten bytes long (it throws here), so
  // the expectation is protobuf's C++ rule: a uint32 is the varint's low 32 bits.
  t.same(decodeRateLimitRequest(bytes), {
    domain: 'd',
    descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: 10, unit: -1 } }],
    hits_addend: 7,
  }, 'uint32 fields keep the low 32 bits; an enum of -1 stays -1');
  const onlyEnum = [0x10, ...varint(-1n)];
  const d2 = [0x0a, entry.length, ...entry, 0x12, onlyEnum.length, ...onlyEnum];
  const enumOnly = Buffer.from([0x0a, 1, 0x64, 0x12, d2.length, ...d2]);
  t.same(decodeRateLimitRequest(enumOnly), method.requestDeserialize(enumOnly), 'a negative enum (ten bytes) as proto-loader reads it');
});

t.test('malformed requests are refused', async (t) => {
  const good = method.requestSerialize({ domain: 'edge', descriptors: [{ entries: [{ key: 'k', value: 'value' }] }] });
  // Cut at a field boundary, the bytes are a shorter valid message; cut inside a field, refused.
  // (protobuf.js reads a cut string short instead of refusing it: proto-loader is the oracle only
  // for the bytes we accept.)
  let refused = 0;
  for (let cut = 1; cut < good.length; cut++) {
    const part = good.subarray(0, cut);
    let ours: RateLimitRequest;
    try {
      ours = decodeRateLimitRequest(part);
    } catch (err) {
      t.ok(err instanceof ProtoError, `cut after ${cut} of ${good.length} bytes: ${(err as Error).message}`);
      refused++;
      continue;
    }
    t.same(ours, method.requestDeserialize(part), `cut at a field boundary after ${cut} bytes: a shorter message`);
  }
  t.equal(refused, good.length - 2, 'every cut but the one after the domain (the message has two fields) is refused');
  t.throws(() => decodeRateLimitRequest(Buffer.from([0x0a, 0x04, 0x65])), ProtoError, 'a string shorter than its length');
  t.throws(() => decodeRateLimitRequest(Buffer.from([0x0b])), ProtoError, 'wire type 3 (groups)');
  t.throws(() => decodeRateLimitRequest(Buffer.from([0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01])), ProtoError, 'a varint over 10 bytes');
});

t.test('responses encode to the bytes proto-loader writes', async (t) => {
  const responses: [string, RateLimitResponse][] = [
    ['OK, one status', { overall_code: 'OK', statuses: [{ code: 'OK', current_limit: { requests_per_unit: 10, unit: 'MINUTE' }, limit_remaining: 9, duration_until_reset: { seconds: 40, nanos: 0 } }] }],
    ['over, a named limit, zero remaining, seconds as a string', { overall_code: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 1, unit: 'SECOND', name: 'per-ip' }, limit_remaining: 0, duration_until_reset: { seconds: '1', nanos: 0 } }, { code: 'OK' }] }],
    ['no statuses', { overall_code: 'OK', statuses: [] }],
    ['headers to add', { overall_code: 'OK', response_headers_to_add: [{ key: 'x-ratelimit-limit', value: '10' }], request_headers_to_add: [{ key: 'x-raw', raw_value: Buffer.from([1, 2, 255]) }] }],
  ];
  for (const [name, response] of responses) t.same(encodeRateLimitResponse(response), method.responseSerialize(response), name);
});

t.test('responses decode to what proto-loader gives (the proxy reading the service)', async (t) => {
  const responses: [string, Record<string, unknown>][] = [
    ['defaults', {}],
    ['OK, one status', { overall_code: 'OK', statuses: [{ code: 'OK', current_limit: { requests_per_unit: 10, unit: 'MINUTE' }, limit_remaining: 9, duration_until_reset: { seconds: 40, nanos: 5 } }] }],
    ['over, a named limit, several statuses', { overall_code: 'OVER_LIMIT', statuses: [{ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 4_000_000_000, unit: 'YEAR', name: 'pér-ip' }, limit_remaining: 0 }, { code: 'OK' }, {}] }],
    ['durations: large, negative', { overall_code: 'OK', statuses: [{ duration_until_reset: { seconds: '9007199254740993', nanos: 999_999_999 } }, { duration_until_reset: { seconds: '-3', nanos: -7 } }] }],
    ['headers to add, text and raw', { overall_code: 'OK', response_headers_to_add: [{ key: 'x-ratelimit-limit', value: '10' }, { key: 'x-empty' }], request_headers_to_add: [{ key: 'x-raw', raw_value: Buffer.from([1, 2, 255]) }] }],
  ];
  for (const [name, response] of responses) {
    const bytes = method.responseSerialize(response);
    t.same(decodeRateLimitResponse(bytes), method.responseDeserialize(bytes), name);
  }
  // What a newer service may add (raw_body 5, dynamic_metadata 6, quota 7, unknown enum numbers): skipped or kept as numbers.
  const w = new ProtoWriter(256);
  w.uint(1, 7);
  const status = w.begin(2);
  w.uint(1, 1);
  const limit = w.begin(2);
  w.uint(2, 12);
  w.fixed32(9, 1);
  w.end(limit);
  w.double(6, 0.5);
  w.end(status);
  w.bytes(5, Buffer.from('body'));
  const meta = w.begin(6);
  w.string(1, 'x');
  w.end(meta);
  w.uint(15, 3);
  const odd = Buffer.from(w.view());
  t.same(decodeRateLimitResponse(odd), method.responseDeserialize(odd), 'unknown fields skipped, unnamed enum numbers kept');
  const good = method.responseSerialize({ overall_code: 'OK', response_headers_to_add: [{ key: 'k', value: 'v' }] });
  t.throws(() => decodeRateLimitResponse(good.subarray(0, good.length - 1)), ProtoError, 'a header cut short is refused');
});
