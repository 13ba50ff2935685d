/**
 * Hot reload through real files: a valid change adds a workload while serving; an invalid one is
 * rejected whole, keeps the last good configuration serving, stays ready, and shows its errors
 * under /config.
 */
import t from 'tap';
import { mkdtempSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ALIAS, echoHandler, records, request, startHttpServer, startPlane, waitFor, yamlDocuments } from '../helpers/harness.js';

function writeYaml(file: string, docs: unknown[]): void {
  // Replace by rename, as editors and config managers do.
  const tmp = `${file}.tmp`;
  writeFileSync(tmp, yamlDocuments(docs));
  renameSync(tmp, file);
}

t.test('valid reload adds a workload; invalid reload keeps serving', async (t) => {
  const up = await startHttpServer(t, echoHandler('api'));
  const dir = mkdtempSync(path.join(tmpdir(), 'svcproxy-reload-'));
  const file = path.join(dir, 'config.yaml');
  const base = records({ replicas: { 'aws-us-east-2': [`127.0.0.1:${up.port}`] } });
  writeYaml(file, base);
  const plane = await startPlane(t, undefined, { configPaths: [dir], watch: true });
  await plane.ready();
  t.equal((await request(plane.port, `api-${ALIAS}.app.localhost`, '/')).status, 200);
  t.equal((await request(plane.port, `web-${ALIAS}.app.localhost`, '/')).status, 404);

  const web = {
    kind: 'workload',
    name: 'web',
    gvc: 'shop',
    spec: {
      type: 'standard',
      containers: [{ name: 'web', image: 'web:1', ports: [{ number: 8080, protocol: 'http' }] }],
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
    },
  };
  const webDeployment = { kind: 'deployment', name: 'web', gvc: 'shop', status: { locations: [{ name: 'aws-us-east-2', replicas: [{ name: 'web-0', address: `127.0.0.1:${up.port}` }] }] } };
  const generation = plane.runtime.store.current.generation;
  writeYaml(file, [...base, web, webDeployment]);
  await waitFor(() => plane.runtime.store.current.generation > generation, 5000, 'reload');
  await plane.ready();
  t.equal((await request(plane.port, `web-${ALIAS}.app.localhost`, '/')).status, 200, 'the new workload answers');

  const kept = plane.runtime.store.current.generation;
  const broken = { ...web, name: 'bad', spec: { ...web.spec, defaultOptions: { timeoutSeconds: 9000 } } };
  writeYaml(file, [...base, broken, { kind: 'gvc', name: 'shop', alias: 'TOO-SHORT' }]);
  await waitFor(() => plane.runtime.store.lastErrors !== undefined, 5000, 'rejected reload');
  t.equal(plane.runtime.store.current.generation, kept, 'nothing of the rejected file is applied');
  t.equal((await request(plane.port, `web-${ALIAS}.app.localhost`, '/')).status, 200, 'last good config keeps serving');
  t.equal((await fetch(plane.adminUrl + '/ready')).status, 200, 'stays ready');
  const dump = (await (await fetch(plane.adminUrl + '/config')).json()) as { lastError: { errors: string[] } };
  t.ok(dump.lastError.errors.some((e) => e.includes('workload/bad: spec.defaultOptions.timeoutSeconds')), 'the timeout error is listed with its path');
  t.ok(dump.lastError.errors.length >= 2, 'every error is listed');

  // SIGHUP-style explicit reload of a fixed file clears the error.
  writeYaml(file, [...base, web, webDeployment]);
  await waitFor(() => plane.runtime.store.lastErrors === undefined, 5000, 'recovered reload');
  t.equal((await request(plane.port, `web-${ALIAS}.app.localhost`, '/')).status, 200);
});
