/**
 * The RLS `RateLimitRequest` written straight into protobuf (envoy.service.ratelimit.v3): domain 1,
 * descriptors 2 (RateLimitDescriptor { entries 1 { key 1, value 2 }, limit 2 { requests_per_unit 1,
 * unit 2 } }), hits_addend 3 — the same bytes as proto-loader's serializer (test/grpc/codec.test.ts).
 */
import { ProtoWriter } from '../grpc/proto-writer.js';
import type { RateLimitRequest, Unit } from './proto.js';

const UNITS: Record<Unit, number> = { UNKNOWN: 0, SECOND: 1, MINUTE: 2, HOUR: 3, DAY: 4, MONTH: 5, YEAR: 6 };

export function encodeRateLimitRequest(request: RateLimitRequest): Buffer {
  const w = new ProtoWriter(256);
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
  if (request.hits_addend !== undefined) {
    w.uint(3, request.hits_addend);
  }
  return w.view();
}
