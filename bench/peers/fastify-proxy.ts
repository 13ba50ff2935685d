/**
 * Peer: fastify 5 with @fastify/http-proxy 11 (undici through @fastify/reply-from) in front of one
 * upstream, logger off, WebSocket forwarding on.
 *
 *   node fastify-proxy.js LISTEN_PORT UPSTREAM_PORT
 */
import Fastify from 'fastify';
import fastifyHttpProxy from '@fastify/http-proxy';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const app = Fastify({ logger: false, bodyLimit: 64 * 1024 * 1024, keepAliveTimeout: 65_000 });
await app.register(fastifyHttpProxy, { upstream: `http://127.0.0.1:${upstreamPort}`, websocket: true });
await app.listen({ port: listenPort!, host: '127.0.0.1' });
process.stdout.write(`fastify listening on ${listenPort}\n`);
process.on('SIGTERM', () => process.exit(0));
