/**
 * Conformance of our minimal access-log protos (proto/envoy/service/accesslog, data/accesslog and the
 * core types they use) with Envoy's originals (shipped in @grpc/grpc-js-xds): every message, field
 * and enum value we declare has Envoy's name, number, type and label; the service path is Envoy's;
 * a full message we encode, Envoy's proto decodes to the same values.
 */
import t from 'tap';
import { compareWithEnvoy } from '../helpers/proto-conformance.js';
import { packageDefinition, streamMethod, SERVICE_NAME } from '../../src/accesslog/proto.js';
import { envoyAls } from '../accesslog/fixtures.js';

const ours = packageDefinition() as unknown as Record<string, unknown>;
const envoy = envoyAls() as unknown as Record<string, unknown>;

t.test('every message, field and enum value we declare is Envoy\'s', async (t) => {
  const checked = compareWithEnvoy(t, ours, envoy);
  t.ok(checked >= 10, `${checked} types compared`);
});

const envoyMethod = (envoy[SERVICE_NAME] as unknown as Record<string, ReturnType<typeof streamMethod>>).StreamAccessLogs!;

t.test('the service and method path are Envoy\'s', async (t) => {
  t.equal(streamMethod().path, '/envoy.service.accesslog.v3.AccessLogService/StreamAccessLogs');
  t.equal(envoyMethod.path, streamMethod().path);
  t.equal(envoyMethod.requestStream, true);
  t.equal(envoyMethod.responseStream, false);
});

t.test('a message we encode, Envoy decodes', async (t) => {
  const entry = {
    common_properties: {
      sample_rate: 1,
      downstream_remote_address: { socket_address: { address: '203.0.113.9', port_value: 0 } },
      downstream_direct_remote_address: { socket_address: { address: '127.0.0.1', port_value: 51000 } },
      downstream_local_address: { socket_address: { address: '127.0.0.1', port_value: 8080 } },
      start_time: { seconds: 1_760_000_000, nanos: 123_000_000 },
      time_to_last_rx_byte: { seconds: 0, nanos: 1_000_000 },
      time_to_first_upstream_tx_byte: { seconds: 0, nanos: 2_000_000 },
      time_to_first_upstream_rx_byte: { seconds: 0, nanos: 5_000_000 },
      time_to_first_downstream_tx_byte: { seconds: 0, nanos: 5_000_000 },
      time_to_last_downstream_tx_byte: { seconds: 0, nanos: 6_000_000 },
      upstream_remote_address: { socket_address: { address: '10.0.0.5', port_value: 8080 } },
      upstream_cluster: 'shop/api',
      response_flags: { upstream_connection_failure: true, upstream_retry_limit_exceeded: true, unauthorized_details: { reason: 'EXTERNAL_SERVICE' } },
      upstream_transport_failure_reason: 'connect-failure',
      route_name: 'api',
      duration: { seconds: 0, nanos: 6_000_000 },
      upstream_request_attempt_count: 3,
      tls_properties: {
        tls_version: 'TLSv1_3',
        tls_sni_hostname: 'api.example.com',
        local_certificate_properties: { subject_alt_name: [{ uri: 'spiffe://acme/gvc/shop/workload/api' }] },
        peer_certificate_properties: { subject_alt_name: [{ uri: 'spiffe://acme/gvc/shop/workload/web' }, { dns: 'web.example' }] },
      },
    },
    protocol_version: 'HTTP2',
    request: {
      request_method: 'PATCH', scheme: 'https', authority: 'api.example.com', path: '/v1/x?y=1', user_agent: 'ua', referer: 'r',
      forwarded_for: '203.0.113.9', request_id: 'id-1', request_headers_bytes: 120, request_body_bytes: 4096, request_headers: { 'x-tenant': 't' },
    },
    response: {
      response_code: { value: 503 }, response_headers_bytes: 40, response_body_bytes: 91,
      response_headers: { 'x-app': 'a' }, response_trailers: { 'grpc-status': '14' }, response_code_details: 'upstream_reset',
    },
  };
  const message = {
    identifier: { node: { id: 'api-0', cluster: 'api', locality: { region: 'aws-us-east-2' }, user_agent_name: 'svcproxy', user_agent_version: '0.1.0' }, log_name: 'edge' },
    http_logs: { log_entry: [entry, entry] },
  };
  const decoded = envoyMethod.requestDeserialize(streamMethod().requestSerialize(message as never)) as unknown as Record<string, any>;
  t.match(decoded.identifier, message.identifier);
  t.equal(decoded.log_entries, 'http_logs');
  t.equal(decoded.http_logs.log_entry.length, 2);
  const e = decoded.http_logs.log_entry[0];
  t.match(e.common_properties, {
    ...entry.common_properties,
    start_time: { seconds: '1760000000', nanos: 123_000_000 },
    time_to_last_rx_byte: { seconds: '0', nanos: 1_000_000 },
    time_to_first_upstream_tx_byte: { seconds: '0' },
    duration: { seconds: '0', nanos: 6_000_000 },
  });
  t.match(e.request, { ...entry.request, request_headers_bytes: '120', request_body_bytes: '4096' });
  t.match(e.response, { ...entry.response, response_headers_bytes: '40', response_body_bytes: '91' });
  t.equal(e.protocol_version, 'HTTP2');

  const later = envoyMethod.requestDeserialize(streamMethod().requestSerialize({ http_logs: { log_entry: [entry] } } as never)) as unknown as Record<string, any>;
  t.equal(later.identifier, null, 'a message without the identifier decodes without one');
});
