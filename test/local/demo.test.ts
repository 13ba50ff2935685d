import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { request } from 'node:http';
import { demoRecords, echoScriptPath, allocatePort } from '../../src/local/index.js';
import { waitFor } from './fixtures.js';

t.test('demo records', async (t) => {
  const records = demoRecords('/x/echo.js', '/usr/bin/node');
  t.same(records.map((r) => `${String(r.kind)}/${String(r.name)}`), ['org/demo', 'location/aws-us-east-2', 'location/gcp-us-east1', 'gvc/demo', 'workload/echo']);
  t.has(records[0], { status: { endpointPrefix: 'demo' } });
  t.has(records[1], { provider: 'aws', region: 'us-east-2' });
  t.has(records[2], { provider: 'gcp', region: 'us-east1' });
  t.same(records[3], { kind: 'gvc', name: 'demo', spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2', '//location/gcp-us-east1'] } } });
  t.notOk('alias' in records[3]!, 'alias left to the config layer');
  t.has(records[4], {
    gvc: 'demo',
    tags: {},
    spec: {
      type: 'standard',
      containers: [{ name: 'echo', command: '/usr/bin/node', args: ['/x/echo.js'], ports: [{ number: 8080, protocol: 'http' }] }],
      defaultOptions: { autoscaling: { minScale: 1 }, debug: true, timeoutSeconds: 5 },
      firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0', '::/0'] } },
    },
  });
  t.not(demoRecords('a', 'b')[4], demoRecords('a', 'b')[4], 'fresh objects each call');
});

t.test('echoScriptPath points at the compiled echo app', async (t) => {
  const path = echoScriptPath();
  t.match(path, /[\\/]local[\\/]echo\.js$/);
  if (!existsSync(path)) {
    t.comment('dist/ not built; skipping the run of the compiled script');
    return;
  }
  const port = await allocatePort();
  const child = spawn(process.execPath, [path], {
    env: { ...process.env, PORT: String(port), HOST: '127.0.0.1', SVC_LOCATION: 'gcp-us-east1', SVC_REPLICA: 'echo-0' },
    stdio: 'ignore',
  });
  let exit: number | null | undefined;
  child.on('exit', (code) => (exit = code));
  t.teardown(() => {
    if (exit === undefined) child.kill('SIGKILL');
  });
  let body = '';
  const deadline = Date.now() + 20_000;
  while (body === '' && Date.now() < deadline) {
    body = await new Promise<string>((resolve) => {
      const req = request({ host: '127.0.0.1', port, path: '/hi', agent: false }, (res) => {
        let b = '';
        res.on('data', (c: Buffer) => (b += c.toString()));
        res.on('end', () => resolve(b));
      });
      req.on('error', () => setTimeout(() => resolve(''), 50));
      req.end();
    });
  }
  t.has(JSON.parse(body), { path: '/hi', location: 'gcp-us-east1', replica: 'echo-0' });
  child.kill('SIGTERM');
  await waitFor(() => exit !== undefined, 10_000, 'exit');
  t.equal(exit, 0, 'exits 0 on SIGTERM');
});
