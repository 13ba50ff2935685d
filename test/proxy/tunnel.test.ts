/** The raw-socket answers of upgrades and tunnels, and their header byte counts (Envoy's: names plus values). */
import t from 'tap';
import { PassThrough } from 'node:stream';
import { headerBytes, rejectUpgrade, Tunnel } from '../../src/proxy/tunnel.js';

t.test('rejectUpgrade writes the JSON error and reports what it wrote', async (t) => {
  const socket = new PassThrough();
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  const sent = rejectUpgrade(socket, 429, 'rate limited', 'rid-1', 'RATE_LIMITED');
  await new Promise((r) => socket.on('end', r));
  const text = Buffer.concat(chunks).toString();
  const [head, body] = text.split('\r\n\r\n') as [string, string];
  const [statusLine, ...lines] = head.split('\r\n');
  t.equal(statusLine, 'HTTP/1.1 429 Too Many Requests');
  t.same(JSON.parse(body), { status: 429, message: 'rate limited', code: 'RATE_LIMITED', details: {}, id: 'rid-1' });
  t.equal(sent.status, 429);
  t.equal(sent.bodyBytes, Buffer.byteLength(body));
  t.equal(sent.headerBytes, lines.reduce((n, l) => n + l.length - 2, 0), 'names plus values, no framing');

  const gone = new PassThrough();
  gone.destroy();
  t.same(rejectUpgrade(gone, 503, 'x', 'r'), { status: 0, headerBytes: 0, bodyBytes: 0 }, 'nothing written to a closed socket');
});

t.test('header bytes; payload counts are zero until a socket carries the tunnel', async (t) => {
  t.equal(headerBytes({ upgrade: 'websocket', 'set-cookie': ['a=1', 'b=22'], skipped: undefined }), 'upgrade'.length + 'websocket'.length + 2 * 'set-cookie'.length + 3 + 4);
  const tunnel = new Tunnel('connect');
  t.same(tunnel.counts(), { in: 0, out: 0 });
  tunnel.carry({ bytesWritten: 150, bytesRead: 90 } as never, 40, 100);
  t.same(tunnel.counts(), { in: 50, out: 50 }, 'heads are not payload');
});
