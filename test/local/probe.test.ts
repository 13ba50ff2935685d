import t from 'tap';
import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { ReplicaRegistry, routeTo, workloadTraffic, type Replica } from '../../src/routing/replicas.js';
import { addressOfDeployment, nextProbeState, QUIET_CHECKS_PER_TURN, QuietSlots, quietWait, type QuietCheck, quietWhileUnrouted, startProbing, INITIAL_PROBE_STATE, type ProbeState } from '../../src/local/probe.js';
import { CheckDeadline, checkExec, checkHttp, checkTcp } from '../../src/local/checks.js';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { allocatePort } from '../../src/local/ports.js';
import { FakeClock, probe, testDeps, waitFor } from './fixtures.js';

function replica(name = 'api-0'): Replica {
  return { workload: 'demo/api', location: 'aws-us-east-2', name, index: 0, ports: new Map(), ready: false, outstanding: 0, ejectedUntil: 0 };
}

async function listen(server: Server | ReturnType<typeof createTcpServer>): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

const never = new AbortController().signal;
const timeoutSignal = (ms: number): AbortSignal => AbortSignal.timeout(ms);

t.test('nextProbeState: Kubernetes thresholds', async (t) => {
  const run = (results: boolean[], s: number, f: number, start: ProbeState = INITIAL_PROBE_STATE): boolean[] => {
    let state = start;
    return results.map((ok) => (state = nextProbeState(state, ok, { successThreshold: s, failureThreshold: f })).ready);
  };
  t.same(run([true], 1, 3), [true], 'one pass is enough');
  t.same(run([true, true, true], 3, 1), [false, false, true], 'successThreshold 3');
  t.same(run([true, false, true, true], 2, 1), [false, false, false, true], 'a failure resets the passes');
  t.same(run([true, false, false, true, false, false, false], 1, 3), [true, true, true, true, true, true, false], 'failureThreshold 3');
  t.same(run([false, false], 1, 3), [false, false], 'starts not ready');
  t.same(run([true, false], 0, 0), [true, false], 'thresholds below 1 count as 1');
});

t.test('HTTP check: 2xx/3xx pass, others fail, headers sent', async (t) => {
  let status = 200;
  let seen: Record<string, unknown> = {};
  const server = createServer((req, res) => {
    seen = { url: req.url, header: req.headers['x-probe'] };
    res.writeHead(status).end('x');
  });
  t.teardown(() => server.close());
  const port = await listen(server);
  const target = { host: '127.0.0.1', port };
  const check = { path: '/healthz', scheme: 'HTTP' as const, headers: [{ name: 'X-Probe', value: 'yes' }] };
  for (const [code, want] of [[200, true], [204, true], [302, true], [399, true], [404, false], [500, false], [503, false]] as const) {
    status = code;
    t.equal(await checkHttp(target, check, never), want, `status ${code}`);
  }
  t.same(seen, { url: '/healthz', header: 'yes' });
});

t.test('HTTP check: refused and hanging servers fail', async (t) => {
  const hanging = createServer(() => undefined);
  t.teardown(() => hanging.closeAllConnections());
  t.teardown(() => hanging.close());
  const port = await listen(hanging);
  const started = Date.now();
  t.equal(await checkHttp({ host: '127.0.0.1', port }, { path: '/', scheme: 'HTTP', headers: [] }, timeoutSignal(150)), false, 'timed out');
  t.ok(Date.now() - started < 2000);
  const closed = await allocatePort();
  t.equal(await checkHttp({ host: '127.0.0.1', port: closed }, { path: '/', scheme: 'HTTP', headers: [] }, never), false, 'refused');
});

t.test('TCP check: open vs closed', async (t) => {
  const server = createTcpServer((s) => s.destroy());
  t.teardown(() => server.close());
  const port = await listen(server);
  t.equal(await checkTcp({ host: '127.0.0.1', port }, never), true);
  t.equal(await checkTcp({ host: '127.0.0.1', port: await allocatePort() }, never), false);
});

t.test('CheckDeadline: one listener, run once at the first abort; a removed listener is not run', async (t) => {
  const d = new CheckDeadline();
  const calls: string[] = [];
  const first = (): void => void calls.push('first');
  d.addEventListener('abort', first);
  d.removeEventListener('abort', first);
  d.addEventListener('abort', () => calls.push('second'));
  t.equal(d.aborted, false);
  d.abort();
  d.abort();
  t.equal(d.aborted, true);
  t.same(calls, ['second']);
});

t.test('TCP check: a connect that hangs fails at the deadline, whichever kind stops it', async (t) => {
  // A listening socket whose process is stopped: the kernel completes handshakes until the accept
  // queue is full, then drops SYNs, so a further connect hangs (its SYN retried after 1 s, 3 s, ...).
  const child = spawn(process.execPath, ['-e', `
    const s = require('net').createServer();
    s.listen({ host: '127.0.0.1', port: 0, backlog: 1 }, () => {
      process.stdout.write(String(s.address().port) + '\\n', () => process.kill(process.pid, 'SIGSTOP'));
    });`], { stdio: ['ignore', 'pipe', 'inherit'] });
  t.teardown(() => child.kill('SIGKILL'));
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))));
  // The child stops itself right after writing: wait until the kernel says so (state T), however busy.
  const state = (): string => readFileSync(`/proc/${child.pid}/stat`, 'utf8').replace(/^.*\) /s, '').charAt(0);
  await waitFor(() => state() === 'T', 30_000, 'the child to stop itself');
  const fillers = Array.from({ length: 4 }, () => connect({ host: '127.0.0.1', port }).on('error', () => undefined));
  t.teardown(() => fillers.forEach((s) => s.destroy()));
  await new Promise((r) => setTimeout(r, 200));

  // Each check is still pending past the first SYN retry (1 s), then ended by its deadline: no
  // bound on how fast the end comes, so a busy machine cannot fail it; a check that ended by itself
  // (a retry, a timeout of its own) or ignored the deadline (hanging ~2 min) would.
  const pendingUntilAborted = async (check: Promise<boolean>, abort: () => void): Promise<[boolean, boolean]> => {
    let ended = false;
    void check.finally(() => (ended = true));
    await new Promise((r) => setTimeout(r, 1200));
    const pending = !ended;
    abort();
    return [pending, await check];
  };
  const deadline = new CheckDeadline();
  t.same(await pendingUntilAborted(checkTcp({ host: '127.0.0.1', port }, deadline), () => deadline.abort()), [true, false], 'pending past a SYN retry; a CheckDeadline stops it');
  const controller = new AbortController();
  t.same(await pendingUntilAborted(checkTcp({ host: '127.0.0.1', port }, controller.signal), () => controller.abort()), [true, false], 'an AbortSignal stops it too');

  const early = new CheckDeadline();
  early.abort();
  t.equal(await checkTcp({ host: '127.0.0.1', port }, early), false, 'already past its deadline: fails without connecting');
});

t.test('TCP check: the connection is closed in order, never reset', async (t) => {
  // A bare Node net server without an 'error' listener on its sockets would die of a reset.
  const ended: string[] = [];
  const server = createTcpServer((s) => {
    s.on('end', () => ended.push('end'));
    s.on('error', (err: NodeJS.ErrnoException) => ended.push(err.code ?? 'error'));
  });
  t.teardown(() => server.close());
  const port = await listen(server);
  for (let i = 0; i < 5; i++) t.equal(await checkTcp({ host: '127.0.0.1', port }, never), true);
  await waitFor(() => ended.length === 5);
  t.same(ended, Array(5).fill('end'), 'the app saw each check end its stream');
});

t.test('exec check: exit status', async (t) => {
  t.equal(await checkExec([process.execPath, '-e', 'process.exit(0)'], undefined, never), true);
  t.equal(await checkExec([process.execPath, '-e', 'process.exit(3)'], undefined, never), false);
  t.equal(await checkExec(['/nonexistent/probe'], undefined, never), false, 'spawn failure');
  t.equal(await checkExec([], undefined, never), false, 'empty command');
  t.equal(
    await checkExec([process.execPath, '-e', 'process.exit(process.env.WANT === "1" ? 0 : 1)'], { ...process.env, WANT: '1' }, never),
    true,
    'runs with the given environment',
  );
  const started = Date.now();
  t.equal(await checkExec([process.execPath, '-e', 'setTimeout(() => {}, 10000)'], undefined, timeoutSignal(200)), false, 'killed at timeout');
  t.ok(Date.now() - started < 5000);
});

t.test('startProbing: HTTP readiness follows the server, with thresholds', async (t) => {
  let status = 500;
  const server = createServer((_req, res) => res.writeHead(status).end());
  t.teardown(() => server.close());
  const port = await listen(server);
  const registry = new ReplicaRegistry();
  const r = replica();
  registry.replace('test', [r]);
  const changes: boolean[] = [];
  registry.on('ready', (x: Replica) => changes.push(x.ready));
  const stop = startProbing(r, probe({ kind: 'http', path: '/ready', successThreshold: 2, failureThreshold: 2 }), () => ({ host: '127.0.0.1', port }), {
    ...testDeps(),
    registry,
  });
  t.teardown(stop);
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(r.ready, false, 'not ready while 500');
  status = 200;
  await waitFor(() => r.ready, 30_000, 'ready');
  status = 500;
  await waitFor(() => !r.ready, 30_000, 'not ready again');
  t.same(changes, [true, false], 'one change each way');
  stop();
  status = 200;
  await new Promise((resolve) => setTimeout(resolve, 200));
  t.equal(r.ready, false, 'stopped probing stays put');
});

t.test('startProbing: no probe means TCP connect to the first port', async (t) => {
  const server = createTcpServer((s) => s.destroy());
  t.teardown(() => server.close());
  const registry = new ReplicaRegistry();
  const r = replica();
  registry.replace('test', [r]);
  const port = await allocatePort();
  const asked: (number | undefined)[] = [];
  const stop = startProbing(r, undefined, (declared) => (asked.push(declared), { host: '127.0.0.1', port }), { ...testDeps(), registry });
  t.teardown(stop);
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal(r.ready, false, 'nothing listening yet');
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  await waitFor(() => r.ready, 30_000, 'ready once listening');
  t.equal(asked[0], undefined, 'asked for the first port');
});

t.test('startProbing: exec probe and initial delay', async (t) => {
  const registry = new ReplicaRegistry();
  const r = replica();
  const stop = startProbing(
    r,
    // Starting node can take seconds on a loaded machine: a generous timeout.
    probe({ kind: 'exec', command: [process.execPath, '-e', 'process.exit(0)'], initialDelaySeconds: 0.3, timeoutSeconds: 10 }),
    () => undefined,
    { ...testDeps(), registry },
  );
  t.teardown(stop);
  await new Promise((resolve) => setTimeout(resolve, 150));
  t.equal(r.ready, false, 'waiting out the initial delay');
  await waitFor(() => r.ready, 20_000, 'ready after the delay');
  t.pass('ready');
});

t.test('startProbing: a deployment replica by its address', async (t) => {
  const server = createTcpServer((s) => s.destroy());
  t.teardown(() => server.close());
  const port = await listen(server);
  const registry = new ReplicaRegistry();
  const r = replica('dep-a');
  const stop = startProbing(r, undefined, addressOfDeployment(`127.0.0.1:${port}`), { ...testDeps(), registry });
  t.teardown(stop);
  await waitFor(() => r.ready, 30_000, 'deployment replica ready');
  t.pass('ready');
});

t.test('addressOfDeployment parses host:port', async (t) => {
  const cases: [string, unknown][] = [
    ['127.0.0.1:8080', { host: '127.0.0.1', port: 8080 }],
    ['app.internal:80', { host: 'app.internal', port: 80 }],
    ['[::1]:9000', { host: '::1', port: 9000 }],
    ['nohost', undefined],
    ['host:0', undefined],
    ['host:70000', undefined],
  ];
  for (const [address, want] of cases) t.same(addressOfDeployment(address)(8080), want, address);
});

t.test('gRPC health check: SERVING passes, NOT_SERVING and no server fail', async (t) => {
  const grpc = await import('@grpc/grpc-js');
  const protoLoader = await import('@grpc/proto-loader');
  const definition = protoLoader.fromJSON(
    {
      nested: {
        grpc: { nested: { health: { nested: { v1: { nested: {
          HealthCheckRequest: { fields: { service: { type: 'string', id: 1 } } },
          HealthCheckResponse: { fields: { status: { type: 'ServingStatus', id: 1 } }, nested: { ServingStatus: { values: { UNKNOWN: 0, SERVING: 1, NOT_SERVING: 2 } } } },
          Health: { methods: { Check: { requestType: 'HealthCheckRequest', responseType: 'HealthCheckResponse', comment: '' } } },
        } } } } } },
      },
    },
    { enums: String },
  );
  let status = 'NOT_SERVING';
  const server = new grpc.Server();
  server.addService(definition['grpc.health.v1.Health'] as unknown as import('@grpc/grpc-js').ServiceDefinition, {
    Check: (_call: unknown, callback: (e: null, r: { status: string }) => void) => callback(null, { status }),
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))),
  );
  t.teardown(() => server.forceShutdown());
  const registry = new ReplicaRegistry();
  const r = replica();
  const stop = startProbing(r, probe({ kind: 'grpc', timeoutSeconds: 1 }), () => ({ host: '127.0.0.1', port }), { ...testDeps(), registry });
  t.teardown(stop);
  await new Promise((resolve) => setTimeout(resolve, 300));
  t.equal(r.ready, false, 'NOT_SERVING');
  status = 'SERVING';
  await waitFor(() => r.ready, 30_000, 'SERVING');
  t.pass('ready when SERVING');
  const { checkGrpc } = await import('../../src/local/checks.js');
  const closed = await allocatePort();
  t.equal(await checkGrpc({ host: '127.0.0.1', port: closed }, '', new Date(Date.now() + 500), AbortSignal.timeout(1000)), false, 'no server');
});

/** A fake clock, a TCP server that accepts (closed in teardown), a registry and a replica. */
async function probeSetup(t: { teardown(fn: () => void): void }) {
  const clock = new FakeClock();
  const server = createTcpServer((s) => s.destroy());
  t.teardown(() => server.close());
  const port = await listen(server);
  return { clock, server, port, registry: new ReplicaRegistry(), r: replica() };
}

t.test('startProbing: period and initial delay run on the injected clock', async (t) => {
  const { clock, server, port, registry, r } = await probeSetup(t);
  const stop = startProbing(r, probe({ kind: 'tcp', initialDelaySeconds: 5, periodSeconds: 10, failureThreshold: 1 }), () => ({ host: '127.0.0.1', port }), {
    ...testDeps(),
    clock,
    registry,
  });
  t.teardown(stop);
  t.same(clock.pending(), [5000], 'first check after the initial delay');
  clock.advance(5000);
  await waitFor(() => r.ready, 30_000, 'ready');
  await waitFor(() => clock.pending().length === 1, 30_000, 'next check scheduled');
  t.same(clock.pending(), [10_000], 'next check a period later');
  await new Promise((resolve) => server.close(resolve));
  clock.advance(9_999);
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.equal(r.ready, true, 'no check before the period');
  clock.advance(1);
  await waitFor(() => !r.ready, 30_000, 'not ready after the failed check');
  stop();
  t.same(clock.pending(), [], 'stop clears the timer');
});

t.test('startProbing: a ready replica of a workload without traffic is checked at the quiet period', async (t) => {
  const clock = new FakeClock();
  let open = true;
  const server = createTcpServer((s) => s.destroy());
  t.teardown(() => server.close());
  const port = await listen(server);
  const target = await allocatePort();
  const registry = new ReplicaRegistry();
  const r = replica();
  const traffic = workloadTraffic();
  // Another replica of the same workload: the one that takes the first request.
  const sibling = { ...replica('api-1'), traffic };
  let checks = 0;
  // The draws of the quiet waits, in order (see quietWait).
  const draws = [0.501, 0.25, 1];
  const stop = startProbing(
    r,
    probe({ kind: 'tcp', periodSeconds: 5, timeoutSeconds: 1, failureThreshold: 3 }),
    () => {
      checks++;
      return { host: '127.0.0.1', port: open ? port : target };
    },
    { ...testDeps(), clock, registry, random: () => draws.shift() ?? 0.5 },
    quietWhileUnrouted(traffic, 60_000, new QuietSlots(clock)),
  );
  t.teardown(stop);
  const nextCheck = async (n: number): Promise<number[]> => {
    // While a check runs, its 1 s timeout is the pending timer; after it, the next check's wait.
    await waitFor(() => checks === n && clock.pending().length === 1 && clock.pending()[0] !== 1000, 30_000, `check ${n} done`);
    return clock.pending();
  };
  clock.advance(0);
  t.same(await nextCheck(1), [32_750], 'ready, no traffic: the first quiet check at a random point of the minute after the period (draw 0.501: 32,555 ms), on the next 250 ms boundary');
  t.equal(r.ready, true);
  clock.advance(32_750);
  t.same(await nextCheck(2), [57_000], 'still quiet: a minute -10% (draw 0.25)');
  clock.advance(57_000);
  t.same(await nextCheck(3), [66_000], 'still quiet: a minute +10% (draw 1)');
  clock.advance(1_000);
  routeTo(sibling);
  t.same(clock.pending(), [4_000], "the workload's first request brings the next check to a period after the last");
  t.equal(traffic.waiters.size, 0);
  clock.advance(4_000);
  t.same(await nextCheck(4), [5_000], 'once a request was routed to the workload: the period');
  traffic.routed = false;
  open = false;
  clock.advance(5_000);
  t.same(await nextCheck(5), [5_000], 'a failed check keeps the period, though the replica is still ready');
  t.equal(r.ready, true, 'one failure of three');
  clock.advance(5_000);
  await nextCheck(6);
  clock.advance(5_000);
  t.same(await nextCheck(7), [5_000], 'not ready: the period');
  t.equal(r.ready, false);
  open = true;
  clock.advance(5_000);
  t.same(await nextCheck(8), [32_500], 'ready again and still no traffic: quiet, the first quiet wait drawn again');
  t.equal(r.ready, true);
  t.equal(traffic.waiters.size, 1, 'waiting for the first request');
  stop();
  t.equal(traffic.waiters.size, 0, 'stopping the probe forgets it');
  t.same(clock.pending(), []);
});

t.test('startProbing: a deployment replica offers its first check to be run at once, until it has run', async (t) => {
  const { clock, port, registry, r } = await probeSetup(t);
  const traffic = workloadTraffic();
  const deps = { ...testDeps(), clock, registry };
  const quiet = quietWhileUnrouted(traffic, 60_000, new QuietSlots(clock));
  const stop = startProbing(r, probe({ kind: 'tcp', initialDelaySeconds: 30, periodSeconds: 5 }), () => ({ host: '127.0.0.1', port }), deps, quiet);
  t.teardown(stop);
  t.same(clock.pending(), [30_000], 'waiting out the initial delay');
  const [first] = registry.firstChecks('demo/api');
  t.ok(first, 'the replica awaits its first check');
  const timeoutMs = probe({ kind: 'tcp' }).timeoutSeconds * 1000;
  t.same(clock.pending(), [timeoutMs], 'asked for: the check runs now (its timeout is the pending timer)');
  await first;
  t.equal(r.ready, true, 'the promise resolves once the check is done');
  t.same(registry.firstChecks('demo/api'), [], 'checked: nothing to wait for');

  const other = replica('api-1');
  const stopOther = startProbing(other, probe({ kind: 'tcp', initialDelaySeconds: 30 }), () => ({ host: '127.0.0.1', port }), deps, quiet);
  t.equal(registry.firstChecks('demo/api').length, 1);
  stopOther();
  t.same(registry.firstChecks('demo/api'), [], 'a stopped probe is not waited for');

  const local = replica('api-2');
  const stopLocal = startProbing(local, probe({ kind: 'tcp', initialDelaySeconds: 30 }), () => ({ host: '127.0.0.1', port }), deps);
  t.teardown(stopLocal);
  t.same(registry.firstChecks('demo/api'), [], "a replica the router does not probe quietly (up's own) does not offer it");
});

t.test('QuietSlots: checks run at their slot, one timer for the earliest slot, cancelled ones never', async (t) => {
  const clock = new FakeClock();
  const slots = new QuietSlots(clock);
  const ran: string[] = [];
  const check = (name: string): QuietCheck => ({ run: () => ran.push(name), gen: 0, at: undefined });
  const [a, b, c, d] = [check('a'), check('b'), check('c'), check('d')];
  slots.schedule(a, 500);
  slots.schedule(b, 250);
  slots.schedule(c, 500);
  slots.schedule(d, 750);
  t.same(clock.pending(), [250], 'one timer, for the earliest slot');
  t.equal(slots.size, 3);
  clock.advance(250);
  t.same(ran, ['b']);
  t.same(clock.pending(), [250], 'then the next slot');
  slots.cancel(c);
  slots.schedule(d, 500);
  t.equal(slots.size, 1, 'the slot d left is dropped with its last entry');
  clock.advance(250);
  t.same(ran, ['b', 'a', 'd'], 'slot 500: a and the rescheduled d, not the cancelled c');
  t.same(clock.pending(), [], 'nothing waits, no timer');
  t.equal(slots.size, 0);
  slots.schedule(a, 1000);
  slots.cancel(a);
  t.same(clock.pending(), [], "a slot's last entry cancelled: its timer goes too");
  slots.schedule(a, 1250);
  slots.cancel(a);
  slots.schedule(a, 1250);
  clock.advance(1000);
  t.same(ran, ['b', 'a', 'd', 'a'], 'cancelled and scheduled again into the same slot: runs once');
  t.equal(a.at, undefined, 'a check that ran waits for nothing');
});

t.test('QuietSlots: a full slot starts its checks a few per turn of the event loop, in order, skipping cancelled ones', async (t) => {
  const clock = new FakeClock();
  const turns: (() => void)[] = [];
  const slots = new QuietSlots(clock, (fn) => turns.push(fn));
  const ran: number[] = [];
  const checks = Array.from({ length: 2 * QUIET_CHECKS_PER_TURN + 3 }, (_, i): QuietCheck => ({ run: () => ran.push(i), gen: 0, at: undefined }));
  const late = checks.slice(0, 3);
  for (const c of checks.slice(3)) slots.schedule(c, 500);
  for (const c of late) slots.schedule(c, 250);
  clock.stall(600);
  t.same(ran, Array.from({ length: QUIET_CHECKS_PER_TURN }, (_, i) => i), 'a late timer: the earlier slot first, then the next, as many as one turn takes');
  t.equal(turns.length, 1, 'the rest wait for the next turn');
  t.equal(slots.starting, checks.length - QUIET_CHECKS_PER_TURN);
  t.equal(checks[QUIET_CHECKS_PER_TURN]!.at, undefined, 'a check whose slot came waits for no slot');
  slots.cancel(checks[QUIET_CHECKS_PER_TURN]!);
  slots.schedule(checks[QUIET_CHECKS_PER_TURN + 1]!, 1000);
  turns.shift()!();
  t.same(ran.slice(QUIET_CHECKS_PER_TURN), Array.from({ length: QUIET_CHECKS_PER_TURN }, (_, i) => QUIET_CHECKS_PER_TURN + 2 + i), 'one cancelled and one scheduled again before their turn: neither starts now, and they do not count');
  t.equal(turns.length, 1);
  turns.shift()!();
  t.equal(ran.length, checks.length - 2, 'the last turn starts the rest');
  t.same(turns, [], 'and asks for no further turn');
  t.equal(slots.starting, 0);
  clock.advance(400);
  t.equal(ran.length, checks.length - 1);
  t.equal(ran.at(-1), QUIET_CHECKS_PER_TURN + 1, 'the check scheduled again runs at its new slot');
  t.same(turns, []);
});

t.test('quietWait: quiet checks of many replicas spread over the minute, and stay spread', async (t) => {
  t.equal(quietWait(5_000, 60_000, false, () => 0), 5_000, 'the first quiet wait is never shorter than the period');
  t.equal(quietWait(5_000, 60_000, false, () => 1), 60_000, '... nor longer than the quiet period');
  t.equal(quietWait(5_000, 60_000, true, () => 0), 54_000, 'later waits: the quiet period -10%');
  t.equal(quietWait(5_000, 60_000, true, () => 1), 66_000, '... to +10%');
  t.equal(quietWait(90_000, 60_000, false, () => 0.5), 90_000, 'a period longer than the quiet one is kept');
  // Ten thousand replicas that turned ready within the same second: their quiet checks, first and
  // second, counted per second. Evenly spread would be ~180 a second (55 s for the first).
  const perSecond = (waits: number[]): number => {
    const counts = new Map<number, number>();
    for (const w of waits) counts.set(Math.floor(w / 1000), (counts.get(Math.floor(w / 1000)) ?? 0) + 1);
    return Math.max(...counts.values());
  };
  const first = Array.from({ length: 10_000 }, () => quietWait(5_000, 60_000, false, Math.random));
  t.ok(perSecond(first) < 400, `first quiet checks: at most ${perSecond(first)} in any second`);
  const second = first.map((w) => w + quietWait(5_000, 60_000, true, Math.random));
  t.ok(perSecond(second) < 400, `second quiet checks: at most ${perSecond(second)} in any second`);
  const together = Array.from({ length: 10_000 }, () => 60_000);
  t.equal(perSecond(together), 10_000, 'the measure itself: a fixed minute puts them all in one second');
});

t.test('startProbing: a replica that is not ready yet keeps the period while its workload is quiet', async (t) => {
  const clock = new FakeClock();
  const registry = new ReplicaRegistry();
  const r = replica();
  let checks = 0;
  const closed = await allocatePort();
  const stop = startProbing(
    r,
    probe({ kind: 'tcp', periodSeconds: 5, timeoutSeconds: 1 }),
    () => {
      checks++;
      return { host: '127.0.0.1', port: closed };
    },
    { ...testDeps(), clock, registry },
    quietWhileUnrouted(workloadTraffic(), 60_000, new QuietSlots(clock)),
  );
  t.teardown(stop);
  clock.advance(0);
  await waitFor(() => checks === 1 && clock.pending().length === 1 && clock.pending()[0] !== 1000, 30_000, 'first check done');
  t.same(clock.pending(), [5_000], 'a replica still starting is checked again at the period');
  t.equal(r.ready, false);
});
