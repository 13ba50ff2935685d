/**
 * The entry of the ingress's external listeners (and `up`'s), and of requests on a workload's outbound
 * (mesh) listener (./outbound.ts hands them here with their caller): resolve the host → through an
 * outbound listener, a host the mesh does not serve is a sibling container or egress → the route
 * (404 without one) → debug answers asked for? → the internal firewall for a mesh caller → the client
 * address after `trustedProxies` → the ingress filters (the external firewall) → dispatch.ts.
 */
import type { Exchange } from '../exchange.js';
import { resolveHost } from '../../routing/index.js';
import { parseHostHeader } from '../../routing/hosts.js';
import { internalFirewall } from '../../firewall/internal.js';
import type { Attempts } from '../attempts.js';
import { askedForDebug } from '../debug-answers.js';
import type { Plane } from '../dataplane-options.js';
import type { Dispatcher } from '../dispatch.js';
import type { DownstreamRequest, DownstreamResponse } from '../errors.js';
import { EMPTY_CHAIN, runChain } from '../filters.js';
import { clientAddress, upstreamHeaders } from '../headers.js';
import type { ListenerHandlers } from '../../listener/index.js';
import type { OutboundCaller } from '../mesh-peer.js';
import { findPort, isInternal, protocolOf, routeTarget } from '../routes.js';
import type { Tunnels } from '../tunnels.js';
import type { Egress } from './egress.js';
import { startExchange } from './start.js';

export class IngressEntry {
  constructor(
    private readonly plane: Plane,
    private readonly dispatcher: Dispatcher,
    private readonly attempts: Attempts,
    private readonly tunnels: Tunnels,
    private readonly egress: Egress,
  ) {}

  /** The ingress's external listener (or `up`'s): every host but internal ones. */
  handlers(listener: { port: number; tls: boolean }): ListenerHandlers {
    return {
      request: (req, res) => this.request(req, res, listener.port, listener.tls, 'external'),
      upgrade: (req, socket, head) => this.tunnels.upgrade(req, socket, head, listener.port, listener.tls, 'external'),
      connect: (req, socket, head) => this.tunnels.connect(req, socket, head, listener.port, listener.tls, 'external'),
    };
  }

  /** A request on an external listener, or (with its `caller`) on a workload's outbound listener. */
  request(req: DownstreamRequest, res: DownstreamResponse, port: number, tls: boolean, listener: 'external' | 'mesh', caller?: OutboundCaller): void {
    const ex = startExchange(this.plane, req, res, tls, port);
    if (!ex) return;
    ex.listenerKind = listener;
    const table = this.plane.table;
    const target = resolveHost(table.hosts, ex.host, listener, port);
    // Through a workload's outbound listener, a host outside the mesh is a sibling container or egress.
    if (!target && caller?.workload !== undefined) return this.outside(ex, caller, caller.workload);
    if (caller?.gvc !== undefined && target?.kind === 'internal-replica' && target.workload.gvc !== caller.gvc &&
        !table.snapshot.workloads.get(caller.workload ?? '')?.mesh.discoverCrossGvcReplicas) {
      return ex.reply({ code: 'NO_ROUTE' });
    }
    const route = target && routeTarget(table.snapshot, target, ex);
    if (!route) return ex.reply({ code: 'NO_ROUTE' });
    const workload = route.workload;
    ex.workload = workload;
    if (route.canonical && workload.defaultOptions.debug) askedForDebug(ex, target, route, table.headers);
    this.plane.opts.telemetry?.routed?.(ex);
    if (caller) {
      ex.meshCaller = caller;
      // Judged here too when the target's sidecar will judge it again: a denied call never leaves.
      if (isInternal(target) && !internalFirewall(workload)(caller)) return ex.reply({ code: 'FIREWALL_BLOCKED' });
    }
    const gvc = table.snapshot.gvcs.get(workload.gvc);
    ex.clientAddress = clientAddress(ex.peer, req.headers['x-forwarded-for'], gvc?.trustedProxies ?? 0);
    const chain = table.ingressChains.get(workload.key) ?? EMPTY_CHAIN;
    if (chain.length === 0) return this.dispatcher.dispatch(ex, table, route, tls);
    runChain(chain, ex, (result) => (result ? ex.reply(result) : this.dispatcher.dispatch(ex, table, route, tls)));
  }

  /**
   * A host the mesh does not serve, through a workload's outbound listener: a container of the
   * caller's own replica by name (`http://side:9000`: plain text, same replica), else a destination
   * outside the mesh, which the caller's egress firewall decides.
   */
  private outside(ex: Exchange, caller: OutboundCaller, callerKey: string): void {
    const workload = this.plane.table.snapshot.workloads.get(callerKey);
    if (!workload) return ex.reply({ code: 'NO_ROUTE' });
    const parsed = parseHostHeader(ex.host);
    const port = parsed?.port ?? 80;
    // `localhost` is the replica's own network (proxy clients send it here: NO_PROXY cannot name
    // `localhost` without every `*.localhost` internal name); a loopback address likewise.
    const local = parsed && isLoopbackHost(parsed.host) ? { host: parsed.host === 'localhost' ? '127.0.0.1' : parsed.host, port } : undefined;
    const sibling = local ?? (parsed && !parsed.host.includes('.') ? caller.sibling?.(parsed.host, port) : undefined);
    if (sibling) {
      ex.workload = workload;
      const headers = upstreamHeaders(ex.req.headers, { host: ex.host, peer: ex.peer, proto: 'http', requestId: ex.requestId, keepTeTrailers: true });
      ex.startTimeout(workload.timeoutMs);
      return this.attempts.forward(ex, sibling, protocolOf(findPort(workload, port)), ex.pathWithQuery, headers);
    }
    this.egress.request(ex, workload, (target, headers) => {
      ex.startTimeout(workload.timeoutMs);
      this.attempts.forward(ex, target, 'http', ex.pathWithQuery, headers);
    });
  }
}

/** The replica's own loopback as proxy clients name it: `localhost` and NO_PROXY's two addresses. */
function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '127.0.0.1' || host === '::1';
}
