/**
 * The entry of a standalone sidecar's inbound listener (`svcproxy sidecar`, behind the ingress or
 * another sidecar): its own workload, the client address one trusted hop further, the upstream
 * headers, the workload's timeout, then its sidecar filters (external authorization, rate limiting)
 * and one attempt to the app container's port in its protocol. No routing: the app is fixed.
 */
import { timeoutMsIn } from '../../config/compile-workload.js';
import type { Attempts } from '../attempts.js';
import type { Plane, SidecarIdentity } from '../dataplane-options.js';
import type { DownstreamRequest, DownstreamResponse } from '../errors.js';
import { EMPTY_CHAIN, runChain } from '../filters.js';
import { clientAddress, upstreamHeaders } from '../headers.js';
import type { ListenerHandlers } from '../../listener/index.js';
import { applyMutations, withQueryMutations } from '../mutations.js';
import { protocolOf } from '../routes.js';
import type { Tunnels } from '../tunnels.js';
import { startExchange } from './start.js';

export class SidecarEntry {
  constructor(private readonly plane: Plane, private readonly attempts: Attempts, private readonly tunnels: Tunnels) {}

  /** A standalone sidecar's inbound listener: filters, then the app. */
  handlers(identity: SidecarIdentity, listener: { port: number; tls: boolean }): ListenerHandlers {
    return {
      request: (req, res) => this.request(req, res, identity, listener.tls, listener.port),
      upgrade: (req, socket, head) => this.tunnels.sidecarUpgrade(req, socket, head, identity, listener),
      connect: (req, socket, head) => this.tunnels.sidecarConnect(req, socket, head, identity, listener),
    };
  }

  private request(req: DownstreamRequest, res: DownstreamResponse, identity: SidecarIdentity, tls: boolean, port: number): void {
    const ex = startExchange(this.plane, req, res, tls, port, 'sidecar');
    if (!ex) return;
    ex.listenerKind = 'sidecar';
    const table = this.plane.table;
    const workload = table.snapshot.workloads.get(identity.workload);
    if (!workload) return ex.reply({ code: 'NO_ROUTE' });
    ex.workload = workload;
    this.plane.opts.telemetry?.routed?.(ex);
    ex.location = identity.location;
    const gvc = table.snapshot.gvcs.get(workload.gvc);
    ex.clientAddress = clientAddress(ex.peer, req.headers['x-forwarded-for'], (gvc?.trustedProxies ?? 0) + 1);
    const forwardedProto = req.headers['x-forwarded-proto'];
    const headers = upstreamHeaders(req.headers, {
      host: ex.host,
      peer: ex.peer,
      proto: typeof forwardedProto === 'string' ? forwardedProto : tls ? 'https' : 'http',
      requestId: ex.requestId,
      keepTeTrailers: true,
    });
    ex.startTimeout(timeoutMsIn(workload, identity.location));
    const protocol = protocolOf(workload.primaryPort);
    ex.targetPort = workload.primaryPort?.number;
    const chain = table.sidecarChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.attempts.forward(ex, identity.app, protocol, ex.pathWithQuery, headers);
    runChain(chain, ex, (result) => {
      if (result) return ex.reply(result);
      this.attempts.forward(ex, identity.app, protocol, withQueryMutations(ex, ex.pathWithQuery), applyMutations(ex, headers));
    });
  }
}
