/**
 * Helpers of the mesh tests: a fake clock whose wall time starts at a chosen instant, temporary
 * folders, the `openssl` binary as a reference, a real mTLS handshake on loopback judged by the
 * server (with TLS 1.3 the client finishes before the server has checked its certificate), and a
 * logger whose entries a test can wait for.
 */
import { execFile } from 'node:child_process';
import { EventEmitter, once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { connect, createServer, type TLSSocket } from 'node:tls';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import type { Clock } from '../../src/deps.js';
import { FakeClock as BaseFakeClock } from '../local/fixtures.js';
import { uriSanOf } from '../../src/mesh/identity.js';
import { startUp, type Up, type UpOptions } from '../../src/roles/up.js';
import { echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { waitFor } from '../helpers/harness.js';
import type { MeshCredentials } from '../../src/mesh/credentials.js';

/** Fake time (test/local's) whose wall time starts at the real now: certificates are judged by openssl too. */
export class FakeClock extends BaseFakeClock implements Clock {
  constructor(wallBase = Date.now()) {
    super(wallBase);
  }
}

/** A new empty folder, removed at teardown. */
export async function tempDir(t: { teardown(fn: () => unknown): void }, prefix = 'mesh-'): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

export interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `openssl` (Debian's) with `args`, `input` on stdin (a string or bytes). */
export function openssl(args: string[], input?: string | Buffer): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = execFile('openssl', args, { encoding: 'buffer', maxBuffer: 1 << 20 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : -1) : 0;
      if (err && code === -1) return reject(err);
      resolve({ code, stdout: stdout.toString('latin1'), stderr: stderr.toString('utf8') });
    });
    child.stdin?.end(input);
  });
}

/** Writes the credentials as `cert.pem`, `key.pem`, `ca.pem` in `dir`; returns their paths. */
export async function writeCredentials(dir: string, c: Pick<MeshCredentials, 'certPem' | 'keyPem' | 'caPem'>): Promise<{ cert: string; key: string; ca: string }> {
  const files = { cert: join(dir, 'cert.pem'), key: join(dir, 'key.pem'), ca: join(dir, 'ca.pem') };
  await writeFile(files.cert, c.certPem);
  await writeFile(files.key, c.keyPem, { mode: 0o600 });
  await writeFile(files.ca, c.caPem);
  return files;
}

export type Handshake = { ok: true; clientUri: string | undefined; serverUri: string | undefined } | { ok: false; error: string; reason?: string };

/**
 * An mTLS handshake on loopback: a node:tls server presenting `server` and requiring a client
 * certificate chained to `server.caPem`, a client presenting `client` and trusting `clientTrust`
 * (the server's bundle by default). The server's verdict decides; the URIs are what each side
 * read with uriSanOf from getPeerCertificate().
 */
export async function handshake(server: MeshCredentials, client: Pick<MeshCredentials, 'certPem' | 'keyPem'>, clientTrust = server.caPem): Promise<Handshake> {
  const srv = createServer({ cert: server.certPem, key: server.keyPem, ca: server.caPem, requestCert: true, rejectUnauthorized: true });
  srv.listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const verdict = new Promise<{ ok: true; uri: string | undefined; socket: TLSSocket } | { ok: false; error: string; reason?: string }>((resolve) => {
    srv.once('secureConnection', (socket: TLSSocket) => resolve({ ok: true, uri: uriSanOf(socket.getPeerCertificate()), socket }));
    // Node checks the client's certificate after OpenSSL's handshake and destroys the socket
    // ('socket hang up'); the reason is left in authorizationError.
    srv.once('tlsClientError', (err: Error, socket: TLSSocket) => {
      const reason = socket.authorizationError;
      resolve({ ok: false, error: err.message, ...(reason ? { reason: String(reason) } : {}) });
    });
  });
  const { port } = srv.address() as AddressInfo;
  // The server's certificate names it by URI only: the client checks the chain, not a host name.
  const sock = connect({ host: '127.0.0.1', port, cert: client.certPem, key: client.keyPem, ca: clientTrust, checkServerIdentity: () => undefined });
  const clientSaw = new Promise<string | undefined>((resolve) => {
    sock.once('secureConnect', () => resolve(uriSanOf(sock.getPeerCertificate())));
    sock.on('error', () => resolve(undefined));
    sock.once('close', () => resolve(undefined));
  });
  try {
    const v = await verdict;
    if (!v.ok) return v;
    const clientUri = await clientSaw;
    v.socket.destroy();
    return { ok: true, clientUri, serverUri: v.uri };
  } finally {
    sock.destroy();
    srv.close();
  }
}

export interface LogEntry {
  level: number;
  msg: string;
  [k: string]: unknown;
}

/** A pino logger at debug level whose entries are kept in `entries` and announced on `events` ('entry'). */
export function captureLogger(): { logger: Logger; entries: LogEntry[]; waitFor(pred: (e: LogEntry) => boolean): Promise<LogEntry> } {
  const entries: LogEntry[] = [];
  const events = new EventEmitter();
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        const entry = JSON.parse(line) as LogEntry;
        entries.push(entry);
        events.emit('entry', entry);
      }
      done();
    },
  });
  const logger = pino({ level: 'debug' }, stream);
  const waitFor = (pred: (e: LogEntry) => boolean): Promise<LogEntry> => {
    const seen = entries.find(pred);
    if (seen) return Promise.resolve(seen);
    return new Promise((resolve) => {
      const on = (e: LogEntry): void => {
        if (!pred(e)) return;
        events.off('entry', on);
        resolve(e);
      };
      events.on('entry', on);
    });
  };
  return { logger, entries, waitFor };
}

// ---- `svcproxy up` with the mesh (test/mesh/up-*.test.ts) -------------------------------------

export const NODE = process.execPath;

/** A container running the demo's echo app on declared port `port`. */
export function echoContainer(name = 'app', port = 8080): Record<string, unknown> {
  return { name, command: NODE, args: [echoScriptPath()], ports: [{ number: port, protocol: 'http' }] };
}

/** A standard workload of one replica: echo containers unless given, `internal` its internal firewall. */
export function meshWorkload(
  gvc: string,
  name: string,
  opts: { containers?: readonly Record<string, unknown>[]; internal?: Record<string, unknown>; tags?: Record<string, unknown>; spec?: Record<string, unknown> } = {},
): Record<string, unknown> {
  return {
    kind: 'workload', name, gvc, tags: opts.tags ?? {},
    spec: {
      type: 'standard',
      containers: opts.containers ?? [echoContainer()],
      defaultOptions: { autoscaling: { minScale: 1 }, timeoutSeconds: 5 },
      firewallConfig: { internal: opts.internal ?? { inboundAllowType: 'same-org' } },
      ...opts.spec,
    },
  };
}

export interface MeshUp {
  readonly up: Up;
  /** Where its local CA is kept. */
  readonly caDir: string;
  /** The outbound listener of `gvc/name`'s replica: the port its HTTP_PROXY names. */
  proxyPort(workload: string): number;
  /** The environment of `gvc/name`'s first process (for a client run as that workload's app). */
  envOf(workload: string): NodeJS.ProcessEnv;
}

/**
 * `svcproxy up` with the org `acme`, location `loc1`, GVCs `g1` and `g2` and the given workloads,
 * its CA in a temporary folder and load shedding off (the busy-machine runs); resolves once every
 * workload's replica is ready.
 */
export async function startMeshUp(
  t: { teardown(fn: () => unknown): void },
  workloads: readonly Record<string, unknown>[],
  opts: Partial<Pick<UpOptions, 'meshCertTtlMs' | 'mesh' | 'logger' | 'deps' | 'api'>> = {},
): Promise<MeshUp> {
  const stateDir = await tempDir(t, 'svcproxy-state-');
  const caDir = join(stateDir, 'ca');
  const up = await startUp({
    settings: defaultSettings,
    records: [
      { kind: 'org', name: 'acme' },
      { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
      { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
      { kind: 'gvc', name: 'g2', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
      ...workloads,
    ],
    listen: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: silentLogger(),
    watch: false,
    stateDir,
    limits: { maxEventLoopDelayMs: 0 },
    ...opts,
  });
  t.teardown(() => up.stop(5000));
  const all = (): readonly { ready: boolean }[] => up.runtime.replicas.all();
  await waitFor(() => all().length === workloads.length && all().every((r) => r.ready), 60_000, 'replicas ready');
  const envOf = (workload: string): NodeJS.ProcessEnv => {
    const p = up.supervisor.processes().find((x) => x.workload === workload);
    if (!p) throw new Error(`no process of ${workload}`);
    return { ...process.env, ...p.env };
  };
  return { up, caDir, envOf, proxyPort: (workload) => Number(new URL(envOf(workload).HTTP_PROXY!).port) };
}
