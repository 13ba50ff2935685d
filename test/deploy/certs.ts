/**
 * Test certificates made by Debian's `openssl`, standing in for the manifests' Secrets: a mesh CA
 * and a workload certificate (ECDSA P-256, the workload's URI SAN only, as DESIGN §9 asks), and the
 * ingress's public certificate for `*.APP_DOMAIN`. Each Secret is a map of file name to contents,
 * as the kubelet writes its keys; nothing here is committed key material.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export type SecretFiles = Record<string, string>;

function openssl(args: string[]): void {
  execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 20_000 });
}

function inTemp<T>(fn: (dir: string) => T): T {
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-deploy-pki-'));
  try {
    return fn(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A mesh Secret (`tls.crt`, `tls.key`, `ca.crt`, as cert-manager writes one) for `uri`. */
export function meshSecret(uri: string): SecretFiles {
  return inTemp((dir) => {
    const f = (n: string): string => path.join(dir, n);
    openssl(['req', '-x509', ...EC, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '2', '-subj', '/CN=test mesh CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
    openssl(['req', '-new', ...EC, '-keyout', f('tls.key'), '-out', f('tls.csr'), '-subj', '/O=test']);
    writeFileSync(f('ext.cnf'), `subjectAltName=critical,URI:${uri}\nbasicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth,clientAuth\n`);
    openssl(['x509', '-req', '-in', f('tls.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', f('ext.cnf'), '-out', f('tls.crt')]);
    return { 'tls.crt': readFileSync(f('tls.crt'), 'utf8'), 'tls.key': readFileSync(f('tls.key'), 'utf8'), 'ca.crt': readFileSync(f('ca.crt'), 'utf8') };
  });
}

/** A kubernetes.io/tls Secret (`tls.crt`, `tls.key`): self-signed for `*.domain` and `domain`. */
export function tlsSecret(domain: string): SecretFiles {
  return inTemp((dir) => {
    const f = (n: string): string => path.join(dir, n);
    openssl(['req', '-x509', ...EC, '-keyout', f('tls.key'), '-out', f('tls.crt'), '-days', '1', '-subj', `/CN=${domain}`,
      '-addext', `subjectAltName=DNS:*.${domain},DNS:${domain}`]);
    return { 'tls.crt': readFileSync(f('tls.crt'), 'utf8'), 'tls.key': readFileSync(f('tls.key'), 'utf8') };
  });
}
