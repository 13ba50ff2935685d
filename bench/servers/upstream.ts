/**
 * The upstreams every row is measured against, each in its own process:
 *
 *   node upstream.js http PORT   HTTP/1.1 keep-alive server answering `ok` (2 bytes) to anything; a
 *                                request body is read to the end first; WebSocket upgrades get a raw
 *                                RFC 6455 echo (every text/binary frame sent back, ping → pong)
 *   node upstream.js h2c PORT    the same tiny answer over HTTP/2 cleartext (prior knowledge)
 *   node upstream.js grpc PORT   gRPC `/bench.Echo/Echo` (unary, echoes the bytes)
 */
import http from 'node:http';
import http2 from 'node:http2';
import type { Duplex } from 'node:stream';
import * as grpc from '@grpc/grpc-js';
import { acceptKey, frame, FrameParser, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG, OP_TEXT } from '../lib/ws.js';
import { echoService } from '../lib/grpc-echo.js';

const [kind, portArg] = process.argv.slice(2);
const port = Number(portArg);
const BODY = Buffer.from('ok');
const HEADERS = { 'content-type': 'text/plain', 'content-length': String(BODY.length) };

function onWebSocket(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string') return void socket.destroy();
  socket.on('error', () => socket.destroy());
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${acceptKey(key)}\r\n\r\n`);
  const parser = new FrameParser();
  const onData = (chunk: Buffer): void => {
    for (const f of parser.push(chunk)) {
      if (f.opcode === OP_TEXT || f.opcode === OP_BINARY) socket.write(frame(f.opcode, f.payload, false));
      else if (f.opcode === OP_PING) socket.write(frame(OP_PONG, f.payload, false));
      else if (f.opcode === OP_CLOSE) {
        socket.end(frame(OP_CLOSE, f.payload, false));
        return;
      }
    }
  };
  if (head.length) onData(head);
  socket.on('data', onData);
}

function ready(): void {
  process.stdout.write(`${kind} upstream listening on ${port}\n`);
}

if (kind === 'http') {
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' || req.method === 'HEAD') {
      res.writeHead(200, HEADERS);
      res.end(BODY);
      return;
    }
    let bytes = 0;
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => {
      res.writeHead(200, { ...HEADERS, 'x-received': String(bytes) });
      res.end(BODY);
    });
  });
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.requestTimeout = 0;
  server.maxHeadersCount = 0;
  server.on('upgrade', onWebSocket);
  server.listen(port, '127.0.0.1', ready);
} else if (kind === 'h2c') {
  const server = http2.createServer({ settings: { maxConcurrentStreams: 1000 } });
  server.on('stream', (stream, headers) => {
    const respond = (): void => {
      if (stream.destroyed) return;
      stream.respond({ ':status': 200, ...HEADERS });
      stream.end(BODY);
    };
    stream.on('error', () => undefined);
    if (headers[':method'] === 'GET' || stream.readableEnded) respond();
    else {
      stream.resume();
      stream.on('end', respond);
    }
  });
  server.listen(port, '127.0.0.1', ready);
} else if (kind === 'grpc') {
  const server = new grpc.Server();
  server.addService(echoService, {
    Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, callback: grpc.sendUnaryData<Buffer>) => callback(null, call.request),
  });
  server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err) => {
    if (err) {
      process.stderr.write(`${err.message}\n`);
      process.exit(1);
    }
    ready();
  });
} else {
  process.stderr.write('usage: upstream.js http|h2c|grpc PORT\n');
  process.exit(2);
}

process.on('SIGTERM', () => process.exit(0));
