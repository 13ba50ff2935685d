/**
 * The filters' direct request encoders (src/grpc/codec.ts) write the same bytes as proto-loader's
 * serializer (fromObject, then encode) for the objects the filters build: an ext_authz CheckRequest
 * with and without a body (text and raw bytes), addresses, principals, a negative size and a
 * timestamp; and an RLS RateLimitRequest.
 */
import t from 'tap';
import { directEncoder } from '../../src/grpc/codec.js';
import { authWire, PROTO_DIR } from '../../src/extauth/proto.js';
import { PROTO_ROOT, serviceDefinition, type RateLimitRequest } from '../../src/ratelimit/proto.js';

t.test('CheckRequest: the same bytes as proto-loader', async (t) => {
  const encode = directEncoder<object>(PROTO_DIR, 'envoy/service/auth/v3/external_auth.proto', 'envoy.service.auth.v3.CheckRequest');
  const serialize = authWire().check.requestSerialize;
  const base = (http: Record<string, unknown>) => ({
    attributes: {
      source: { principal: 'spiffe://org/ns/gvc/w', certificate: '', address: { socket_address: { address: '10.1.2.3', port_value: 54321 } } },
      destination: { principal: '', certificate: '', address: { socket_address: { address: '127.0.0.1', port_value: 15006 } } },
      request: { time: { seconds: 1764130000, nanos: 123000000 }, http },
      context_extensions: {},
    },
  });
  const http = {
    id: 'req-1', method: 'POST', path: '/api/x?y=1', host: 'app.example', scheme: 'https', query: '', fragment: '', size: -1, protocol: 'HTTP/1.1',
    headers: { ':method': 'POST', ':path': '/api/x?y=1', ':authority': 'app.example', 'x-ünïcode': 'välue', 'x-envoy-auth-partial-body': 'false' },
  };
  for (const [name, request] of [
    ['no body', base(http)],
    ['text body', base({ ...http, size: 5, body: 'hello' })],
    ['raw body', base({ ...http, raw_body: Buffer.from([0, 1, 2, 255]) })],
    ['empty', { attributes: { source: { principal: '', certificate: '' }, destination: { principal: '', certificate: '' }, request: { time: { seconds: 0, nanos: 0 }, http: { headers: {} } }, context_extensions: {} } }],
  ] as const) {
    t.same(encode(request), serialize(request), name);
  }
});

t.test('RateLimitRequest: the same bytes as proto-loader', async (t) => {
  const encode = directEncoder<RateLimitRequest>(PROTO_ROOT, 'envoy/service/ratelimit/v3/rls.proto', 'envoy.service.ratelimit.v3.RateLimitRequest');
  const serialize = serviceDefinition().ShouldRateLimit!.requestSerialize;
  const request: RateLimitRequest = { domain: 'org/gvc/w', descriptors: [{ entries: [{ key: 'authority', value: 'app.example' }, { key: 'header', value: 'ü' }] }], hits_addend: 1 };
  t.same(encode(request), serialize(request));
});
