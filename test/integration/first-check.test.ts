/**
 * A router that just started has not checked its deployment replicas yet (their first checks are
 * spread over the first second, or wait out a probe's initial delay). A request that finds none of
 * its workload's replicas ready runs their first checks at once and is routed when one passes, and
 * answered 503 only when they fail; it is not answered 503 before any replica was checked. WebSocket
 * upgrades wait the same way. Real upstreams on port 0; the probe's initial delay (30 s) stands for
 * "not checked yet".
 */
import t from 'tap';
import net from 'node:net';
import type { Duplex } from 'node:stream';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, type TapLike } from '../helpers/harness.js';
import { allocatePort } from '../../src/local/ports.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;
const LOCATION = 'aws-us-east-2';
const DELAYED = {
  containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }], readinessProbe: { tcpSocket: { port: 8080 }, initialDelaySeconds: 30 } }],
};

t.test('the first request runs the first check now and is routed when it passes', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] }, workloadSpec: DELAYED }));
  t.equal(plane.runtime.replicas.all()[0]!.ready, false, 'not checked yet');
  const res = await request(plane.port, CANONICAL, '/now');
  t.equal(res.status, 200, 'routed after its first check, not 503');
  t.equal(JSON.parse(res.body).name, 'app');
  t.equal(plane.runtime.replicas.firstChecks('shop/api').length, 0, 'every replica has had its first check');
});

t.test('one replica down, one up: the request goes to the one whose first check passed', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const dead = await allocatePort();
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${dead}`, `127.0.0.1:${app.port}`] }, workloadSpec: DELAYED }));
  for (let i = 0; i < 3; i++) t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  const ready = plane.runtime.replicas.all().map((r) => r.ready);
  t.same(ready, [false, true], 'the dead replica failed its first check, the live one passed');
});

t.test('every first check fails: 503 no healthy upstream, and later requests do not wait again', async (t) => {
  const dead = await allocatePort();
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${dead}`] }, workloadSpec: DELAYED }));
  const first = await request(plane.port, CANONICAL, '/');
  t.equal(first.status, 503);
  t.match(JSON.parse(first.body), { code: 'NO_HEALTHY_UPSTREAM' });
  t.equal(plane.runtime.replicas.firstChecks('shop/api').length, 0, 'checked once: nothing left to wait for');
  t.equal((await request(plane.port, CANONICAL, '/')).status, 503);
});

/** The status of the answer to a WebSocket upgrade sent on a raw connection. */
async function upgradeStatus(t: TapLike, port: number): Promise<number> {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  socket.write(
    `GET /ws HTTP/1.1\r\nHost: ${CANONICAL}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n',
  );
  let head = '';
  for await (const chunk of socket) {
    head += (chunk as Buffer).toString('latin1');
    if (head.includes('\r\n\r\n')) break;
  }
  return Number(head.slice(9, 12));
}

t.test('a WebSocket upgrade waits for the first check too', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  app.server.on('upgrade', (_req, socket: Duplex) => {
    t.teardown(() => socket.destroy());
    socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n');
  });
  const plane = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] }, workloadSpec: DELAYED }));
  t.equal(await upgradeStatus(t, plane.port), 101, 'upgraded after the first check, not 503');
  const dead = await allocatePort();
  const down = await startPlane(t, records({ replicas: { [LOCATION]: [`127.0.0.1:${dead}`] }, workloadSpec: DELAYED }));
  t.equal(await upgradeStatus(t, down.port), 503, 'its only replica failed its first check: 503');
});
