/**
 * A router that just started has not checked its deployment replicas yet (their first checks are
 * spread over the first second, or wait out a probe's initial delay). A request that finds none of
 * its workload's replicas ready runs their first checks at once and is routed when one passes, and
 * answered 503 only when they fail; it is not answered 503 before any replica was checked. Real
 * upstreams on port 0; the probe's initial delay (30 s) stands for "not checked yet".
 */
import t from 'tap';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane } from '../helpers/harness.js';
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
