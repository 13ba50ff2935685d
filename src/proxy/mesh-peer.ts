/**
 * Who is calling on a sidecar's mTLS listener (DESIGN §9): the certificate the TLS handshake
 * verified against the mesh CA (the listener refuses connections without one), its one URI SAN
 * read as a workload identity, and the DER bytes for the `x-forwarded-client-cert` hash. Read once
 * per connection (every request of a kept-alive connection or an HTTP/2 session shares it).
 */
import type { TLSSocket } from 'node:tls';
import type { MeshCaller } from '../firewall/internal.js';
import { parseSpiffeUri, uriSanOf, xfccValue, type MeshPeer } from '../mesh/index.js';
import type { PortModel, WorkloadModel } from '../config/model.js';
import type { HostPort } from '../routing/replicas.js';
import type { DownstreamRequest } from './errors.js';
import type { MeshTlsClient } from './mesh-tls.js';
import { strippedAtEdge } from '../filter/index.js';

export interface VerifiedPeer {
  /** The certificate's URI SAN (the caller's identity as presented). */
  readonly uri: string;
  /** The identity parsed; undefined when the URI is not a SPIFFE identity. */
  readonly identity: MeshPeer | undefined;
  /** The certificate, DER. */
  readonly der: Buffer;
  /** The last `x-forwarded-client-cert` value made for it, and the target identity it was made for. */
  xfcc?: { readonly by: string; readonly value: string };
  /** The internal firewall's view of it (`callerOf`), made once per connection. */
  caller?: MeshCaller;
}

/**
 * The `x-forwarded-client-cert` value for `peer` calling `by`: hashed once per connection (and
 * again only when the target's own certificate was renewed), not on every request.
 */
export function xfccOf(peer: VerifiedPeer, by: string): string {
  const known = peer.xfcc;
  if (known !== undefined && known.by === by) return known.value;
  const value = xfccValue(by, peer.der, peer.uri);
  peer.xfcc = { by, value };
  return value;
}

const peers = new WeakMap<object, VerifiedPeer | null>();

function tlsSocketOf(req: DownstreamRequest): TLSSocket | undefined {
  // HTTP/2: the session's socket (the compat request's own `socket` is a proxy object).
  const stream = (req as { stream?: { session?: { socket?: unknown } } }).stream;
  const socket = stream?.session?.socket ?? req.socket;
  return socket && typeof (socket as TLSSocket).getPeerCertificate === 'function' ? socket as TLSSocket : undefined;
}

/** The verified peer of a request on an mTLS listener; undefined when there is none. */
export function verifiedPeerOf(req: DownstreamRequest): VerifiedPeer | undefined {
  const socket = tlsSocketOf(req);
  if (!socket) return undefined;
  const known = peers.get(socket);
  if (known !== undefined) return known ?? undefined;
  let peer: VerifiedPeer | null = null;
  if (socket.authorized) {
    const cert = socket.getPeerCertificate();
    const uri = uriSanOf(cert);
    if (uri !== undefined && cert.raw) peer = { uri, identity: parseSpiffeUri(uri), der: cert.raw };
  }
  peers.set(socket, peer);
  return peer ?? undefined;
}

/**
 * The internal firewall's view of a verified peer: a workload of this org, or a member of the org
 * outside every workload (an ingress, `up`'s host listener); undefined (nobody) for an identity of
 * another trust domain or one that is not SPIFFE.
 */
export function callerOf(peer: VerifiedPeer | undefined, org: string): MeshCaller | undefined {
  const id = peer?.identity;
  if (!id || id.org !== org) return undefined;
  return (peer!.caller ??= id.workload !== undefined && id.gvc !== undefined ? { workload: `${id.gvc}/${id.workload}`, gvc: id.gvc } : {});
}

/**
 * Who calls through a mesh (outbound) listener: a workload (its own sidecar's listener, or one of
 * `up`'s replicas) or a caller outside every workload (`workload` unset).
 */
export interface OutboundCaller extends MeshCaller {
  /** Its mTLS client; absent: no mesh credentials, so targets are judged here and reached in plain text. */
  readonly tls?: MeshTlsClient;
  /** A container of the caller's own replica, by name and declared port (`http://side:9000`). */
  sibling?(container: string, port: number): HostPort | undefined;
}

/** A replica as its sidecar's mTLS listener serves it. */
export interface MeshInbound {
  readonly workload: string;
  readonly location: string;
  readonly replica: string;
  readonly index: number;
  /** The sidecar's own identity (the `By` of `x-forwarded-client-cert`). */
  uri(): string;
  /** Declared container port → where the app listens for it. */
  app(port: number): HostPort | undefined;
}

/**
 * How a request reaches its replica: over mTLS to the replica's sidecar (`mesh`), in plain text to
 * its own sidecar (`sidecar`), or to the app (`app`: after the sidecar filters ran in-process;
 * `bare`: a port excluded from the mesh, no filters).
 */
export type Hop = 'mesh' | 'sidecar' | 'app' | 'bare';

/** Where an admitted mesh request goes, and the `x-forwarded-client-cert` it carries. */
export interface MeshAdmission {
  readonly workload: WorkloadModel;
  readonly port: PortModel;
  readonly app: HostPort;
  readonly xfcc: string;
}

/**
 * Envoy's SANITIZE_SET on an mTLS listener, done to the request itself before the filters run: the
 * client's `x-forwarded-client-cert` (and names that read as it or as another header the proxy
 * sets: see strippedAtEdge) removed, the verified caller's value set. So ext_authz's check (built
 * from the raw header list) and the app see the same, true value, whoever dialled the listener.
 */
export function sanitizeSet(req: DownstreamRequest, xfcc: string): void {
  const raw = req.rawHeaders;
  let kept = 0;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    const name = raw[i]!;
    // Every name strippedAtEdge removes starts with `x`: the others are kept without a lower-cased copy.
    const first = name.charCodeAt(0);
    if ((first === 120 /* x */ || first === 88 /* X */) && strippedAtEdge(name.toLowerCase(), NO_PREFIXES)) continue;
    raw[kept++] = name;
    raw[kept++] = raw[i + 1]!;
  }
  raw.length = kept;
  raw.push('x-forwarded-client-cert', xfcc);
  const headers = req.headers;
  for (const name in headers) if (strippedAtEdge(name, NO_PREFIXES)) delete headers[name];
  headers['x-forwarded-client-cert'] = xfcc;
}

const NO_PREFIXES: readonly string[] = [];
