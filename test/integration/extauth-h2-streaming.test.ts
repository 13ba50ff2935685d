/**
 * Streaming bodies through external authorization keep flowing over HTTP/2 (issue 25 #9). The check
 * reads a body of unknown length only until it goes quiet (BODY_IDLE_MS), then the rest is replayed
 * to the app; node:http2's compat request stalled in that replay. Against a gRPC peer that is not
 * grpc-js — gRPC C-core through Debian's python3-grpcio (test/fixtures/grpcio/peer.py, a real
 * process) — a bidi ping-pong and a client-streaming call with a pause after every message, through
 * an ingress and through a sidecar behind one; then an h2c upload of unknown length that pauses
 * mid-body, and the same over HTTP/1.1 chunked. Every pause waits for an event (the app reported the
 * previous message), so it lasts past the idle timer however busy the machine is: the app sees a
 * message only after the check allowed the call, and the check goes out only once the body went
 * quiet.
 */
import t, { type Test } from 'tap';
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import http from 'node:http';
import http2 from 'node:http2';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ALIAS, records, startHttpServer, startPlane, startSidecarBehindIngress, type StartedPlane } from '../helpers/harness.js';
import { allow, startGrpcAuth, type GrpcAuthServer } from '../fixtures/extauth/servers.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const PYTHON = '/usr/bin/python3';
const PEER = path.join(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/grpcio/peer.py');
/** Bounds a hang (the failure this file guards against), never a pass: the proxy's request timeout, and the client's deadline above it. */
const TIMEOUT_SECONDS = 15;
const DEADLINE_SECONDS = 30;
const MESSAGES = ['m1', 'm2', 'm3', 'm4', 'm5'];

/** A peer.py process: commands on stdin, each stdout line taken once by the first waiter it matches. */
class Peer {
  private readonly lines: string[] = [];
  private readonly waiters: { matches: (line: string) => boolean; resolve: (line: string) => void }[] = [];
  private stderr = '';
  private exited: string | undefined;

  private constructor(private readonly child: ChildProcessWithoutNullStreams) {
    createInterface({ input: child.stdout }).on('line', (line) => {
      const i = this.waiters.findIndex((w) => w.matches(line));
      if (i < 0) return void this.lines.push(line);
      const [waiter] = this.waiters.splice(i, 1);
      waiter!.resolve(line);
    });
    child.stderr.on('data', (c: Buffer) => (this.stderr += c.toString()));
  }

  static start(t: Test, ...args: string[]): Peer {
    const child = spawn(PYTHON, [PEER, ...args], { stdio: 'pipe' });
    const peer = new Peer(child);
    t.teardown(() => {
      if (child.exitCode === null) child.kill();
    });
    child.on('close', (code, signal) => {
      if (signal !== null) return;
      // Ends every wait with a line no assertion expects, carrying what the peer said.
      peer.exited = `exited ${code}: ${peer.stderr}`;
      for (const w of peer.waiters.splice(0)) w.resolve(peer.exited);
    });
    return peer;
  }

  send(line: string): void {
    this.child.stdin.write(`${line}\n`);
  }

  /** The next line starting with one of `prefixes` (already printed or still to come), whole. */
  next(...prefixes: string[]): Promise<string> {
    const matches = (line: string): boolean => prefixes.some((p) => line.startsWith(p));
    const i = this.lines.findIndex(matches);
    if (i >= 0) return Promise.resolve(this.lines.splice(i, 1)[0]!);
    if (this.exited !== undefined) return Promise.resolve(this.exited);
    return new Promise((resolve) => this.waiters.push({ matches, resolve }));
  }
}

const grpcioThere = ((): boolean => {
  try {
    execFileSync(PYTHON, ['-c', 'import grpc'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();
if (!grpcioThere) t.fail(`${PYTHON} cannot import grpc: run scripts/test-deps.sh (Debian's python3-grpcio)`);

/**
 * Retries: by default every attempt reads the body through the retry replay buffer (src/retry/replay.ts)
 * wrapped around the check's replay; with `off` the forwarder reads the check's replay itself.
 */
type Retries = 'default' | 'off';

function base(appPort: number, authPort: number, protocol: 'grpc' | 'http', retries: Retries = 'default'): Record<string, unknown>[] {
  return records({
    ports: [{ number: protocol === 'grpc' ? 50051 : 8080, protocol }],
    replicas: { 'aws-us-east-2': [`127.0.0.1:${appPort}`] },
    workloadSpec: {
      defaultOptions: { timeoutSeconds: TIMEOUT_SECONDS },
      ...(retries === 'off' ? { requestRetryPolicy: { attempts: 0 } } : {}),
    },
    tags: {
      'svc/externalAuthAddress': '127.0.0.1',
      'svc/externalAuthPort': authPort,
      'svc/externalAuthScheme': 'http',
      'svc/externalAuthFailureAllow': false,
    },
  });
}

/** The gRPC C-core app and client, the authorization server, and the front plane for `via`. */
async function grpcSetup(t: Test, via: 'ingress' | 'sidecar', retries: Retries = 'default'): Promise<{ app: Peer; client: Peer; auth: GrpcAuthServer; front: StartedPlane }> {
  const app = Peer.start(t, 'server');
  const listening = await app.next('port ');
  if (!listening.startsWith('port ')) throw new Error(`the gRPC app did not start: ${listening}`);
  const appPort = Number(listening.slice('port '.length));
  const auth = await startGrpcAuth(t, () => allow());
  const recs = base(appPort, auth.port, 'grpc', retries);
  let front: StartedPlane;
  if (via === 'ingress') {
    front = await startPlane(t, recs);
  } else {
    const { ingress, sidecar } = await startSidecarBehindIngress(t, recs, appPort);
    await sidecar.ready();
    front = ingress;
  }
  await front.ready();
  const client = Peer.start(t, 'client', `127.0.0.1:${front.port}`, CANONICAL, String(DEADLINE_SECONDS));
  return { app, client, auth, front };
}

const BIDI_CASES: [via: 'ingress' | 'sidecar', retries: Retries][] = [['ingress', 'default'], ['ingress', 'off'], ['sidecar', 'default']];
for (const [via, retries] of BIDI_CASES) {
  t.test(`gRPC C-core through a ${via} with ext_authz (retries ${retries}): bidi ping-pong, each answer awaited before the next send`, { skip: !grpcioThere }, async (t) => {
    const { app, client, auth } = await grpcSetup(t, via, retries);
    client.send('bidi-start');
    for (const m of MESSAGES) {
      client.send(`bidi-send ${m}`);
      // A call that ends instead (its status line) fails here with the status it got.
      if (!t.equal(await client.next('answer ', 'status '), `answer echo ${m}`, `answer to ${m}`)) return;
    }
    client.send('bidi-end');
    t.equal(await client.next('status '), 'status OK ');
    for (const m of MESSAGES) t.equal(await app.next('recv bidi '), `recv bidi ${m}`, `the app got ${m} in order`);
    t.equal(auth.calls.length, 1, 'one check for the call');
    t.equal(auth.calls[0]!.attributes.request.http.headers['x-envoy-auth-partial-body'], 'true', 'checked with the first message only');
  });
}

for (const via of ['ingress', 'sidecar'] as const) {

  t.test(`gRPC C-core through a ${via} with ext_authz: client streaming, each message sent once the app has the one before`, { skip: !grpcioThere }, async (t) => {
    const { app, client, auth } = await grpcSetup(t, via);
    client.send('collect-start');
    const ended = client.next('result ', 'status ');
    for (const m of MESSAGES) {
      client.send(`collect-send ${m}`);
      // The pause: the next message leaves only after this one went through the check to the app
      // (or the call ended, which fails here with its status).
      if (!t.equal(await Promise.race([app.next('recv collect '), ended]), `recv collect ${m}`, `the app got ${m} in order`)) return;
    }
    client.send('collect-end');
    t.equal(await ended, `result ${MESSAGES.join(',')}`);
    t.equal(auth.calls.length, 1, 'one check for the call');
  });
}

/** An HTTP/1.1 app that reports every body chunk as it arrives and answers with the whole body. */
async function uploadApp(t: Test): Promise<{ port: number; received: () => string; arrived: (n: number) => Promise<void> }> {
  let body = '';
  let waiting: { n: number; resolve: () => void } | undefined;
  const app = await startHttpServer(t, (req, res) => {
    req.setEncoding('latin1');
    req.on('data', (c: string) => {
      body += c;
      if (waiting && body.length >= waiting.n) waiting.resolve();
    });
    req.on('end', () => res.end(`got ${body.length}`));
  });
  return {
    port: app.port,
    received: () => body,
    arrived: (n) => (body.length >= n ? Promise.resolve() : new Promise((resolve) => (waiting = { n, resolve }))),
  };
}

async function uploadSetup(t: Test, retries: Retries = 'default'): Promise<{ app: Awaited<ReturnType<typeof uploadApp>>; auth: GrpcAuthServer; plane: StartedPlane }> {
  const app = await uploadApp(t);
  const auth = await startGrpcAuth(t, () => allow());
  const plane = await startPlane(t, base(app.port, auth.port, 'http', retries));
  await plane.ready();
  return { app, auth, plane };
}

const FIRST = 'first part of the upload;';
// Past the check's 8 KiB body limit, so the rest also crosses the replay's buffers.
const REST = 'x'.repeat(100_000);

for (const retries of ['default', 'off'] as const) t.test(`h2c upload of unknown length (retries ${retries}), paused mid-body until the app has the first part`, async (t) => {
  const { app, auth, plane } = await uploadSetup(t, retries);
  const session = http2.connect(plane.url);
  t.teardown(() => session.destroy());
  const stream = session.request({ ':method': 'POST', ':path': '/upload', ':authority': CANONICAL });
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    let status = 0;
    let body = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.setEncoding('utf8');
    stream.on('data', (c: string) => (body += c));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
  });
  stream.write(FIRST);
  await app.arrived(FIRST.length);
  t.equal(auth.calls.length, 1, 'the check went out with the first part');
  stream.end(REST);
  t.same(await answer, { status: 200, body: `got ${FIRST.length + REST.length}` });
  t.ok(app.received() === FIRST + REST, 'the app received the whole body, in order');
});

t.test('HTTP/1.1 chunked upload, paused mid-body until the app has the first part', async (t) => {
  const { app, auth, plane } = await uploadSetup(t);
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: plane.port, method: 'POST', path: '/upload', headers: { host: CANONICAL }, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.write(FIRST);
    void app.arrived(FIRST.length).then(() => {
      t.equal(auth.calls.length, 1, 'the check went out with the first part');
      req.end(REST);
    });
  });
  t.same(await answer, { status: 200, body: `got ${FIRST.length + REST.length}` });
  t.ok(app.received() === FIRST + REST, 'the app received the whole body, in order');
});
