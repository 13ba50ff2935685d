/**
 * The `--api` listener's address (src/roles/up.ts): an address given and taken fails `up`; the
 * default one taken (another `up` on the machine) is skipped with a warning and `up` runs. A
 * workload that bypasses its outbound proxy gets the `--api` URL as SVC_ENDPOINT, where its token
 * is from outside its workload.
 */
import t from 'tap';
import net from 'node:net';
import { once } from 'node:events';
import { join } from 'node:path';
import { startUp, type UpOptions } from '../../src/roles/up.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { request, waitFor } from '../helpers/harness.js';
import { captureLogger, echoContainer, meshWorkload, tempDir } from '../mesh/fixtures.js';

const BASE = [
  { kind: 'org', name: 'acme' },
  { kind: 'location', name: 'loc1', provider: 'aws', region: 'r1' },
  { kind: 'gvc', name: 'g1', spec: { staticPlacement: { locationLinks: ['//location/loc1'] } } },
];

async function taken(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const server = net.createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => server.close());
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

function options(dir: string, api: UpOptions['api'], extra: Partial<UpOptions> = {}): UpOptions {
  return {
    settings: defaultSettings, records: BASE, listen: ['127.0.0.1:0'], admin: '127.0.0.1:0', logger: silentLogger(),
    watch: false, stateDir: join(dir, 'state'), limits: { maxEventLoopDelayMs: 0 }, ...(api ? { api } : {}), ...extra,
  };
}

t.test('an --api address given and taken fails up', async (t) => {
  const dir = await tempDir(t, 'svcproxy-api-');
  await t.rejects(startUp(options(dir, { address: await taken(t) })), { code: 'EADDRINUSE' });
});

t.test('the default address taken: up runs without it and says so', async (t) => {
  const dir = await tempDir(t, 'svcproxy-api-');
  const { logger, entries } = captureLogger();
  const up = await startUp(options(dir, { address: await taken(t), optional: true }, { logger }));
  t.teardown(() => up.stop(5000));
  t.equal(up.api.url, undefined);
  t.ok(entries.some((e) => /default --api address is taken/.test(e.msg)));
});

t.test('a workload that bypasses its proxy is given the --api URL, where its token is outside', async (t) => {
  const dir = await tempDir(t, 'svcproxy-api-');
  const bypass = meshWorkload('g1', 'direct', { containers: [echoContainer()], tags: { 'svc/bypassProxyOutbound': 'true' } });
  const up = await startUp(options(dir, { address: '127.0.0.1:0' }, { records: [...BASE, bypass] }));
  t.teardown(() => up.stop(5000));
  await waitFor(() => up.runtime.replicas.all().some((r) => r.ready), 60_000, 'replica ready');
  const env = up.supervisor.processes()[0]!.env;
  t.equal(env.HTTP_PROXY, undefined);
  t.equal(env.SVC_ENDPOINT, up.api.url);
  const url = new URL(up.api.url!);
  const res = await request(Number(url.port), url.host, '/org/acme/gvc/g1', { headers: { authorization: `Bearer ${env.SVC_TOKEN}` } });
  t.equal(res.status, 403);
  t.equal(JSON.parse(res.body).code, 'token_outside_workload');
});
