import t from 'tap';
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startEcho, MAX_ECHO_BODY } from '../../src/local/echo.js';

async function start(t: { teardown(fn: () => unknown): void }) {
  const server = await startEcho(0, { workload: 'echo', location: 'aws-us-east-2', replica: 'echo-0' }, '127.0.0.1');
  t.teardown(() => new Promise((resolve) => server.close(resolve)));
  return (server.address() as AddressInfo).port;
}

function call(
  port: number,
  path: string,
  options: { method?: string; body?: string | Buffer; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: options.method ?? 'GET', headers: options.headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

t.test('echoes the request with its identity', async (t) => {
  const port = await start(t);
  const res = await call(port, '/a/b?x=1&x=2&y=z', { method: 'POST', body: 'hello', headers: { 'x-test': 'yes' } });
  t.equal(res.status, 200);
  t.equal(res.headers['content-type'], 'application/json');
  const echo = JSON.parse(res.body.toString()) as Record<string, unknown>;
  t.has(echo, {
    method: 'POST',
    path: '/a/b',
    query: { x: ['1', '2'], y: 'z' },
    headers: { 'x-test': 'yes' },
    body: 'hello',
    workload: 'echo',
    location: 'aws-us-east-2',
    replica: 'echo-0',
  });
});

t.test('body is cut at 64 KiB', async (t) => {
  const port = await start(t);
  const res = await call(port, '/', { method: 'PUT', body: Buffer.alloc(MAX_ECHO_BODY + 1000, 'a') });
  t.equal((JSON.parse(res.body.toString()) as { body: string }).body.length, MAX_ECHO_BODY);
});

t.test('helpers: healthz, status, bytes, delay', async (t) => {
  const port = await start(t);
  t.equal((await call(port, '/healthz')).status, 200);
  const teapot = await call(port, '/status/418');
  t.equal(teapot.status, 418);
  t.equal((JSON.parse(teapot.body.toString()) as { path: string }).path, '/status/418');
  t.equal((await call(port, '/status/204')).status, 204);
  t.equal((await call(port, '/status/99')).status, 400);
  t.equal((await call(port, '/status/abc')).status, 400);
  const bytes = await call(port, '/bytes/200000');
  t.equal(bytes.status, 200);
  t.equal(bytes.body.length, 200000);
  t.equal((await call(port, '/bytes/0')).body.length, 0);
  t.equal((await call(port, '/bytes/-1')).status, 400);
  const started = Date.now();
  const delayed = await call(port, '/delay?ms=200');
  t.equal(delayed.status, 200);
  t.ok(Date.now() - started >= 190, 'waited');
  t.equal((await call(port, '/delay?ms=x')).status, 400);
});
