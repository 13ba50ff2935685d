/**
 * Peer: the floor of a Node proxy on these sockets (issue 40, "The floor"). A byte relay: for each
 * client connection one connection to the upstream, `pipe` both ways, nothing parsed. `tcp` listens
 * with `net`; `tls` terminates TLS (TLS 1.3 at least, the certificate and key given) with `tls` and
 * relays the plaintext to the same upstream. What svcproxy does beyond moving bytes (parsing,
 * routing, filters, its own writes) is the difference between its row and this one.
 *
 *   node relay.js tcp LISTEN_PORT UPSTREAM_PORT
 *   node relay.js tls LISTEN_PORT UPSTREAM_PORT CERT_FILE KEY_FILE
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';

const [mode, listenArg, upstreamArg, certFile, keyFile] = process.argv.slice(2);
const upstreamPort = Number(upstreamArg);

function relay(client: net.Socket): void {
  const upstream = net.connect(upstreamPort, '127.0.0.1');
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  const close = (): void => {
    client.destroy();
    upstream.destroy();
  };
  client.once('error', close).once('close', close);
  upstream.once('error', close).once('close', close);
}

const server = mode === 'tls'
  ? tls.createServer({ cert: readFileSync(certFile!), key: readFileSync(keyFile!), minVersion: 'TLSv1.3' }, relay)
  : net.createServer(relay);
server.listen(Number(listenArg), '127.0.0.1', () => process.stdout.write(`${mode} relay listening on ${listenArg}\n`));
process.on('SIGTERM', () => process.exit(0));
