/**
 * The local mesh CA (src/mesh/ca.ts) checked by references: every certificate it makes is read by
 * Debian's `openssl` (verify, extensions, dates, `ec -check` on the keys) and used in a real mTLS
 * handshake on loopback, where a certificate of another CA and an expired one (issued by a CA whose
 * injected clock is in the past) are refused. The CA folder: created once and reused, its modes,
 * concurrent opens (in one process and in three) agree on one CA, a corrupt, mismatched, expired or
 * nearly expired CA is replaced. Renewal runs in fake time: at two thirds of the ttl and not
 * before, retried with backoff when issuing fails, stopped by close(). Last, the lazy load: a
 * process that imports the mesh but opens no CA has not loaded @peculiar/x509 nor reflect-metadata.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { readFile, stat, writeFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { LocalCa, issuedCredentials, type CertificateIssuer } from '../../src/mesh/ca.js';
import { workloadUri } from '../../src/mesh/identity.js';
import type { MeshCredentials } from '../../src/mesh/credentials.js';
import { silentLogger } from '../../src/log.js';
import { FakeClock, captureLogger, handshake, openssl, tempDir } from './fixtures.js';

const HOUR = 3600_000;
const DAY = 24 * HOUR;
const API = workloadUri('acme', 'prod', 'api');
const WEB = workloadUri('acme', 'prod', 'web');

/** The value lines of `openssl x509 -noout -ext NAME`, joined, and whether it is marked critical. */
async function ext(pem: string, name: string): Promise<{ critical: boolean; value: string }> {
  const r = await openssl(['x509', '-noout', '-ext', name], pem);
  const lines = r.stdout.trim().split('\n');
  return { critical: /critical/.test(lines[0] ?? ''), value: lines.slice(1).map((l) => l.trim()).join(' ') };
}

async function dates(pem: string): Promise<{ notBefore: number; notAfter: number }> {
  const r = await openssl(['x509', '-noout', '-startdate', '-enddate'], pem);
  const get = (k: string): number => Date.parse(new RegExp(`${k}=(.*)`).exec(r.stdout)?.[1] ?? '');
  return { notBefore: get('notBefore'), notAfter: get('notAfter') };
}

t.test('a new CA: files, modes, subject and extensions as openssl reads them; reused by the next open', async (t) => {
  const dir = join(await tempDir(t), 'ca');
  const log = captureLogger();
  const before = Date.now();
  const ca = await LocalCa.open(dir, { org: 'acme', logger: log.logger });
  t.ok(log.entries.some((e) => e.msg === 'created the local mesh CA'));
  t.equal((await stat(dir)).mode & 0o777, 0o700);
  t.equal((await stat(join(dir, 'ca-key.pem'))).mode & 0o777, 0o600);
  t.equal((await stat(join(dir, 'ca.pem'))).mode & 0o777, 0o644);
  t.same((await readdir(dir)).sort(), ['ca-key.pem', 'ca.pem'], 'no temporary file left');
  t.equal(await readFile(join(dir, 'ca.pem'), 'utf8'), ca.caPem);

  const subject = await openssl(['x509', '-noout', '-subject', '-nameopt', 'RFC2253'], ca.caPem);
  t.equal(subject.stdout.trim(), 'subject=CN=svcproxy local mesh CA,O=acme');
  t.same(await ext(ca.caPem, 'basicConstraints'), { critical: true, value: 'CA:TRUE' });
  t.same(await ext(ca.caPem, 'keyUsage'), { critical: true, value: 'Certificate Sign, CRL Sign' });
  t.match((await ext(ca.caPem, 'subjectKeyIdentifier')).value, /^[0-9A-F]{2}(:[0-9A-F]{2}){19}$/);
  const d = await dates(ca.caPem);
  t.ok(d.notBefore <= before && d.notBefore >= before - 2 * 60_000, 'backdated a minute');
  t.ok(Math.abs(d.notAfter - (before + 3650 * DAY)) < 5 * 60_000, 'ten years');
  t.equal((await openssl(['verify', '-CAfile', join(dir, 'ca.pem'), join(dir, 'ca.pem')])).code, 0, 'self-signed');
  const key = await openssl(['ec', '-check', '-noout', '-in', join(dir, 'ca-key.pem')]);
  t.equal(key.code, 0, key.stderr);
  t.match(key.stderr + key.stdout, /EC Key valid/);
  t.match((await openssl(['pkey', '-in', join(dir, 'ca-key.pem'), '-noout', '-text'])).stdout, /prime256v1/);

  const again = await LocalCa.open(dir, { org: 'acme' });
  t.equal(again.caPem, ca.caPem, 'the same CA');
  const leaf = await again.issue(API, HOUR);
  t.equal((await openssl(['verify', '-CAfile', join(dir, 'ca.pem')], leaf.certPem)).code, 0, 'its certificates chain to the file');
});

t.test('an issued certificate, as openssl reads it, and in a TLS handshake', async (t) => {
  const dir = await tempDir(t);
  const clock = { wallNow: () => Date.now() };
  const ca = await LocalCa.open(join(dir, 'ca'), { org: 'acme', clock });
  const started = Date.now();
  const leaf = await ca.issue(WEB, HOUR);
  t.equal(leaf.uri, WEB);
  t.equal(leaf.caPem, ca.caPem);
  t.match(leaf.keyPem, /^-----BEGIN PRIVATE KEY-----\n/, 'PKCS#8');
  await writeFile(join(dir, 'leaf.pem'), leaf.certPem);
  await writeFile(join(dir, 'leaf-key.pem'), leaf.keyPem);
  const verify = await openssl(['verify', '-CAfile', join(dir, 'ca', 'ca.pem'), '-purpose', 'sslclient', join(dir, 'leaf.pem')]);
  t.equal(verify.code, 0, verify.stdout + verify.stderr);
  t.equal((await openssl(['verify', '-CAfile', join(dir, 'ca', 'ca.pem'), '-purpose', 'sslserver', join(dir, 'leaf.pem')])).code, 0);
  t.same(await ext(leaf.certPem, 'subjectAltName'), { critical: true, value: `URI:${WEB}` }, 'the only SAN, critical as the subject is empty');
  t.same(await ext(leaf.certPem, 'keyUsage'), { critical: true, value: 'Digital Signature, Key Agreement' });
  t.same(await ext(leaf.certPem, 'extendedKeyUsage'), { critical: false, value: 'TLS Web Server Authentication, TLS Web Client Authentication' });
  t.same(await ext(leaf.certPem, 'basicConstraints'), { critical: true, value: 'CA:FALSE' });
  const ski = (await ext(ca.caPem, 'subjectKeyIdentifier')).value;
  t.equal((await ext(leaf.certPem, 'authorityKeyIdentifier')).value.replace(/^keyid:/, ''), ski, 'AKI is the CA key id');
  t.match((await ext(leaf.certPem, 'subjectKeyIdentifier')).value, /^[0-9A-F]{2}(:[0-9A-F]{2}){19}$/);
  t.equal((await openssl(['x509', '-noout', '-subject'], leaf.certPem)).stdout.trim(), 'subject=', 'no subject');
  const d = await dates(leaf.certPem);
  t.ok(d.notBefore <= started - 59_000 && d.notBefore >= started - 62_000, 'backdated one minute');
  t.equal(d.notAfter, leaf.notAfter, 'notAfter as reported');
  t.ok(leaf.notAfter > started + HOUR - 2000 && leaf.notAfter <= Date.now() + HOUR);
  const key = await openssl(['ec', '-check', '-noout', '-in', join(dir, 'leaf-key.pem')]);
  t.equal(key.code, 0, key.stderr);
  t.equal(new X509Certificate(leaf.certPem).checkPrivateKey((await import('node:crypto')).createPrivateKey(leaf.keyPem)), true);

  const serials = new Set<string>();
  for (let i = 0; i < 20; i++) {
    const s = (await openssl(['x509', '-noout', '-serial'], (await ca.issue(WEB, HOUR)).certPem)).stdout.trim().replace('serial=', '');
    t.match(s, /^[4-7][0-9A-F]{31}$/, 'sixteen bytes, positive, no leading zero');
    serials.add(s);
  }
  t.equal(serials.size, 20, 'random serials');

  const server = await ca.issue(API, HOUR);
  t.same(await handshake(server, leaf), { ok: true, serverUri: WEB, clientUri: API }, 'each side reads the other');

  const other = await LocalCa.open(join(dir, 'other'), { org: 'acme' });
  const stranger = await other.issue(WEB, HOUR);
  const refused = await handshake(server, stranger);
  t.equal(refused.ok, false, 'a certificate of another CA is refused');
  t.match(refused, { reason: 'UNABLE_TO_VERIFY_LEAF_SIGNATURE' });
  t.equal((await openssl(['verify', '-CAfile', join(dir, 'ca', 'ca.pem')], stranger.certPem)).code, 2, 'openssl: not ours');

  const past = await LocalCa.open(join(dir, 'ca'), { org: 'acme', clock: { wallNow: () => Date.now() - 2 * HOUR } });
  const expired = await past.issue(WEB, 60_000);
  t.ok(expired.notAfter < Date.now() - HOUR);
  t.equal((await openssl(['verify', '-CAfile', join(dir, 'ca', 'ca.pem')], expired.certPem)).code, 2, 'openssl: expired');
  const late = await handshake(server, expired);
  t.equal(late.ok, false, 'an expired certificate is refused');
  t.match(late, { reason: 'CERT_HAS_EXPIRED' });
});

t.test('concurrent opens of an empty folder agree on one CA', async (t) => {
  const root = await tempDir(t);
  for (let round = 0; round < 8; round++) {
    const dir = join(root, `ca${round}`);
    const cas = await Promise.all([0, 1, 2, 3].map(() => LocalCa.open(dir, { org: 'acme' })));
    t.equal(new Set(cas.map((c) => c.caPem)).size, 1, `round ${round}`);
    const key = await readFile(join(dir, 'ca-key.pem'), 'utf8');
    t.ok(new X509Certificate(cas[0]!.caPem).checkPrivateKey((await import('node:crypto')).createPrivateKey(key)), 'the key on disk is its key');
    t.same((await readdir(dir)).sort(), ['ca-key.pem', 'ca.pem']);
  }
});

function childOpen(dir: string): Promise<string> {
  const script = `const { LocalCa } = await import(${JSON.stringify(new URL('../../src/mesh/ca.js', import.meta.url).href)});
    const ca = await LocalCa.open(${JSON.stringify(dir)}, { org: 'acme' }); process.stdout.write(ca.caPem);`;
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['--import=@tapjs/typescript/import', '--input-type=module', '-e', script], { encoding: 'utf8' }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
}

t.test('three processes opening one empty folder agree on one CA', async (t) => {
  const dir = join(await tempDir(t), 'ca');
  const pems = await Promise.all([childOpen(dir), childOpen(dir), childOpen(dir)]);
  t.equal(new Set(pems).size, 1);
  t.equal(pems[0], await readFile(join(dir, 'ca.pem'), 'utf8'));
});

t.test('a corrupt, mismatched, expired or nearly expired CA is replaced, and the replacement logged', async (t) => {
  const root = await tempDir(t);
  const opened = async (dir: string, clock?: { wallNow(): number }): Promise<{ ca: LocalCa; reason: unknown }> => {
    const log = captureLogger();
    const ca = await LocalCa.open(dir, { org: 'acme', logger: log.logger, ...(clock ? { clock } : {}) });
    return { ca, reason: log.entries.find((e) => e.msg === 'replacing the local mesh CA')?.reason };
  };

  const corrupt = join(root, 'corrupt');
  const first = await LocalCa.open(corrupt, { org: 'acme' });
  await writeFile(join(corrupt, 'ca.pem'), '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
  const fixed = await opened(corrupt);
  t.match(fixed.reason, /ca\.pem is not a certificate/);
  t.not(fixed.ca.caPem, first.caPem);
  t.equal((await openssl(['verify', '-CAfile', join(corrupt, 'ca.pem')], (await fixed.ca.issue(API, HOUR)).certPem)).code, 0);
  t.same((await readdir(corrupt)).sort(), ['ca-key.pem', 'ca-key.pem.replaced', 'ca.pem', 'ca.pem.replaced'], 'the bad one kept aside');

  const mismatch = join(root, 'mismatch');
  const a = await LocalCa.open(mismatch, { org: 'acme' });
  await LocalCa.open(join(root, 'b'), { org: 'acme' });
  await writeFile(join(mismatch, 'ca-key.pem'), await readFile(join(root, 'b', 'ca-key.pem')));
  const m = await opened(mismatch);
  t.match(m.reason, /ca-key\.pem does not match ca\.pem/);
  t.not(m.ca.caPem, a.caPem);

  const expired = join(root, 'expired');
  const old = await LocalCa.open(expired, { org: 'acme', clock: { wallNow: () => Date.now() - 3660 * DAY } });
  const e = await opened(expired);
  t.match(e.reason, /ca\.pem expired at/);
  t.not(e.ca.caPem, old.caPem);

  const soon = join(root, 'soon');
  const nearly = await LocalCa.open(soon, { org: 'acme', clock: { wallNow: () => Date.now() - 3640 * DAY } });
  t.equal((await opened(soon, { wallNow: () => Date.now() - 3640 * DAY })).ca.caPem, nearly.caPem, 'fine then');
  const s = await opened(soon);
  t.match(s.reason, /within 30 days/);
  t.not(s.ca.caPem, nearly.caPem);

  const keyOnly = join(root, 'keyonly');
  await LocalCa.open(keyOnly, { org: 'acme' });
  await (await import('node:fs/promises')).unlink(join(keyOnly, 'ca.pem'));
  const k = await LocalCa.open(keyOnly, { org: 'acme' });
  t.equal((await openssl(['verify', '-CAfile', join(keyOnly, 'ca.pem')], (await k.issue(API, HOUR)).certPem)).code, 0, 'a key left without its certificate is replaced');
});

const serialOf = (c: MeshCredentials): string => new X509Certificate(c.certPem).serialNumber;

t.test('issuedCredentials renews at two thirds of the ttl, not before', async (t) => {
  const clock = new FakeClock();
  const ca = await LocalCa.open(join(await tempDir(t), 'ca'), { org: 'acme', clock });
  const src = await issuedCredentials(ca, WEB, 3 * HOUR, { clock, logger: silentLogger() });
  t.teardown(() => src.close());
  const first = src.current();
  t.equal(first.notAfter, Math.floor((clock.wallNow() + 3 * HOUR) / 1000) * 1000);
  t.same(clock.pending(), [2 * HOUR]);
  const changes: MeshCredentials[] = [];
  src.onChange((c) => changes.push(c));

  clock.advance(2 * HOUR - 1);
  await new Promise((resolve) => setImmediate(resolve));
  t.equal(changes.length, 0, 'not before');
  t.equal(src.current(), first);

  const renewed = new Promise<MeshCredentials>((resolve) => src.onChange(resolve));
  clock.advance(1);
  const next = await renewed;
  t.not(serialOf(next), serialOf(first), 'a new serial');
  t.equal(src.current(), next);
  t.equal(next.notAfter, Math.floor((clock.wallNow() + 3 * HOUR) / 1000) * 1000);
  t.same(clock.pending(), [2 * HOUR], 'the next renewal');
  t.equal(changes.length, 1);
});

t.test('issuedCredentials: a failing issue is logged and retried with backoff capped at a tenth of the ttl', async (t) => {
  const clock = new FakeClock();
  const ca = await LocalCa.open(join(await tempDir(t), 'ca'), { org: 'acme', clock });
  let failures = 0;
  const flaky: CertificateIssuer = {
    issue: async (uri, ttl) => {
      if (failures > 0) {
        failures--;
        throw new Error('signing failed');
      }
      return ca.issue(uri, ttl);
    },
  };
  const ttl = 30_000;
  const log = captureLogger();
  const src = await issuedCredentials(flaky, WEB, ttl, { clock, logger: log.logger });
  t.teardown(() => src.close());
  const first = src.current();
  failures = 6;
  let logged = 0;
  const failed = async (): Promise<void> => {
    await log.waitFor((e) => e.msg.startsWith('mesh certificate renewal failed') && log.entries.filter((x) => x.level === 50).length > logged);
    logged++;
  };
  clock.advance(20_000);
  await failed();
  t.same(clock.pending(), [1000]);
  t.equal(src.current(), first, 'the old certificate stays');
  clock.advance(1000);
  await failed();
  t.same(clock.pending(), [2000]);
  clock.advance(2000);
  await failed();
  t.same(clock.pending(), [3000], 'capped at ttl/10');
  const renewed = new Promise<MeshCredentials>((resolve) => src.onChange(resolve));
  // Failures at 20, 21, 23, 26, 29 and 32 s; the first certificate ends at 30 s.
  for (const at of [26, 29, 32]) {
    clock.advance(3000);
    await failed();
    t.match(log.entries.at(-1), { expired: at > 30, retryInMs: 3000 }, `at ${at} s`);
  }
  t.match(log.entries.at(-1), { msg: /has expired/ }, 'past notAfter it says so, and keeps trying');
  t.equal(src.current(), first);
  t.same(clock.pending(), [3000]);
  clock.advance(3000);
  const next = await renewed;
  t.not(serialOf(next), serialOf(first));
  t.same(clock.pending(), [20_000], 'back to the normal schedule');
});

t.test('issuedCredentials: close() stops the timers and late results; long ttls wait in steps', async (t) => {
  const clock = new FakeClock();
  const ca = await LocalCa.open(join(await tempDir(t), 'ca'), { org: 'acme', clock });
  const src = await issuedCredentials(ca, WEB, HOUR, { clock, logger: silentLogger() });
  t.equal(clock.pending().length, 1);
  src.close();
  t.same(clock.pending(), [], 'no timer left');

  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let calls = 0;
  let lateDone!: () => void;
  const late = new Promise<void>((resolve) => (lateDone = resolve));
  const slow: CertificateIssuer = {
    issue: async (u, ttl) => {
      if (calls++ === 0) return ca.issue(u, ttl);
      await gate;
      const c = await ca.issue(u, ttl);
      setImmediate(lateDone);
      return c;
    },
  };
  const src2 = await issuedCredentials(slow, WEB, HOUR, { clock, logger: silentLogger() });
  let changed = 0;
  src2.onChange(() => changed++);
  const first = src2.current();
  clock.advance(40 * 60_000);
  src2.close();
  release();
  await late;
  t.equal(changed, 0, 'no change after close');
  t.equal(src2.current(), first);
  t.same(clock.pending(), []);

  const long = await issuedCredentials(ca, WEB, 60 * DAY, { clock, logger: silentLogger() });
  t.teardown(() => long.close());
  t.same(clock.pending(), [2 ** 31 - 1], 'a Node timer cannot wait 40 days at once');
  const before = long.current();
  clock.advance(2 ** 31 - 1);
  t.same(clock.pending(), [40 * DAY - (2 ** 31 - 1)]);
  t.equal(long.current(), before);
});

t.test('the X.509 library is loaded only when a CA is opened', async (t) => {
  const script = `import { createRequire } from 'node:module';
    const req = createRequire(import.meta.url);
    const loaded = () => [Object.keys(req.cache).some((k) => k.includes('@peculiar')), typeof Reflect.getMetadata === 'function'];
    const mesh = await import(${JSON.stringify(new URL('../../src/mesh/index.js', import.meta.url).href)});
    const before = loaded();
    await mesh.LocalCa.open(process.argv[1], { org: 'acme' });
    process.stdout.write(JSON.stringify({ before, after: loaded() }));`;
  const dir = join(await tempDir(t), 'ca');
  const out = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, ['--import=@tapjs/typescript/import', '--input-type=module', '-e', script, dir], { encoding: 'utf8' }, (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    );
  });
  t.same(JSON.parse(out), { before: [false, false], after: [true, true] });
});
