/**
 * Conformance of our minimal rate-limit protos (proto/envoy/...) with Envoy's originals (shipped in
 * @grpc/grpc-js-xds): every field we declare has Envoy's name, number, type and label, every enum
 * value Envoy's number; what our proto encodes, Envoy's decodes to the same message, and what Envoy's
 * encodes (with fields we leave out) our proto decodes without loss of what we read.
 */
import t from 'tap';
import { compareWithEnvoy } from '../helpers/proto-conformance.js';
import { packageDefinition, serviceDefinition, SERVICE_NAME } from '../../src/ratelimit/proto.js';
import { envoyRls } from '../fixtures/ratelimit/servers.js';

const ours = packageDefinition() as unknown as Record<string, unknown>;
const envoy = envoyRls() as unknown as Record<string, unknown>;

t.test('every message, field and enum value we declare is Envoy\'s', async (t) => {
  const checked = compareWithEnvoy(t, ours, envoy, { exactEnums: true });
  t.ok(checked >= 5, `${checked} types compared`);
});

const ourMethod = serviceDefinition().ShouldRateLimit!;
const envoyMethod = (envoy[SERVICE_NAME] as unknown as typeof serviceDefinition extends () => infer S ? S : never).ShouldRateLimit!;

t.test('the service and method path are Envoy\'s', async (t) => {
  t.equal(ourMethod.path, '/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit');
  t.equal(envoyMethod.path, ourMethod.path);
});

t.test('a request we encode, Envoy decodes', async (t) => {
  const request = {
    domain: 'edge',
    descriptors: [
      { entries: [{ key: 'authority', value: 'api.example.com' }, { key: 'path', value: '/v1' }] },
      { entries: [{ key: 'remote_address', value: '10.0.0.1' }], limit: { requests_per_unit: 7, unit: 'HOUR' } },
    ],
    hits_addend: 1,
  };
  const decoded = envoyMethod.requestDeserialize(ourMethod.requestSerialize(request)) as Record<string, unknown>;
  t.match(decoded, {
    domain: 'edge',
    hits_addend: 1,
    descriptors: [
      { entries: [{ key: 'authority', value: 'api.example.com' }, { key: 'path', value: '/v1' }], limit: null },
      { entries: [{ key: 'remote_address', value: '10.0.0.1' }], limit: { requests_per_unit: 7, unit: 'HOUR' } },
    ],
  });
  const back = ourMethod.requestDeserialize(envoyMethod.requestSerialize(decoded)) as Record<string, unknown>;
  t.match(back, request, 'and back');
});

t.test('a response: ours → Envoy\'s, and Envoy\'s (with fields we leave out) → ours', async (t) => {
  const response = {
    overall_code: 'OVER_LIMIT',
    statuses: [
      { code: 'OVER_LIMIT', current_limit: { requests_per_unit: 5, unit: 'SECOND', name: 'per-ip' }, limit_remaining: 0, duration_until_reset: { seconds: '1', nanos: 0 } },
      { code: 'OK', current_limit: null, limit_remaining: 0, duration_until_reset: null },
    ],
    response_headers_to_add: [{ key: 'x-a', value: '1', raw_value: Buffer.alloc(0) }],
    request_headers_to_add: [{ key: 'x-b', value: '', raw_value: Buffer.from('raw') }],
  };
  const inEnvoy = envoyMethod.responseDeserialize(ourMethod.responseSerialize(response)) as Record<string, unknown>;
  t.match(inEnvoy, {
    overall_code: 'OVER_LIMIT',
    statuses: [
      { code: 'OVER_LIMIT', current_limit: { requests_per_unit: 5, unit: 'SECOND', name: 'per-ip' }, limit_remaining: 0, duration_until_reset: { seconds: '1' } },
      { code: 'OK', current_limit: null },
    ],
    response_headers_to_add: [{ key: 'x-a', value: '1' }],
    request_headers_to_add: [{ key: 'x-b' }],
  });
  t.equal(Buffer.from((inEnvoy.request_headers_to_add as { raw_value: Buffer }[])[0]!.raw_value).toString(), 'raw');

  const full = {
    ...response,
    statuses: [{ ...response.statuses[0], quota: { requests: 3, valid_until: { seconds: '99', nanos: 0 }, id: 'q' } }],
    raw_body: Buffer.from('ignored'),
    dynamic_metadata: { fields: { k: { string_value: 'v' } } },
    quota: { requests: 1, id: 'x' },
  };
  const inOurs = ourMethod.responseDeserialize(envoyMethod.responseSerialize(full)) as Record<string, unknown>;
  t.match(inOurs, {
    overall_code: 'OVER_LIMIT',
    statuses: [{ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 5, unit: 'SECOND', name: 'per-ip' }, limit_remaining: 0, duration_until_reset: { seconds: '1' } }],
    response_headers_to_add: [{ key: 'x-a', value: '1' }],
  });
  t.notOk('raw_body' in inOurs, 'fields we leave out are skipped');
});
