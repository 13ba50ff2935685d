/**
 * The entry of a workload's outbound (mesh) listener: what its app calls, by the platform's host names
 * (internal ones too) or as its `HTTP_PROXY` / `HTTPS_PROXY`. Requests go the ingress way
 * (./ingress.ts) with the caller's identity, so the target's internal firewall judges it (DESIGN §4);
 * a CONNECT to a workload's HTTP port is served as requests inside the tunnel (proxy clients that
 * always tunnel), to a `tcp` port as a tunnel (tunnels.ts), and to a destination outside the mesh
 * by the caller's egress firewall (./egress.ts).
 */
import http2 from 'node:http2';
import http, { type IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { resolveHost } from '../../routing/index.js';
import type { Plane } from '../dataplane-options.js';
import type { DownstreamRequest, DownstreamResponse } from '../errors.js';
import { DEFAULT_LIMITS, sniff, type ListenerHandlers } from '../../listener/index.js';
import type { OutboundCaller } from '../mesh-peer.js';
import { findPort, protocolOf } from '../routes.js';
import { CONNECTION_ESTABLISHED } from '../tunnel.js';
import type { Tunnels } from '../tunnels.js';
import type { Egress } from './egress.js';
import type { IngressEntry } from './ingress.js';

export class OutboundEntry {
  constructor(
    private readonly plane: Plane,
    private readonly ingress: IngressEntry,
    private readonly tunnels: Tunnels,
    private readonly egress: Egress,
  ) {}

  /**
   * A mesh (outbound) listener: answers internal host names (and every other workload host) for
   * callers inside the mesh. `caller` is the identity of the workload whose outbound traffic this
   * listener carries; the target's internal firewall decides whether it may call (DESIGN §4).
   */
  handlers(listener: { port: number }, caller: OutboundCaller = {}): ListenerHandlers {
    const request = (req: DownstreamRequest, res: DownstreamResponse): void => this.ingress.request(req, res, listener.port, false, 'mesh', caller);
    const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer): void => this.tunnels.upgrade(req, socket, head, listener.port, false, 'mesh', caller);
    // Requests inside a CONNECT to an HTTP port (proxy clients that always tunnel, as undici's
    // EnvHttpProxyAgent does): served like requests to the listener itself, each routed by its Host.
    let tunnelled: TunnelServers | undefined;
    return {
      request,
      upgrade,
      connect: (req, socket, head) => {
        const target = resolveHost(this.plane.table.hosts, req.url ?? '', 'mesh', listener.port);
        if (target === undefined) {
          // A destination outside the mesh (HTTPS_PROXY's CONNECT host:443): the egress firewall decides.
          const workload = caller.workload === undefined ? undefined : this.plane.table.snapshot.workloads.get(caller.workload);
          if (workload) return this.egress.connect(req, socket, head, workload);
        } else if (target.kind !== 'domain' && protocolOf(findPort(target.workload, 'port' in target ? target.port : undefined)) !== 'tcp') {
          const servers = (tunnelled ??= tunnelServers(request, upgrade));
          socket.write(CONNECTION_ESTABLISHED);
          if (head.length > 0) socket.unshift(head);
          // HTTP/1.1 or HTTP/2 with prior knowledge (gRPC clients behind a proxy): the first bytes
          // say, as on the listener itself.
          sniff(socket as Socket, servers.h1, servers.h2, DEFAULT_LIMITS.headersTimeoutMs, undefined);
          return;
        }
        this.tunnels.connect(req, socket, head, listener.port, false, 'mesh', caller);
      },
    };
  }
}

interface TunnelServers {
  readonly h1: http.Server;
  readonly h2: http2.Http2Server;
}

/** Servers for the connections CONNECT handed over (they never listen themselves). */
function tunnelServers(request: (req: DownstreamRequest, res: DownstreamResponse) => void, upgrade: (req: IncomingMessage, socket: Duplex, head: Buffer) => void): TunnelServers {
  const h1 = http.createServer({ maxHeaderSize: 64 * 1024 }, request);
  h1.on('upgrade', upgrade);
  h1.on('clientError', (_err, socket) => socket.destroy());
  // Node enforces the headers timeout once a server is 'listening'; this one never listens itself.
  h1.emit('listening');
  const h2 = http2.createServer({ settings: { enablePush: false } }, request);
  h2.on('sessionError', () => undefined);
  return { h1, h2 };
}
