/**
 * Free loopback TCP ports for the processes `svcproxy up` starts: bind port 0, read the port the
 * kernel chose, close, hand the number out. Ports of one batch are held open together, so a batch
 * never contains the same port twice. There is an unavoidable window between closing the probe
 * socket and the child binding the port; another program may take it meanwhile, in which case the
 * child fails to bind, exits, and the supervisor restarts it on the same port (a local-only risk).
 * Fails (rejects) when the host cannot be bound at all, e.g. no loopback interface.
 */
import { createServer, type Server } from 'node:net';

export const LOOPBACK = '127.0.0.1';

function listen(host: string): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host, port: 0, exclusive: true }, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}

/** `count` distinct free ports on `host`, all bound at once and then released. */
export async function allocatePorts(count: number, host: string = LOOPBACK): Promise<number[]> {
  const servers: Server[] = [];
  try {
    for (let i = 0; i < count; i++) servers.push(await listen(host));
    return servers.map((s) => {
      const address = s.address();
      if (address === null || typeof address === 'string') throw new Error(`no TCP address on ${host}`);
      return address.port;
    });
  } finally {
    await Promise.all(servers.map(close));
  }
}

/** One free port on `host` (loopback by default). */
export async function allocatePort(host: string = LOOPBACK): Promise<number> {
  const [port] = await allocatePorts(1, host);
  return port!;
}
