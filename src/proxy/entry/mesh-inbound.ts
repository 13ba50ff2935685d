/**
 * The entry of a sidecar's mTLS listener (`--mesh-inbound`; one per replica under `up`): requests from
 * other sidecars for this replica's internal names (DESIGN §9). The handshake verified the caller's
 * certificate; here the Host must be one of the replica's internal names on a declared port (a
 * sidecar is no relay) and the caller's identity must pass the internal firewall (`admit`), then the
 * caller's verified identity is set in `x-forwarded-client-cert`, the sidecar filters run (not on
 * the port the workload keeps out of its sidecar) and one attempt goes to the app.
 */
import { timeoutMsIn } from '../../config/compile-workload.js';
import type { ErrorCode } from '../../filter/index.js';
import { internalFirewall } from '../../firewall/internal.js';
import { resolveHost } from '../../routing/index.js';
import type { Attempts } from '../attempts.js';
import type { Plane } from '../dataplane-options.js';
import type { DownstreamRequest, DownstreamResponse } from '../errors.js';
import type { Exchange } from '../exchange.js';
import { EMPTY_CHAIN, runChain } from '../filters.js';
import { clientAddress, upstreamHeaders } from '../headers.js';
import type { ListenerHandlers } from '../../listener/index.js';
import { callerOf, sanitizeSet, verifiedPeerOf, xfccOf, type MeshAdmission, type MeshInbound } from '../mesh-peer.js';
import { applyMutations, withQueryMutations } from '../mutations.js';
import { findPort, isInternal, protocolOf } from '../routes.js';
import type { Tunnels } from '../tunnels.js';
import { startExchange } from './start.js';

export class MeshInboundEntry {
  constructor(private readonly plane: Plane, private readonly attempts: Attempts, private readonly tunnels: Tunnels) {}

  /**
   * A sidecar's mTLS listener (`--mesh-inbound`; one per replica under `up`): requests from other
   * sidecars for this replica's internal names. The handshake verified the caller's certificate;
   * here its identity meets the internal firewall, then the sidecar filters and the app (DESIGN §9).
   */
  handlers(identity: MeshInbound, listener: { port: number }): ListenerHandlers {
    return {
      request: (req, res) => this.request(req, res, identity, listener.port),
      upgrade: (req, socket, head) => this.tunnels.meshInboundUpgrade(req, socket, head, identity, listener.port, this.gate(identity)),
      connect: (req, socket, head) => this.tunnels.meshInboundConnect(req, socket, head, identity, listener.port, this.gate(identity)),
    };
  }

  /**
   * Who may call `identity` on its mTLS listener, and where the request goes: the Host must be one
   * of its internal names on a declared port (a sidecar is no relay), and its internal firewall
   * must admit the caller's verified identity. Answers the refusal's code otherwise.
   */
  admit(ex: Exchange, identity: MeshInbound): MeshAdmission | ErrorCode {
    const peer = verifiedPeerOf(ex.req);
    ex.sourcePrincipal = peer?.uri;
    ex.sourceIdentity = peer?.identity;
    ex.location = identity.location;
    const target = resolveHost(this.plane.table.hosts, ex.host, 'mesh', ex.listenerPort);
    if (!target || !isInternal(target) || target.workload.key !== identity.workload) return 'NO_ROUTE';
    if (target.kind === 'internal-replica' && (target.location !== identity.location || target.index !== identity.index)) return 'NO_ROUTE';
    const workload = target.workload;
    ex.workload = workload;
    const caller = callerOf(peer, this.plane.org);
    if (!peer || !caller || !internalFirewall(workload)(caller)) return 'FIREWALL_BLOCKED';
    const port = findPort(workload, target.port);
    const app = port && identity.app(port.number);
    if (!port || !app) return 'NO_ROUTE';
    ex.targetPort = port.number;
    return { workload, port, app, xfcc: xfccOf(peer, identity.uri()) };
  }

  private request(req: DownstreamRequest, res: DownstreamResponse, identity: MeshInbound, port: number): void {
    const ex = startExchange(this.plane, req, res, true, port, 'sidecar');
    if (!ex) return;
    ex.listenerKind = 'sidecar';
    const admitted = this.admit(ex, identity);
    if (typeof admitted === 'string') return ex.reply({ code: admitted });
    const { workload, port: portModel, app } = admitted;
    this.plane.opts.telemetry?.routed?.(ex);
    const table = this.plane.table;
    const gvc = table.snapshot.gvcs.get(workload.gvc);
    // Behind the caller's sidecar: one more trusted hop (it appended its app's address).
    ex.clientAddress = clientAddress(ex.peer, req.headers['x-forwarded-for'], (gvc?.trustedProxies ?? 0) + 1);
    // Before the filters: ext_authz's check must show the verified caller's value, as the app gets.
    sanitizeSet(req, admitted.xfcc);
    const forwardedProto = req.headers['x-forwarded-proto'];
    const headers = upstreamHeaders(req.headers, {
      host: ex.host,
      peer: ex.peer,
      proto: typeof forwardedProto === 'string' ? forwardedProto : 'http',
      requestId: ex.requestId,
      keepTeTrailers: true,
    });
    ex.startTimeout(timeoutMsIn(workload, identity.location));
    const protocol = protocolOf(portModel);
    const chain = portModel.number === workload.mesh.inboundDisabledPort ? EMPTY_CHAIN : table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.attempts.forward(ex, app, protocol, ex.pathWithQuery, headers);
    runChain(chain, ex, (result) => {
      if (result) return ex.reply(result);
      this.attempts.forward(ex, app, protocol, withQueryMutations(ex, ex.pathWithQuery), applyMutations(ex, headers));
    });
  }

  /** The admission check for tunnels on an mTLS listener. */
  private gate(identity: MeshInbound): (ex: Exchange) => MeshAdmission | ErrorCode {
    return (ex) => this.admit(ex, identity);
  }
}
