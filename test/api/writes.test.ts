/**
 * The control plane's writes over plain HTTP (src/local/api/writes.ts, body.ts, router.ts), against
 * one `up`: versions (a stale one is 409; of parallel writers from one version exactly one wins each
 * round, none is lost), POST on a taken name (409), read-only members dropped (a replaced GVC keeps
 * its alias), a record of another kind, name or GVC than its path (400), a workload without `gvc`
 * belongs to its path's GVC, bodies too large (413 on Content-Length, and once the streamed bytes pass
 * the limit, before the rest is read), too slow (408), malformed JSON and YAML (400 with line and
 * column), other media types (415), unknown paths (404) and methods (405 with Allow), a refused
 * delete (400 with the findings), and a client that sends slowly holding up no other write.
 */
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import type { Up } from '../../src/roles/up.js';
import { upWithApi } from '../helpers/api.js';
import { tempDir } from '../mesh/fixtures.js';

const RECORDS = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', alias: 'aaaaaaaaaaaa1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
];

/** A workload `up` starts no process for (no command): writes here need no replicas. */
function workload(name: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { kind: 'workload', name, spec: { type: 'standard', containers: [{ name: 'main', image: 'nginx', ports: [{ number: 80, protocol: 'http' }] }], firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } } }, ...extra };
}

interface Reply { status: number; headers: http.IncomingHttpHeaders; json: Record<string, any>; text: string }

t.test('writes over HTTP', async (t) => {
  const dir = await tempDir(t, 'svcproxy-writes-');
  const up: Up = await upWithApi(dir, { records: RECORDS }, { bodyTimeoutMs: 300 });
  t.teardown(() => up.stop(1000));
  const key = (await readFile(up.operatorKeyFile, 'utf8')).trim();
  const api = new URL(up.api.url!);
  const call = (method: string, path: string, body?: unknown, headers: http.OutgoingHttpHeaders = {}): Promise<Reply> => new Promise((resolve, reject) => {
    const text = body === undefined ? undefined : typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const req = http.request({ host: api.hostname, port: api.port, method, path, agent: false, headers: {
      authorization: `Bearer ${key}`, ...(text !== undefined ? { 'content-type': 'application/json' } : {}), ...headers,
    } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const s = Buffer.concat(chunks).toString();
        let json: Record<string, any> = {};
        try { json = JSON.parse(s) as Record<string, any>; } catch { /* no body (204) */ }
        resolve({ status: res.statusCode!, headers: res.headers, json, text: s });
      });
    });
    req.on('error', reject);
    req.end(text);
  });
  const isError = (tt: typeof t, r: Reply, status: number, code: string): void => {
    tt.equal(r.status, status, `${status} ${code}: ${r.text}`);
    tt.equal(r.json.code, code);
    tt.same(Object.keys(r.json).sort(), ['code', 'details', 'id', 'message', 'status']);
  };
  const W = '/org/acme/gvc/g1/workload';

  t.test('versions: a stale one is 409, none applies the current', async (t) => {
    t.equal((await call('PUT', W, workload('v'))).status, 201);
    const v1 = await call('GET', `${W}/v`);
    t.equal(v1.json.version, 1);
    const patched = await call('PATCH', `${W}/v`, { version: 1, description: 'one' });
    t.equal(patched.status, 200);
    t.match(patched.json, { version: 2, description: 'one' });
    isError(t, await call('PATCH', `${W}/v`, { version: 1, description: 'stale' }), 409, 'version_conflict');
    isError(t, await call('PUT', W, { ...workload('v'), version: 1 }), 409, 'version_conflict');
    t.match((await call('PATCH', `${W}/v`, { description: 'no version' })).json, { version: 3, description: 'no version' });
    t.match((await call('PUT', W, { ...workload('v'), version: '3', description: 'a string version' })).json, { version: 4 });
    isError(t, await call('PATCH', `${W}/v`, { version: 'x' }), 400, 'bad_request');
    t.equal((await call('GET', `${W}/v`)).json.description, 'a string version');
  });

  t.test('parallel writers from one version: exactly one wins each round, none lost', async (t) => {
    t.equal((await call('PUT', W, workload('race'))).status, 201);
    for (let round = 0; round < 10; round++) {
      const { version } = (await call('GET', `${W}/race`)).json as { version: number };
      const replies = await Promise.all(Array.from({ length: 6 }, (_, i) => call('PATCH', `${W}/race`, { version, tags: { [`r${round}`]: `w${i}` } })));
      const won = replies.filter((r) => r.status === 200);
      t.equal(won.length, 1, `round ${round}: one winner`);
      t.ok(replies.filter((r) => r.status !== 200).every((r) => r.status === 409 && r.json.code === 'version_conflict'), `round ${round}: the others 409`);
      t.equal(won[0]!.json.version, version + 1);
    }
    const final = (await call('GET', `${W}/race`)).json;
    t.equal(Object.keys(final.tags).length, 10, 'every round\'s winner kept');
    t.equal(final.version, 11);
  });

  t.test('create, identity of a body, read-only members', async (t) => {
    isError(t, await call('POST', W, workload('v')), 409, 'already_exists');
    isError(t, await call('PUT', W, { ...workload('x'), kind: 'gvc' }), 400, 'bad_request');
    isError(t, await call('PUT', `${W}/x`, workload('y')), 400, 'bad_request');
    isError(t, await call('PUT', W, { ...workload('x'), gvc: 'g2' }), 400, 'bad_request');
    isError(t, await call('PUT', W, { kind: 'workload', spec: {} }), 400, 'bad_request');
    const put = await call('PUT', `${W}/x`, { ...workload('x'), name: undefined, gvc: '/org/acme/gvc/g1' });
    t.equal(put.status, 201);
    t.equal(put.headers.location, `${W}/x`);
    t.ok(up.runtime.store.current.workloads.has('g1/x'), 'a workload without gvc belongs to its path\'s GVC');
    const replaced = await call('PUT', '/org/acme/gvc', { ...RECORDS[2], alias: 'zzzzzzzzzzzz9', id: 'mine', created: '1999-01-01T00:00:00Z', links: [], status: { x: 1 }, description: 'replaced' });
    t.equal(replaced.status, 200);
    t.match(replaced.json, { alias: 'aaaaaaaaaaaa1', description: 'replaced', version: 2 });
    t.not(replaced.json.id, 'mine');
    t.not(replaced.json.created, '1999-01-01T00:00:00Z');
    t.notOk('status' in replaced.json);
    t.equal(up.runtime.store.current.gvcs.get('g1')!.alias, 'aaaaaaaaaaaa1', 'the GVC keeps the alias it routes by');
  });

  t.test('secrets: checked names, never echoed', async (t) => {
    const value = 'SEKRET-w-81c2';
    const bad = await call('PUT', '/org/acme/secret', { kind: 'secret', name: 'Bad Name', type: 'opaque', data: { payload: value } });
    isError(t, bad, 400, 'invalid_record');
    t.match(bad.json.details.errors, [/secret\/Bad Name: name: must be/]);
    t.notOk(bad.text.includes(value));
    const malformed = await call('PUT', '/org/acme/secret', `{"kind": "secret", "name": "s", "data": {"payload": ${value}}}`);
    isError(t, malformed, 400, 'bad_request');
    t.notOk(malformed.text.includes(value), 'the parser\'s message does not quote the body');
    const put = await call('PUT', '/org/acme/secret', { kind: 'secret', name: 's', type: 'opaque', data: { payload: value } });
    t.equal(put.status, 201);
    t.notOk(put.text.includes(value));
    const patched = await call('PATCH', '/org/acme/secret/s', { description: 'patched' });
    t.equal(patched.status, 200);
    t.notOk(patched.text.includes(value));
    t.notOk((await call('GET', '/org/acme/secret')).text.includes(value));
    t.equal((await call('GET', '/org/acme/secret/s/-reveal')).json.data.payload, value);
    t.equal((await call('DELETE', '/org/acme/secret/s')).status, 204);
  });

  t.test('paths and methods', async (t) => {
    isError(t, await call('GET', '/org/acme/nothing'), 404, 'not_found');
    isError(t, await call('PATCH', `${W}/missing`, {}), 404, 'not_found');
    isError(t, await call('DELETE', `${W}/missing`), 404, 'not_found');
    isError(t, await call('PUT', '/org/acme/gvc/g9/workload', workload('w')), 404, 'not_found');
    const wrong = await call('DELETE', '/org/acme/gvc');
    isError(t, wrong, 405, 'method_not_allowed');
    t.equal(wrong.headers.allow, 'GET, POST, PUT');
    t.equal((await call('GET', `${W}/`)).json.kind, 'list', 'a trailing slash');
    isError(t, await call('GET', `${W}?limit=0`), 400, 'bad_request');
    const page = await call('GET', `${W}?limit=1`);
    t.equal(page.json.items.length, 1);
    const next = page.json.links.find((l: { rel: string }) => l.rel === 'next').href as string;
    const second = await call('GET', next);
    t.not(second.json.items[0].name, page.json.items[0].name);
    // Across GVCs (the cursor names a GVC and a workload): every workload once, in order.
    const seen: string[] = [];
    for (let path: string | undefined = '/org/acme/workload?limit=2'; path !== undefined;) {
      const got = await call('GET', path);
      t.equal(got.status, 200, path);
      seen.push(...(got.json.items as { name: string }[]).map((w) => w.name));
      path = (got.json.links as { rel: string; href: string }[]).find((l) => l.rel === 'next')?.href;
    }
    t.same(seen, [...up.runtime.store.current.workloads.values()].map((w) => w.name).sort());
    isError(t, await call('DELETE', '/org/acme/gvc/g1'), 400, 'invalid_record');
    t.ok(up.runtime.store.current.gvcs.has('g1'), 'a GVC with workloads stays');
    t.equal((await call('DELETE', `${W}/x`)).status, 202);
    isError(t, await call('GET', `${W}/x`), 404, 'not_found');
  });

  t.test('malformed bodies', async (t) => {
    const json = await call('PUT', W, '{"kind": "workload",\n  "name": "w",\n  "spec": {,}}');
    isError(t, json, 400, 'bad_request');
    t.match(json.json.details, { line: 3, column: 12 });
    const yaml = await call('PUT', W, 'kind: workload\nname: w\nspec: [oops\n', { 'content-type': 'application/yaml' });
    isError(t, yaml, 400, 'bad_request');
    t.match(yaml.json.message, /not valid YAML: line \d+, column \d+/);
    const good = await call('PUT', W, 'kind: workload\nname: y1\nspec:\n  type: standard\n  containers: [{name: main, image: x, ports: [{number: 80}]}]\n', { 'content-type': 'text/yaml' });
    t.equal(good.status, 201, good.text);
    isError(t, await call('PUT', W, 'a: 1\n---\nb: 2\n', { 'content-type': 'application/x-yaml' }), 400, 'bad_request');
    isError(t, await call('PUT', W, '[1, 2]'), 400, 'bad_request');
    isError(t, await call('PUT', W, Buffer.from([0x7b, 0xff, 0x7d])), 400, 'bad_request');
    isError(t, await call('PUT', W, 'x', { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
    isError(t, await call('PUT', W, ''), 400, 'bad_request');
  });

  t.test('a body too large: 413 before it is read whole', async (t) => {
    // Content-Length past the limit: answered before a byte of the body is sent.
    const declared = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = http.request({ host: api.hostname, port: api.port, method: 'PUT', path: W, agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': 2 * 1024 * 1024 } }, resolve);
      req.on('error', reject);
      req.flushHeaders();
    });
    t.equal(declared.statusCode, 413);
    t.equal(declared.headers.connection, 'close');
    declared.resume();
    // Streamed (chunked) past the limit: answered while the client is still sending.
    const streamed = await new Promise<number>((resolve, reject) => {
      const req = http.request({ host: api.hostname, port: api.port, method: 'PUT', path: W, agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
        req.destroy();
      });
      req.on('error', (e) => (e as NodeJS.ErrnoException).code === 'ECONNRESET' || (e as NodeJS.ErrnoException).code === 'EPIPE' ? undefined : reject(e));
      const chunk = Buffer.alloc(64 * 1024, 0x20);
      const pump = (): void => {
        if (req.destroyed) return;
        while (req.write(chunk)) { /* until the socket pushes back */ }
        req.once('drain', pump);
      };
      pump();
    });
    t.equal(streamed, 413);
  });

  t.test('a slow client: 408 for itself, nobody else held up', async (t) => {
    const socket = net.connect(Number(api.port), api.hostname);
    await once(socket, 'connect');
    const body = JSON.stringify(workload('slow'));
    socket.write(`PUT ${W} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 10)}`);
    // Meanwhile another write goes through.
    t.equal((await call('PUT', W, workload('fast'))).status, 201);
    const answer = await new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('close', () => resolve(text));
    });
    t.match(answer, /^HTTP\/1\.1 408 /);
    t.match(answer, /"code":"request_timeout"/);
    t.notOk(up.runtime.store.current.workloads.has('g1/slow'));
  });
});
