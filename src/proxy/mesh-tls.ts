/**
 * The client side of a mesh identity (DESIGN §9): the TLS options a caller's sidecar dials a target
 * replica's mTLS listener with. Its certificate and key, and the CA bundle the target must chain to,
 * come from a credential source (issued by `up`'s local CA, or `--mesh-cert`/`--mesh-key`/`--mesh-ca`
 * files) and are swapped in when the source renews or reloads them: connections opened after that
 * present the new certificate, pooled ones keep theirs (a certificate is only checked at the
 * handshake), so a renewal fails no request. The target must prove the workload identity the
 * caller routed to (its one URI SAN), as Istio's secure naming does: a replica of another workload
 * answering on that address is refused.
 */
import tls, { type PeerCertificate } from 'node:tls';
import { secureContextOf, uriSanOf, type CredentialSource } from '../mesh/index.js';

export class MeshTlsClient {
  private context: tls.SecureContext;
  private readonly unsubscribe: () => void;
  /** `onDial`: told of every connection this client opens (the handshake rate under load). */
  constructor(readonly source: CredentialSource, private readonly onDial?: () => void) {
    this.context = secureContextOf(source.current());
    this.unsubscribe = source.onChange((c) => (this.context = secureContextOf(c)));
  }

  /** The caller's own identity (its certificate's URI SAN). */
  get uri(): string {
    return this.source.current().uri;
  }

  /** Options for a connection to a sidecar that must present `serverUri`, offering `alpn`. */
  options(serverUri: string, alpn: 'h2' | 'http/1.1'): tls.ConnectionOptions {
    this.onDial?.();
    return {
      secureContext: this.context,
      ALPNProtocols: [alpn],
      minVersion: 'TLSv1.3',
      rejectUnauthorized: true,
      // The chain was verified against the CA bundle; the name that matters is the workload's URI.
      checkServerIdentity: (_host: string, cert: PeerCertificate) => {
        const got = uriSanOf(cert);
        return got === serverUri ? undefined : new Error(`mesh peer is ${got ?? 'without a workload identity'}, expected ${serverUri}`);
      },
    };
  }

  close(): void {
    this.unsubscribe();
  }
}
