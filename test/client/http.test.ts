/**
 * The client's HTTP exchanges (src/client/http.ts) against real HTTP servers on loopback that answer
 * as an API under strain would: the request headers it sends (and `-H` replacing them), bodies that
 * are JSON or not, which answers are retried and after how long (the backoff's sleeps are recorded,
 * not waited: the clock is injected), `Retry-After`, a quota's 429 and a POST's 503 not retried, a
 * reset connection retried for a GET, a refused one never, the time limit and the size limit.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { ApiClient, HttpFailure, MAX_ANSWER_BYTES, Unreachable, maskToken, retryDelay } from '../../src/client/http.js';
import type { Session } from '../../src/client/session.js';
import { startHttpServer } from '../helpers/harness.js';
import { freePort } from '../fixtures/ratelimit/servers.js';
import { testCert } from '../fixtures/tls.js';
import { failureHint } from '../../src/client/errors.js';

function session(endpoint: string, extra: Partial<Session> = {}): Session {
  return {
    vendor: 'svc', prefix: 'SVC_', endpoint, token: 'secret-token-0123456789', insecure: false, timeoutMs: 10_000,
    output: 'json', color: false, ts: 'iso', local: false, actor: '<system>', sources: {}, ...extra,
  };
}

function client(s: Session, opts: { debug?: boolean } = {}): { api: ApiClient; sleeps: number[]; err: string[] } {
  const sleeps: number[] = [];
  const err: string[] = [];
  const api = new ApiClient(s, { writeErr: (x) => err.push(x), now: () => new Date(0), sleep: async (ms) => void sleeps.push(ms), random: () => 0 }, { debug: opts.debug ?? false, verbose: true });
  return { api, sleeps, err };
}

/** A server that answers the n-th request with `script[n]` (the last one repeated). */
async function scripted(t: Test, script: ((req: http.IncomingMessage, res: http.ServerResponse) => void)[]): Promise<{ url: string; seen: http.IncomingMessage[]; bodies: string[] }> {
  const seen: http.IncomingMessage[] = [];
  const bodies: string[] = [];
  const { url } = await startHttpServer(t, (req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      seen.push(req);
      bodies.push(body);
      script[Math.min(seen.length - 1, script.length - 1)]!(req, res);
    });
  });
  return { url, seen, bodies };
}

/** What a request failed with (undefined: it did not). */
const failure = (p: Promise<unknown>): Promise<unknown> => p.then(() => undefined, (e: unknown) => e);

const json = (status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}) => (_req: http.IncomingMessage, res: http.ServerResponse) => {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
};

t.test('the headers sent, -H replacing one, a JSON body, a text answer', async (t) => {
  const server = await scripted(t, [(_req, res) => res.end('plain words')]);
  const { api } = client(session(server.url));
  t.teardown(() => api.close());
  const answer = await api.request('POST', '/org/acme/gvc?x=1', { body: { name: 'g' }, headers: [['accept', 'application/yaml'], ['X-Extra', 'yes']] });
  t.equal(answer.body, 'plain words', 'not JSON: the text');
  const h = server.seen[0]!.headers;
  t.equal(server.seen[0]!.url, '/org/acme/gvc?x=1');
  t.equal(h.accept, 'application/yaml', '-H replaces the default of the same name');
  t.equal(h['x-extra'], 'yes');
  t.equal(h['content-type'], 'application/json');
  t.equal(h.authorization, 'Bearer secret-token-0123456789');
  t.match(h['user-agent'], /^svcproxy \d+\.\d+\.\d+\/ node v\d+/);
  t.match(h['x-svc-session'], /^[0-9a-f-]{36}$/);
  t.equal(server.bodies[0], '{"name":"g"}');
});

t.test('retried: 503 and 502 for GET with backoff, Retry-After, a 429 not about a quota', async (t) => {
  const server = await scripted(t, [json(503, { message: 'busy' }), json(502, {}), json(200, { ok: 1 })]);
  const { api, sleeps, err } = client(session(server.url));
  t.teardown(() => api.close());
  t.same((await api.request('GET', '/x')).body, { ok: 1 });
  t.same(sleeps, [500, 1000], 'exponential');
  t.match(err.join(''), /retrying GET \/x in 0\.5 s \(503 Service Unavailable\)/);
  const after = await scripted(t, [json(503, {}, { 'retry-after': '3' }), json(429, { message: 'slow down' }), json(200, {})]);
  const second = client(session(after.url));
  t.teardown(() => second.api.close());
  await second.api.request('POST', '/y').catch(() => undefined);
  t.equal(after.seen.length, 1, 'a POST is not retried on 503');
  await second.api.request('GET', '/y');
  t.same(second.sleeps, [500], 'a 429 is retried, with backoff');
  const third = await scripted(t, [json(503, {}, { 'retry-after': '3' }), json(200, {})]);
  const c3 = client(session(third.url));
  t.teardown(() => c3.api.close());
  await c3.api.request('GET', '/z');
  t.same(c3.sleeps, [3000], 'Retry-After');
  t.equal(retryDelay(0, 'Wed, 21 Oct 2015 07:28:00 GMT', Date.parse('Wed, 21 Oct 2015 07:27:55 GMT'), () => 0), 5000, 'Retry-After as a date');
  t.equal(retryDelay(9, undefined, 0, () => 0), 20_000, 'at most 20 s');
});

t.test('not retried: a quota\'s 429, a 500, 4xx; given up after three retries', async (t) => {
  const quota = await scripted(t, [json(429, { status: 429, code: 'quota_exceeded', message: 'quota workloads-per-gvc exceeded' })]);
  const c1 = client(session(quota.url));
  t.teardown(() => c1.api.close());
  const refused = await failure(c1.api.request('POST', '/q'));
  t.ok(refused instanceof HttpFailure && refused.answer.status === 429, 'refused with the 429');
  t.equal(quota.seen.length, 1);
  const failing = await scripted(t, [json(500, { status: 500 }), json(404, {})]);
  const c2 = client(session(failing.url));
  t.teardown(() => c2.api.close());
  t.equal((await failure(c2.api.request('GET', '/a')) as HttpFailure).answer.status, 500);
  t.equal(failing.seen.length, 1);
  const down = await scripted(t, [json(503, {})]);
  const c3 = client(session(down.url));
  t.teardown(() => c3.api.close());
  t.equal((await failure(c3.api.request('GET', '/b')) as HttpFailure).answer.status, 503);
  t.equal(down.seen.length, 4, 'three retries');
});

t.test('a reset connection is retried for GET; a refused one is not retried', async (t) => {
  const reset = await scripted(t, [(req) => req.socket.destroy(), json(200, { ok: true })]);
  const c1 = client(session(reset.url));
  t.teardown(() => c1.api.close());
  t.same((await c1.api.request('GET', '/r')).body, { ok: true });
  const port = await freePort();
  const c2 = client(session(`http://127.0.0.1:${port}`));
  const refused = await failure(c2.api.request('GET', '/x'));
  t.ok(refused instanceof Unreachable && refused.code === 'ECONNREFUSED', 'refused: Unreachable, ECONNREFUSED');
  t.same(c2.sleeps, [], 'not retried');
});

t.test('bounds: the time limit and the answer size', async (t) => {
  const silent = await scripted(t, [() => undefined]);
  const c1 = client(session(silent.url, { timeoutMs: 300 }));
  t.teardown(() => c1.api.close());
  t.match(await failure(c1.api.request('GET', '/slow')), { code: 'ECONNABORTED', message: 'timeout of 300ms exceeded' });
  const big = await scripted(t, [(_req, res) => {
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    let left = MAX_ANSWER_BYTES / chunk.length + 2;
    const more = (): void => {
      while (left-- > 0) if (!res.write(chunk)) return void res.once('drain', more);
      res.end();
    };
    more();
  }]);
  const c2 = client(session(big.url));
  t.teardown(() => c2.api.close());
  t.match(await failure(c2.api.request('GET', '/big')), { code: 'ERR_ANSWER_TOO_LARGE' });
});

t.test('-d: both sides of each exchange, the token masked', async (t) => {
  const server = await scripted(t, [json(200, { name: 'x' })]);
  const { api, err } = client(session(server.url), { debug: true });
  t.teardown(() => api.close());
  await api.request('PUT', '/p', { body: { a: 1 } });
  const text = err.join('');
  t.match(text, /^\S.* >>>>\n> PUT \/p\n> Host: 127\.0\.0\.1\n> Accept: [^\n]+\n> Content-Type: application\/json\n> User-Agent: [^\n]+\n> x-svc-session: [^\n]+\n> Authorization: sec\.\.\.789\n\n\{\n {2}"a": 1\n\}\n>>>>>>>\n/);
  t.match(text, /<<<<\n< 200 OK\n< content-type: application\/json\n[\s\S]*\n\n\{\n {2}"name": "x"\n\}\n<<<<<<<<\n$/);
  t.notMatch(text, 'secret-token-0123456789');
  t.equal(maskToken('Bearer short'), '...', 'a short token: nothing of it');
});

t.test('TLS: a certificate not trusted is refused (with a hint), --insecure skips the check', async (t) => {
  const cert = testCert();
  t.teardown(cert.cleanup);
  const server = https.createServer({ cert: cert.cert, key: cert.key }, (_req, res) => res.end('{"kind": "org", "name": "acme"}'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const strict = client(session(url));
  const refused = await failure(strict.api.request('GET', '/org/acme'));
  strict.api.close();
  t.ok(refused instanceof Unreachable, 'no answer');
  t.match((refused as Unreachable).code, /SELF_SIGNED|UNABLE_TO_VERIFY/);
  t.match(failureHint(refused as Unreachable, { local: false, endpoint: url, hasToken: true, cwd: '/' }), /TLS refused .* --insecure \(-k\)/);
  const insecure = client(session(url, { insecure: true }));
  t.teardown(() => insecure.api.close());
  t.same((await insecure.api.request('GET', '/org/acme')).body, { kind: 'org', name: 'acme' });
});
