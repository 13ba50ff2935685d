/**
 * Peer: http-proxy-3 1.23 (the maintained http-proxy rewrite) in front of one upstream, with a
 * keep-alive agent (without one it sends `connection: close` both ways and runs at half the speed),
 * WebSocket upgrades forwarded with `proxy.ws()`.
 *
 *   node http-proxy-3.js LISTEN_PORT UPSTREAM_PORT
 */
import http from 'node:http';
import { createProxyServer } from 'http-proxy-3';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const agent = new http.Agent({ keepAlive: true, maxSockets: 256, maxFreeSockets: 256 });
const proxy = createProxyServer({ target: `http://127.0.0.1:${upstreamPort}`, agent, ws: true });
proxy.on('error', (_err, _req, resOrSocket) => {
  const res = resOrSocket as http.ServerResponse;
  if (typeof res.writeHead === 'function' && !res.headersSent) {
    res.writeHead(502);
    res.end();
  } else {
    (resOrSocket as { destroy?: () => void }).destroy?.();
  }
});
const server = http.createServer((req, res) => proxy.web(req, res));
server.on('upgrade', (req, socket, head) => proxy.ws(req, socket, head));
server.keepAliveTimeout = 65_000;
server.headersTimeout = 66_000;
server.listen(listenPort, '127.0.0.1', () => process.stdout.write(`http-proxy-3 listening on ${listenPort}\n`));
process.on('SIGTERM', () => process.exit(0));
