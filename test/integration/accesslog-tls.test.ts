/**
 * The access-log service over TLS, against a real gRPC server built from Envoy's accesslog protos
 * serving a certificate of a throw-away CA: a cluster's `envoy.transport_sockets.tls` with the CA as
 * a file or inline, and an `sni` the certificate must carry; a certificate that does not verify (no
 * CA given, so the public roots; a wrong `sni`; another CA) is a failed stream, counted and retried,
 * and never falls back to plaintext. A server that requires a client certificate gets the
 * cluster's `tls_certificates`; without one, or with one it does not trust, the stream fails.
 * Skipped where openssl is missing.
 */
import t from 'tap';
import { Registry } from 'prom-client';
import { buildSnapshot, defaultSettings } from '../../src/config/index.js';
import { createTelemetry } from '../../src/tracing/index.js';
import { silentLogger } from '../../src/log.js';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, type TapLike } from '../helpers/harness.js';
import { accessLog, cluster, startAlsServer, waitUntil } from '../accesslog/fixtures.js';
import { makePki } from '../fixtures/extauth/pki.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';
const TLS_CONTEXT = 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext';

const pki = makePki();

function tlsSocket(typed: Record<string, unknown>): Record<string, unknown> {
  return { transport_socket: { name: 'envoy.transport_sockets.tls', typed_config: { '@type': TLS_CONTEXT, ...typed } } };
}

async function plane(t: TapLike, alsPort: number, transport: Record<string, unknown>) {
  const upstream = await startHttpServer(t, echoHandler('app'));
  const recs = records({
    replicas: { [LOCATION]: [`127.0.0.1:${upstream.port}`] },
    gvcSpec: { sidecar: { envoy: { accessLog: [accessLog('als', { flush: '0.05s' })], clusters: [cluster('als', alsPort, transport)] } } },
  });
  const registry = new Registry();
  const telemetry = await createTelemetry(buildSnapshot(recs, defaultSettings), {
    role: 'ingress', logger: silentLogger(), registry, accessLog: { reconnectInitialMs: 50, reconnectMaxMs: 200, connectTimeoutMs: 1000 },
  });
  const started = await startPlane(t, recs, { telemetry });
  await started.ready();
  return { ...started, registry };
}

/** `svcproxy_accesslog_stream_failures_total` once it is above 0, or 0 after `timeoutMs`. */
async function failedStreams(registry: Registry, timeoutMs: number): Promise<number> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline;) {
    const m = /svcproxy_accesslog_stream_failures_total\{[^}]*\} (\d+)/.exec(await registry.metrics());
    if (m && Number(m[1]) > 0) return Number(m[1]);
    await new Promise((r) => setTimeout(r, 50));
  }
  return 0;
}

t.test('entries arrive over TLS: the CA from a file, or inline with an sni', { skip: pki ? false : 'openssl not available' }, async (t) => {
  t.teardown(() => pki!.cleanup());
  const als = await startAlsServer(t, 0, { tls: pki!.server });

  const byFile = await plane(t, als.port, tlsSocket({ common_tls_context: { validation_context: { trusted_ca: { filename: pki!.caFile } } } }));
  t.equal((await request(byFile.port, CANONICAL, '/by-file')).status, 200);
  await waitUntil(() => als.entries().some((e) => e.request.path === '/by-file'), 30_000, 'the entry sent over TLS (CA file, the address checked)');

  const inline = await plane(t, als.port, tlsSocket({ sni: 'localhost', common_tls_context: { validation_context: { trusted_ca: { inline_string: pki!.ca.toString() } } } }));
  t.equal((await request(inline.port, CANONICAL, '/inline')).status, 200);
  await waitUntil(() => als.entries().some((e) => e.request.path === '/inline'), 30_000, 'the entry sent over TLS (inline CA, sni localhost)');
  t.ok(als.streams.every((s) => s[0]?.identifier), 'each stream starts with the identifier');
});

t.test('a certificate that does not verify is a failed stream, never plaintext', { skip: pki ? false : 'openssl not available' }, async (t) => {
  const local = makePki()!;
  t.teardown(() => local.cleanup());
  const als = await startAlsServer(t, 0, { tls: local.server });
  const cases: [string, Record<string, unknown>][] = [
    ['no validation_context: the public roots do not know the test CA', tlsSocket({})],
    ['an sni the certificate does not carry', tlsSocket({ sni: 'als.example', common_tls_context: { validation_context: { trusted_ca: { inline_string: local.ca.toString() } } } })],
    ['another CA', tlsSocket({ common_tls_context: { validation_context: { trusted_ca: { inline_string: local.rogue.cert.toString() } } } })],
  ];
  for (const [name, transport] of cases) {
    const p = await plane(t, als.port, transport);
    t.equal((await request(p.port, CANONICAL, '/refused')).status, 200, `${name}: the request is not affected`);
    t.ok(await failedStreams(p.registry, 8000) > 0, `${name}: the stream failed`);
  }
  t.equal(als.entries().length, 0, 'nothing reached the server');
});

t.test('a server that asks for a client certificate gets the cluster\'s, and without one the stream fails', { skip: pki ? false : 'openssl not available' }, async (t) => {
  const local = makePki()!;
  t.teardown(() => local.cleanup());
  const als = await startAlsServer(t, 0, { tls: { ...local.server, clientCa: local.ca } });
  const trusted = { validation_context: { trusted_ca: { inline_string: local.ca.toString() } } };

  const withCert = await plane(t, als.port, tlsSocket({
    common_tls_context: { ...trusted, tls_certificates: [{ certificate_chain: { inline_string: local.client.cert.toString() }, private_key: { inline_string: local.client.key.toString() } }] },
  }));
  t.equal((await request(withCert.port, CANONICAL, '/with-cert')).status, 200);
  await waitUntil(() => als.entries().some((e) => e.request.path === '/with-cert'), 30_000, 'the entry sent with the client certificate');

  const cases: [string, Record<string, unknown>][] = [
    ['no client certificate', tlsSocket({ common_tls_context: trusted })],
    ['a certificate the server does not trust', tlsSocket({
      common_tls_context: { ...trusted, tls_certificates: [{ certificate_chain: { inline_string: local.rogue.cert.toString() }, private_key: { inline_string: local.rogue.key.toString() } }] },
    })],
  ];
  for (const [name, transport] of cases) {
    const p = await plane(t, als.port, transport);
    t.equal((await request(p.port, CANONICAL, `/${name.replace(/\W+/g, '-')}`)).status, 200, `${name}: the request is not affected`);
    t.ok(await failedStreams(p.registry, 8000) > 0, `${name}: the stream failed`);
  }
  t.notOk(als.entries().some((e) => e.request.path !== '/with-cert'), 'only the entry with the certificate reached the server');
});
