/**
 * Free loopback TCP ports for the processes `svcproxy up` starts: bind port 0, read the port the
 * kernel chose, close, hand the number out. Ports of one batch are held open together, so a batch
 * never contains the same port twice. There is an unavoidable window between closing the probe
 * socket and the child binding the port; another program may take it meanwhile, in which case the
 * child fails to bind, exits, and the supervisor restarts it on the same port (a local-only risk).
 * Fails (rejects) when the host cannot be bound at all, e.g. no loopback interface.
 */
import { createServer, type Server } from 'node:net';
import type { HostPort } from '../routing/replicas.js';

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

/** A replica's ports laid out over its containers (`layPorts`). */
export interface PortLayout {
  /** Per container (in order): its own port for each number it declares. */
  readonly own: readonly ReadonlyMap<number, number>[];
  /** The replica's ports, what the proxy dials: per declared number, the first container declaring it. */
  readonly ports: Map<number, HostPort>;
  /** A container of the replica by name: its own port for that declared number. */
  sibling(container: string, port: number): HostPort | undefined;
}

/**
 * Hands `ports` (allocated, one per declared port of every container, in order) to the containers:
 * every container gets its own port per declared number; the replica's map takes the first container
 * that declares a number.
 */
export function layPorts(containers: readonly { readonly name: string; readonly ports: readonly { readonly number: number }[] }[], ports: readonly number[], host: string): PortLayout {
  const own: Map<number, number>[] = [];
  const replicaPorts = new Map<number, HostPort>();
  let next = 0;
  for (const container of containers) {
    const mine = new Map<number, number>();
    for (const port of container.ports) {
      const actual = ports[next++]!;
      mine.set(port.number, actual);
      if (!replicaPorts.has(port.number)) replicaPorts.set(port.number, { host, port: actual });
    }
    own.push(mine);
  }
  return {
    own,
    ports: replicaPorts,
    sibling: (name, port) => {
      const i = containers.findIndex((c) => c.name === name);
      const actual = i < 0 ? undefined : own[i]!.get(port);
      return actual === undefined ? undefined : { host, port: actual };
    },
  };
}
