/**
 * The RLS wire (envoy.service.ratelimit.v3) written out for the hot paths, without proto-loader's
 * intermediate message objects. The proxy's client writes `RateLimitRequest`s and decodes the
 * `RateLimitResponse`s; the rate-limit service decodes the requests and writes the responses. Decoding
 * gives the object proto-loader would give (keepCase, enums as names, longs as strings, defaults
 * filled in, unknown fields skipped). Written fields are in
 * field-number order and every field the object carries is written, as protobuf.js does: the same
 * bytes as proto-loader's serializer (test/grpc/codec.test.ts, test/ratelimit/wire.test.ts).
 */
import {
  DELIMITED_1, DELIMITED_2, DELIMITED_3, DELIMITED_4, VARINT_1, VARINT_2, VARINT_3,
  enumName, ProtoReader, readHeaderValue, readKeyValue,
} from '../grpc/proto-reader.js';
import { ProtoWriter } from '../grpc/proto-writer.js';
import type { Code, DescriptorStatus, HeaderValue, RateLimitDescriptor, RateLimitRequest, RateLimitResponse, Unit } from './proto.js';

/** `RateLimitUnit` names by number, and numbers by name. */
const UNIT_NAMES: readonly Unit[] = ['UNKNOWN', 'SECOND', 'MINUTE', 'HOUR', 'DAY', 'MONTH', 'YEAR'];
const UNITS = Object.fromEntries(UNIT_NAMES.map((name, n) => [name, n])) as Readonly<Record<Unit, number>>;
const CODES: Readonly<Record<Code, number>> = { UNKNOWN: 0, OK: 1, OVER_LIMIT: 2 };

/** RateLimitDescriptor { entries 1 { key 1, value 2 }, limit 2 { requests_per_unit 1, unit 2 } } */
function descriptor(r: ProtoReader): RateLimitDescriptor {
  const d: RateLimitDescriptor = { entries: [], limit: null };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) d.entries.push(readKeyValue(r.message()));
    else if (k === DELIMITED_2) {
      const l = r.message();
      const limit = { requests_per_unit: 0, unit: 'UNKNOWN' as Unit };
      while (!l.done) {
        const t = l.key();
        if (t === VARINT_1) limit.requests_per_unit = l.uint32();
        else if (t === VARINT_2) limit.unit = enumName(UNIT_NAMES, l.int32());
        else l.skip(t);
      }
      d.limit = limit;
    } else r.skip(k);
  }
  return d;
}

/**
 * RateLimitRequest { domain 1, descriptors 2, hits_addend 3 }: the proxy's check. `headroom`: bytes
 * left free in front of the message, which the result includes (room for the gRPC prefix).
 */
export function encodeRateLimitRequest(request: RateLimitRequest, headroom = 0): Buffer {
  const w = new ProtoWriter(256, headroom);
  w.string(1, request.domain);
  for (const d of request.descriptors) {
    const descriptor = w.begin(2);
    for (const e of d.entries) w.entry(1, e.key, e.value);
    if (d.limit) {
      const limit = w.begin(2);
      w.uint(1, d.limit.requests_per_unit);
      w.uint(2, UNITS[d.limit.unit] ?? 0);
      w.end(limit);
    }
    w.end(descriptor);
  }
  if (request.hits_addend !== undefined) w.uint(3, request.hits_addend);
  return w.view();
}

export function decodeRateLimitRequest(bytes: Uint8Array): RateLimitRequest {
  const r = new ProtoReader(bytes);
  const request: RateLimitRequest = { domain: '', descriptors: [], hits_addend: 0 };
  while (!r.done) {
    const k = r.key();
    if (k === DELIMITED_1) request.domain = r.string();
    else if (k === DELIMITED_2) request.descriptors.push(descriptor(r.message()));
    else if (k === VARINT_3) request.hits_addend = r.uint32();
    else r.skip(k);
  }
  return request;
}

function headerValue(w: ProtoWriter, field: number, h: HeaderValue): void {
  const start = w.begin(field);
  w.string(1, h.key);
  if (h.value !== undefined) w.string(2, h.value);
  if (h.raw_value !== undefined) w.bytes(3, h.raw_value);
  w.end(start);
}

/** DescriptorStatus { code 1, current_limit 2 { requests_per_unit 1, unit 2, name 3 }, limit_remaining 3, duration_until_reset 4 } */
function descriptorStatus(w: ProtoWriter, s: DescriptorStatus): void {
  const start = w.begin(2);
  w.uint(1, CODES[s.code]);
  if (s.current_limit) {
    const limit = w.begin(2);
    w.uint(1, s.current_limit.requests_per_unit);
    w.uint(2, UNITS[s.current_limit.unit]);
    if (s.current_limit.name !== undefined) w.string(3, s.current_limit.name);
    w.end(limit);
  }
  if (s.limit_remaining !== undefined) w.uint(3, s.limit_remaining);
  if (s.duration_until_reset) {
    const d = w.begin(4);
    w.int64(1, Number(s.duration_until_reset.seconds));
    if (s.duration_until_reset.nanos !== undefined) w.uint(2, s.duration_until_reset.nanos);
    w.end(d);
  }
  w.end(start);
}

export function encodeRateLimitResponse(response: RateLimitResponse): Buffer {
  const w = new ProtoWriter(256);
  w.uint(1, CODES[response.overall_code]);
  for (const s of response.statuses ?? []) descriptorStatus(w, s);
  for (const h of response.response_headers_to_add ?? []) headerValue(w, 3, h);
  for (const h of response.request_headers_to_add ?? []) headerValue(w, 4, h);
  return w.view();
}

const CODE_NAMES: readonly Code[] = ['UNKNOWN', 'OK', 'OVER_LIMIT'];

/** DescriptorStatus { code 1, current_limit 2 { requests_per_unit 1, unit 2, name 3 }, limit_remaining 3, duration_until_reset 4 { seconds 1, nanos 2 } } */
function decodeDescriptorStatus(r: ProtoReader): DescriptorStatus {
  const s: DescriptorStatus = { code: 'UNKNOWN', current_limit: null, limit_remaining: 0, duration_until_reset: null };
  while (!r.done) {
    const k = r.key();
    if (k === VARINT_1) s.code = enumName(CODE_NAMES, r.int32());
    else if (k === DELIMITED_2) {
      const l = r.message();
      const limit = { name: '', requests_per_unit: 0, unit: 'UNKNOWN' as Unit };
      while (!l.done) {
        const t = l.key();
        if (t === VARINT_1) limit.requests_per_unit = l.uint32();
        else if (t === VARINT_2) limit.unit = enumName(UNIT_NAMES, l.int32());
        else if (t === DELIMITED_3) limit.name = l.string();
        else l.skip(t);
      }
      s.current_limit = limit;
    } else if (k === VARINT_3) s.limit_remaining = r.uint32();
    else if (k === DELIMITED_4) {
      const d = r.message();
      const duration = { seconds: '0', nanos: 0 };
      while (!d.done) {
        const t = d.key();
        if (t === VARINT_1) duration.seconds = d.int64();
        else if (t === VARINT_2) duration.nanos = d.int32();
        else d.skip(t);
      }
      s.duration_until_reset = duration;
    } else r.skip(k);
  }
  return s;
}

/** RateLimitResponse { overall_code 1, statuses 2, response_headers_to_add 3, request_headers_to_add 4 }: the service's answer. */
export function decodeRateLimitResponse(bytes: Uint8Array): RateLimitResponse {
  const r = new ProtoReader(bytes);
  const response: Required<RateLimitResponse> = { overall_code: 'UNKNOWN', statuses: [], response_headers_to_add: [], request_headers_to_add: [] };
  while (!r.done) {
    const k = r.key();
    if (k === VARINT_1) response.overall_code = enumName(CODE_NAMES, r.int32());
    else if (k === DELIMITED_2) response.statuses.push(decodeDescriptorStatus(r.message()));
    else if (k === DELIMITED_3) response.response_headers_to_add.push(readHeaderValue(r.message()));
    else if (k === DELIMITED_4) response.request_headers_to_add.push(readHeaderValue(r.message()));
    else r.skip(k);
  }
  return response;
}
