/**
 * TLS around external authorization: `https` to the auth service (gRPC and HTTP) with a private
 * CA the proxy is told to trust (and refused without it), and the client certificate of an mTLS
 * downstream connection forwarded as Envoy does — principal from the URI SAN, URL-encoded PEM when
 * `svc/externalAuthIncludePeerCert` is true — over HTTP/1.1 and HTTP/2; an unverified client
 * certificate is never presented as an identity. Certificates come from the openssl CLI.
 */
import t, { type Test } from 'tap';
import http2 from 'node:http2';
import https from 'node:https';
import { X509Certificate } from 'node:crypto';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
import { allow, startGrpcAuth, startHttpAuth } from '../fixtures/extauth/servers.js';
import { CLIENT_URI, makePki, type Pki } from '../fixtures/extauth/pki.js';
import { extAuthFactory } from '../../src/extauth/index.js';
import { externalFirewallFactory } from '../../src/firewall/index.js';
import { parseFlags } from '../../src/cli.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

const pki = makePki();
if (!pki) {
  t.plan(0, 'openssl is not available');
} else {
  t.teardown(() => pki.cleanup());
  run(pki);
}

function factories(ca: Buffer | undefined) {
  return { ingress: [externalFirewallFactory()], sidecar: [extAuthFactory(ca ? { ca } : {})] };
}

function run(pki: Pki): void {
  t.test('gRPC over TLS to the auth service: trusted with the CA option, refused without', async (t) => {
    const app = await startHttpServer(t, echoHandler('app'));
    const auth = await startGrpcAuth(t, () => allow({ headers: [{ header: { key: 'x-authz', value: 'tls' } }] }), { tls: pki.server });
    const recs = records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
      tags: { 'svc/externalAuthAddress': 'localhost', 'svc/externalAuthPort': auth.port, 'svc/externalAuthFailureAllow': false },
    });
    const trusted = await startPlane(t, recs, { factories: factories(pki.ca) });
    await trusted.ready();
    const res = await request(trusted.port, CANONICAL, '/');
    t.equal(res.status, 200, 'https is the default scheme; the private CA is trusted');
    t.equal(JSON.parse(res.body).headers['x-authz'], 'tls');
    t.equal(auth.calls.length, 1);

    const untrusted = await startPlane(t, recs, { factories: factories(undefined) });
    await untrusted.ready();
    t.equal((await request(untrusted.port, CANONICAL, '/')).status, 403, 'an unknown CA fails the check (fail-closed here)');
    t.equal(auth.calls.length, 1, 'nothing reached the server');

    // The operator's way: --extauth-ca FILE (SVCPROXY_EXTAUTH_CA), through the default factories.
    const { flags } = parseFlags(['ingress'], { SVCPROXY_EXTAUTH_CA: pki.caFile });
    t.equal(flags['extauth-ca'], pki.caFile, 'SVCPROXY_EXTAUTH_CA is the --extauth-ca flag');
    const byFlag = await startPlane(t, recs, { extAuthCaFile: flags['extauth-ca']! });
    await byFlag.ready();
    t.equal((await request(byFlag.port, CANONICAL, '/')).status, 200, 'the CA file is trusted');
    t.equal(auth.calls.length, 2);
  });

  t.test('HTTP over TLS to the auth service', async (t) => {
    const app = await startHttpServer(t, echoHandler('app'));
    const auth = await startHttpAuth(t, () => ({ status: 200 }), { tls: pki.server });
    const recs = records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
      tags: { 'svc/externalAuthAddress': 'localhost', 'svc/externalAuthPort': auth.port, 'svc/externalAuthProtocol': 'http', 'svc/externalAuthFailureAllow': false },
    });
    const trusted = await startPlane(t, recs, { factories: factories(pki.ca) });
    await trusted.ready();
    t.equal((await request(trusted.port, CANONICAL, '/')).status, 200);
    t.equal(auth.calls.length, 1);
    const untrusted = await startPlane(t, recs, { factories: factories(undefined) });
    await untrusted.ready();
    t.equal((await request(untrusted.port, CANONICAL, '/')).status, 403);
    t.equal(auth.calls.length, 1);

    // An IP address: no SNI, the certificate's IP SAN is checked; the Host header never becomes SNI.
    const byIp = await startPlane(
      t,
      recs.map((r) => (r.kind === 'workload' ? { ...r, tags: { ...(r.tags as object), 'svc/externalAuthAddress': '127.0.0.1' } } : r)),
      { factories: factories(pki.ca) },
    );
    await byIp.ready();
    t.equal((await request(byIp.port, CANONICAL, '/')).status, 200, 'https to an IP address');
    t.equal((await request(byIp.port, `${ALIAS}.app.localhost`, '/')).status, 404, 'another host (no route here)');
    t.equal((await request(byIp.port, CANONICAL, '/again')).status, 200);
    t.equal(auth.calls.length, 3);
  });

  async function mtlsPlane(t: Test, includePeerCert: boolean) {
    const app = await startHttpServer(t, echoHandler('app'));
    const auth = await startGrpcAuth(t, () => allow());
    const plane = await startPlane(
      t,
      records({
        replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
        tags: {
          'svc/externalAuthAddress': '127.0.0.1',
          'svc/externalAuthPort': auth.port,
          'svc/externalAuthScheme': 'http',
          'svc/externalAuthIncludePeerCert': includePeerCert,
        },
      }),
      { listenTls: ['127.0.0.1:0'], tls: { certFile: pki.server.certFile, keyFile: pki.server.keyFile, clientCaFile: parseFlags(['up', '--tls-client-ca', pki.caFile]).flags['tls-client-ca']! } },
    );
    await plane.ready();
    return { auth, port: plane.runtime.listeners.find((l) => l.tls)!.address.port };
  }

  function httpsGet(port: number, client: { cert: Buffer; key: Buffer } | undefined): Promise<number> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port, path: '/who', servername: 'localhost', ca: pki.ca, headers: { host: CANONICAL }, agent: false, ...client },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        },
      );
      req.on('error', reject);
      req.end();
    });
  }

  t.test('mTLS: the verified client certificate reaches the auth server (HTTP/1.1)', async (t) => {
    const { auth, port } = await mtlsPlane(t, true);
    t.equal(await httpsGet(port, pki.client), 200);
    const attrs = auth.calls[0]!.attributes;
    t.equal(attrs.source.principal, CLIENT_URI, 'principal: the URI SAN');
    t.equal(attrs.source.certificate, encodeURIComponent(new X509Certificate(pki.client.cert).toString()), 'URL-encoded PEM');
    t.match(attrs.source.certificate, /^-----BEGIN%20CERTIFICATE-----%0A/);
    t.equal(attrs.destination.principal, 'localhost', 'destination principal: the proxy certificate (DNS SAN)');
    t.equal(attrs.request.http.scheme, 'https');
    t.equal(attrs.request.http.headers[':scheme'], 'https');

    t.equal(await httpsGet(port, undefined), 200, 'a client without a certificate is served');
    t.equal(auth.calls[1]!.attributes.source.principal, '');
    t.equal(auth.calls[1]!.attributes.source.certificate, '');

    t.equal(await httpsGet(port, pki.rogue), 200, 'an unverified certificate is served...');
    t.equal(auth.calls[2]!.attributes.source.principal, '', '...but never presented as an identity');
    t.equal(auth.calls[2]!.attributes.source.certificate, '');
  });

  t.test('mTLS over HTTP/2, without include-peer-cert', async (t) => {
    const { auth, port } = await mtlsPlane(t, false);
    const session = http2.connect(`https://127.0.0.1:${port}`, { ca: pki.ca, servername: 'localhost', ...pki.client });
    t.teardown(() => session.close());
    const status = await new Promise<number>((resolve, reject) => {
      const stream = session.request({ ':path': '/h2', ':authority': CANONICAL });
      stream.on('response', (h) => resolve(Number(h[':status'])));
      stream.on('error', reject);
      stream.resume();
    });
    t.equal(status, 200);
    const attrs = auth.calls[0]!.attributes;
    t.equal(attrs.request.http.protocol, 'HTTP/2');
    t.equal(attrs.source.principal, CLIENT_URI, 'the principal is always sent');
    t.equal(attrs.source.certificate, '', 'the certificate only when asked');
  });
}
