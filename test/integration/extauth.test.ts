/**
 * External authorization in gRPC mode, end to end: a real ingress, a real app, and a real
 * authorization server built from Envoy's own external_auth.proto. Allow with every mutation
 * (set, append, add-if-absent, remove, response headers, query parameters), the AttributeContext
 * it receives, denials (custom and default), the body (sent, partial, as bytes, removed), errors
 * and timeouts under both failure modes, UTF-8 sanitizing, listen port, metrics, and one call per
 * request.
 */
import t, { type Test } from 'tap';
import http from 'node:http';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, startSidecarBehindIngress } from '../helpers/harness.js';
import { allow, deadPort, startGrpcAuth, type EnvoyCheckRequest, type GrpcAnswer } from '../fixtures/extauth/servers.js';

const CANONICAL = `api-${ALIAS}.app.localhost`;

async function setup(t: Test, tags: Record<string, unknown>, handler: (req: EnvoyCheckRequest) => GrpcAnswer | Promise<GrpcAnswer>, extra: { authPort?: number } = {}) {
  const app = await startHttpServer(t, echoHandler('app'));
  const auth = await startGrpcAuth(t, handler);
  const plane = await startPlane(
    t,
    records({
      replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
      tags: {
        'svc/externalAuthAddress': '127.0.0.1',
        'svc/externalAuthPort': extra.authPort ?? auth.port,
        'svc/externalAuthScheme': 'http',
        ...tags,
      },
    }),
  );
  await plane.ready();
  return { app, auth, plane };
}

t.test('allow: the AttributeContext Envoy sends, and every ok_response mutation', async (t) => {
  const { auth, plane } = await setup(t, {}, () =>
    allow({
      headers: [
        { header: { key: 'x-user', value: 'alice' } },
        { header: { key: 'X-Tags', value: 'b' }, append: { value: true } },
        { header: { key: 'x-new-append', value: 'n' }, append: { value: true } },
        { header: { key: 'x-keep', value: 'replaced?' }, append_action: 'ADD_IF_ABSENT' },
        { header: { key: 'x-absent', value: 'added' }, append_action: 'ADD_IF_ABSENT' },
        { header: { key: 'x-only-if', value: 'no' }, append_action: 'OVERWRITE_IF_EXISTS' },
        { header: { key: 'x-user-override', value: 'server' }, append: { value: false } },
        { header: { key: 'x-both', value: 'set-then-removed' } },
      ],
      headers_to_remove: ['authorization', 'x-both', 'host', ':path'],
      response_headers_to_add: [{ header: { key: 'x-auth-response', value: 'yes' } }],
      query_parameters_to_set: [{ key: 'added', value: '1' }, { key: 'q', value: 'two' }],
      query_parameters_to_remove: ['drop'],
    }),
  );
  const res = await new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port: plane.port,
        path: '/a/./b//c?q=1&drop=x&keep=k',
        agent: false,
        headers: [
          'Host', CANONICAL,
          'Authorization', 'Bearer secret',
          'X-Tags', 'a',
          'X-Keep', 'original',
          'X-User-Override', 'client',
          'X-Dup', 'one',
          'X-Dup', 'two',
          'X-Request-Id', 'req-123',
          'X-Envoy-Auth-Partial-Body', 'spoofed',
          'X-Svc-Debug', 'client-set',
        ] as unknown as http.OutgoingHttpHeaders,
      },
      (r) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => resolve({ status: r.statusCode ?? 0, headers: r.headers, body: Buffer.concat(chunks).toString() }));
      },
    );
    req.on('error', reject);
    req.end();
  });
  t.equal(res.status, 200);
  t.equal(res.headers['x-auth-response'], 'yes', 'response_headers_to_add reaches the client');
  const seen = JSON.parse(res.body) as { url: string; headers: Record<string, string> };
  t.equal(seen.headers['x-user'], 'alice', 'set adds a header');
  t.equal(seen.headers['x-tags'], 'a,b', 'append joins onto the existing value');
  t.equal(seen.headers['x-new-append'], 'n', 'append of an absent header adds it');
  t.equal(seen.headers['x-keep'], 'original', 'ADD_IF_ABSENT leaves an existing header');
  t.equal(seen.headers['x-absent'], 'added', 'ADD_IF_ABSENT adds a missing one');
  t.notOk('x-only-if' in seen.headers, 'OVERWRITE_IF_EXISTS does not add');
  t.equal(seen.headers['x-user-override'], 'server', 'append:false overrides the client value');
  t.notOk('authorization' in seen.headers, 'headers_to_remove removes');
  t.notOk('x-both' in seen.headers, 'a header both set and removed ends up removed (Envoy order)');
  t.equal(seen.headers.host, CANONICAL, 'Host cannot be removed');
  const url = new URL(seen.url, 'http://x');
  t.equal(url.pathname, '/a/b/c', 'the path is the normalized one (":path" cannot be removed)');
  t.same([...url.searchParams.entries()].sort(), [['added', '1'], ['keep', 'k'], ['q', 'two']], 'query set and removed');

  t.equal(auth.calls.length, 1, 'one round trip to the auth server per request');
  const attrs = auth.calls[0]!.attributes;
  const h = attrs.request.http;
  t.equal(h.id, 'req-123', 'the request id');
  t.equal(h.method, 'GET');
  t.equal(h.path, '/a/b/c?q=1&drop=x&keep=k', 'normalized path with the query as sent');
  t.equal(h.host, CANONICAL);
  t.equal(h.scheme, 'http');
  t.equal(h.protocol, 'HTTP/1.1');
  t.equal(h.query, '', 'query is always empty, as in Envoy (it is part of path)');
  t.equal(String(h.size), '-1', 'no content-length: size -1');
  t.equal(h.body, '');
  t.equal(h.headers[':authority'], CANONICAL);
  t.equal(h.headers[':method'], 'GET');
  t.equal(h.headers[':path'], '/a/b/c?q=1&drop=x&keep=k');
  t.equal(h.headers[':scheme'], 'http');
  t.notOk('host' in h.headers, 'Host is :authority, as Envoy sees HTTP/1.1');
  t.equal(h.headers['x-dup'], 'one,two', 'repeated headers joined with ","');
  t.equal(h.headers.authorization, 'Bearer secret');
  t.equal(h.headers['x-request-id'], 'req-123');
  t.equal(h.headers['x-forwarded-proto'], 'http');
  t.equal(h.headers['x-forwarded-for'], '127.0.0.1');
  t.notOk('x-envoy-auth-partial-body' in h.headers, 'a client cannot supply the partial-body header');
  t.notOk('x-svc-debug' in h.headers, 'client x-svc-* headers are stripped at the edge, as for the app');
  for (const name of Object.keys(h.headers)) t.equal(name, name.toLowerCase(), `${name} is lower case`);
  t.equal(attrs.source.address?.socket_address.address, '127.0.0.1', 'source: the client');
  t.ok((attrs.source.address?.socket_address.port_value ?? 0) > 0, 'source port: the client connection');
  t.equal(attrs.destination.address?.socket_address.address, '127.0.0.1', 'destination: the proxy');
  t.equal(attrs.destination.address?.socket_address.port_value, plane.port);
  const seconds = Number(attrs.request.time.seconds);
  t.ok(Math.abs(seconds - Date.now() / 1000) < 60, 'request.time is now');
  t.equal(attrs.source.principal, '', 'no TLS: no principal');
});

t.test('deny: custom status, headers and body verbatim; a bare non-OK status is 403', async (t) => {
  let answer: GrpcAnswer = {};
  const { auth, plane } = await setup(t, {}, () => answer);
  answer = {
    status: { code: 16 },
    denied_response: {
      status: { code: 'Unauthorized' },
      headers: [
        { header: { key: 'WWW-Authenticate', value: 'Bearer realm="acme"' } },
        { header: { key: 'content-type', value: 'text/html' } },
        { header: { key: 'x-reason', value: 'one' } },
        { header: { key: 'x-reason', value: 'two' }, append: { value: true } },
        { header: { key: 'transfer-encoding', value: 'chunked' } },
      ],
      body: '<h1>login first</h1>',
    },
  };
  const denied = await request(plane.port, CANONICAL, '/secret');
  t.equal(denied.status, 401);
  t.equal(denied.headers['www-authenticate'], 'Bearer realm="acme"');
  t.equal(denied.headers['content-type'], 'text/html');
  t.equal(denied.headers['x-reason'], 'one, two', 'append:true adds a second value');
  t.equal(denied.body, '<h1>login first</h1>', 'the body verbatim');

  answer = { status: { code: 7, message: 'nope' } };
  const bare = await request(plane.port, CANONICAL, '/secret');
  t.equal(bare.status, 403, 'non-OK without denied_response: 403');
  const body = JSON.parse(bare.body);
  t.equal(body.code, 'AUTH_DENIED');
  t.equal(body.status, 403);
  t.type(body.id, 'string');

  answer = { status: { code: 7 }, denied_response: { status: null, headers: [], body: '' } };
  t.equal((await request(plane.port, CANONICAL, '/')).status, 403, 'denied_response without a status: 403');

  answer = { status: { code: 0 }, denied_response: { status: { code: 'Unauthorized' }, headers: [], body: 'x' } };
  t.equal((await request(plane.port, CANONICAL, '/')).status, 200, 'status OK allows whatever else came along');
  t.equal(auth.calls.length, 4);
});

t.test('the body: first 8 KiB with the partial-body header, as bytes, or not at all', async (t) => {
  const { auth, plane } = await setup(t, {}, () => allow());
  const small = await request(plane.port, CANONICAL, '/upload', { method: 'POST', body: 'hello', headers: { 'content-type': 'text/plain' } });
  t.equal(JSON.parse(small.body).body, 'hello', 'the app gets the body');
  let h = auth.calls.at(-1)!.attributes.request.http;
  t.equal(h.body, 'hello');
  t.equal(h.headers['x-envoy-auth-partial-body'], 'false');
  t.equal(String(h.size), '5');

  const big = Buffer.alloc(20_000, 'x');
  big.write('START', 0);
  big.write('END', big.length - 3);
  const large = await request(plane.port, CANONICAL, '/upload', { method: 'POST', body: big });
  t.equal(JSON.parse(large.body).body, big.toString(), 'the app gets the whole body, buffered prefix first');
  h = auth.calls.at(-1)!.attributes.request.http;
  t.equal(h.body.length, 8192, 'only the first 8 KiB go to the check');
  t.ok(h.body.startsWith('START'));
  t.equal(h.headers['x-envoy-auth-partial-body'], 'true');
  t.equal(String(h.size), '20000');

  // Chunked (no content-length): size -1.
  const chunked = await new Promise<string>((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port: plane.port, path: '/c', method: 'POST', agent: false, headers: { host: CANONICAL, 'transfer-encoding': 'chunked' } }, (r) => {
      let s = '';
      r.on('data', (c: Buffer) => (s += c));
      r.on('end', () => resolve(s));
    });
    req.on('error', reject);
    req.write('part1-');
    setTimeout(() => req.end('part2'), 20);
  });
  t.equal(JSON.parse(chunked).body, 'part1-part2');
  h = auth.calls.at(-1)!.attributes.request.http;
  t.equal(String(h.size), '-1');
  t.equal(h.body, 'part1-part2', 'the check waited for the end of a short chunked body');
  t.equal(h.headers['x-envoy-auth-partial-body'], 'false');
});

t.test('pack as bytes, remove request body', async (t) => {
  const bytes = await setup(t, { 'svc/externalAuthPackAsBytes': true }, () => allow());
  const payload = Buffer.from([0xff, 0x00, 0xfe, 0x41]);
  const res = await request(bytes.plane.port, CANONICAL, '/bin', { method: 'POST', body: payload });
  t.equal(res.status, 200);
  const h = bytes.auth.calls[0]!.attributes.request.http;
  t.same([...h.raw_body], [...payload], 'raw_body carries the bytes unchanged');
  t.equal(h.body, '');
  t.equal(h.headers['x-envoy-auth-partial-body'], 'false');

  const removed = await setup(t, { 'svc/externalAuthRemoveRequestBody': true }, () => allow());
  const res2 = await request(removed.plane.port, CANONICAL, '/x', { method: 'POST', body: 'secret-body' });
  t.equal(JSON.parse(res2.body).body, 'secret-body', 'the app still gets the body');
  const h2 = removed.auth.calls[0]!.attributes.request.http;
  t.equal(h2.body, '');
  t.equal(h2.raw_body.length, 0);
  t.notOk('x-envoy-auth-partial-body' in h2.headers, 'no body, no partial-body header');
});

t.test('server down: fail-open continues with the failure-mode header, fail-closed answers 403', async (t) => {
  const port = await deadPort();
  const open = await setup(t, {}, () => allow(), { authPort: port });
  const res = await request(open.plane.port, CANONICAL, '/', { headers: { 'x-envoy-auth-failure-mode-allowed': 'spoofed' } });
  t.equal(res.status, 200, 'failure allow (the default) lets it through');
  t.equal(JSON.parse(res.body).headers['x-envoy-auth-failure-mode-allowed'], 'true');
  const clean = await request(open.plane.port, CANONICAL, '/');
  t.equal(JSON.parse(clean.body).headers['x-envoy-auth-failure-mode-allowed'], 'true');

  const closed = await setup(t, { 'svc/externalAuthFailureAllow': false }, () => allow(), { authPort: port });
  const res2 = await request(closed.plane.port, CANONICAL, '/');
  t.equal(res2.status, 403);
  const body = JSON.parse(res2.body);
  t.equal(body.message, 'external authorization failed');
  t.equal(body.code, 'AUTH_FAILED');

  const metrics = await (await fetch(`${open.plane.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_extauth_checks_total\{workload="shop\/api",result="error"\} 2/);
  t.match(metrics, /svcproxy_extauth_checks_total\{workload="shop\/api",result="failure_mode_allowed"\} 2/);
});

t.test('server slower than the timeout, and RPC errors, under both failure modes', async (t) => {
  const slow = () => new Promise<GrpcAnswer>((resolve) => setTimeout(() => resolve(allow()), 1000));
  const open = await setup(t, { 'svc/externalAuthTimeout': '100ms' }, slow);
  const started = Date.now();
  const res = await request(open.plane.port, CANONICAL, '/');
  t.equal(res.status, 200);
  t.equal(JSON.parse(res.body).headers['x-envoy-auth-failure-mode-allowed'], 'true');
  t.ok(Date.now() - started < 900, 'the timeout bounds the check');

  const closed = await setup(t, { 'svc/externalAuthTimeout': '100ms', 'svc/externalAuthFailureAllow': 'false' }, slow);
  const res2 = await request(closed.plane.port, CANONICAL, '/');
  t.equal(res2.status, 403);
  t.equal(JSON.parse(res2.body).message, 'external authorization failed');

  const erring = await setup(t, { 'svc/externalAuthFailureAllow': false }, () => ({ grpcError: 14, message: 'backend down' }));
  t.equal((await request(erring.plane.port, CANONICAL, '/')).status, 403, 'an RPC error is a failure, not a denial');
  const invalid = await setup(t, { 'svc/externalAuthFailureAllow': false }, () => allow({ headers: [{ header: { key: 'x-bad', value: 'a\r\nb' } }] }));
  t.equal((await request(invalid.plane.port, CANONICAL, '/')).status, 403, 'an invalid header mutation is a failure');
});

t.test('hostile headers are sanitized to UTF-8: the check never fails because of them', async (t) => {
  const { auth, plane } = await setup(t, { 'svc/externalAuthFailureAllow': false }, () => allow());
  const res = await request(plane.port, CANONICAL, '/x', {
    headers: { 'x-bad': '\xff\xfeok', 'x-good': Buffer.from('é€', 'utf8').toString('latin1') },
  });
  t.equal(res.status, 200);
  const h = auth.calls[0]!.attributes.request.http.headers;
  t.equal(h['x-bad'], '\uFFFD\uFFFDok', 'invalid bytes become U+FFFD');
  t.equal(h['x-good'], 'é€', 'valid UTF-8 is kept');
  const body = await request(plane.port, CANONICAL, '/x', { method: 'POST', body: Buffer.from([0x61, 0xc3, 0x28]) });
  t.equal(body.status, 200);
  t.equal(auth.calls[1]!.attributes.request.http.body, 'a\uFFFD(', 'the body string too');
});

t.test('listen port limits authorization to one container port', async (t) => {
  const other = await setup(t, { 'svc/externalAuthListenPort': 9999, 'svc/externalAuthFailureAllow': false }, () => ({ status: { code: 7 } }));
  t.equal((await request(other.plane.port, CANONICAL, '/')).status, 200, 'requests for port 8080 are not checked');
  t.equal(other.auth.calls.length, 0);
  const same = await setup(t, { 'svc/externalAuthListenPort': 8080 }, () => ({ status: { code: 7 } }));
  t.equal((await request(same.plane.port, CANONICAL, '/')).status, 403, 'requests for port 8080 are');
  t.equal(same.auth.calls.length, 1);
});

t.test('metrics: checks by result and their duration; one call per request', async (t) => {
  let deny = false;
  const { auth, plane } = await setup(t, {}, () => (deny ? { status: { code: 7 } } : allow()));
  for (let i = 0; i < 3; i++) await request(plane.port, CANONICAL, `/${i}`);
  deny = true;
  await request(plane.port, CANONICAL, '/d');
  t.equal(auth.calls.length, 4, 'exactly one check per request');
  const metrics = await (await fetch(`${plane.adminUrl}/metrics`)).text();
  t.match(metrics, /svcproxy_extauth_checks_total\{workload="shop\/api",result="ok"\} 3/);
  t.match(metrics, /svcproxy_extauth_checks_total\{workload="shop\/api",result="denied"\} 1/);
  t.match(metrics, /svcproxy_extauth_duration_seconds_count\{workload="shop\/api"\} 4/);
});

t.test('workloads without the address tag get no filter and no check', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const auth = await startGrpcAuth(t, () => ({ status: { code: 7 } }));
  const plane = await startPlane(t, records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] }, tags: { 'svc/externalAuthPort': auth.port } }));
  await plane.ready();
  t.equal((await request(plane.port, CANONICAL, '/')).status, 200);
  t.equal(auth.calls.length, 0);
  t.equal(plane.runtime.dataplane['table'].sidecarChains.get('shop/api')?.length, 0, 'an empty sidecar chain');
});

t.test('ingress → standalone sidecar → app: checked once, at the sidecar', async (t) => {
  const app = await startHttpServer(t, echoHandler('app'));
  const auth = await startGrpcAuth(t, () => allow({ headers: [{ header: { key: 'x-user', value: 'carol' } }] }));
  const base = records({
    replicas: { 'aws-us-east-2': [`127.0.0.1:${app.port}`] },
    tags: { 'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': auth.port, 'svc/externalAuthScheme': 'http', 'svc/externalAuthFailureAllow': false },
  });
  const { ingress } = await startSidecarBehindIngress(t, base, app.port);
  await ingress.ready();
  const res = await request(ingress.port, CANONICAL, '/through', { headers: { 'x-forwarded-for': '198.51.100.1', 'x-svc-spoof': '1' } });
  t.equal(res.status, 200);
  t.equal(JSON.parse(res.body).headers['x-user'], 'carol');
  t.equal(auth.calls.length, 1, 'one check: the ingress leaves it to the replica’s sidecar');
  const h = auth.calls[0]!.attributes.request.http;
  t.equal(h.scheme, 'http', 'the scheme the ingress forwarded');
  t.equal(h.headers['x-forwarded-for'], '198.51.100.1, 127.0.0.1, 127.0.0.1');
  t.notOk('x-svc-spoof' in h.headers, 'the ingress stripped client vendor headers');
});
