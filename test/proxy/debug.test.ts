/**
 * The debug answers' values (src/proxy/debug.ts) on an injected clock: Server-Timing entries in the
 * order the request met them (filters, the wait for a replica, each attempt, the total), the attempts
 * value, and the trace id taken from a W3C traceparent (the format's own rules: 32 hex digits, not all
 * zero) or made new.
 */
import t from 'tap';
import { DebugInfo, attemptsValue, freshTraceparent, traceIdFor } from '../../src/proxy/debug.js';

const NAMES = { route: 'x-svc-route', attempts: 'x-svc-attempts', traceId: 'x-svc-trace-id' };

t.test('timings in order, the wait summed, open attempts ended at the answer', async (t) => {
  const info = new DebugInfo(false, 'canonical; gvc=shop; workload=api; port=8080');
  info.filterRan('ext_authz', 1.234);
  info.filterRan('ratelimit', 0.5);
  info.queued(10);
  info.queued(12); // a second mark while waiting keeps the first
  info.dequeued(30);
  info.queued(40);
  info.attemptStarted('api-0', 'aws-us-east-2', 45);
  info.attemptEnded('503', true, 50);
  info.attemptEnded('200', false, 51); // already ended: ignored
  info.attemptStarted('api-1', 'aws-us-east-2', 55);
  const h = info.headers(NAMES, 0, 60.004, 4.6);
  t.equal(h['server-timing'], 'extauth;dur=1.23, ratelimit;dur=0.5, queue;dur=40, upstream;dur=5;desc="attempt 1 api-0 503", upstream;dur=5;desc="attempt 2 api-1 answering", total;dur=60');
  t.equal(h['x-svc-attempts'], '2; 1=api-0@aws-us-east-2 503 retried, 2=api-1@aws-us-east-2 answering');
  t.equal(h['x-envoy-upstream-service-time'], '5');
  t.equal(h['x-svc-route'], 'canonical; gvc=shop; workload=api; port=8080');
  t.notOk('x-svc-trace-id' in h);
  t.equal(attemptsValue([]), '0');
});

t.test('trace ids: the caller\'s when it is a valid W3C one, else new', async (t) => {
  const id = '4bf92f3577b34da6a3ce929d0e0e4736';
  t.same(traceIdFor(`00-${id}-00f067aa0ba902b7-01`), { id, fresh: false });
  t.same(traceIdFor(` 00-${id}-00f067aa0ba902b7-00 `), { id, fresh: false });
  for (const bad of [undefined, '', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, `00-${id.toUpperCase()}-00f067aa0ba902b7-01`, `00-${id}-01`, [`00-${id}-00f067aa0ba902b7-01`]]) {
    const got = traceIdFor(bad);
    t.equal(got.fresh, true, JSON.stringify(bad));
    t.match(got.id, /^[0-9a-f]{32}$/);
  }
  const made = traceIdFor(undefined).id;
  t.match(freshTraceparent(made), new RegExp(`^00-${made}-[0-9a-f]{16}-01$`));
  const info = new DebugInfo(true, 'alias; gvc=shop; workload=api');
  info.traceId = made;
  t.equal(info.headers(NAMES, 0, 1, undefined)['x-svc-trace-id'], made);
});
