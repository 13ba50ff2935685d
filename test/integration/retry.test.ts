/**
 * Retries, outlier ejection and location failover with real upstreams that fail on purpose: the
 * first N attempts per condition, refused connections, resets before and after headers, bodies
 * replayed or not, the timeout covering every attempt, and traffic moving away from a location whose
 * replicas die and back when they return.
 */
import t from 'tap';
import type http from 'node:http';
import http2 from 'node:http2';
import { ALIAS, echoHandler, records, request, startH2Server, startHttpServer, startPlane, waitFor } from '../helpers/harness.js';
import type { Clock } from '../../src/deps.js';
import { systemClock } from '../../src/deps.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

/** An upstream that answers `fail` for the first `n` requests, then echoes; it records attempts. */
function flaky(n: number, fail: (req: http.IncomingMessage, res: http.ServerResponse) => void) {
  const seen: { attempt: string | undefined; body: string }[] = [];
  const handler: http.RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      seen.push({ attempt: req.headers['x-envoy-attempt-count'] as string | undefined, body: Buffer.concat(chunks).toString() });
      if (seen.length <= n) return fail(req, res);
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(Buffer.concat(chunks));
    });
  };
  return { seen, handler };
}

const status503 = (_req: http.IncomingMessage, res: http.ServerResponse): void => {
  res.writeHead(503);
  res.end('down');
};

t.test('5xx retried up to attempts, each attempt counted', async (t) => {
  const f = flaky(2, status503);
  const up = await startHttpServer(t, f.handler);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { requestRetryPolicy: { attempts: 2, retryOn: ['5xx'] } } }));
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/');
  t.equal(res.status, 200);
  t.same(f.seen.map((s) => s.attempt), ['1', '2', '3']);
  f.seen.length = 0;
  const f2 = flaky(5, status503);
  const up2 = await startHttpServer(t, f2.handler);
  const plane2 = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up2.port}`] }, workloadSpec: { requestRetryPolicy: { attempts: 2, retryOn: ['5xx'] } } }));
  await plane2.ready();
  const res2 = await request(plane2.port, CANONICAL, '/');
  t.equal(res2.status, 503, 'after the last attempt the upstream answer goes to the client');
  t.equal(res2.body, 'down');
  t.equal(f2.seen.length, 3, 'one attempt and two retries');
});

t.test('the default policy does not retry a plain 503; a numeric code does', async (t) => {
  const f = flaky(1, status503);
  const up = await startHttpServer(t, f.handler);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  t.equal((await request(plane.port, CANONICAL, '/')).status, 503);
  t.equal(f.seen.length, 1);

  const g = flaky(1, status503);
  const up2 = await startHttpServer(t, g.handler);
  const plane2 = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up2.port}`] }, workloadSpec: { requestRetryPolicy: { retryOn: ['503'] } } }));
  await plane2.ready();
  t.equal((await request(plane2.port, CANONICAL, '/')).status, 200);
  t.equal(g.seen.length, 2);
});

t.test('attempts 0 turns retries off', async (t) => {
  const f = flaky(1, status503);
  const up = await startHttpServer(t, f.handler);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { requestRetryPolicy: { attempts: 0, retryOn: ['5xx'] } } }));
  await plane.ready();
  t.equal((await request(plane.port, CANONICAL, '/')).status, 503);
  t.equal(f.seen.length, 1);
});

t.test('reset before headers is retried with `reset`; after headers never', async (t) => {
  const f = flaky(1, (req) => req.socket.destroy());
  const up = await startHttpServer(t, f.handler);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { requestRetryPolicy: { retryOn: ['reset'] } } }));
  await plane.ready();
  t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  t.equal(f.seen.length, 2);

  let hits = 0;
  const midway = await startHttpServer(t, (req, res) => {
    hits++;
    res.writeHead(200, { 'content-length': '100' });
    res.write('partial');
    setTimeout(() => req.socket.destroy(), 20);
  });
  const plane2 = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${midway.port}`] }, workloadSpec: { requestRetryPolicy: { retryOn: ['reset', '5xx'] } } }));
  await plane2.ready();
  const outcome = await request(plane2.port, CANONICAL, '/').then(
    (r) => `answered ${r.status} with ${r.body.length} bytes`,
    (err: Error) => `client saw ${err.message}`,
  );
  t.match(outcome, /client saw|answered 200 with 7 bytes/, 'the client sees the broken answer');
  t.equal(hits, 1, 'nothing is retried after response headers went out');
});

t.test('an HTTP/2 stream reset before headers is retried once, not once per event it reports', async (t) => {
  // A reset stream reports 'error' and then 'close': each used to schedule a retry, so two attempts
  // answered one request (the second write of headers threw and took the process down).
  let streams = 0;
  const up = await startH2Server(t, (stream) => {
    streams++;
    stream.on('error', () => undefined);
    if (streams === 1) return stream.close(http2.constants.NGHTTP2_REFUSED_STREAM);
    stream.respond({ ':status': 200 });
    stream.end('second');
  });
  const plane = await startPlane(t, records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] },
    ports: [{ number: 8080, protocol: 'http2' }],
    workloadSpec: { requestRetryPolicy: { attempts: 3, retryOn: ['refused-stream', 'reset'] } },
  }));
  await plane.ready();
  const res = await request(plane.port, CANONICAL, '/');
  t.equal(res.status, 200);
  t.equal(res.body, 'second');
  // Let any second retry that was scheduled land before counting.
  const late = await request(plane.port, CANONICAL, '/after');
  t.equal(late.status, 200);
  t.equal(streams, 3, 'one refused stream, one retry, then the next request: no extra attempt');
});

t.test('connect failures move to another replica', async (t) => {
  const good = await startHttpServer(t, echoHandler('good'));
  const doomed = await startHttpServer(t, echoHandler('doomed'));
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${doomed.port}`, `127.0.0.1:${good.port}`] } }));
  await plane.ready();
  await new Promise<void>((resolve) => {
    doomed.server.closeAllConnections();
    doomed.server.close(() => resolve());
  });
  for (let i = 0; i < 10; i++) {
    const res = await request(plane.port, CANONICAL, '/');
    t.equal(res.status, 200, `request ${i} answered`);
  }
});

t.test('a POST body is replayed intact; a body past 64 KiB is not retried', async (t) => {
  const f = flaky(1, status503);
  const up = await startHttpServer(t, f.handler);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { requestRetryPolicy: { retryOn: ['5xx'] } } }));
  await plane.ready();
  const body = 'b'.repeat(40_000) + 'end';
  const res = await request(plane.port, CANONICAL, '/upload', { method: 'POST', body });
  t.equal(res.status, 200);
  t.equal(res.body, body, 'the retried attempt got the whole body');
  t.same(f.seen.map((s) => s.body.length), [body.length, body.length]);

  const g = flaky(1, status503);
  const up2 = await startHttpServer(t, g.handler);
  const plane2 = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up2.port}`] }, workloadSpec: { requestRetryPolicy: { retryOn: ['5xx'] } } }));
  await plane2.ready();
  const big = await request(plane2.port, CANONICAL, '/upload', { method: 'POST', body: Buffer.alloc(200_000, 7) });
  t.equal(big.status, 503, 'a body past the replay buffer is not retried');
  t.equal(g.seen.length, 1);
});

t.test('the timeout covers every attempt', async (t) => {
  let hits = 0;
  const slow503 = await startHttpServer(t, (_req, res) => {
    hits++;
    const timer = setTimeout(() => {
      res.writeHead(503);
      res.end();
    }, 600);
    res.on('close', () => clearTimeout(timer));
  });
  const plane = await startPlane(
    t,
    records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${slow503.port}`] }, workloadSpec: { defaultOptions: { timeoutSeconds: 1 }, requestRetryPolicy: { attempts: 5, retryOn: ['5xx'] } } }),
  );
  await plane.ready();
  const started = Date.now();
  const res = await request(plane.port, CANONICAL, '/');
  const took = Date.now() - started;
  t.equal(res.status, 504);
  t.ok(took >= 950 && took < 1800, `answered at the 1 s timeout (${took} ms)`);
  t.equal(hits, 2, 'the second attempt was cut by the timeout');
});

t.test('outlier ejection: 5 consecutive 5xx eject a replica; time brings it back', async (t) => {
  let offset = 0;
  const clock: Clock = { ...systemClock, now: () => systemClock.now() + offset };
  let badHits = 0;
  const bad = await startHttpServer(t, (_req, res) => {
    badHits++;
    res.writeHead(500);
    res.end();
  });
  const good = await startHttpServer(t, echoHandler('good'));
  const plane = await startPlane(
    t,
    records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${bad.port}`, `127.0.0.1:${good.port}`] }, workloadSpec: { requestRetryPolicy: { attempts: 0 } } }),
    { deps: { clock } },
  );
  await plane.ready();
  for (let i = 0; i < 60 && badHits < 5; i++) await request(plane.port, CANONICAL, '/');
  t.equal(badHits, 5, 'five failures reached the bad replica');
  const before = badHits;
  for (let i = 0; i < 30; i++) t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  t.equal(badHits, before, 'the ejected replica gets no traffic');
  const metrics = await (await fetch(plane.adminUrl + '/metrics')).text();
  t.match(metrics, /svcproxy_outlier_ejections_total\{workload="shop\/api",location="aws-us-east-2"\} 1/);
  offset += 31_000;
  for (let i = 0; i < 40 && badHits === before; i++) await request(plane.port, CANONICAL, '/');
  t.ok(badHits > before, 'after 30 s the replica is back in rotation');
});

t.test('a lone replica is never ejected', async (t) => {
  let hits = 0;
  const bad = await startHttpServer(t, (_req, res) => {
    hits++;
    res.writeHead(500);
    res.end();
  });
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${bad.port}`] }, workloadSpec: { requestRetryPolicy: { attempts: 0 } } }));
  await plane.ready();
  for (let i = 0; i < 8; i++) t.equal((await request(plane.port, CANONICAL, '/')).status, 500);
  t.equal(hits, 8);
});

t.test('a location whose replicas die loses its traffic and gets it back', async (t) => {
  const near = await startHttpServer(t, echoHandler('near'));
  const far = await startHttpServer(t, echoHandler('far'));
  const nearPort = near.port;
  // A probe every second (the default for deployment replicas is every 5 s).
  const probed = {
    containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }], readinessProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1, failureThreshold: 1 } }],
  };
  const recs = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${nearPort}`], 'gcp-us-west1': [`127.0.0.1:${far.port}`] }, workloadSpec: probed });
  for (const r of recs) {
    if (r.kind === 'location') (r as { status?: unknown }).status = { latencyMs: r.name === 'aws-us-east-2' ? 5 : 80 };
  }
  const plane = await startPlane(t, recs);
  await plane.ready();
  const names = async (n: number): Promise<string[]> => {
    const out: string[] = [];
    for (let i = 0; i < n; i++) out.push(JSON.parse((await request(plane.port, CANONICAL, '/')).body).name);
    return out;
  };
  t.same(new Set(await names(5)), new Set(['near']), 'the nearer location takes the traffic');
  await new Promise<void>((resolve) => {
    near.server.closeAllConnections();
    near.server.close(() => resolve());
  });
  const during = await names(5);
  t.same(new Set(during), new Set(['far']), 'requests fail over to the other location at once (connect failure retried there)');
  await waitFor(() => !plane.runtime.replicas.list('shop/api', 'aws-us-east-2')[0]!.ready, 10_000, 'the dead replica to be probed not ready');
  const revived = await startHttpServerOn(t, nearPort, echoHandler('near'));
  t.ok(revived);
  await waitFor(() => plane.runtime.replicas.list('shop/api', 'aws-us-east-2')[0]!.ready, 10_000, 'the replica to come back');
  t.same(new Set(await names(5)), new Set(['near']), 'traffic moves back');
});

async function startHttpServerOn(t: { teardown(fn: () => unknown): void }, port: number, handler: http.RequestListener): Promise<boolean> {
  const { createServer } = await import('node:http');
  const server = createServer(handler);
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return true;
}

t.test('each HTTP condition against a real upstream failing once', async (t) => {
  const conditions: [retryOn: string[], fail: (req: http.IncomingMessage, res: http.ServerResponse) => void][] = [
    [['gateway-error'], (_q, r) => void r.writeHead(502).end()],
    [['gateway-error'], (_q, r) => void r.writeHead(504).end()],
    [['retriable-4xx'], (_q, r) => void r.writeHead(409).end()],
    [['envoy-ratelimited'], (_q, r) => void r.writeHead(429, { 'x-envoy-ratelimited': 'true' }).end()],
    [['retriable-status-codes', '418'], (_q, r) => void r.writeHead(418).end()],
    [['5xx'], (req) => req.socket.destroy()],
    [['reset'], (req) => req.socket.destroy()],
  ];
  for (const [retryOn, fail] of conditions) {
    const f = flaky(1, fail);
    const up = await startHttpServer(t, f.handler);
    const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] }, workloadSpec: { requestRetryPolicy: { attempts: 1, retryOn } } }));
    await plane.ready();
    const res = await request(plane.port, CANONICAL, '/');
    t.equal(res.status, 200, `${retryOn.join(',')}: retried`);
    t.equal(f.seen.length, 2, `${retryOn.join(',')}: two attempts`);
    await plane.runtime.stop(0);
  }
});
