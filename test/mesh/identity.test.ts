/**
 * Workload identity (src/mesh/identity.ts) against references. parseSpiffeUri: a table, then
 * generated and mutated URIs judged by the WHATWG URL parser (what is well-formed: one scheme, a
 * host, a path left as written, no user, port, query or fragment) plus the SPIFFE ID spec's
 * character rules; workloadUri round-trips through it. uriSanOf and parseSubjectAltName: certificates
 * with generated SAN lists (DNS, URI, email; values with commas, quotes, backslashes, non-ASCII)
 * read back from Node's X509Certificate and from a real TLS handshake, and certificates made by
 * `openssl req` as a second encoder. xfccValue: its shape, and the hash against
 * `openssl x509 -outform der | sha256sum`. The seed is printed; rerun with MESH_IDENTITY_SEED.
 */
import t from 'tap';
import { execFile } from 'node:child_process';
import { webcrypto, X509Certificate } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { loadX509, LocalCa } from '../../src/mesh/ca.js';
import { DEFAULT_ORG, certificateHash, parseSpiffeUri, parseSubjectAltName, uriSanOf, workloadUri, xfccValue, type MeshPeer } from '../../src/mesh/identity.js';
import { prng, testSeed } from '../helpers/seed.js';
import { handshake, openssl, tempDir } from './fixtures.js';

const SEED = testSeed('MESH_IDENTITY_SEED', 20261127);
t.comment(`MESH_IDENTITY_SEED=${SEED}`);
const rnd = prng(SEED);
const int = (n: number): number => Math.floor(rnd() * n);
const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)] as T;
const chars = (alphabet: string, min: number, max: number): string =>
  Array.from({ length: min + int(max - min + 1) }, () => alphabet[int(alphabet.length)]).join('');

t.test('parseSpiffeUri: table', async (t) => {
  const cases: [string, MeshPeer | undefined][] = [
    ['spiffe://acme/gvc/prod/workload/api', { uri: 'spiffe://acme/gvc/prod/workload/api', org: 'acme', gvc: 'prod', workload: 'api' }],
    ['spiffe://local/gvc/g-1/workload/w2', { uri: 'spiffe://local/gvc/g-1/workload/w2', org: 'local', gvc: 'g-1', workload: 'w2' }],
    // Well-formed but not a workload: the trust domain only.
    ['spiffe://acme/ingress', { uri: 'spiffe://acme/ingress', org: 'acme' }],
    ['spiffe://example.org/ns/default/sa/web', { uri: 'spiffe://example.org/ns/default/sa/web', org: 'example.org' }],
    ['spiffe://example.org/gvc/prod/workload/api', { uri: 'spiffe://example.org/gvc/prod/workload/api', org: 'example.org' }],
    ['spiffe://acme/gvc/Prod/workload/api', { uri: 'spiffe://acme/gvc/Prod/workload/api', org: 'acme' }],
    ['spiffe://acme/gvc/prod/workload/api/extra', { uri: 'spiffe://acme/gvc/prod/workload/api/extra', org: 'acme' }],
    ['spiffe://acme/gvc/-x/workload/api', { uri: 'spiffe://acme/gvc/-x/workload/api', org: 'acme' }],
    [`spiffe://acme/gvc/${'a'.repeat(65)}/workload/api`, { uri: `spiffe://acme/gvc/${'a'.repeat(65)}/workload/api`, org: 'acme' }],
    ['spiffe://acme', undefined],
    ['spiffe://acme/', undefined],
    ['spiffe://acme/gvc/prod/workload/api/', undefined],
    ['spiffe://acme//gvc', undefined],
    ['spiffe://acme/gvc/../workload/api', undefined],
    ['spiffe://acme/gvc/./workload', undefined],
    ['spiffe://acme/gvc/pr%6Fd/workload/api', undefined],
    ['spiffe://acme/gvc/prod/workload/api?x=1', undefined],
    ['spiffe://acme/gvc/prod/workload/api#f', undefined],
    ['spiffe://ACME/gvc/prod/workload/api', undefined],
    ['SPIFFE://acme/gvc/prod/workload/api', undefined],
    ['spiffe://acme:443/gvc/prod/workload/api', undefined],
    ['spiffe://user@acme/gvc/prod/workload/api', undefined],
    ['spiffe:///gvc/prod/workload/api', undefined],
    ['https://acme/gvc/prod/workload/api', undefined],
    ['spiffe://acme/gvc/prod/workload/a b', undefined],
    ['spiffe://acme/gvc/prod/workload/ap\u00e9', undefined],
    ['', undefined],
  ];
  for (const [uri, want] of cases) t.same(parseSpiffeUri(uri), want, JSON.stringify(uri));
  t.equal(DEFAULT_ORG, 'local');
  t.equal(workloadUri('acme', 'prod', 'api'), 'spiffe://acme/gvc/prod/workload/api');
});

/** The reference: WHATWG URL decides the structure, the SPIFFE spec's character rules the rest. */
function oracle(s: string): MeshPeer | undefined {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    return undefined;
  }
  // Rebuilt from the parts the parser found: anything else (user, port, query, fragment, even
  // empty ones) or any normalization (dot segments, case, percent-encoding) makes it differ.
  if (u.protocol !== 'spiffe:' || u.port !== '' || `spiffe://${u.hostname}${u.pathname}` !== s || u.href !== s) return undefined;
  if (!/^[a-z0-9._-]+$/.test(u.hostname)) return undefined;
  const segments = u.pathname.split('/').slice(1);
  if (u.pathname === '' || segments.some((p) => !/^[A-Za-z0-9._-]+$/.test(p) || p === '.' || p === '..')) return undefined;
  const name = (x: string | undefined): boolean => x !== undefined && x.length <= 64 && /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/.test(x);
  if (segments.length === 4 && segments[0] === 'gvc' && segments[2] === 'workload' && name(u.hostname) && name(segments[1]) && name(segments[3])) {
    return { uri: s, org: u.hostname, gvc: segments[1], workload: segments[3] };
  }
  return { uri: s, org: u.hostname };
}

const NAME_CHARS = 'abcdefghijklmnopqrstuvwxyz0123456789-';
/** A platform name (1-64 characters), or with `tooLong` sometimes one of 65. */
function randomName(tooLong = false): string {
  const n = pick(tooLong ? [1, 2, 5, 12, 64, 65] : [1, 2, 5, 12, 63, 64]);
  if (n === 1) return chars('abz09', 1, 1);
  return chars('abz09', 1, 1) + chars(NAME_CHARS, n - 2, n - 2) + chars('abz09', 1, 1);
}

function randomUri(): string {
  const scheme = pick(['spiffe://', 'spiffe://', 'spiffe://', 'spiffe://', 'spiffe://', 'SPIFFE://', 'spiffe:/', 'spiffes://', 'http://', '']);
  const td = pick([() => randomName(true), () => randomName(), () => 'example.org', () => chars('abcxyz019.-_AZ%:@', 1, 8), () => '']) ();
  const segs = Array.from({ length: int(6) }, () =>
    pick([() => randomName(), () => chars('abAZ09._-', 1, 6), () => pick(['.', '..', '', 'gvc', 'workload']), () => chars('ab%2F?#@:;= \u00e9\\', 1, 3)])(),
  );
  if (rnd() < 0.4) return `${scheme}${td}/gvc/${randomName(true)}/workload/${randomName(true)}`;
  return `${scheme}${td}${segs.map((s) => `/${s}`).join('')}`;
}

function mutate(s: string): string {
  const at = int(s.length + 1);
  const c = pick(['/', '%', '?', '#', '@', ':', 'A', '.', '..', '\\', ' ', '\t', '-', '_', '%41', '\u00e9', '']);
  switch (int(4)) {
    case 0:
      return s.slice(0, at) + c + s.slice(at);
    case 1:
      return s.slice(0, at) + s.slice(at + 1);
    case 2:
      return s.slice(0, at) + c + s.slice(at + 1);
    default:
      return s.slice(0, at) + s.slice(at, at + 3) + s.slice(at);
  }
}

t.test('parseSpiffeUri: generated and mutated URIs agree with the WHATWG URL parser', async (t) => {
  let accepted = 0;
  let workloads = 0;
  let mismatches = 0;
  for (let i = 0; i < 6000; i++) {
    let s = randomUri();
    for (let m = pick([0, 0, 1, 2, 3]); m > 0; m--) s = mutate(s);
    const got = parseSpiffeUri(s);
    const want = oracle(s);
    if (JSON.stringify(got) !== JSON.stringify(want)) {
      if (mismatches++ < 10) t.same(got, want, `${JSON.stringify(s)} (seed ${SEED})`);
    }
    if (got) accepted++;
    if (got?.workload) workloads++;
  }
  t.equal(mismatches, 0, 'no disagreement');
  // The draw covers both answers and both kinds of identity.
  t.ok(accepted > 500 && accepted < 5500, `accepted ${accepted}`);
  t.ok(workloads > 100, `workloads ${workloads}`);
});

t.test('workloadUri round-trips through parseSpiffeUri for platform names', async (t) => {
  for (let i = 0; i < 500; i++) {
    const [org, gvc, w] = [randomName(), randomName(), randomName()] as [string, string, string];
    const uri = workloadUri(org, gvc, w);
    t.same(parseSpiffeUri(uri), { uri, org, gvc, workload: w }, uri);
  }
});

type San = { type: 'dns' | 'url' | 'email'; value: string };
const SAN_TYPE = { dns: 'DNS', url: 'URI', email: 'email' } as const;

async function certWithSans(sans: San[]): Promise<X509Certificate> {
  const x = await loadX509();
  const alg = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
  const keys = (await webcrypto.subtle.generateKey(alg, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x.X509CertificateGenerator.createSelfSigned({
    name: 'CN=sans',
    keys,
    signingAlgorithm: alg,
    extensions: [new x.SubjectAlternativeNameExtension(sans, false)],
  });
  return new X509Certificate(cert.toString('pem'));
}

/** SAN values are IA5String: one byte a character (é is written as the byte 0xe9, which Node escapes). */
const VALUE_CHARS = 'abz09:/.-_,"\\ =;\u00e9@';

t.test('parseSubjectAltName and uriSanOf read what Node reports for generated SAN lists', async (t) => {
  for (let i = 0; i < 150; i++) {
    const sans: San[] = Array.from({ length: 1 + int(4) }, () => {
      const type = pick(['dns', 'url', 'url', 'email'] as const);
      const value = type === 'url' && rnd() < 0.5 ? workloadUri(randomName(), randomName(), randomName()) : chars(VALUE_CHARS, 1, 12);
      return { type, value };
    });
    const cert = await certWithSans(sans);
    const entries = parseSubjectAltName(cert.subjectAltName ?? '');
    t.same(entries, sans.map((s) => ({ type: SAN_TYPE[s.type], value: s.value })), `${JSON.stringify(cert.subjectAltName)} (seed ${SEED})`);
    const uris = sans.filter((s) => s.type === 'url');
    t.equal(uriSanOf({ subjectaltname: cert.subjectAltName }), uris.length === 1 ? uris[0]?.value : undefined);
  }
  t.equal(uriSanOf(undefined), undefined);
  t.equal(uriSanOf({}), undefined);
  t.equal(uriSanOf({ subjectaltname: 'DNS:a.example' }), undefined);
  // Not Node's shape: refused rather than guessed.
  t.equal(uriSanOf({ subjectaltname: 'URI:"spiffe://a/b' }), undefined);
  t.equal(uriSanOf({ subjectaltname: 'URI:spiffe://a/b,URI:x' }), 'spiffe://a/b,URI:x');
  t.equal(parseSubjectAltName('URI:a, '), undefined);
  t.equal(parseSubjectAltName('nocolon'), undefined);
});

t.test('uriSanOf on certificates made by openssl req', async (t) => {
  const dir = await tempDir(t);
  const cases: { sans: string[]; want: string | undefined }[] = [
    { sans: ['DNS.1 = api.example', 'URI.1 = spiffe://acme/gvc/prod/workload/api'], want: 'spiffe://acme/gvc/prod/workload/api' },
    { sans: ['URI.1 = spiffe://acme/a', 'URI.2 = spiffe://acme/b'], want: undefined },
    { sans: ['URI.1 = spiffe://acme/a,b'], want: 'spiffe://acme/a,b' },
    // The config file's syntax: a backslash escapes the quote.
    { sans: ['URI.1 = spiffe://acme/a\\"b'], want: 'spiffe://acme/a"b' },
    { sans: ['DNS.1 = a.example', 'IP.1 = 127.0.0.1', 'email.1 = x@y.example'], want: undefined },
  ];
  for (const [i, c] of cases.entries()) {
    const conf = join(dir, `req${i}.cnf`);
    await writeFile(conf, ['[req]', 'distinguished_name = dn', 'x509_extensions = ext', 'prompt = no', '[dn]', 'CN = t', '[ext]', 'subjectAltName = @alt', '[alt]', ...c.sans, ''].join('\n'));
    const cert = join(dir, `cert${i}.pem`);
    const r = await openssl(['req', '-x509', '-config', conf, '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', join(dir, `key${i}.pem`), '-out', cert, '-days', '1']);
    t.equal(r.code, 0, r.stderr);
    const x = new X509Certificate(await readFile(cert));
    t.equal(uriSanOf({ subjectaltname: x.subjectAltName }), c.want, JSON.stringify(x.subjectAltName));
  }
});

t.test('uriSanOf reads the peer certificate of a real TLS handshake, special characters included', async (t) => {
  const ca = await LocalCa.open(await tempDir(t), { org: 'acme' });
  const server = await ca.issue(workloadUri('acme', 'prod', 'api'), 3600_000);
  for (const uri of ['spiffe://acme/gvc/prod/workload/web', 'spiffe://acme/a,b', 'spiffe://acme/a"b\\c', 'spiffe://acme/\u00e9, URI:spiffe://evil/x']) {
    const client = await ca.issue(uri, 3600_000);
    const h = await handshake(server, client);
    t.same(h, { ok: true, serverUri: uri, clientUri: server.uri }, uri);
  }
});

function sha256sum(input: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile('sha256sum', { encoding: 'utf8' }, (err, stdout) => (err ? reject(err) : resolve(stdout.split(' ')[0] as string)));
    child.stdin?.end(input);
  });
}

t.test('xfccValue: By, Hash (openssl x509 -outform der | sha256sum) and URI, quoted as Envoy does', async (t) => {
  const ca = await LocalCa.open(await tempDir(t), { org: 'acme' });
  const caller = await ca.issue(workloadUri('acme', 'prod', 'web'), 3600_000);
  const der = new X509Certificate(caller.certPem).raw;
  const ref = await openssl(['x509', '-outform', 'der'], caller.certPem);
  t.equal(ref.code, 0);
  const hash = await sha256sum(Buffer.from(ref.stdout, 'latin1'));
  t.match(hash, /^[0-9a-f]{64}$/);
  t.equal(certificateHash(der), hash);
  const by = workloadUri('acme', 'prod', 'api');
  t.equal(xfccValue(by, der, caller.uri), `By=${by};Hash=${hash};URI=${caller.uri}`);
  t.equal(xfccValue('spiffe://a/b', der, 'spiffe://a/c,d'), `By=spiffe://a/b;Hash=${hash};URI="spiffe://a/c,d"`);
  t.equal(xfccValue('spiffe://a/b;x', der, 'spiffe://a/"q"=\\'), `By="spiffe://a/b;x";Hash=${hash};URI="spiffe://a/\\"q\\"=\\\\"`);
});
