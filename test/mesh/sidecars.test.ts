/**
 * The mesh as operators run it, with real processes: `svcproxy sidecar` in front of each workload's
 * app and `svcproxy ingress`, each given its certificate as PEM files (`--mesh-cert/--mesh-key/
 * --mesh-ca`, issued here by a LocalCa), the target replicas listed in a `deployment` record with
 * their sidecar's mTLS listener (`mesh`). A's app (this test) calls B through A's outbound listener;
 * B's sidecar verifies A's certificate, applies B's internal firewall, runs B's ext_authz with the
 * caller as `source.principal`, and hands B's app the `x-forwarded-client-cert` of the verified
 * caller. Straight to B's mTLS listener: plaintext, no certificate, another CA's, an expired one,
 * and an identity the firewall does not admit are each refused, counted and logged with the peer.
 * A sidecar started with another workload's certificate, or with part of the flags, does not start.
 */
import t from 'tap';
import http from 'node:http';
import { createHash, X509Certificate } from 'node:crypto';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { LocalCa } from '../../src/mesh/index.js';
import { echoHandler, request, startHttpServer, yamlDocuments } from '../helpers/harness.js';
import { allow, startGrpcAuth } from '../fixtures/extauth/servers.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { eventually } from '../faults/fixtures.js';
import { openssl, tempDir } from './fixtures.js';
import {
  INGRESS_URI, ORG, counter, credentialFiles, direct, meshRecords, replicasReady, runToExit, startIngress, startSidecar, stopAndReadLogs, uriOf,
} from '../helpers/mesh-sidecars.js';

const HOUR = 3600_000;
const B_HOST = 'b.g1.internal.localhost:8080';
const B2_HOST = 'b.g2.internal.localhost:8080';
const SPOOF = `By=${uriOf('g1', 'b')};Hash=${'0'.repeat(64)};URI=${uriOf('g1', 'evil')}`;

const sha256 = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');

/** Plain HTTP/1.1 to a TLS listener: the answer, or the error the client saw. */
function plaintext(port: number): Promise<{ status: number } | { error: string }> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: '/', headers: { host: B_HOST }, agent: false }, (res) => {
      res.resume();
      resolve({ status: res.statusCode ?? 0 });
    });
    req.on('error', (err) => resolve({ error: err.message }));
    req.end();
  });
}

t.test('sidecars and an ingress over mTLS, as processes', async (t) => {
  const dir = await tempDir(t, 'mesh-sidecars-');
  const ca = await LocalCa.open(join(dir, 'ca'), { org: ORG });
  const issue = async (name: string, uri: string) => {
    const creds = await ca.issue(uri, HOUR);
    return { creds, files: await credentialFiles(dir, name, creds) };
  };
  const [a, b, b2, ingressId] = await Promise.all([issue('a', uriOf('g1', 'a')), issue('b', uriOf('g1', 'b')), issue('b2', uriOf('g2', 'b')), issue('ingress', INGRESS_URI)]);

  const auth = await startGrpcAuth(t, () => allow());
  const appA = await startHttpServer(t, echoHandler('g1/a'));
  const appB = await startHttpServer(t, echoHandler('g1/b'));
  const appB2 = await startHttpServer(t, echoHandler('g2/b'));
  const [inA, inB, inB2] = [await freePort(), await freePort(), await freePort()];
  const config = join(dir, 'mesh.yaml');
  await writeFile(config, yamlDocuments(meshRecords([
    { gvc: 'g1', name: 'a', internal: { inboundAllowType: 'same-gvc' } },
    {
      gvc: 'g1', name: 'b', internal: { inboundAllowType: 'same-gvc' }, replica: { app: appB.port, mesh: inB },
      tags: {
        'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': auth.port, 'svc/externalAuthScheme': 'http',
        'svc/externalAuthIncludePeerCert': true, 'svc/externalAuthFailureAllow': false, 'svc/externalAuthTimeout': '10s',
      },
    },
    { gvc: 'g2', name: 'b', internal: { inboundAllowType: 'same-org' }, replica: { app: appB2.port, mesh: inB2 } },
  ])));

  const [sa, sb, sb2, ingress] = await Promise.all([
    startSidecar(t, { config, gvc: 'g1', workload: 'a', app: appA.port, inbound: inA, files: a.files }),
    startSidecar(t, { config, gvc: 'g1', workload: 'b', app: appB.port, inbound: inB, files: b.files }),
    startSidecar(t, { config, gvc: 'g2', workload: 'b', app: appB2.port, inbound: inB2, files: b2.files }),
    startIngress(t, { config, files: ingressId.files }),
  ]);
  t.ok(await replicasReady(sa, 2), "A's sidecar sees both B replicas ready");
  t.ok(await replicasReady(ingress, 2), 'the ingress sees both B replicas ready');

  const aHash = sha256(new X509Certificate(a.creds.certPem).raw);
  const aPem = join(dir, 'a', 'cert.pem');
  const der = await openssl(['x509', '-in', aPem, '-outform', 'DER']);
  t.equal(aHash, sha256(Buffer.from(der.stdout, 'latin1')), "the hash of A's DER certificate, as openssl writes it");

  await t.test("A's app -> A's outbound listener -> mTLS -> B's sidecar -> B's app", async (t) => {
    const res = await request(sa.meshPort, B_HOST, '/one', { headers: { 'x-forwarded-client-cert': SPOOF } });
    t.equal(res.status, 200, 'admitted: same GVC');
    const seen = JSON.parse(res.body) as { name: string; url: string; headers: Record<string, string> };
    t.equal(seen.name, 'g1/b', "B's app answered");
    t.equal(seen.headers['x-forwarded-client-cert'], `By=${uriOf('g1', 'b')};Hash=${aHash};URI=${uriOf('g1', 'a')}`,
      "XFCC: B's identity, the hash of A's certificate, A's identity; the client's spoofed value is gone");

    const other = await request(sa.meshPort, B2_HOST, '/two');
    t.equal(other.status, 200, 'a workload of another GVC that admits the whole org');
    t.equal(JSON.parse(other.body).headers['x-forwarded-client-cert'], `By=${uriOf('g2', 'b')};Hash=${aHash};URI=${uriOf('g1', 'a')}`, 'By names that other B');
  });

  await t.test("ext_authz on B's side sees the verified caller", async (t) => {
    const checks = auth.calls.filter((c) => c.attributes.request.http.path === '/one');
    t.equal(checks.length, 1, "one check for the request, made by B's sidecar only");
    const source = checks[0]!.attributes.source;
    t.equal(source.principal, uriOf('g1', 'a'), "source.principal is A's URI SAN");
    t.equal(source.certificate, encodeURIComponent(new X509Certificate(a.creds.certPem).toString()), "source.certificate is A's URL-encoded PEM");
    t.equal(checks[0]!.attributes.destination.principal, uriOf('g1', 'b'), "destination.principal is B's own identity");
  });

  await t.test("straight to B's mTLS listener: who is refused, and how", async (t) => {
    const plain = await plaintext(inB);
    t.ok('error' in plain, `plaintext HTTP gets no answer (${JSON.stringify(plain)})`);
    const noCert = await direct(inB, B_HOST, '/', { ca: b.creds.caPem });
    t.ok('error' in noCert, `no client certificate: refused (${JSON.stringify(noCert)})`);

    const otherCa = await LocalCa.open(join(dir, 'other-ca'), { org: ORG });
    const impostor = await otherCa.issue(uriOf('g1', 'a'), HOUR);
    const wrongCa = await direct(inB, B_HOST, '/', { client: impostor, ca: b.creds.caPem });
    t.ok('error' in wrongCa, `A's identity from another CA: refused (${JSON.stringify(wrongCa)})`);

    // The same CA, its clock two days back: a certificate that expired a day ago.
    const past = await LocalCa.open(join(dir, 'ca'), { org: ORG, clock: { wallNow: () => Date.now() - 48 * HOUR } });
    const expiredCreds = await past.issue(uriOf('g1', 'a'), HOUR);
    t.ok(Date.parse(new X509Certificate(expiredCreds.certPem).validTo) < Date.now(), 'the certificate has expired');
    const expired = await direct(inB, B_HOST, '/', { client: expiredCreds, ca: b.creds.caPem });
    t.ok('error' in expired, `an expired certificate: refused (${JSON.stringify(expired)})`);

    const c = await ca.issue(uriOf('g2', 'c'), HOUR);
    const denied = await direct(inB, B_HOST, '/', { client: c, ca: b.creds.caPem });
    t.equal('status' in denied && denied.status, 403, 'a valid certificate of a workload the firewall does not admit: 403');
    t.equal('body' in denied && JSON.parse(denied.body).message, 'blocked by firewall', "the firewall's answer");

    // A caller holding a valid certificate may dial the listener itself: its own XFCC, in either spelling, must not pass.
    const own = await direct(inB, B_HOST, '/three', { client: a.creds, ca: b.creds.caPem, headers: { 'x-forwarded-client-cert': SPOOF, 'x_forwarded_client_cert': SPOOF } });
    t.equal('status' in own && own.status, 200, "A's own certificate, straight: admitted");
    // A client offering Node's default order (AES-256-GCM first) gets the mesh's first suite.
    t.equal('cipher' in own && own.cipher, 'TLS_CHACHA20_POLY1305_SHA256', "the listener's suite order decides: ChaCha20-Poly1305");
    const appSaw = 'body' in own ? (JSON.parse(own.body) as { headers: Record<string, string> }).headers : {};
    t.equal(appSaw['x-forwarded-client-cert'], `By=${uriOf('g1', 'b')};Hash=${aHash};URI=${uriOf('g1', 'a')}`, 'XFCC replaced');
    t.equal(appSaw['x_forwarded_client_cert'], undefined, 'the underscore spelling removed (CGI-style servers read it as XFCC)');
    const check = auth.calls.find((c) => c.attributes.request.http.path === '/three');
    t.equal(check?.attributes.request.http.headers['x-forwarded-client-cert'], `By=${uriOf('g1', 'b')};Hash=${aHash};URI=${uriOf('g1', 'a')}`,
      "the auth server sees the verified caller's XFCC, as Envoy's SANITIZE_SET sets it before the filters");
    t.equal(check?.attributes.request.http.headers['x_forwarded_client_cert'], undefined, 'nor the underscore spelling');

    const failures = (reason: string): Promise<number> => counter(sb, 'svcproxy_mesh_tls_handshake_failures_total', `reason="${reason}"`);
    const reasons = ['http_request', 'peer_did_not_return_a_certificate', 'unable_to_verify_leaf_signature', 'cert_has_expired'];
    t.ok(await eventually(async () => (await Promise.all(reasons.map(failures))).every((n) => n === 1), 30_000, 50),
      `each handshake refusal counted once by its reason: ${reasons.join(', ')}`);
    t.equal(await counter(sb, 'svcproxy_mesh_requests_total', 'reporter="destination",source_workload="c",source_gvc="g2",destination_workload="b",destination_gvc="g1",response_code="403",outcome="denied"'), 1, 'the firewall refusal counted');

    const logs = await stopAndReadLogs(sb);
    const refused = logs.filter((l) => l.msg === 'mesh handshake refused');
    t.same(refused.map((l) => [l.reason, l.peer ?? null]).sort(), [
      ['cert_has_expired', uriOf('g1', 'a')],
      ['http_request', null],
      ['peer_did_not_return_a_certificate', null],
      ['unable_to_verify_leaf_signature', uriOf('g1', 'a')],
    ], 'each refused handshake logged with the identity the peer presented');
    const blocked = logs.find((l) => l.status === 403 && l.sourcePrincipal === uriOf('g2', 'c'));
    t.match(blocked, { error: 'FIREWALL_BLOCKED', workload: 'b', gvc: 'g1' }, 'the firewall refusal logged with the caller');
  });

  await t.test('an ingress calls internal names with its own identity', async (t) => {
    const denied = await request(ingress.meshPort, B_HOST, '/');
    t.equal(denied.status, 403, 'same-gvc does not admit the ingress');
    t.equal(JSON.parse(denied.body).message, 'blocked by firewall', "the firewall's answer");
    const admitted = await request(ingress.meshPort, B2_HOST, '/four');
    t.equal(admitted.status, 200, 'same-org admits it');
    const ingressHash = sha256(new X509Certificate(ingressId.creds.certPem).raw);
    t.equal(JSON.parse(admitted.body).headers['x-forwarded-client-cert'], `By=${uriOf('g2', 'b')};Hash=${ingressHash};URI=${INGRESS_URI}`, "XFCC names the ingress's own identity");
    // The target's own firewall decides, not only the caller's side.
    const straight = await direct(inB2, B2_HOST, '/', { client: ingressId.creds, ca: b.creds.caPem });
    t.equal('status' in straight && straight.status, 200, 'same-org, straight to its listener');
    t.equal(await counter(sb2, 'svcproxy_mesh_requests_total', 'reporter="destination",source_workload="unknown",source_gvc="unknown",destination_workload="b",destination_gvc="g2",response_code="200",outcome="allowed"'), 2,
      "B's side counted both calls of the ingress (an org member without a workload)");
  });
});

t.test('a sidecar does not start with the wrong identity or part of the flags', async (t) => {
  const dir = await tempDir(t, 'mesh-sidecars-start-');
  const ca = await LocalCa.open(join(dir, 'ca'), { org: ORG });
  const b = await credentialFiles(dir, 'b', await ca.issue(uriOf('g1', 'b'), HOUR));
  const config = join(dir, 'mesh.yaml');
  await writeFile(config, yamlDocuments(meshRecords([{ gvc: 'g1', name: 'a', internal: { inboundAllowType: 'same-gvc' } }])));
  const base = async (): Promise<string[]> => [
    'sidecar', '--config', config, '--gvc', 'g1', '--workload', 'a', '--location', 'loc1', '--app', '127.0.0.1:1',
    '--listen', `127.0.0.1:${await freePort()}`, '--admin', `127.0.0.1:${await freePort()}`, '--mesh-inbound', `127.0.0.1:${await freePort()}`,
  ];

  const wrong = await runToExit(t, [...await base(), '--mesh-cert', b.cert, '--mesh-key', b.key, '--mesh-ca', b.ca]);
  t.not(wrong.code, 0, 'exits non-zero');
  t.match(wrong.stderr, `--mesh-cert carries ${uriOf('g1', 'b')}; the sidecar of g1/a must present ${uriOf('g1', 'a')}`, 'and says why');

  const partial = await runToExit(t, [...await base(), '--mesh-cert', b.cert, '--mesh-key', b.key]);
  t.equal(partial.code, 2, 'a usage error');
  t.match(partial.stderr, '--mesh-cert, --mesh-key and --mesh-ca go together', 'naming the three flags');

  const none = await runToExit(t, await base());
  t.equal(none.code, 2, '--mesh-inbound without an identity: a usage error');
  t.match(none.stderr, '--mesh-inbound needs --mesh-cert, --mesh-key and --mesh-ca', 'naming what is missing');
});
