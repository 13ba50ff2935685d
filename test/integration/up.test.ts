/**
 * `svcproxy up` end to end: the built-in demo's echo workload started as real processes, answering on
 * its canonical, location and internal (mesh) endpoints; and the installed command started as a user
 * does, answering, then draining and exiting 0 on SIGTERM.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startUp } from '../../src/roles/up.js';
import { demoRecords, echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { request, waitFor } from '../helpers/harness.js';
import { tempDir } from '../mesh/fixtures.js';

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));

t.test('the demo echo workload answers on every endpoint kind', async (t) => {
  const up = await startUp({
    settings: defaultSettings,
    records: demoRecords(echoScriptPath(), process.execPath),
    listen: ['127.0.0.1:0'],
    mesh: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: silentLogger(),
    watch: false,
    stateDir: await tempDir(t, 'svcproxy-state-'),
  });
  t.teardown(() => up.stop(5000));
  const { runtime } = up;
  await waitFor(() => runtime.replicas.all().length === 2 && runtime.replicas.all().every((r) => r.ready), 15_000, 'demo replicas ready');
  const alias = runtime.store.current.gvcs.get('demo')!.alias;
  const port = runtime.listeners[0]!.address.port;
  const res = await request(port, `echo-${alias}.app.localhost`, '/hello?x=1', { headers: { 'x-svc-debug': 'true' } });
  t.equal(res.status, 200);
  const body = JSON.parse(res.body);
  t.equal(body.path, '/hello');
  t.equal(body.workload, 'echo');
  t.match(body.location, /^(aws-us-east-2|gcp-us-east1)$/);
  t.equal(res.headers['x-svc-location'], body.location, 'debug header names the answering location');
  t.equal(res.headers['x-svc-replica'], 'echo-0');

  const direct = await request(port, `echo-${alias}.gcp-us-east1.direct.localhost`, '/');
  t.equal(JSON.parse(direct.body).location, 'gcp-us-east1');

  const meshPort = runtime.meshListeners[0]!.address.port;
  const internal = await request(meshPort, 'echo.demo.internal.localhost:8080', '/inside');
  t.equal(internal.status, 200);
  t.equal(JSON.parse(internal.body).path, '/inside');
  const external = await request(port, 'echo.demo.internal.localhost:8080', '/');
  t.equal(external.status, 404, 'internal names are never answered on the external listener');
});

t.test('the installed command: demo answers, SIGTERM drains and exits 0', async (t) => {
  // In a folder of its own: its state (.svcproxy/) is not the repository's or another test's.
  const child = spawn(process.execPath, [BIN, 'up', '--listen', '127.0.0.1:0', '--mesh', '127.0.0.1:0', '--admin', '127.0.0.1:0', '--log-level', 'warn'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    cwd: await tempDir(t, 'svcproxy-up-cwd-'),
  });
  t.teardown(() => {
    if (child.exitCode === null) child.kill('SIGKILL');
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  await waitFor(() => /try:\s+curl http:\/\/\S+/.test(out), 60_000, 'up to print its endpoints');
  const url = new URL(/try:\s+curl (http:\/\/\S+)/.exec(out)![1]!);
  t.match(url.hostname, /^echo-[a-z0-9]{13}\.app\.localhost$/);
  let answered = 0;
  const deadline = Date.now() + 60_000; // a hang guard: a busy machine starts the demo's processes slowly
  while (Date.now() < deadline) {
    const res = await request(Number(url.port), url.hostname, '/').catch(() => undefined);
    if (res?.status === 200) {
      answered++;
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  t.equal(answered, 1, 'the demo answers');
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  child.kill('SIGTERM');
  t.equal(await exited, 0, 'exits 0 after draining');
});
