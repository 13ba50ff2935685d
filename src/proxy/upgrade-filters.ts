/**
 * The sidecar filters (external authorization, rate limiting) for WebSocket upgrades, which have no
 * ServerResponse of their own: an upgrade request must not be a way around authorization (Envoy
 * checks upgrade requests like any other). The chain runs on a real Exchange whose response is bound
 * to the upgrade socket, so a denial is an ordinary local reply written on it (then the socket is
 * closed); when every filter lets the request continue, the socket is handed back and the filters'
 * header and query mutations are applied to the upgrade request before it is proxied. The Exchange
 * here does no bookkeeping of its own (the upgrade is not a request in flight of the data plane).
 */
import http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Clock } from '../deps.js';
import { Exchange } from './exchange.js';
import { runChain, type Chain } from './filters.js';

export interface UpgradeInfo {
  readonly requestId: string;
  /** Normalized path and the query as sent. */
  readonly path: string;
  readonly query: string;
  readonly host: string;
  readonly clientAddress: string;
  readonly tls: boolean;
  readonly listenerKind: Exchange['listenerKind'];
  readonly listenerPort: number;
  readonly targetPort: number | undefined;
}

const NO_OBSERVER = { onFinish: () => undefined };

/** Resolves true when the upgrade may proceed (with `req` mutated), false when it was answered. */
export function filterUpgrade(chain: Chain, req: http.IncomingMessage, socket: Duplex, info: UpgradeInfo, clock: Clock): Promise<boolean> {
  const res = new http.ServerResponse(req);
  res.shouldKeepAlive = false;
  res.assignSocket(socket as net.Socket);
  const ex = new Exchange(req, res, info.requestId, info.path, info.query, info.host, req.socket?.remoteAddress ?? '', clock.now(), clock, NO_OBSERVER);
  ex.clientAddress = info.clientAddress;
  ex.tls = info.tls;
  ex.listenerKind = info.listenerKind;
  ex.listenerPort = info.listenerPort;
  ex.targetPort = info.targetPort;
  return new Promise((resolve) => {
    runChain(chain, ex, (result) => {
      if (result || socket.destroyed) {
        if (result) {
          // Nothing reads this socket any more: close it once the answer is flushed.
          res.once('finish', () => (socket as net.Socket).destroySoon());
          ex.reply(result);
        }
        return resolve(false);
      }
      res.detachSocket(socket as net.Socket);
      applyToUpgrade(ex, req);
      resolve(true);
    });
  });
}

function applyToUpgrade(ex: Exchange, req: http.IncomingMessage): void {
  if (ex.upstreamRemove) for (const name of ex.upstreamRemove) delete req.headers[name];
  if (ex.upstreamSet) for (const [name, value] of ex.upstreamSet) req.headers[name] = value;
  if (ex.upstreamQuerySet || ex.upstreamQueryRemove) {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    const params = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    if (ex.upstreamQueryRemove) for (const name of ex.upstreamQueryRemove) params.delete(name);
    if (ex.upstreamQuerySet) for (const [name, value] of ex.upstreamQuerySet) params.set(name, value);
    const query = params.toString();
    req.url = (q < 0 ? url : url.slice(0, q)) + (query ? `?${query}` : '');
  }
}
