/**
 * Egress through a workload's outbound listener (DESIGN §9): requests in absolute form
 * (`HTTP_PROXY`) and `CONNECT host:port` tunnels (`HTTPS_PROXY`) to destinations outside the mesh.
 * The caller's `firewallConfig.external.outbound*` rules decide (src/firewall/egress.ts; none set:
 * nothing leaves, as on the platform); the connection goes to the address that was checked, so a
 * second DNS answer cannot slip past the rules. Denied: 403 `blocked by firewall`, counted and
 * logged with the caller and the destination.
 */
import type { IncomingMessage, OutgoingHttpHeaders } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import type { WorkloadModel } from '../../config/model.js';
import type { Metrics } from '../../admin/metrics.js';
import { egressPolicy, systemLookup, type EgressDestination, type Lookup } from '../../firewall/egress.js';
import { parseHostHeader } from '../../routing/hosts.js';
import type { HostPort } from '../../routing/replicas.js';
import type { Exchange } from '../exchange.js';
import { upstreamHeaders } from '../headers.js';
import { openTcpTunnel, rejectUpgrade } from '../tunnel.js';
import { ERRORS } from '../../filter/index.js';

export interface EgressOptions {
  readonly metrics: Metrics;
  readonly logger: Logger;
  readonly lookup?: Lookup;
}

export class Egress {
  private readonly lookup: Lookup;

  constructor(private readonly opts: EgressOptions) {
    this.lookup = opts.lookup ?? systemLookup;
  }

  /** A plain HTTP request for a host outside the mesh: checked, then `go` forwards it to the checked address. */
  request(ex: Exchange, workload: WorkloadModel, go: (target: HostPort, headers: OutgoingHttpHeaders) => void): void {
    const parsed = parseHostHeader(ex.host);
    if (!parsed) return ex.reply({ code: 'NO_ROUTE' });
    const dest: EgressDestination = { host: parsed.host, port: parsed.port ?? 80, protocol: 'http' };
    ex.egress = `${dest.host}:${dest.port}`;
    void this.decide(workload, dest).then((address) => {
      if (ex.isFinished) return;
      if (address === undefined) return ex.reply({ code: 'FIREWALL_BLOCKED' });
      const headers = upstreamHeaders(ex.req.headers, { host: ex.host, peer: ex.peer, proto: 'http', requestId: ex.requestId, keepTeTrailers: true });
      go({ host: address, port: dest.port }, headers);
    });
  }

  /** `CONNECT host:port` to a destination outside the mesh: checked, then a TCP tunnel to the checked address. */
  connect(req: IncomingMessage, socket: Duplex, head: Buffer, workload: WorkloadModel): void {
    socket.on('error', () => socket.destroy());
    const parsed = parseHostHeader(req.url ?? '');
    if (!parsed || parsed.port === undefined) {
      rejectUpgrade(socket, 400, 'bad request: CONNECT needs host:port', '', 'BAD_REQUEST');
      return;
    }
    const dest: EgressDestination = { host: parsed.host, port: parsed.port, protocol: parsed.port === 443 ? 'https' : 'tcp' };
    void this.decide(workload, dest).then((address) => {
      if (socket.destroyed) return;
      if (address === undefined) {
        const blocked = ERRORS.FIREWALL_BLOCKED;
        rejectUpgrade(socket, blocked.status, blocked.message, '', 'FIREWALL_BLOCKED');
        return;
      }
      openTcpTunnel(socket, head, { host: address, port: dest.port }, {
        connected: () => undefined,
        failed: () => {
          const reset = ERRORS.UPSTREAM_RESET;
          rejectUpgrade(socket, reset.status, reset.message, '', 'UPSTREAM_RESET');
        },
      }, true);
    });
  }

  /** The address to dial, or undefined when the caller's egress firewall denies the destination. */
  private async decide(workload: WorkloadModel, dest: EgressDestination): Promise<string | undefined> {
    const verdict = await egressPolicy(workload).check(dest, this.lookup);
    const labels = { source_workload: workload.name, source_gvc: workload.gvc, outcome: verdict.allowed ? 'allowed' : 'denied' };
    this.opts.metrics.egressRequests.inc(labels);
    if (!verdict.allowed) {
      this.opts.logger.info({ workload: workload.name, gvc: workload.gvc, destination: `${dest.host}:${dest.port}`, reason: verdict.reason }, 'egress blocked by firewall');
      return undefined;
    }
    return verdict.address;
  }
}
