/**
 * The filters' request encoders (src/extauth/encode.ts, src/ratelimit/wire.ts) write the same bytes
 * as proto-loader's serializer (fromObject, then encode) for the objects the filters build: an
 * ext_authz CheckRequest with and without a body (text and raw bytes), addresses, principals, a
 * negative size, a timestamp, non-ASCII and long values (nested lengths past one byte), many headers;
 * and RLS RateLimitRequests. Both decode back to the object. Encoded with room for the gRPC prefix
 * (the clients' way, the writer growing past its first buffer for the long ones) and the prefix put
 * in place, they are the same bytes as the message framed by copying.
 */
import t from 'tap';
import { encodeCheckRequest } from '../../src/extauth/encode.js';
import { encodeRateLimitRequest } from '../../src/ratelimit/wire.js';
import { GRPC_PREFIX, grpcFrame, prefixInPlace } from '../../src/grpc/unary.js';
import type { CheckRequestObject, HttpRequestObject } from '../../src/extauth/attributes.js';
import { authWire } from '../../src/extauth/proto.js';
import { serviceDefinition, type RateLimitRequest } from '../../src/ratelimit/proto.js';

t.test('CheckRequest: the same bytes as proto-loader', async (t) => {
  const wire = authWire().check;
  const base = (http: HttpRequestObject): CheckRequestObject => ({
    attributes: {
      source: { principal: 'spiffe://org/ns/gvc/w', certificate: '', address: { socket_address: { address: '10.1.2.3', port_value: 54321 } } },
      destination: { principal: '', certificate: '', address: { socket_address: { address: '127.0.0.1', port_value: 15006 } } },
      request: { time: { seconds: 1764130000, nanos: 123000000 }, http },
      context_extensions: {},
    },
  });
  const http: HttpRequestObject = {
    id: 'req-1', method: 'POST', path: '/api/x?y=1', host: 'app.example', scheme: 'https', query: '', fragment: '', size: -1, protocol: 'HTTP/1.1',
    headers: { ':method': 'POST', ':path': '/api/x?y=1', ':authority': 'app.example', 'x-ünïcode': 'välue', 'x-envoy-auth-partial-body': 'false' },
  };
  const many: Record<string, string> = {};
  for (let i = 0; i < 60; i++) many[`x-header-${i}`] = `value ${i} ${'v'.repeat(i * 3)}`;
  const cases: [string, CheckRequestObject][] = [
    ['no body', base(http)],
    ['text body', base({ ...http, size: 5, body: 'hello' })],
    ['raw body', base({ ...http, raw_body: Buffer.from([0, 1, 2, 255]) })],
    ['a long cookie, a long path, a large size', base({ ...http, size: 3_000_000_000, path: `/${'p'.repeat(300)}`, headers: { ...http.headers, cookie: 'c'.repeat(5000) } })],
    ['sixty headers', base({ ...http, headers: many })],
    ['non-ASCII past 127 characters', base({ ...http, headers: { 'x-text': 'ü'.repeat(200), 'x-emoji': '😀'.repeat(40) } })],
    ['a certificate', { attributes: { ...base(http).attributes, source: { principal: 'CN=client', certificate: `-----BEGIN%20CERTIFICATE-----%0A${'A'.repeat(1200)}`, address: { socket_address: { address: '::1', port_value: 0 } } } } }],
    ['context extensions', { attributes: { ...base(http).attributes, context_extensions: { a: '1', b: 'two' } } }],
    ...[-128, -4294967296, -4294967297, -9007199254740991].map((size): [string, CheckRequestObject] => [`size ${size}`, base({ ...http, size })]),
    ['empty', { attributes: { source: { principal: '', certificate: '' }, destination: { principal: '', certificate: '' }, request: { time: { seconds: 0, nanos: 0 }, http: { id: '', method: '', headers: {}, path: '', host: '', scheme: '', query: '', fragment: '', size: 0, protocol: '' } }, context_extensions: {} } }],
  ];
  for (const [name, request] of cases) {
    const bytes = encodeCheckRequest(request);
    t.same(bytes, wire.requestSerialize(request), name);
    const back = wire.requestDeserialize(bytes) as { attributes: { request: { http: { headers: Record<string, string> } } } };
    t.same(back.attributes.request.http.headers, request.attributes.request.http.headers, `${name}: headers decode back`);
    t.same(prefixInPlace(encodeCheckRequest(request, GRPC_PREFIX)), grpcFrame(bytes), `${name}: framed in place`);
  }
});

t.test('RateLimitRequest: the same bytes as proto-loader', async (t) => {
  const method = serviceDefinition().ShouldRateLimit!;
  const cases: [string, RateLimitRequest][] = [
    ['entries', { domain: 'org/gvc/w', descriptors: [{ entries: [{ key: 'authority', value: 'app.example' }, { key: 'header', value: 'ü' }] }], hits_addend: 1 }],
    ['several descriptors, no hits_addend', { domain: 'd', descriptors: [{ entries: [{ key: 'a', value: '1' }] }, { entries: [{ key: 'b', value: 'x'.repeat(400) }] }] }],
    ['a limit override', { domain: 'd', descriptors: [{ entries: [{ key: 'k', value: 'v' }], limit: { requests_per_unit: 1000, unit: 'MINUTE' } }], hits_addend: 3 }],
    ['no descriptors', { domain: '', descriptors: [] }],
  ];
  for (const [name, request] of cases) {
    const bytes = encodeRateLimitRequest(request);
    t.same(bytes, method.requestSerialize(request), name);
    t.match(method.requestDeserialize(bytes), { domain: request.domain }, `${name}: decodes back`);
    t.same(prefixInPlace(encodeRateLimitRequest(request, GRPC_PREFIX)), grpcFrame(bytes), `${name}: framed in place`);
  }
});
