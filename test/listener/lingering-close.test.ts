/**
 * A connection closed after its last answer lingers (src/http1/linger.ts): the server closes its
 * sending side and reads what the client still sends until the client closes, so a client that was
 * still sending a body when it was answered 413 reads the 413 instead of a reset. Both HTTP/1.1
 * paths: the quick one (a body with Content-Length) and Node's server (a chunked body).
 */
import t from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { listen } from '../../src/listener/index.js';

const ANSWER = 'too large';

t.test('answered before its body: the client still sending reads the answer, no reset', async (t) => {
  let serverSocket: net.Socket | undefined;
  const listener = await listen({
    host: '127.0.0.1',
    port: 0,
    handlers: {
      request: (req, res) => {
        serverSocket = req.socket as net.Socket;
        res.writeHead(413, { connection: 'close', 'content-length': ANSWER.length });
        res.end(ANSWER);
      },
    },
  });
  t.teardown(() => listener.destroy());

  for (const [path, head, chunk] of [
    ['the quick path', 'Content-Length: 1000000\r\n', Buffer.alloc(64 * 1024, 0x61)],
    ["Node's server", 'Transfer-Encoding: chunked\r\n', Buffer.from(`10000\r\n${'a'.repeat(0x10000)}\r\n`)],
  ] as const) {
    serverSocket = undefined;
    const client = net.connect({ port: listener.address.port, host: '127.0.0.1', allowHalfOpen: true });
    await once(client, 'connect');
    let text = '';
    let failed: Error | undefined;
    client.on('data', (c: Buffer) => (text += c.toString('latin1')));
    client.on('error', (e) => (failed = e));
    const closed = once(client, 'close');
    const headBytes = Buffer.byteLength(`POST / HTTP/1.1\r\nHost: x\r\n${head}\r\n`);
    client.write(`POST / HTTP/1.1\r\nHost: x\r\n${head}\r\n`);
    client.write(chunk);
    // The answer and the server's end of sending, read whole.
    await once(client, 'end');
    t.match(text, /^HTTP\/1\.1 413 [\s\S]*\r\n\r\ntoo large$/, `${path}: the 413 read whole`);
    // Still sending after the answer: read by the server and dropped, until the client is done.
    client.write(chunk);
    client.end();
    await closed;
    t.equal(failed, undefined, `${path}: no reset`);
    if (!serverSocket!.destroyed) await once(serverSocket!, 'close');
    t.equal(serverSocket!.bytesRead, headBytes + 2 * chunk.length, `${path}: the server read what came after its answer, then closed`);
  }
});
