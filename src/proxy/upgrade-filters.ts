/**
 * The sidecar filters (external authorization, rate limiting) for WebSocket upgrades and CONNECT
 * tunnels, which have no ServerResponse of their own: an upgrade or a tunnel must not be a way
 * around authorization (Envoy checks both like any other request). The chain runs on the tunnel's
 * Exchange, whose response is bound to the raw socket for the time of the chain, so a denial is an
 * ordinary local reply written on it (then the socket is closed); when every filter lets the
 * request continue, the socket is handed back and the filters' header and query mutations are
 * applied to the upgrade request before it is proxied (a CONNECT to the app carries no headers).
 */
import type http from 'node:http';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { Exchange } from './exchange.js';
import { runChain, type Chain } from './filters.js';

/** Resolves true when the upgrade may proceed (with its request mutated), false when it was answered. */
export function filterUpgrade(chain: Chain, ex: Exchange, socket: Duplex): Promise<boolean> {
  const res = ex.res as http.ServerResponse;
  res.shouldKeepAlive = false;
  res.assignSocket(socket as net.Socket);
  return new Promise((resolve) => {
    runChain(chain, ex, (result) => {
      if (result || socket.destroyed || ex.isFinished) {
        if (result && !ex.isFinished) {
          // Nothing reads this socket any more: close it once the answer is flushed.
          res.once('finish', () => (socket as net.Socket).destroySoon());
          ex.reply(result);
        }
        return resolve(false);
      }
      res.detachSocket(socket as net.Socket);
      applyToUpgrade(ex, ex.req as http.IncomingMessage);
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
