/**
 * An app that frames its answer with a listed or repeated `Content-Length` (`2, 2`, two `2` lines,
 * a list and a line), through the whole proxy: RFC 9110 §8.6 lets a recipient send one value on or
 * refuse the answer; svcproxy refuses it as llhttp and Envoy do (the client gets `502`
 * `UPSTREAM_PROTOCOL_ERROR`, as for every answer that cannot be framed), and no client ever receives such a
 * length. Read with a raw socket, so what reaches the client is seen byte for byte, not through a
 * client parser that might itself refuse or mend it. The next request is served.
 */
import t from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { ALIAS, records, startPlane } from '../helpers/harness.js';
import { startRawApp } from './fixtures.js';

const HOST = `api-${ALIAS}.app.localhost`;

const ANSWERS: Record<string, string> = {
  '/ok': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok',
  '/listed': 'HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok',
  '/listed-tight': 'HTTP/1.1 200 OK\r\nContent-Length: 2,2\r\n\r\nok',
  '/twice': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok',
  '/list-and-line': 'HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nok',
  '/head-twice': 'HTTP/1.1 200 OK\r\ncontent-length: 2\r\nX-A: 1\r\nCONTENT-LENGTH: 2\r\n\r\nok',
};

/** Sends one request on a fresh connection and returns every byte the proxy wrote until it closed. */
async function rawGet(port: number, path: string): Promise<string> {
  const socket = net.connect(port, '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${HOST}\r\nConnection: close\r\n\r\n`);
  let got = '';
  socket.setEncoding('latin1');
  socket.on('data', (d: string) => (got += d));
  await once(socket, 'close');
  return got;
}

t.test('a listed or repeated Content-Length from the app never reaches the client', async (t) => {
  const app = (await startRawApp(t, ANSWERS)).port;
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app}`] } }));
  await plane.ready();

  for (const path of ['/listed', '/listed-tight', '/twice', '/list-and-line', '/head-twice']) {
    const raw = await rawGet(plane.port, path);
    const head = raw.slice(0, raw.indexOf('\r\n\r\n'));
    const lengths = head.split('\r\n').filter((line) => /^content-length:/i.test(line));
    t.ok(lengths.length <= 1, `${path}: at most one content-length line reaches the client (${JSON.stringify(lengths)})`);
    t.notOk(lengths.some((line) => line.includes(',')), `${path}: no listed length reaches the client`);
    t.match(head, /^HTTP\/1\.1 502 /, `${path}: 502`);
    t.match(raw.slice(raw.indexOf('\r\n\r\n') + 4), /"code":"UPSTREAM_PROTOCOL_ERROR"/, `${path}: code UPSTREAM_PROTOCOL_ERROR`);
    t.match(await rawGet(plane.port, '/ok'), /^HTTP\/1\.1 200 [^]*\r\n\r\nok$/, `${path}: the next request is served`);
  }
  t.equal(plane.runtime.dataplane.requestsInFlight, 0, 'nothing left in flight');
});
