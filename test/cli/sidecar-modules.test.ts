/**
 * What an untagged sidecar holds in memory (issue 40, "Memory beside every replica"): it runs beside
 * every replica, so the modules of the other commands are loaded only by those commands
 * (src/cli.ts). A sidecar started with a preloaded module that records every ES module resolved
 * answers through its app and has loaded none of `up`'s runtime, the platform API, `logs`,
 * `explain`, `validate`'s report, the rate-limit service or the cluster (`--workers`). (node:cluster
 * itself is loaded by Node's net.Server.listen in every process.) Those commands still run them
 * (their own tests); what a start costs in memory is measured by bench/ (`--only memory`), not
 * asserted here.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { records, startHttpServer, yamlDocuments } from '../helpers/harness.js';
import { answerThreeThenStop, writeResolveHooks } from '../helpers/proxy-process.js';

const LOCATION = 'aws-us-east-2';
const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-sidecar-modules-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const LOG = path.join(dir, 'loaded.txt');
writeFileSync(path.join(dir, 'probe.mjs'), `
import { register } from 'node:module';
register(${JSON.stringify(writeResolveHooks(dir))}, import.meta.url, { data: { log: ${JSON.stringify(LOG)} } });
`);

t.test('an untagged sidecar loads none of the other commands', async (t) => {
  const app = await startHttpServer(t, (_req, res) => res.end('app'));
  writeFileSync(path.join(dir, 'config.yaml'), yamlDocuments(records({ replicas: { [LOCATION]: [`127.0.0.1:${app.port}`] } })));
  writeFileSync(LOG, '');
  const { answers, code } = await answerThreeThenStop(t, ['sidecar', '--config', path.join(dir, 'config.yaml'), '--app', `127.0.0.1:${app.port}`, '--gvc', 'shop', '--workload', 'api', '--location', LOCATION, '--replica', 'api-0'], {
    nodeArgs: ['--import', pathToFileURL(path.join(dir, 'probe.mjs')).href],
    extraArgs: ['--log-level', 'warn'],
  });
  t.equal(code, 0, 'the sidecar exited 0 on SIGTERM');
  t.same(answers, ['app', 'app', 'app'], 'the app answered through the sidecar');

  const lines = readFileSync(LOG, 'utf8').split('\n').filter(Boolean);
  const ours = [...new Set(lines.map((l) => /\/dist\/(.*)$/.exec(l)?.[1]).filter((m): m is string => m !== undefined))];
  t.ok(ours.includes('proxy/dataplane.js') && ours.includes('roles/runtime.js'), 'the probe saw the data plane load');
  const lazy = ['roles/up.js', 'local/api/', 'local/supervisor.js', 'logs/', 'explain/', 'config/validate-report.js', 'ratelimit/service/', 'cluster/index.js', 'cluster/primary.js', 'cluster/worker.js'];
  t.same(ours.filter((m) => lazy.some((l) => m.startsWith(l))), [], 'none of up, the API, logs, explain, validate, the rate-limit service or the cluster');
});
