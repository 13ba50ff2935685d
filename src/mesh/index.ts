/**
 * The mesh's door (DESIGN.md §9): workload identity (SPIFFE URIs, peer SANs, XFCC), the local CA and
 * the credential sources. Importing it loads no X.509 library: ca.ts loads @peculiar/x509 on the
 * first CA opened.
 */
export { DEFAULT_ORG, certificateHash, parseSpiffeUri, parseSubjectAltName, uriSanOf, workloadUri, xfccValue, type MeshPeer } from './identity.js';
export { LocalCa, issuedCredentials, type CertificateIssuer } from './ca.js';
export { MESH_CIPHERSUITES, checkCredentials, fileCredentials, secureContextOf, type CredentialFiles, type CredentialSource, type MeshCredentials } from './credentials.js';
