/**
 * Access-log settings compiled per workload, table-style: GVC and workload entries, cluster
 * resolution (STATIC/STRICT_DNS socket addresses, a workload's cluster overriding the GVC's,
 * `google_grpc.target_uri`), `excludedWorkloads` in its name and link forms on entries and clusters,
 * batching defaults and durations, a cluster's TLS transport socket, and the notes for entries that
 * cannot be used.
 */
import t from 'tap';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { clusterTargets, clusterTls, compileAccessLogPlan, durationMs } from '../../src/accesslog/config.js';
import { responseFlags, duration } from '../../src/accesslog/entry.js';
import type { Exchange } from '../../src/proxy/exchange.js';
import { records } from '../helpers/harness.js';
import { accessLog, cluster } from './fixtures.js';
import { makePki } from '../fixtures/extauth/pki.js';

const pki = makePki();

function plan(gvcEnvoy: Record<string, unknown> | undefined, workloadEnvoy?: Record<string, unknown>, extra: Record<string, unknown>[] = []) {
  const recs = records({
    replicas: { 'aws-us-east-2': ['127.0.0.1:1'] },
    ...(gvcEnvoy ? { gvcSpec: { sidecar: { envoy: gvcEnvoy } } } : {}),
    ...(workloadEnvoy ? { workloadSpec: { sidecar: { envoy: workloadEnvoy } } } : {}),
    extra,
  });
  return compileAccessLogPlan(buildSnapshot(recs, defaultSettings));
}

t.test('durations and cluster addresses', async (t) => {
  t.equal(durationMs('1s'), 1000);
  t.equal(durationMs('0.25s'), 250);
  t.equal(durationMs({ seconds: 2, nanos: 500_000_000 }), 2500);
  t.equal(durationMs(undefined), undefined);
  t.same(clusterTargets(cluster('x', 9001)), ['127.0.0.1:9001']);
  t.same(clusterTargets({
    load_assignment: { endpoints: [
      { lb_endpoints: [{ endpoint: { address: { socket_address: { address: 'als.internal', port_value: '9001' } } } }, { endpoint: {} }] },
      { lb_endpoints: [{ endpoint: { address: { socket_address: { address: '::1', port_value: 9002 } } } }] },
    ] },
  }), ['als.internal:9001', '[::1]:9002']);
});

t.test('GVC entries apply to every workload; defaults; the workload\'s own entries', async (t) => {
  const p = plan({ accessLog: [accessLog('als')], clusters: [cluster('als', 9001)] });
  const [spec] = p.workloads.get('shop/api')!;
  t.match(spec, { logName: 'edge', targets: ['127.0.0.1:9001'], flushMs: 1000, bufferBytes: 16384, requestHeaders: [], workloadName: 'api' });
  t.same(p.notes, []);

  const own = plan(
    { clusters: [cluster('als', 9001)] },
    { accessLog: [accessLog('als', { logName: 'mine', flush: '250ms', bytes: 100, typed: { additional_request_headers_to_log: ['X-A'] } })], clusters: [cluster('als', 9009)] },
  );
  t.match(own.workloads.get('shop/api'), [{ logName: 'mine', targets: ['127.0.0.1:9009'], flushMs: 250, bufferBytes: 100, requestHeaders: ['x-a'] }], 'a workload cluster overrides the GVC\'s of the same name');

  const google = plan({ accessLog: [{ name: 'envoy.access_loggers.http_grpc', typed_config: { common_config: { log_name: 'g', grpc_service: { google_grpc: { target_uri: 'als:9000', stat_prefix: 'x' } } } } }] });
  t.match(google.workloads.get('shop/api'), [{ targets: ['als:9000'] }]);
});

t.test('excludedWorkloads', async (t) => {
  const web = { kind: 'workload', name: 'web', gvc: 'shop', spec: { type: 'standard', containers: [{ name: 'app', image: 'x', ports: [{ number: 80, protocol: 'http' }] }] } };
  for (const form of ['web', '//workload/web', '//gvc/shop/workload/web', '/org/acme/gvc/shop/workload/web']) {
    const p = plan({ accessLog: [accessLog('als', { excludedWorkloads: [form] })], clusters: [cluster('als', 1)] }, undefined, [web]);
    t.ok(p.workloads.has('shop/api') && !p.workloads.has('shop/web'), `entry excludes ${form}`);
  }
  const otherGvc = plan({ accessLog: [accessLog('als', { excludedWorkloads: ['//gvc/other/workload/web'] })], clusters: [cluster('als', 1)] }, undefined, [web]);
  t.ok(otherGvc.workloads.has('shop/web'), 'a link to another GVC\'s workload does not exclude this one');

  const byCluster = plan({ accessLog: [accessLog('als')], clusters: [cluster('als', 1, { excludedWorkloads: ['web'] })] }, undefined, [web]);
  t.ok(byCluster.workloads.has('shop/api'));
  t.notOk(byCluster.workloads.has('shop/web'), 'a cluster that excludes the workload does not resolve for it');
  t.match(byCluster.notes, [/shop\/web: no cluster "als"/]);
});

t.test('entries that cannot be used are noted and skipped', async (t) => {
  const p = plan({
    accessLog: [accessLog('missing'), accessLog('eds', { logName: 'e' }), accessLog('empty', { logName: 'x' }), { name: 'envoy.access_loggers.http_grpc', typed_config: { common_config: { log_name: 'n', grpc_service: {} } } }],
    clusters: [{ name: 'eds', type: 'EDS' }, { name: 'empty', type: 'STRICT_DNS', load_assignment: { endpoints: [] } }],
  });
  t.equal(p.workloads.size, 0);
  t.equal(p.notes.length, 4);
  t.match(p.notes.join('\n'), /no cluster "missing"[\s\S]*EDS[\s\S]*no load_assignment[\s\S]*no envoy_grpc/);
});

t.test('a cluster\'s TLS transport socket: sni and trusted_ca (file, inline, base64), or a note', async (t) => {
  const tls = (typed: Record<string, unknown>, name = 'envoy.transport_sockets.tls') => ({ transport_socket: { name, typed_config: typed } });
  const files: Record<string, string> = { '/ca.pem': 'PEM FROM FILE' };
  const read = (path: string): string => {
    if (!(path in files)) throw new Error('ENOENT: no such file');
    return files[path]!;
  };
  const cases: [string, Record<string, unknown>, unknown][] = [
    ['no transport socket: plaintext', {}, undefined],
    ['raw_buffer: plaintext', { transport_socket: { name: 'envoy.transport_sockets.raw_buffer' } }, undefined],
    ['tls without a context: public roots', tls({}), {}],
    ['sni and a CA file', tls({ sni: 'als.internal', common_tls_context: { validation_context: { trusted_ca: { filename: '/ca.pem' } } } }), { sni: 'als.internal', ca: 'PEM FROM FILE' }],
    ['inline CA', tls({ common_tls_context: { validation_context: { trusted_ca: { inline_string: 'INLINE' } } } }), { ca: 'INLINE' }],
    ['base64 CA', tls({ common_tls_context: { validation_context: { trusted_ca: { inline_bytes: Buffer.from('BYTES').toString('base64') } } } }), { ca: 'BYTES' }],
    ['another socket', tls({}, 'envoy.transport_sockets.alts'), { problem: /not supported/ }],
    ['a client certificate from SDS', tls({ common_tls_context: { tls_certificate_sds_secret_configs: [{ name: 'cert' }] } }), { problem: /from SDS .* not supported/ }],
    ['a client certificate without its key', tls({ common_tls_context: { tls_certificates: [{ certificate_chain: { inline_string: 'C' } }] } }), { problem: /needs both certificate_chain and private_key/ }],
    ['a CA from SDS', tls({ common_tls_context: { validation_context_sds_secret_config: { name: 'ca' } } }), { problem: /only common_tls_context.validation_context.trusted_ca/ }],
    ['an unreadable CA file', tls({ common_tls_context: { validation_context: { trusted_ca: { filename: '/nope.pem' } } } }), { problem: /cannot read trusted_ca "\/nope.pem": ENOENT/ }],
  ];
  for (const [name, c, expected] of cases) {
    if (expected && typeof expected === 'object' && 'problem' in expected) t.match(clusterTls(c, read), expected, name);
    else t.same(clusterTls(c, read), expected, name);
  }

  const recs = (transport: Record<string, unknown>) => records({
    replicas: { 'aws-us-east-2': ['127.0.0.1:1'] },
    gvcSpec: { sidecar: { envoy: { accessLog: [accessLog('als')], clusters: [cluster('als', 9001, transport)] } } },
  });
  const secure = compileAccessLogPlan(buildSnapshot(recs(tls({ sni: 'als.internal', common_tls_context: { validation_context: { trusted_ca: { filename: '/ca.pem' } } } })), defaultSettings), read);
  t.same(secure.workloads.get('shop/api')![0]!.tls, { sni: 'als.internal', ca: 'PEM FROM FILE' });
  const plain = compileAccessLogPlan(buildSnapshot(recs({}), defaultSettings), read);
  t.not(plain.workloads.get('shop/api')![0]!.key, secure.workloads.get('shop/api')![0]!.key, 'TLS settings are part of the stream\'s identity');
  const broken = compileAccessLogPlan(buildSnapshot(recs(tls({ common_tls_context: { validation_context: { trusted_ca: { filename: '/nope.pem' } } } })), defaultSettings), read);
  t.equal(broken.workloads.size, 0, 'never sent in plaintext instead');
  t.match(broken.notes, [/accessLog "edge" of shop\/api: cluster "als": transport_socket: cannot read trusted_ca "\/nope.pem".*; not logging/]);
});

t.test("a cluster's TLS client certificate: from files or inline, checked against its key", { skip: pki ? false : 'openssl not available' }, async (t) => {
  t.teardown(() => pki!.cleanup());
  const { client, rogue, server } = pki!;
  const tls = (certificate: Record<string, unknown>) => ({
    transport_socket: { name: 'envoy.transport_sockets.tls', typed_config: { common_tls_context: { tls_certificates: [certificate] } } },
  });
  const files: Record<string, string> = { '/client.pem': client.cert.toString(), '/client.key': client.key.toString() };
  const read = (path: string): string => {
    if (!(path in files)) throw new Error('ENOENT: no such file');
    return files[path]!;
  };
  const inline = (pem: Buffer) => ({ inline_string: pem.toString() });
  t.same(
    clusterTls(tls({ certificate_chain: { filename: '/client.pem' }, private_key: { filename: '/client.key' } }), read),
    { cert: client.cert.toString(), key: client.key.toString() },
    'chain and key from files',
  );
  t.same(
    clusterTls(tls({ certificate_chain: { inline_bytes: client.cert.toString('base64') }, private_key: inline(client.key) }), read),
    { cert: client.cert.toString(), key: client.key.toString() },
    'inline (bytes and string)',
  );
  const problems: [string, Record<string, unknown>, RegExp][] = [
    ['an unreadable key file', { certificate_chain: inline(client.cert), private_key: { filename: '/nope.key' } }, /cannot read tls_certificates\[0\]\.private_key "\/nope.key": ENOENT/],
    ["another certificate's key", { certificate_chain: inline(client.cert), private_key: inline(rogue.key) }, /private_key does not belong to the certificate/],
    ['a chain that is no certificate', { certificate_chain: { inline_string: 'not a pem' }, private_key: inline(client.key) }, /certificate_chain is not a PEM certificate/],
    ['a key that is no key', { certificate_chain: inline(server.cert), private_key: { inline_string: 'not a pem' } }, /private_key is not a PEM private key/],
  ];
  for (const [name, certificate, problem] of problems) t.match(clusterTls(tls(certificate), read), { problem }, name);

  const recs = (certificate: Record<string, unknown>) => records({
    replicas: { 'aws-us-east-2': ['127.0.0.1:1'] },
    gvcSpec: { sidecar: { envoy: { accessLog: [accessLog('als')], clusters: [cluster('als', 9001, tls(certificate))] } } },
  });
  const mine = compileAccessLogPlan(buildSnapshot(recs({ certificate_chain: inline(client.cert), private_key: inline(client.key) }), defaultSettings), read);
  const theirs = compileAccessLogPlan(buildSnapshot(recs({ certificate_chain: inline(server.cert), private_key: inline(server.key) }), defaultSettings), read);
  t.not(mine.workloads.get('shop/api')![0]!.key, theirs.workloads.get('shop/api')![0]!.key, "the client certificate is part of the stream's identity");
  const mismatched = compileAccessLogPlan(buildSnapshot(recs({ certificate_chain: inline(client.cert), private_key: inline(rogue.key) }), defaultSettings), read);
  t.equal(mismatched.workloads.size, 0, 'a certificate that cannot be used: not logging, never without it');
  t.match(mismatched.notes, [/cluster "als": transport_socket: tls_certificates\[0\]: private_key does not belong to the certificate; not logging/]);
});

t.test('response flags and durations of an entry', async (t) => {
  const ex = (errorCode: string | undefined, status: number, attempts = 1) => ({ errorCode, status, attempts }) as unknown as Exchange;
  const cases: [Exchange, string | undefined, unknown][] = [
    [ex(undefined, 200), undefined, undefined],
    [ex('NO_ROUTE', 404), undefined, { no_route_found: true }],
    [ex('NO_HEALTHY_UPSTREAM', 503), undefined, { no_healthy_upstream: true }],
    [ex('UPSTREAM_TIMEOUT', 504), undefined, { upstream_request_timeout: true }],
    [ex('UPSTREAM_RESET', 503, 3), 'connect-failure', { upstream_connection_failure: true, upstream_retry_limit_exceeded: true }],
    [ex('UPSTREAM_RESET', 503), 'reset', { upstream_remote_reset: true }],
    [ex('UPSTREAM_PROTOCOL_ERROR', 502), 'reset', { upstream_protocol_error: true }],
    [ex('UPSTREAM_PROTOCOL_ERROR', 502, 2), 'reset', { upstream_protocol_error: true, upstream_retry_limit_exceeded: true }],
    [ex('HTTP_VERSION_NOT_SUPPORTED', 505), undefined, { downstream_protocol_error: true }],
    [ex('RATE_LIMITED', 429), undefined, { rate_limited: true }],
    [ex('RATE_LIMIT_UNAVAILABLE', 503), undefined, { rate_limit_service_error: true }],
    [ex('AUTH_DENIED', 403), undefined, { unauthorized_details: { reason: 'EXTERNAL_SERVICE' } }],
    [ex('BAD_REQUEST', 400), undefined, { downstream_protocol_error: true }],
    [ex(undefined, 0), undefined, { downstream_connection_termination: true }],
  ];
  for (const [e, failure, flags] of cases) t.same(responseFlags(e, failure), flags, `${e.errorCode ?? 'none'} ${e.status}`);
  t.same(duration(1234.5678), { seconds: 1, nanos: 234_567_800 });
  t.same(duration(-5), { seconds: 0, nanos: 0 });
});
