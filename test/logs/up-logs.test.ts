/**
 * `svcproxy up` writes what `svcproxy logs` reads: the demo's echo processes in two locations and the
 * requests they served end up in one workload file, read back consolidated and in time order.
 */
import t from 'tap';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startUp } from '../../src/roles/up.js';
import { demoRecords, echoScriptPath } from '../../src/local/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { silentLogger } from '../../src/log.js';
import { runLogs, PROXY_CONTAINER } from '../../src/logs/index.js';
import type { Flags } from '../../src/flags.js';
import { request, waitFor } from '../helpers/harness.js';

t.test('process output and access lines of every location, in time order', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcproxy-up-logs-'));
  t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }));
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'svcproxy-up-state-'));
  t.teardown(() => fs.rmSync(stateDir, { recursive: true, force: true }));
  const up = await startUp({
    settings: defaultSettings,
    records: demoRecords(echoScriptPath(), process.execPath),
    listen: ['127.0.0.1:0'],
    mesh: ['127.0.0.1:0'],
    admin: '127.0.0.1:0',
    logger: silentLogger(),
    watch: false,
    logDir: dir,
    stateDir,
  });
  let stopped = false;
  t.teardown(() => (stopped ? undefined : up.stop(5000)));
  const { runtime } = up;
  await waitFor(() => runtime.replicas.all().length === 2 && runtime.replicas.all().every((r) => r.ready), 15_000, 'demo replicas ready');
  const alias = runtime.store.current.gvcs.get('demo')!.alias;
  const port = runtime.listeners[0]!.address.port;
  for (const location of ['aws-us-east-2', 'gcp-us-east1']) {
    t.equal((await request(port, `echo-${alias}.${location}.direct.localhost`, `/from-${location}`)).status, 200);
  }
  await up.stop(5000);
  stopped = true;

  let out = '';
  const code = await runLogs({ workload: 'echo', 'log-dir': dir, output: 'json' } as Flags, { out: (s) => (out += s), err: () => undefined });
  t.equal(code, 0);
  const records = out.trim().split('\n').map((l) => JSON.parse(l) as Record<string, string>);
  const listening = records.filter((r) => /^echo listening on \d+$/.test(r.msg ?? ''));
  t.same(listening.map((r) => r.location).sort(), ['aws-us-east-2', 'gcp-us-east1'], 'each location\'s process output');
  t.ok(listening.every((r) => r.replica === 'echo-0' && r.container === 'echo' && r.gvc === 'demo'), 'with replica, container and gvc');
  const access = records.filter((r) => r.container === PROXY_CONTAINER);
  t.same(access.map((r) => r.path).sort(), ['/from-aws-us-east-2', '/from-gcp-us-east1'], 'the access-log lines');
  t.ok(access.every((r) => r.location && r.replica === 'echo-0'));
  const times = records.map((r) => Date.parse(r.time!));
  t.same(times, [...times].sort((a, b) => a - b), 'in time order');

  let east = '';
  await runLogs({ workload: 'echo', gvc: 'demo', location: 'aws-us-east-2', 'log-dir': dir } as Flags, { out: (s) => (east += s), err: () => undefined });
  t.notMatch(east, /gcp-us-east1/);
  t.match(east, /aws-us-east-2\s+echo-0\s+echo\s+echo listening on/);
});
