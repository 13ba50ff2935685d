/**
 * Opens N keep-alive connections, makes one GET on each (at most 50 at a time), then holds them all
 * open and idle. Prints `ready {"open": N, "ok": K}` once every request has been answered, and
 * closes everything on SIGTERM or when stdin closes.
 *
 *   node idle.js PORT HOST CONNECTIONS
 */
import net from 'node:net';

const [portArg, host, connsArg] = process.argv.slice(2);
const port = Number(portArg);
const total = Number(connsArg);
const sockets: net.Socket[] = [];
let ok = 0;

function one(): Promise<void> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    sockets.push(socket);
    let buf = '';
    const onData = (chunk: Buffer): void => {
      buf += chunk.toString('latin1');
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const m = /content-length:\s*(\d+)/i.exec(buf.slice(0, end));
      if (m && buf.length < end + 4 + Number(m[1])) return;
      socket.off('data', onData);
      if (/^HTTP\/1\.1 200/.test(buf)) ok++;
      resolve();
    };
    socket.on('data', onData);
    socket.on('error', () => resolve());
    socket.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: keep-alive\r\n\r\n`);
  });
}

let next = 0;
await Promise.all(
  Array.from({ length: 50 }, async () => {
    while (next < total) {
      next++;
      await one();
    }
  }),
);
const open = sockets.filter((s) => !s.destroyed).length;
process.stdout.write(`ready ${JSON.stringify({ open, ok })}\n`);
const close = (): void => {
  for (const s of sockets) s.destroy();
  process.exit(0);
};
process.on('SIGTERM', close);
process.stdin.on('end', close);
process.stdin.resume();
