/**
 * Bring-your-own CA and rotation by files, with real `svcproxy sidecar` processes: the CA and the
 * sidecars' certificates are made by the openssl CLI (as cert-manager or an operator's own PKI would
 * make them) and given as `--mesh-cert/--mesh-key/--mesh-ca`. While twenty request loops flow from
 * A's app through A's sidecar over mTLS to B, both sidecars' certificate and key files are replaced
 * the way kubelet and cert-manager do it (a new file renamed over the old). New connections meet the
 * new certificates on both sides (B's listener shows its new serial; B's app sees the hash of A's
 * new certificate), pooled ones keep going, and no request fails.
 */
import t from 'tap';
import http from 'node:http';
import { createHash, randomBytes, X509Certificate } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { echoHandler, request, startHttpServer, yamlDocuments } from '../helpers/harness.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { Load, eventually, send } from '../faults/fixtures.js';
import { openssl, tempDir } from './fixtures.js';
import { meshRecords, replicasReady, replaceFile, serialAt, startSidecar, stopAndReadLogs, uriOf, type MeshFiles } from '../helpers/mesh-sidecars.js';

const B_HOST = 'b.g1.internal.localhost:8080';
/** Requests B's app holds until this many are in: more at once than A's pool had connections. */
const HOLD = 30;
const LOOPS = 20;

interface Leaf {
  readonly files: MeshFiles;
  readonly certPem: string;
  readonly keyPem: string;
  readonly caPem: string;
  readonly serial: string;
  readonly hash: string;
}

async function run(args: string[]): Promise<void> {
  const r = await openssl(args);
  if (r.code !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
}

/** A CA of the operator's own, made by openssl: ECDSA P-256, CA:TRUE, keyCertSign. */
async function opensslCa(dir: string): Promise<{ cert: string; key: string }> {
  const cert = join(dir, 'ca.pem');
  const key = join(dir, 'ca.key');
  await run(['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert,
    '-days', '2', '-subj', '/O=acme/CN=byo mesh CA', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  return { cert, key };
}

/** A sidecar certificate for `uri` signed by `ca`, in `dir`, with a random serial. */
async function opensslLeaf(dir: string, ca: { cert: string; key: string }, uri: string): Promise<Leaf> {
  await mkdir(dir, { recursive: true });
  const f = (name: string): string => join(dir, name);
  await writeFile(f('ext'), `basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=URI:${uri}\n`);
  await run(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', f('key.pem'), '-out', f('csr'), '-subj', '/O=acme']);
  const serial = randomBytes(12);
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  await run(['x509', '-req', '-in', f('csr'), '-CA', ca.cert, '-CAkey', ca.key, '-set_serial', `0x${serial.toString('hex')}`, '-days', '1', '-out', f('cert.pem'), '-extfile', f('ext')]);
  const [certPem, keyPem, caPem] = await Promise.all([readFile(f('cert.pem'), 'utf8'), readFile(f('key.pem'), 'utf8'), readFile(ca.cert, 'utf8')]);
  await writeFile(f('ca.pem'), caPem);
  const x = new X509Certificate(certPem);
  return {
    files: { cert: f('cert.pem'), key: f('key.pem'), ca: f('ca.pem') },
    certPem, keyPem, caPem,
    serial: x.serialNumber,
    hash: createHash('sha256').update(x.raw).digest('hex'),
  };
}

/** `leaf`'s files replaced by `next`'s: the key first, then the certificate, each renamed into place. */
async function rotate(leaf: Leaf, next: Leaf): Promise<void> {
  await replaceFile(leaf.files.key, next.keyPem, 0o600);
  await replaceFile(leaf.files.cert, next.certPem);
}

t.test("rotation by files under steady load, with an operator's own CA", async (t) => {
  const dir = await tempDir(t, 'mesh-sidecars-rotation-');
  const ca = await opensslCa(dir);
  const [a, b] = await Promise.all([opensslLeaf(join(dir, 'a'), ca, uriOf('g1', 'a')), opensslLeaf(join(dir, 'b'), ca, uriOf('g1', 'b'))]);

  // B's app: an echo, except /hold, answered only once HOLD of them are waiting.
  const echo = echoHandler('g1/b');
  let held: (() => void)[] = [];
  const appB = await startHttpServer(t, (req, res) => {
    if (req.url !== '/hold') return echo(req, res);
    held.push(() => echo(req, res));
    if (held.length === HOLD) {
      const release = held;
      held = [];
      for (const answer of release) answer();
    }
  });
  const appA = await startHttpServer(t, echoHandler('g1/a'));
  const [inA, inB] = [await freePort(), await freePort()];
  const config = join(dir, 'mesh.yaml');
  await writeFile(config, yamlDocuments(meshRecords([
    { gvc: 'g1', name: 'a', internal: { inboundAllowType: 'same-gvc' } },
    { gvc: 'g1', name: 'b', internal: { inboundAllowType: 'same-gvc' }, replica: { app: appB.port, mesh: inB } },
  ])));
  const [sa, sb] = await Promise.all([
    startSidecar(t, { config, gvc: 'g1', workload: 'a', app: appA.port, inbound: inA, files: a.files }),
    startSidecar(t, { config, gvc: 'g1', workload: 'b', app: appB.port, inbound: inB, files: b.files }),
  ]);
  t.ok(await replicasReady(sa, 1), "A's sidecar sees B's replica ready");

  const first = await request(sa.meshPort, B_HOST, '/');
  t.equal(first.status, 200, "certificates from the operator's own CA: A reaches B over mTLS");
  t.match(JSON.parse(first.body).headers['x-forwarded-client-cert'], `Hash=${a.hash};URI=${uriOf('g1', 'a')}`, "XFCC: the hash of A's openssl-made certificate");

  const agent = new http.Agent({ keepAlive: true, maxSockets: LOOPS });
  t.teardown(() => agent.destroy());
  const hashOf = (body: string): string | undefined => /Hash=([0-9a-f]{64})/.exec(body)?.[1];
  const load = new Load(() => send(sa.meshPort, B_HOST, '/load', { agent, note: (_res, body) => hashOf(body) }), { concurrency: LOOPS, pauseMs: 5, maxRequests: 1e6, maxMs: 90_000 });
  t.teardown(() => load.stop());
  await load.settle(100);

  const [a2, b2] = await Promise.all([opensslLeaf(join(dir, 'a-next'), ca, uriOf('g1', 'a')), opensslLeaf(join(dir, 'b-next'), ca, uriOf('g1', 'b'))]);
  load.phase = 'rotating';
  await Promise.all([rotate(a, a2), rotate(b, b2)]);
  // New connections to each sidecar's mTLS listener are shown its new certificate once it has reloaded.
  t.ok(await eventually(async () => (await serialAt(inB, a).catch(() => '')) === b2.serial, 30_000, 50), "B's listener presents B's new certificate");
  t.ok(await eventually(async () => (await serialAt(inA, a).catch(() => '')) === a2.serial, 30_000, 50), "A's listener presents A's new certificate (its client has it too)");

  // More requests at once than A had connections to B: new connections, made with A's new certificate.
  load.phase = 'after';
  const burst = await Promise.all(Array.from({ length: HOLD }, () => request(sa.meshPort, B_HOST, '/hold')));
  t.same([...new Set(burst.map((r) => r.status))], [200], 'the burst is served');
  t.ok(burst.some((r) => hashOf(r.body) === a2.hash), "B's app sees the hash of A's new certificate on new connections");
  await load.settle(100);
  await load.stop();

  const results = load.of();
  const failed = results.filter((r) => r.outcome !== 200);
  t.same(failed, [], `no failed request (${results.length} in all, ${load.of('rotating').length} during the switch)`);
  const hashes = new Set(results.map((r) => r.note));
  t.ok(hashes.has(a.hash), 'the loops were served with the old certificate...');
  t.ok([...hashes].every((h) => h === a.hash || h === a2.hash), '...and only ever with one of the two');

  const logs = await stopAndReadLogs(sb);
  const reloaded = logs.filter((l) => l.msg === 'mesh credentials reloaded');
  t.ok(reloaded.length >= 1 && reloaded.every((l) => l.uri === uriOf('g1', 'b')), "B logged the reload, with its identity");
  t.equal(reloaded.at(-1)?.notAfter, new Date(new X509Certificate(b2.certPem).validTo).toISOString(), 'the last set loaded is the new one');
});
