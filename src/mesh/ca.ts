/**
 * The local mesh CA that `up` keeps in `.svcproxy/ca/` and the sidecar certificates it issues
 * (DESIGN.md §9), and credentials renewed from it at two thirds of their lifetime. Certificates are
 * built by @peculiar/x509 on Node's WebCrypto, loaded on first use only, so a process without a
 * mesh never loads it. The CA files are created without clobbering (temporary file, then `link`),
 * so two processes starting at once agree on one CA; a CA that is unreadable, expires within 30
 * days or whose key does not match is moved aside (`*.replaced`) and a new one made. Failing to
 * create the folder or the files throws; a failed renewal is logged and retried with backoff.
 */
import { KeyObject, createPrivateKey, X509Certificate as NodeX509, webcrypto } from 'node:crypto';
import { constants as fsConstants } from 'node:fs';
import { copyFile, link, mkdir, readFile, rename, unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import type * as X509 from '@peculiar/x509';
import type { Clock, Timer } from '../deps.js';
import type { CredentialSource, MeshCredentials } from './credentials.js';
import { ChangeListeners } from './listeners.js';

const CA_FILE = 'ca.pem';
const KEY_FILE = 'ca-key.pem';
const CA_VALIDITY_MS = 10 * 365 * 24 * 3600_000;
const CA_MIN_REMAINING_MS = 30 * 24 * 3600_000;
/** Peers' clocks may be a little behind ours. */
const BACKDATE_MS = 60_000;
const CA_SUBJECT_CN = 'svcproxy local mesh CA';
const EC = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
/** Waiting for another process that linked the key but not yet the certificate: 40 × 50 ms. */
const PARTIAL_WAITS = 40;
const OPEN_ATTEMPTS = 5;

let x509Lib: Promise<typeof X509> | undefined;

/** @peculiar/x509 on Node's WebCrypto, loaded once, on first use (its tsyringe needs reflect-metadata first). */
export function loadX509(): Promise<typeof X509> {
  x509Lib ??= (async () => {
    await import('reflect-metadata');
    const lib = await import('@peculiar/x509');
    lib.cryptoProvider.set(webcrypto as unknown as Crypto);
    return lib;
  })();
  return x509Lib;
}

function isCode(err: unknown, code: string): boolean {
  return (err as NodeJS.ErrnoException | undefined)?.code === code;
}

async function readOrUndefined(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, 'utf8');
  } catch (err) {
    if (isCode(err, 'ENOENT')) return undefined;
    throw err;
  }
}

function pemOf(cert: X509.X509Certificate): string {
  const pem = cert.toString('pem').replace(/\r\n/g, '\n');
  return pem.endsWith('\n') ? pem : `${pem}\n`;
}

/** A random positive serial: 16 bytes, top bit clear (positive), next bit set (no leading zero byte). */
function randomSerial(): string {
  const bytes = webcrypto.getRandomValues(new Uint8Array(16));
  bytes[0] = ((bytes[0] as number) & 0x7f) | 0x40;
  return Buffer.from(bytes).toString('hex');
}

type Loaded = { ca: LoadedCa } | { missing: 'both' | 'cert' } | { bad: string; certText?: string; keyText?: string };
interface LoadedCa {
  readonly certPem: string;
  readonly key: KeyObject;
}

/** What is in `dir`: a usable CA, nothing (or a key whose certificate is not linked yet), or a bad CA and why. */
async function loadCa(dir: string, wallNow: number): Promise<Loaded> {
  // The certificate first: creators link the key before the certificate, so a certificate seen means a key is there.
  const certText = await readOrUndefined(join(dir, CA_FILE));
  const keyText = await readOrUndefined(join(dir, KEY_FILE));
  if (certText === undefined) return keyText === undefined ? { missing: 'both' } : { missing: 'cert' };
  if (keyText === undefined) return { bad: `${CA_FILE} has no ${KEY_FILE}`, certText };
  let cert: NodeX509;
  let key: KeyObject;
  try {
    cert = new NodeX509(certText);
  } catch (err) {
    return { bad: `${CA_FILE} is not a certificate (${(err as Error).message})`, certText, keyText };
  }
  try {
    key = createPrivateKey(keyText);
  } catch {
    return { bad: `${KEY_FILE} is not a private key`, certText, keyText };
  }
  if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') {
    return { bad: `${KEY_FILE} is not an ECDSA P-256 key`, certText, keyText };
  }
  if (!cert.checkPrivateKey(key)) return { bad: `${KEY_FILE} does not match ${CA_FILE}`, certText, keyText };
  if (!cert.ca) return { bad: `${CA_FILE} is not a CA certificate`, certText, keyText };
  const notAfter = Date.parse(cert.validTo);
  if (!(notAfter - wallNow > CA_MIN_REMAINING_MS)) {
    const when = new Date(notAfter).toISOString();
    return { bad: notAfter <= wallNow ? `${CA_FILE} expired at ${when}` : `${CA_FILE} expires at ${when}, within 30 days`, certText, keyText };
  }
  return { ca: { certPem: certText, key } };
}

async function createCa(org: string, wallNow: number): Promise<{ certPem: string; keyPem: string }> {
  const x = await loadX509();
  const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
  const cert = await x.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerial(),
    name: [{ O: [org] }, { CN: [CA_SUBJECT_CN] }],
    notBefore: new Date(wallNow - BACKDATE_MS),
    notAfter: new Date(wallNow + CA_VALIDITY_MS),
    keys,
    signingAlgorithm: EC,
    extensions: [
      new x.BasicConstraintsExtension(true, undefined, true),
      new x.KeyUsagesExtension(x.KeyUsageFlags.keyCertSign | x.KeyUsageFlags.cRLSign, true),
      await x.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const keyPem = KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string;
  return { certPem: pemOf(cert), keyPem };
}

/** Writes `text` to a new temporary file in `dir` and links it as `name` unless that exists; false when it did. */
async function linkNew(dir: string, name: string, text: string, mode: number): Promise<boolean> {
  const tmp = join(dir, `.${name}.${process.pid}.${randomSerial().slice(0, 8)}.tmp`);
  await writeFile(tmp, text, { mode, flag: 'wx' });
  try {
    try {
      await link(tmp, join(dir, name));
    } catch (err) {
      // A file system without hard links: an exclusive copy still lets one process win.
      if (!['EPERM', 'ENOTSUP', 'ENOSYS', 'EOPNOTSUPP'].some((code) => isCode(err, code))) throw err;
      await copyFile(tmp, join(dir, name), fsConstants.COPYFILE_EXCL);
    }
    return true;
  } catch (err) {
    if (isCode(err, 'EEXIST')) return false;
    throw err;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}

/** Moves a bad CA aside, unless another process already replaced what we judged. */
async function moveAside(dir: string, judged: { certText?: string; keyText?: string }): Promise<void> {
  const certText = await readOrUndefined(join(dir, CA_FILE));
  const keyText = await readOrUndefined(join(dir, KEY_FILE));
  if (certText !== judged.certText || keyText !== judged.keyText) return;
  // The certificate first, so that a reader never sees it without its key.
  for (const name of [CA_FILE, KEY_FILE]) {
    await rename(join(dir, name), join(dir, `${name}.replaced`)).catch((err: unknown) => {
      if (!isCode(err, 'ENOENT')) throw err;
    });
  }
}

export class LocalCa {
  private constructor(
    readonly caPem: string,
    private readonly caCert: X509.X509Certificate,
    private readonly signingKey: CryptoKey,
    private readonly authorityKeyId: X509.Extension,
    private readonly clock: Pick<Clock, 'wallNow'>,
    private readonly x: typeof X509,
  ) {}

  /** Opens the CA kept in `dir`, creating it (or replacing a bad one) as the module comment says. */
  static async open(dir: string, opts: { org: string; clock?: Pick<Clock, 'wallNow'>; logger?: Logger }): Promise<LocalCa> {
    const clock = opts.clock ?? { wallNow: () => Date.now() };
    await mkdir(dir, { recursive: true, mode: 0o700 });
    let waits = 0;
    for (let attempt = 0; attempt < OPEN_ATTEMPTS; ) {
      const found = await loadCa(dir, clock.wallNow());
      if ('ca' in found) return LocalCa.from(found.ca, clock);
      if ('missing' in found && found.missing === 'cert' && waits < PARTIAL_WAITS) {
        // Another process linked its key and is about to link its certificate.
        waits++;
        await sleep(50);
        continue;
      }
      attempt++;
      if ('bad' in found) {
        opts.logger?.warn({ dir, reason: found.bad }, 'replacing the local mesh CA');
        await moveAside(dir, found);
        continue;
      }
      if (found.missing === 'cert') {
        opts.logger?.warn({ dir }, `replacing the local mesh CA: ${KEY_FILE} without ${CA_FILE}`);
        await moveAside(dir, { keyText: await readOrUndefined(join(dir, KEY_FILE)) });
        continue;
      }
      const made = await createCa(opts.org, clock.wallNow());
      // The key first: whoever links it wins, and a certificate is only ever linked beside its own key.
      if (await linkNew(dir, KEY_FILE, made.keyPem, 0o600)) {
        if (await linkNew(dir, CA_FILE, made.certPem, 0o644)) opts.logger?.info({ dir }, 'created the local mesh CA');
      }
      waits = 0;
    }
    throw new Error(`cannot create a usable local mesh CA in ${dir}`);
  }

  private static async from(found: LoadedCa, clock: Pick<Clock, 'wallNow'>): Promise<LocalCa> {
    const x = await loadX509();
    const caCert = new x.X509Certificate(found.certPem);
    const pkcs8 = found.key.export({ type: 'pkcs8', format: 'der' });
    const signingKey = await webcrypto.subtle.importKey('pkcs8', pkcs8, { name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign']);
    const ski = caCert.getExtension(x.SubjectKeyIdentifierExtension);
    const aki = ski
      ? new x.AuthorityKeyIdentifierExtension(ski.keyId)
      : await x.AuthorityKeyIdentifierExtension.create(await caCert.publicKey.export());
    return new LocalCa(found.certPem, caCert, signingKey, aki, clock, x);
  }

  /**
   * A fresh ECDSA P-256 key and a leaf whose only SAN is `uri` (critical, the subject being empty),
   * valid from one minute ago to now + `ttlMs` (whole seconds, as X.509 stores them), for TLS
   * server and client use. About 5–10 ms.
   */
  async issue(uri: string, ttlMs: number): Promise<MeshCredentials> {
    const x = this.x;
    const now = this.clock.wallNow();
    const notAfter = Math.floor((now + ttlMs) / 1000) * 1000;
    const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as CryptoKeyPair;
    const cert = await x.X509CertificateGenerator.create({
      serialNumber: randomSerial(),
      subject: '',
      issuer: this.caCert.subjectName,
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(notAfter),
      publicKey: keys.publicKey,
      signingKey: this.signingKey,
      signingAlgorithm: EC,
      extensions: [
        new x.SubjectAlternativeNameExtension([{ type: 'url', value: uri }], true),
        new x.BasicConstraintsExtension(false, undefined, true),
        new x.KeyUsagesExtension(x.KeyUsageFlags.digitalSignature | x.KeyUsageFlags.keyAgreement, true),
        new x.ExtendedKeyUsageExtension([x.ExtendedKeyUsage.serverAuth, x.ExtendedKeyUsage.clientAuth]),
        this.authorityKeyId,
        await x.SubjectKeyIdentifierExtension.create(keys.publicKey),
      ],
    });
    const keyPem = KeyObject.from(keys.privateKey).export({ type: 'pkcs8', format: 'pem' }) as string;
    return { certPem: pemOf(cert), keyPem, caPem: this.caPem, uri, notAfter };
  }
}

/** What `issuedCredentials` needs of a CA (a `LocalCa`, or a stand-in in tests). */
export interface CertificateIssuer {
  issue(uri: string, ttlMs: number): Promise<MeshCredentials>;
}

/** Node's timers fire at once past 2^31-1 ms: longer waits are taken in steps. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * Credentials issued by `ca` for `uri` and renewed at two thirds of `ttlMs` (timers from
 * deps.clock, times from clock.wallNow()). A failed renewal is logged and retried (1 s doubling,
 * capped at a tenth of the ttl), and keeps being retried once the old certificate has expired
 * (logged as such): the last certificate stays current. The first issue's failure is thrown.
 */
export async function issuedCredentials(ca: CertificateIssuer, uri: string, ttlMs: number, deps: { clock: Clock; logger: Logger }): Promise<CredentialSource> {
  const { clock, logger } = deps;
  /**
   * Two thirds into the ttl, and at least a sixth of it before the certificate ends: its notAfter is
   * whole seconds rounded down, so a short ttl's certificate (`--mesh-cert-ttl 3s`) can end up to a
   * second early, which left a renewal at two thirds no time at all on a busy machine.
   */
  const renewalAt = (issuedAt: number, c: MeshCredentials): number => Math.min(issuedAt + (ttlMs * 2) / 3, c.notAfter - ttlMs / 6);
  let current = await ca.issue(uri, ttlMs);
  let renewAt = renewalAt(clock.wallNow(), current);
  let backoff = 1000;
  let timer: Timer | undefined;
  let closed = false;
  const listeners = new ChangeListeners<MeshCredentials>(logger);

  const schedule = (delay: number): void => {
    timer = clock.setTimeout(() => void tick(), Math.max(0, Math.min(delay, MAX_TIMER_MS)));
    timer.unref?.();
  };
  const tick = async (): Promise<void> => {
    timer = undefined;
    const wait = renewAt - clock.wallNow();
    if (wait > 0) return schedule(wait);
    try {
      const next = await ca.issue(uri, ttlMs);
      if (closed) return;
      current = next;
      renewAt = renewalAt(clock.wallNow(), next);
      backoff = 1000;
      schedule(renewAt - clock.wallNow());
      listeners.emit(next);
    } catch (err) {
      if (closed) return;
      const retryIn = Math.min(backoff, ttlMs / 10);
      const expired = current.notAfter <= clock.wallNow();
      logger.error({ err, uri, retryInMs: retryIn, expired }, expired ? 'mesh certificate renewal failed; the certificate has expired' : 'mesh certificate renewal failed');
      backoff = Math.min(backoff * 2, ttlMs / 10);
      schedule(retryIn);
    }
  };
  schedule(renewAt - clock.wallNow());

  return {
    current: () => current,
    onChange: (listener) => listeners.add(listener),
    close: () => {
      closed = true;
      clock.clearTimeout(timer);
      timer = undefined;
      listeners.clear();
    },
  };
}
