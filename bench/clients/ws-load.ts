/**
 * WebSocket ping-pong: N connections, each sending a 32-byte text message and waiting for its echo
 * before sending the next, for T seconds. Prints one JSON line: messages (round trips), seconds, rate,
 * p50/p99 round-trip latency (ms), errors.
 *
 *   node ws-load.js PORT HOST CONNECTIONS SECONDS
 */
import net from 'node:net';
import { clientKey, frame, FrameParser, OP_CLOSE, OP_TEXT } from '../lib/ws.js';
import { percentiles, Samples } from '../lib/stats.js';

const [portArg, host, connsArg, secondsArg] = process.argv.slice(2);
const port = Number(portArg);
const conns = Number(connsArg);
const seconds = Number(secondsArg);
const payload = Buffer.alloc(32, 0x62);
const latencies = new Samples();
let errors = 0;
let firstError = '';

function open(): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end < 0) return;
      socket.off('data', onData);
      const status = head.subarray(0, head.indexOf('\r\n')).toString();
      if (!/^HTTP\/1\.1 101/.test(status)) return reject(new Error(`handshake: ${status}`));
      const rest = head.subarray(end + 4);
      if (rest.length) socket.unshift(rest);
      resolve(socket);
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET /ws HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${clientKey()}\r\nSec-WebSocket-Version: 13\r\n\r\n`);
  });
}

const sockets = await Promise.all(Array.from({ length: conns }, () => open()));
const started = performance.now();
const stopAt = started + seconds * 1000;

await Promise.all(
  sockets.map(
    (socket) =>
      new Promise<void>((resolve) => {
        const parser = new FrameParser();
        let sentAt = 0;
        const send = (): void => {
          sentAt = performance.now();
          if (sentAt >= stopAt) {
            socket.end(frame(OP_CLOSE, Buffer.alloc(0), true));
            return resolve();
          }
          socket.write(frame(OP_TEXT, payload, true));
        };
        socket.on('data', (chunk: Buffer) => {
          for (const f of parser.push(chunk)) {
            if (f.opcode !== OP_TEXT) continue;
            latencies.push(performance.now() - sentAt);
            send();
          }
        });
        socket.on('error', (err) => {
          errors++;
          firstError ||= err.message;
          resolve();
        });
        socket.on('close', () => resolve());
        send();
      }),
  ),
);
const elapsed = (performance.now() - started) / 1000;
const [p50, p99] = percentiles(latencies.values(), [50, 99]);
process.stdout.write(JSON.stringify({ requests: latencies.length, seconds: elapsed, rps: latencies.length / elapsed, p50, p99, errors, firstError }) + '\n');
process.exit(0);
