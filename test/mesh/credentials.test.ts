/**
 * Mesh credentials from PEM files (src/mesh/credentials.ts). The initial checks, each error naming
 * its file and never the key: missing, garbage, mismatched key, another CA, expired, two URI SANs,
 * a URI that is not SPIFFE; chains made by `openssl` (root → intermediate → leaf, the intermediate
 * in the certificate file) accepted, and without the intermediate refused; a SEC1 key given back as
 * PKCS#8. Watching: new files renamed into place, a Kubernetes `..data` symlink swap, a symlink into
 * an unwatched folder (seen by the poll), a bad new key (logged with the file's name, the last good
 * set kept). Tests wait for onChange or for the log line, never sleep.
 */
import t from 'tap';
import type { Test } from 'tap';
import { X509Certificate } from 'node:crypto';
import { mkdir, rename, symlink, writeFile } from 'node:fs/promises';
import { connect, createServer, type TLSSocket } from 'node:tls';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { LocalCa } from '../../src/mesh/ca.js';
import { fileCredentials, secureContextOf, type CredentialSource, type MeshCredentials } from '../../src/mesh/credentials.js';
import { uriSanOf, workloadUri } from '../../src/mesh/identity.js';
import { silentLogger } from '../../src/log.js';
import { captureLogger, handshake, openssl, tempDir, writeCredentials } from './fixtures.js';

const HOUR = 3600_000;
const API = workloadUri('acme', 'prod', 'api');
const WEB = workloadUri('acme', 'prod', 'web');
const serialOf = (c: Pick<MeshCredentials, 'certPem'>): string => new X509Certificate(c.certPem).serialNumber;
const nextChange = (src: CredentialSource): Promise<MeshCredentials> =>
  new Promise((resolve) => {
    const off = src.onChange((c) => {
      off();
      resolve(c);
    });
  });

async function rejects(t: Test, files: { cert: string; key: string; ca: string }, pattern: RegExp, what: string): Promise<void> {
  await t.rejects(fileCredentials(files, { logger: silentLogger() }), { message: pattern }, what);
}

t.test('a good set loads; its TLS context works; a SEC1 key is given back as PKCS#8', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const issued = await ca.issue(API, HOUR);
  const files = await writeCredentials(dir, issued);
  const src = await fileCredentials(files, { logger: silentLogger() });
  t.teardown(() => src.close());
  t.same(src.current(), issued, 'the same certificate, key, bundle, URI and notAfter');

  const peer = await ca.issue(WEB, HOUR);
  const server = createServer({ requestCert: true, rejectUnauthorized: true, ...{ cert: peer.certPem, key: peer.keyPem, ca: peer.caPem } });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  const seen = once(server, 'secureConnection') as Promise<[TLSSocket]>;
  const client = connect({ port: (server.address() as AddressInfo).port, host: '127.0.0.1', secureContext: secureContextOf(src.current()), checkServerIdentity: () => undefined });
  client.on('error', () => undefined);
  const clientSecure = once(client, 'secureConnect');
  const [socket] = await seen;
  t.equal(uriSanOf(socket.getPeerCertificate()), API, 'secureContextOf presents the certificate');
  await clientSecure;
  t.equal(uriSanOf(client.getPeerCertificate()), WEB, 'and trusts the bundle');
  socket.destroy();
  client.destroy();

  const sec1 = await openssl(['ec', '-in', files.key], undefined);
  t.match(sec1.stdout, /BEGIN EC PRIVATE KEY/);
  await writeFile(files.key, sec1.stdout);
  const again = await fileCredentials(files, { logger: silentLogger() });
  t.equal(again.current().keyPem, issued.keyPem, 'PKCS#8');
  again.close();
});

t.test('a bad initial set throws an error naming the file, never the key', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const good = await ca.issue(API, HOUR);
  const files = await writeCredentials(dir, good);
  const other = await LocalCa.open(join(dir, 'other'), { org: 'acme' });
  const foreign = await other.issue(API, HOUR);
  const past = await LocalCa.open(join(dir, 'ca'), { org: 'acme', clock: { wallNow: () => Date.now() - 2 * HOUR } });

  await rejects(t, { ...files, cert: join(dir, 'missing.pem') }, new RegExp(`^${join(dir, 'missing.pem')}: cannot read \\(ENOENT\\)`), 'missing');
  await writeFile(join(dir, 'junk.pem'), 'not a certificate\n');
  await rejects(t, { ...files, cert: join(dir, 'junk.pem') }, /junk\.pem: no PEM certificate/, 'garbage certificate');
  await writeFile(join(dir, 'bad.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
  await rejects(t, { ...files, cert: join(dir, 'bad.pem') }, /bad\.pem: certificate 1 is not valid X\.509/, 'broken certificate');
  await rejects(t, { ...files, ca: join(dir, 'junk.pem') }, /junk\.pem: no PEM certificate/, 'garbage bundle');

  const secret = 'MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg';
  await writeFile(join(dir, 'junk-key.pem'), `-----BEGIN PRIVATE KEY-----\n${secret}\n-----END PRIVATE KEY-----\n`);
  const err = await fileCredentials({ ...files, key: join(dir, 'junk-key.pem') }, { logger: silentLogger() }).catch((e: Error) => e);
  t.match(err, { message: /junk-key\.pem: not a readable unencrypted PEM private key/ }, 'garbage key');
  t.notMatch((err as Error).message, secret.slice(8, 24), 'no key material in the message');

  await writeFile(join(dir, 'other-key.pem'), foreign.keyPem);
  await rejects(t, { ...files, key: join(dir, 'other-key.pem') }, /other-key\.pem: the key does not match the certificate in .*cert\.pem/, 'mismatched key');
  await writeFile(join(dir, 'other-ca.pem'), foreign.caPem);
  await rejects(t, { ...files, ca: join(dir, 'other-ca.pem') }, /cert\.pem: the certificate does not chain to a CA in .*other-ca\.pem/, 'another CA');

  const expired = await past.issue(API, 60_000);
  await mkdir(join(dir, 'expired'));
  await rejects(t, await writeCredentials(join(dir, 'expired'), expired), /expired\/cert\.pem: the certificate expired at 20/, 'expired');
});

/** A root, an intermediate and leaves, made by openssl alone: a second encoder and a longer chain. */
async function opensslChain(dir: string, leaves: Record<string, string>): Promise<void> {
  const run = async (args: string[]): Promise<void> => {
    const r = await openssl(args);
    if (r.code !== 0) throw new Error(`openssl ${args.join(' ')}: ${r.stderr}`);
  };
  const p = (name: string): string => join(dir, name);
  const newKey = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  await run(['req', '-x509', ...newKey, '-keyout', p('root.key'), '-out', p('root.pem'), '-subj', '/CN=root', '-days', '2',
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  const sign = async (name: string, subj: string, ext: string, ca: string): Promise<void> => {
    await run(['req', '-new', ...newKey, '-keyout', p(`${name}.key`), '-out', p(`${name}.csr`), '-subj', subj]);
    await writeFile(p(`${name}.ext`), ext);
    await run(['x509', '-req', '-in', p(`${name}.csr`), '-CA', p(`${ca}.pem`), '-CAkey', p(`${ca}.key`), '-set_serial', String(1000 + name.length), '-days', '1', '-extfile', p(`${name}.ext`), '-out', p(`${name}.pem`)]);
  };
  await sign('int', '/CN=intermediate', 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign\n', 'root');
  for (const [name, san] of Object.entries(leaves)) {
    await sign(name, '/CN=leaf', `basicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=${san}\n`, 'int');
  }
}

t.test('chains and SANs made by openssl', async (t) => {
  const dir = await tempDir(t);
  await opensslChain(dir, { good: `URI:${API},DNS:api.example`, two: 'URI:spiffe://acme/a,URI:spiffe://acme/b', none: 'DNS:api.example', http: 'URI:https://api.example/x' });
  const { readFile } = await import('node:fs/promises');
  const text = async (name: string): Promise<string> => readFile(join(dir, name), 'utf8');
  await writeFile(join(dir, 'good-chain.pem'), (await text('good.pem')) + (await text('int.pem')));
  const src = await fileCredentials({ cert: join(dir, 'good-chain.pem'), key: join(dir, 'good.key'), ca: join(dir, 'root.pem') }, { logger: silentLogger() });
  t.equal(src.current().uri, API);
  t.equal(src.current().notAfter, Date.parse(new X509Certificate(await text('good.pem')).validTo));
  src.close();
  await rejects(t, { cert: join(dir, 'good.pem'), key: join(dir, 'good.key'), ca: join(dir, 'root.pem') }, /good\.pem: the certificate does not chain to a CA in .*root\.pem/, 'without its intermediate');
  const bundle = join(dir, 'bundle.pem');
  await writeFile(bundle, (await text('root.pem')) + (await text('int.pem')));
  const viaBundle = await fileCredentials({ cert: join(dir, 'good.pem'), key: join(dir, 'good.key'), ca: bundle }, { logger: silentLogger() });
  t.equal(viaBundle.current().uri, API, 'the intermediate in the bundle');
  viaBundle.close();
  await rejects(t, { cert: join(dir, 'two.pem'), key: join(dir, 'two.key'), ca: join(dir, 'root.pem') }, /two\.pem: the certificate must have exactly one URI SAN \(it has 2\)/, 'two URIs');
  await rejects(t, { cert: join(dir, 'none.pem'), key: join(dir, 'none.key'), ca: join(dir, 'root.pem') }, /none\.pem: .*exactly one URI SAN \(it has 0\)/, 'no URI');
  await rejects(t, { cert: join(dir, 'http.pem'), key: join(dir, 'http.key'), ca: join(dir, 'root.pem') }, /http\.pem: the URI SAN "https:\/\/api\.example\/x" is not a SPIFFE ID/, 'not SPIFFE');
});

t.test('watching: files renamed into place are reloaded; a bad new key is logged and the last good set kept', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const files = await writeCredentials(dir, await ca.issue(API, HOUR));
  const log = captureLogger();
  const src = await fileCredentials(files, { logger: log.logger, watch: true });
  t.teardown(() => src.close());
  const first = src.current();

  const replace = async (name: string, text: string): Promise<void> => {
    const tmp = join(dir, `.${name}.tmp`);
    await writeFile(tmp, text);
    await rename(tmp, join(dir, name));
  };
  const renewed = await ca.issue(API, 2 * HOUR);
  let changed = nextChange(src);
  await replace('key.pem', renewed.keyPem);
  await replace('cert.pem', renewed.certPem);
  let got = await changed;
  t.equal(serialOf(got), serialOf(renewed), 'the new certificate');
  t.equal(src.current(), got);
  t.not(serialOf(got), serialOf(first));

  const errorLogged = log.waitFor((e) => e.level === 50 && /key\.pem/.test(String(e.reason)));
  await replace('key.pem', '-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n');
  const entry = await errorLogged;
  t.match(entry, { msg: 'mesh credentials not reloaded; keeping the last good ones', files: { key: files.key }, reason: new RegExp(`${files.key}: not a readable`) });
  t.equal(src.current(), got, 'the last good set stays');

  const third = await ca.issue(API, HOUR);
  changed = nextChange(src);
  await replace('cert.pem', third.certPem);
  await replace('key.pem', third.keyPem);
  got = await changed;
  t.equal(serialOf(got), serialOf(third), 'a good set after a bad one is taken');
});

t.test('accept: a set for another identity is refused at start and on reload (the last good set kept)', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const accept = (c: MeshCredentials): string | undefined => (c.uri === API ? undefined : `carries ${c.uri}, not ${API}`);
  await mkdir(join(dir, 'wrong'));
  const wrong = await writeCredentials(join(dir, 'wrong'), await ca.issue(WEB, HOUR));
  await t.rejects(fileCredentials(wrong, { logger: silentLogger(), accept }), { message: `${wrong.cert}: carries ${WEB}, not ${API}` });

  const files = await writeCredentials(dir, await ca.issue(API, HOUR));
  const log = captureLogger();
  const src = await fileCredentials(files, { logger: log.logger, watch: true, accept });
  t.teardown(() => src.close());
  const first = src.current();
  const refused = log.waitFor((e) => e.level === 50 && String(e.reason).includes(`carries ${WEB}`));
  const other = await ca.issue(WEB, HOUR);
  for (const [name, text] of [['key.pem', other.keyPem], ['cert.pem', other.certPem]] as const) {
    const tmp = join(dir, `.${name}.tmp`);
    await writeFile(tmp, text);
    await rename(tmp, join(dir, name));
  }
  await refused;
  t.equal(src.current(), first, 'still the workload\'s own certificate');
});

t.test('watching: a Kubernetes ..data symlink swap is seen', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const mount = join(dir, 'mount');
  await mkdir(mount);
  const publish = async (version: string, c: MeshCredentials, first: boolean): Promise<void> => {
    const data = join(mount, `..${version}`);
    await mkdir(data);
    await writeCredentials(data, c);
    await symlink(`..${version}`, join(mount, '..data_tmp'));
    await rename(join(mount, '..data_tmp'), join(mount, '..data'));
    if (first) for (const f of ['cert.pem', 'key.pem', 'ca.pem']) await symlink(join('..data', f), join(mount, f));
  };
  await publish('v1', await ca.issue(API, HOUR), true);
  const src = await fileCredentials({ cert: join(mount, 'cert.pem'), key: join(mount, 'key.pem'), ca: join(mount, 'ca.pem') }, { logger: silentLogger(), watch: true });
  t.teardown(() => src.close());
  const v2 = await ca.issue(API, HOUR);
  const changed = nextChange(src);
  await publish('v2', v2, false);
  t.equal(serialOf(await changed), serialOf(v2));
});

t.test('watching: a file that is a symlink into an unwatched folder is caught by the poll', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const store = join(dir, 'store');
  const link = join(dir, 'links');
  await mkdir(store);
  await mkdir(link);
  await writeCredentials(store, await ca.issue(API, HOUR));
  for (const f of ['cert.pem', 'key.pem', 'ca.pem']) await symlink(join(store, f), join(link, f));
  const src = await fileCredentials({ cert: join(link, 'cert.pem'), key: join(link, 'key.pem'), ca: join(link, 'ca.pem') }, { logger: silentLogger(), watch: true, pollMs: 100 });
  t.teardown(() => src.close());
  const next = await ca.issue(API, HOUR);
  const changed = nextChange(src);
  // Written in place in the other folder: only the stat poll sees it.
  await writeCredentials(store, next);
  t.equal(serialOf(await changed), serialOf(next));
});

t.test('handshake with file credentials on both sides', async (t) => {
  const dir = await tempDir(t);
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme' });
  const src = await fileCredentials(await writeCredentials(dir, await ca.issue(WEB, HOUR)), { logger: silentLogger() });
  t.same(await handshake(await ca.issue(API, HOUR), src.current()), { ok: true, serverUri: WEB, clientUri: API });
  src.close();
});
