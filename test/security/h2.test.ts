/**
 * HTTP/2 abuse with hand-built frames: rapid reset (CVE-2023-44487: HEADERS then RST_STREAM, over
 * and over) gets the session closed with GOAWAY ENHANCE_YOUR_CALM after a bounded number of
 * streams, the upstream work it started is cancelled (the upstream pool is left with nothing
 * running), and other clients are served throughout; a stream flood past the advertised
 * SETTINGS_MAX_CONCURRENT_STREAMS is refused (REFUSED_STREAM) beyond the limit; and a `host` header
 * that disagrees with `:authority` is answered 400.
 */
import t from 'tap';
import http2 from 'node:http2';
import { ALIAS, records, request, startPlane } from '../helpers/harness.js';
import { FRAME, H2_ERROR, connectH2, get, headersFrame, rstFrame, startRecorder } from './fixtures.js';

const H = `api-${ALIAS}.app.localhost`;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function h2request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request(headers);
    let status = 0;
    let body = '';
    stream.on('response', (h) => (status = Number(h[':status'])));
    stream.on('data', (c: Buffer) => (body += c));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
    stream.end();
  });
}

t.test('rapid reset: the session is closed with ENHANCE_YOUR_CALM, others keep being served', async (t) => {
  // The upstream takes 50 ms, so streams reset at once have upstream work in flight to cancel.
  const up = await startRecorder(t, (_req, res) => {
    setTimeout(() => res.end('ok'), 50);
    return true;
  });
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();

  const attacker = await connectH2(t, plane.port);
  const bystander = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => bystander.destroy());
  const bystanderResults: number[] = [];
  let attacking = true;
  const background = (async () => {
    while (attacking) {
      bystanderResults.push((await h2request(bystander, { ':path': '/bystander', ':authority': H })).status);
      await sleep(10);
    }
  })();

  const N = 5000;
  let sent = 0;
  // Batches of 20: the HEADERS, a moment for the proxy to start the upstream requests, then the resets.
  for (let i = 0; i < N && !attacker.closed; i += 20) {
    const ids = Array.from({ length: 20 }, (_, k) => 2 * (i + k) + 1);
    attacker.write(Buffer.concat(ids.map((id) => headersFrame(id, get(H, `/attack/${id}`)))));
    await sleep(2);
    attacker.write(Buffer.concat(ids.map((id) => rstFrame(id, H2_ERROR.CANCEL))));
    sent += ids.length;
    await sleep(1);
  }
  const closed = await (async () => {
    for (let i = 0; i < 100 && !attacker.closed; i++) await sleep(20);
    return attacker.closed;
  })();
  attacking = false;
  await background;
  const goaway = attacker.goaway();
  t.ok(closed, `the attacking session was closed after ${sent} of ${N} streams`);
  t.equal(goaway?.code, H2_ERROR.ENHANCE_YOUR_CALM, 'with GOAWAY ENHANCE_YOUR_CALM');
  t.ok(sent < 1500, `the attacker got ${sent} streams in, not ${N}`);
  const reached = up.seen.filter((s) => s.url.startsWith('/attack/')).length;
  t.ok(reached <= 400, `${reached} of them reached the upstream before being cancelled`);
  t.ok(bystanderResults.length > 0 && bystanderResults.every((s) => s === 200), `the other session was served throughout (${bystanderResults.length} requests: ${[...new Set(bystanderResults)].join(', ')})`);

  // The upstream work the resets started is cancelled: nothing stays running in the pool.
  const pool = plane.runtime.dataplane.upstreams.pool({ host: '127.0.0.1', port: up.port });
  for (let i = 0; i < 100 && (pool.stats.running > 0 || pool.stats.pending > 0); i++) await sleep(20);
  t.same({ running: pool.stats.running, pending: pool.stats.pending }, { running: 0, pending: 0 }, 'the upstream pool is left with nothing running');
  t.equal(plane.runtime.dataplane.requestsInFlight, 0, 'no request left in flight');
  t.equal((await request(plane.port, H, '/after')).status, 200, 'a new HTTP/1.1 client is served');
  t.equal((await h2request(bystander, { ':path': '/after', ':authority': H })).status, 200, 'and the other session still is');
  const metrics = await (await fetch(`${plane.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_overload_sessions_closed_total 1/, 'counted in svcproxy_overload_sessions_closed_total');
});

t.test('a stream flood past SETTINGS_MAX_CONCURRENT_STREAMS: the flooding session is closed, others are served', async (t) => {
  let active = 0;
  let peak = 0;
  const up = await startRecorder(t, (_req, res) => {
    peak = Math.max(peak, ++active);
    setTimeout(() => {
      active--;
      res.end('ok');
    }, 200);
    return true;
  });
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }), { limits: { maxConcurrentStreams: 10 } });
  await plane.ready();

  const flooder = await connectH2(t, plane.port);
  const settings = flooder.frames.find((f) => f.type === FRAME.SETTINGS && !(f.flags & 1))!;
  const advertised = new Map<number, number>();
  for (let o = 0; o + 6 <= settings.payload.length; o += 6) advertised.set(settings.payload.readUInt16BE(o), settings.payload.readUInt32BE(o + 2));
  t.equal(advertised.get(3), 10, 'SETTINGS_MAX_CONCURRENT_STREAMS = 10 is advertised');

  // A client that honours the setting: 30 at once are served, at most 10 at a time.
  const polite = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => polite.destroy());
  await new Promise((r) => polite.once('remoteSettings', r));
  const all = await Promise.all(Array.from({ length: 30 }, (_, i) => h2request(polite, { ':path': `/polite/${i}`, ':authority': H })));
  t.same([...new Set(all.map((r) => r.status))], [200], 'a client that honours the limit: 30 of 30 served');
  t.ok(peak <= 10, `at most 10 at a time upstream (${peak})`);

  // One that does not: 30 HEADERS at once after acknowledging the limit. The session is closed
  // (a connection error, as nghttp2 treats exceeding an acknowledged limit) and no more than 10
  // of its streams were ever forwarded.
  const before = up.seen.length;
  flooder.write(Buffer.concat(Array.from({ length: 30 }, (_, i) => headersFrame(2 * i + 1, get(H, `/flood/${i}`)))));
  for (let i = 0; i < 100 && !flooder.closed; i++) await sleep(20);
  t.ok(flooder.closed, 'the flooding session is closed');
  t.ok(flooder.goaway() !== undefined, `with GOAWAY (code ${flooder.goaway()?.code})`);
  t.ok(up.seen.length - before <= 10, `${up.seen.length - before} of its 30 streams reached the upstream`);
  t.equal(plane.runtime.dataplane.requestsInFlight, 0, 'nothing left in flight');
  t.equal((await h2request(polite, { ':path': '/after', ':authority': H })).status, 200, 'the polite session is still served');
  t.equal((await request(plane.port, H, '/after')).status, 200, 'and so is a new HTTP/1.1 client');
});

t.test('Host and :authority that disagree: 400', async (t) => {
  const up = await startRecorder(t);
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } }));
  await plane.ready();
  const session = http2.connect(`http://127.0.0.1:${plane.port}`);
  t.teardown(() => session.destroy());
  const mismatch = await h2request(session, { ':path': '/', ':authority': H, host: 'evil.example' });
  t.equal(mismatch.status, 400, 'a host header naming another authority: 400');
  t.equal(JSON.parse(mismatch.body).code, 'BAD_REQUEST');
  const reverse = await h2request(session, { ':path': '/', ':authority': 'evil.example', host: H });
  t.equal(reverse.status, 400, 'and the other way round');
  const same = await h2request(session, { ':path': '/', ':authority': H, host: H.toUpperCase() });
  t.equal(same.status, 200, 'the same authority in another case is fine');
  // An :authority with userinfo (RFC 9113 §8.3.1: MUST NOT), sent raw: Node 22's HTTP/2 client
  // refuses to send it. The stream is answered (400/404 on Node 20) or reset (Node 22's nghttp2
  // rejects the field itself); either way it is not routed.
  const raw = await connectH2(t, plane.port);
  raw.write(headersFrame(1, get(`user@${H}`)));
  for (let i = 0; i < 100 && !raw.answered().has(1) && raw.resets()[1] === undefined && !raw.closed; i++) await sleep(20);
  t.ok(raw.answered().has(1) || raw.resets()[1] !== undefined, `an :authority with userinfo is answered or reset (${raw.answered().has(1) ? 'answered' : 'reset'})`);
  t.same(up.seen.map((s) => s.headers.host), [H], 'only the consistent request reached the upstream, under its own name');
});
