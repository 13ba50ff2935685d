/**
 * A sidecar's mesh credentials (its certificate, key and the trust bundle) and where they come
 * from: PEM files mounted by cert-manager or SPIRE (`--mesh-cert/--mesh-key/--mesh-ca`), checked
 * with Node's own X509Certificate and reloaded when they change, or the local CA (ca.ts). A bad
 * initial set throws an Error naming the file and the fault (never the key's content); a bad new
 * set is logged and the last good one kept, so a half-written rotation never takes the mesh down.
 */
import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import type { FSWatcher } from 'node:fs';
import { createSecureContext, type SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import { watchConfigPaths } from '../config/watch.js';
import { parseSpiffeUri, parseSubjectAltName } from './identity.js';
import { ChangeListeners } from './listeners.js';

export interface MeshCredentials {
  /** The leaf (followed by any intermediates). */
  readonly certPem: string;
  /** PKCS#8 PEM. */
  readonly keyPem: string;
  /** The trust bundle (one or more CA certificates). */
  readonly caPem: string;
  /** The leaf's URI SAN. */
  readonly uri: string;
  /** Wall-clock ms since epoch. */
  readonly notAfter: number;
}

export interface CredentialSource {
  current(): MeshCredentials;
  /** Called after every successful renewal or reload; returns an unsubscribe function. */
  onChange(listener: (c: MeshCredentials) => void): () => void;
  close(): void;
}

export interface CredentialFiles {
  readonly cert: string;
  readonly key: string;
  readonly ca: string;
}

/**
 * The mesh's TLS 1.3 suites, ChaCha20-Poly1305 first (the server's order decides): the hop carries
 * many small records (a request or an answer each), and on them OpenSSL 3.0's AES-GCM costs about
 * twice ChaCha20-Poly1305 even with AES-NI (`openssl speed -evp`, 64 to 1,024-byte records; the two
 * are level at 16 KiB). AES-128-GCM then AES-256-GCM stay offered.
 */
export const MESH_CIPHERSUITES = 'TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384';

/** A TLS context presenting these credentials and trusting their bundle (for a server, add requestCert). */
export function secureContextOf(c: MeshCredentials): SecureContext {
  return createSecureContext({ cert: c.certPem, key: c.keyPem, ca: c.caPem, ciphers: MESH_CIPHERSUITES });
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g;
/** Longer chains than this are refused rather than walked. */
const MAX_CHAIN = 8;
const DEBOUNCE_MS = 100;
const POLL_MS = 5000;

function certificatesIn(text: string, file: string): X509Certificate[] {
  const blocks = text.match(PEM_CERT) ?? [];
  if (blocks.length === 0) throw new Error(`${file}: no PEM certificate in the file`);
  return blocks.map((block, i) => {
    try {
      return new X509Certificate(block);
    } catch (err) {
      throw new Error(`${file}: certificate ${i + 1} is not valid X.509 (${(err as Error).message})`);
    }
  });
}

function issuedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

function checkValid(cert: X509Certificate, what: string, now: number): void {
  const notAfter = Date.parse(cert.validTo);
  if (!(notAfter > now)) throw new Error(`${what} expired at ${new Date(notAfter).toISOString()}`);
}

/** Walks from the leaf through the given intermediates to a CA of the bundle, each signature checked. */
function checkChain(leaf: X509Certificate, intermediates: X509Certificate[], anchors: X509Certificate[], files: CredentialFiles, now: number): void {
  let current = leaf;
  const unused = new Set(intermediates);
  for (let depth = 0; depth < MAX_CHAIN; depth++) {
    const anchor = anchors.find((a) => issuedBy(current, a));
    if (anchor) return checkValid(anchor, `${files.ca}: the CA certificate ${anchor.subject.replace(/\n/g, ', ')}`, now);
    const next = [...unused].find((c) => issuedBy(current, c));
    if (!next) break;
    checkValid(next, `${files.cert}: the intermediate certificate ${next.subject.replace(/\n/g, ', ')}`, now);
    unused.delete(next);
    current = next;
  }
  throw new Error(`${files.cert}: the certificate does not chain to a CA in ${files.ca}`);
}

/**
 * The credentials in the given PEM texts, checked: the key matches the leaf, the leaf chains to the
 * bundle, it has exactly one URI SAN and it is a SPIFFE ID, nothing on the path has expired at `now`.
 * Throws an Error naming the file at fault.
 */
export function checkCredentials(texts: { cert: string; key: string; ca: string }, files: CredentialFiles, now: number): MeshCredentials {
  const [leaf, ...intermediates] = certificatesIn(texts.cert, files.cert) as [X509Certificate, ...X509Certificate[]];
  let key: KeyObject;
  try {
    key = createPrivateKey(texts.key);
  } catch {
    // Node's message is generic, but nothing of the key's content may reach a log.
    throw new Error(`${files.key}: not a readable unencrypted PEM private key`);
  }
  if (key.type !== 'private') throw new Error(`${files.key}: not a private key`);
  if (!leaf.checkPrivateKey(key)) throw new Error(`${files.key}: the key does not match the certificate in ${files.cert}`);
  const anchors = certificatesIn(texts.ca, files.ca);
  const uris = (parseSubjectAltName(leaf.subjectAltName ?? '') ?? []).filter((e) => e.type === 'URI');
  if (uris.length !== 1) throw new Error(`${files.cert}: the certificate must have exactly one URI SAN (it has ${uris.length})`);
  const uri = (uris[0] as { value: string }).value;
  if (!parseSpiffeUri(uri)) throw new Error(`${files.cert}: the URI SAN ${JSON.stringify(uri)} is not a SPIFFE ID (spiffe://TRUST-DOMAIN/PATH)`);
  checkValid(leaf, `${files.cert}: the certificate`, now);
  checkChain(leaf, intermediates, anchors, files, now);
  return {
    certPem: texts.cert,
    keyPem: key.export({ type: 'pkcs8', format: 'pem' }) as string,
    caPem: texts.ca,
    uri,
    notAfter: Date.parse(leaf.validTo),
  };
}

async function readNamed(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new Error(`${file}: cannot read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

async function loadFiles(files: CredentialFiles): Promise<{ creds: MeshCredentials; texts: string }> {
  const [cert, key, ca] = await Promise.all([readNamed(files.cert), readNamed(files.key), readNamed(files.ca)]);
  return { creds: checkCredentials({ cert, key, ca }, files, Date.now()), texts: `${cert}\0${key}\0${ca}` };
}

/** What the poll compares: the files as their paths resolve now (a swapped symlink changes the inode). */
async function fileStamp(files: CredentialFiles): Promise<string> {
  const parts = await Promise.all(
    [files.cert, files.key, files.ca].map(async (f) => {
      const s = await stat(f).catch(() => undefined);
      return s ? `${s.dev}:${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}` : '-';
    }),
  );
  return parts.join('|');
}

/**
 * `--mesh-cert/--mesh-key/--mesh-ca` PEM files, checked as `checkCredentials` says; a bad initial set
 * throws. With `watch`, the files' folders are watched (as config/watch.ts does: renames and
 * Kubernetes `..data` swaps are seen) and their stats polled every `pollMs` (5 s) as a backstop for
 * symlinks into other folders; changes are debounced (100 ms), and a bad new set is logged (error,
 * with the file names) while the last good one is kept. An unchanged set notifies no one.
 */
export async function fileCredentials(
  files: CredentialFiles,
  opts: { logger: Logger; watch?: boolean; pollMs?: number; accept?: (c: MeshCredentials) => string | undefined },
): Promise<CredentialSource> {
  const { logger } = opts;
  /** A set `accept` refuses (a sidecar's certificate for another identity) is refused like a bad one. */
  const load = async (): Promise<Awaited<ReturnType<typeof loadFiles>>> => {
    const next = await loadFiles(files);
    const problem = opts.accept?.(next.creds);
    if (problem !== undefined) throw new Error(`${files.cert}: ${problem}`);
    return next;
  };
  let loaded = await load();
  const listeners = new ChangeListeners<MeshCredentials>(logger);
  const watchers: FSWatcher[] = [];
  let debounce: NodeJS.Timeout | undefined;
  let poll: NodeJS.Timeout | undefined;
  let closed = false;
  let reloading = false;
  let again = false;

  const reload = async (): Promise<void> => {
    if (reloading) {
      again = true;
      return;
    }
    reloading = true;
    try {
      do {
        again = false;
        try {
          const next = await load();
          if (closed || next.texts === loaded.texts) continue;
          loaded = next;
          logger.info({ files, uri: next.creds.uri, notAfter: new Date(next.creds.notAfter).toISOString() }, 'mesh credentials reloaded');
          listeners.emit(next.creds);
        } catch (err) {
          if (!closed) logger.error({ files, reason: (err as Error).message }, 'mesh credentials not reloaded; keeping the last good ones');
        }
      } while (again && !closed);
    } finally {
      reloading = false;
    }
  };
  const changed = (): void => {
    if (closed) return;
    clearTimeout(debounce);
    debounce = setTimeout(() => void reload(), DEBOUNCE_MS);
    debounce.unref();
  };

  if (opts.watch) {
    watchers.push(...watchConfigPaths([files.cert, files.key, files.ca], changed, logger, 'mesh certificate'));
    let stamp = await fileStamp(files);
    let polling = false;
    poll = setInterval(() => {
      if (polling) return;
      polling = true;
      void fileStamp(files)
        .then((now) => {
          if (now !== stamp) {
            stamp = now;
            changed();
          }
        })
        .finally(() => {
          polling = false;
        });
    }, opts.pollMs ?? POLL_MS);
    poll.unref();
  }

  return {
    current: () => loaded.creds,
    onChange: (listener) => listeners.add(listener),
    close: () => {
      closed = true;
      clearTimeout(debounce);
      clearInterval(poll);
      for (const w of watchers) w.close();
      listeners.clear();
    },
  };
}
