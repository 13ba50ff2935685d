/**
 * `svcproxy explain` as a user runs it (`node bin/svcproxy.js`, the compiled program): text and JSON
 * output (the timeout with its source: the tour's with and without `svc/timeoutSecondsOverride`),
 * exit 0 when it routes and 1 when refused, validate's file:line errors for an invalid
 * configuration, usage errors (a URL without a scheme, a malformed -H, an unknown --location) with
 * exit 2, and no socket opened: the authorization and rate-limit services of the configuration point
 * at a listener that counts connections, and it counts none.
 */
import t from 'tap';
import net from 'node:net';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ALIAS, yamlDocuments, type TapLike } from '../helpers/harness.js';

const BIN = fileURLToPath(new URL('../../bin/svcproxy.js', import.meta.url));
const HOST = `api-${ALIAS}.app.localhost`;

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A listener that counts the connections it accepts. */
async function counter(t: TapLike): Promise<{ port: number; accepted: () => number; drain: () => Promise<void> }> {
  let accepted = 0;
  const waiters: (() => void)[] = [];
  const server = net.createServer((socket) => {
    accepted++;
    socket.destroy();
    waiters.shift()?.();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return {
    port: (server.address() as net.AddressInfo).port,
    accepted: () => accepted,
    // Connections are accepted in order: once our own is accepted, any made before it was too.
    drain: () => new Promise<void>((resolve) => {
      waiters.push(resolve);
      net.connect((server.address() as net.AddressInfo).port, '127.0.0.1').on('error', () => undefined);
    }),
  };
}

function config(servicePort: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'explain-'));
  writeFileSync(join(dir, 'records.yaml'), yamlDocuments([
    { kind: 'org', name: 'acme', status: { endpointPrefix: 'acme' } },
    { kind: 'location', name: 'aws-us-east-2', provider: 'aws', region: 'us-east-2' },
    { kind: 'location', name: 'gcp-us-east1', provider: 'gcp', region: 'us-east1' },
    { kind: 'gvc', name: 'shop', alias: ALIAS, spec: { staticPlacement: { locationLinks: ['//location/aws-us-east-2', '//location/gcp-us-east1'] } } },
    {
      kind: 'workload', name: 'api', gvc: 'shop',
      tags: {
        'svc/externalAuthAddress': '127.0.0.1', 'svc/externalAuthPort': String(servicePort), 'svc/externalAuthScheme': 'http',
        'svc/rateLimitAddress': '127.0.0.1', 'svc/rateLimitPort': String(servicePort), 'svc/rateLimitScheme': 'http', 'svc/rateLimitDescriptors': 'authority,method',
      },
      spec: {
        type: 'standard',
        containers: [{ name: 'app', image: 'app:1', ports: [{ number: 8080, protocol: 'http' }] }],
        firewallConfig: { external: { inboundAllowCIDR: ['0.0.0.0/0'] } },
        defaultOptions: { autoscaling: { minScale: 1, maxScale: 3 }, debug: true, timeoutSeconds: 9 },
        requestRetryPolicy: { attempts: 1, retryOn: ['5xx'] },
      },
    },
    {
      kind: 'deployment', name: 'api', gvc: 'shop',
      status: { locations: [
        { name: 'aws-us-east-2', replicas: [{ name: 'api-0', address: '127.0.0.1:7001' }] },
        { name: 'gcp-us-east1', replicas: [{ name: 'api-0', address: '127.0.0.1:7002' }] },
      ] },
    },
  ]));
  return dir;
}

t.test('text and JSON output, exit codes, and no connection to any service', async (t) => {
  const services = await counter(t);
  const dir = config(services.port);

  const text = await run(['explain', '--config', dir, `http://${HOST}/v1/items?x=1`, '-H', 'x-svc-debug: true', '--location', 'gcp-us-east1']);
  t.equal(text.code, 0, text.stderr);
  t.match(text.stdout, /^verdict: +routes to shop\/api in gcp-us-east1\n/, 'the verdict first: --location makes gcp 0 ms, aws is unknown');
  t.match(text.stdout, /host: +canonical name, external listener/);
  t.match(text.stdout, /\* gcp-us-east1 +yes +- +0 ms \(own\)/);
  t.match(text.stdout, /ext_authz grpc:\/\/127\.0\.0\.1:\d+ \(grpc, 1000 ms, fail-open\): checked/);
  t.match(text.stdout, new RegExp(`ratelimit http://127\\.0\\.0\\.1:\\d+ domain svc .*descriptor \\[authority=${HOST.replace(/\./g, '\\.')}, method=GET\\]`));
  t.match(text.stdout, /timeout: +9000 ms \(spec\.defaultOptions\.timeoutSeconds\)\n/, 'the timeout and where it comes from');
  t.match(text.stdout, /retries: +1 on 5xx; backoff below 25 ms/);
  t.match(text.stdout, /debug: +x-svc-debug: applies/);

  const json = await run(['explain', '-c', dir, `http://${HOST}/a/../b`, '-X', 'POST', '-o', 'json']);
  t.equal(json.code, 0, json.stderr);
  const e = JSON.parse(json.stdout) as Record<string, any>;
  t.same(Object.keys(e).sort(), ['debug', 'filters', 'firewall', 'host', 'location', 'notes', 'replica', 'replicas', 'request', 'retry', 'route', 'suspended', 'timeoutMs', 'timeoutSource', 'tracing', 'verdict'], 'the documented fields');
  t.same([e.timeoutMs, e.timeoutSource], [9000, 'spec.defaultOptions.timeoutSeconds']);
  t.same(e.verdict, { routes: true, reason: 'to shop/api in aws-us-east-2' }, 'without --location both latencies are unknown: the GVC\'s first location');
  t.equal(e.request.path, '/b');
  t.equal(e.route.upstreamPath, '/b');
  t.same(e.location.candidates.map((c: { name: string; latencySource: string }) => [c.name, c.latencySource]), [['aws-us-east-2', 'unknown'], ['gcp-us-east1', 'unknown']]);

  const refused = await run(['explain', '-c', dir, 'http://nobody.example.org/', '-o', 'json']);
  t.equal(refused.code, 1, 'refused: exit 1');
  t.same(JSON.parse(refused.stdout).verdict, { routes: false, status: 404, code: 'NO_ROUTE', reason: 'no host name of the configuration is "nobody.example.org"' });
  const refusedText = await run(['explain', '-c', dir, 'http://nobody.example.org/']);
  t.equal(refusedText.code, 1);
  t.match(refusedText.stdout, /^verdict: +404 NO_ROUTE: /);

  await services.drain();
  t.equal(services.accepted(), 1, 'the only connection the service port saw is the test\'s own');
});

t.test('the tour with svc/timeoutSecondsOverride: 5 added (README, step 3): the tag named as the timeout\'s source', async (t) => {
  const tour = readFileSync(fileURLToPath(new URL('../../docs/examples/tour.yaml', import.meta.url)), 'utf8');
  t.match(tour, /^tags: \{\}$/m, 'the tour ships with no tags');
  const dir = mkdtempSync(join(tmpdir(), 'explain-tour-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'tour.yaml');
  const url = 'http://echo-tour000000001.app.localhost:8080/hello';
  writeFileSync(file, tour);
  const before = await run(['explain', '--config', file, url]);
  t.equal(before.code, 0, before.stderr);
  t.match(before.stdout, /^timeout: +1000 ms \(spec\.defaultOptions\.timeoutSeconds\)$/m, 'as shipped: defaultOptions.timeoutSeconds');
  writeFileSync(file, tour.replace(/^tags: \{\}$/m, 'tags:\n  svc/timeoutSecondsOverride: 5'));
  const after = await run(['explain', '--config', file, url]);
  t.equal(after.code, 0, after.stderr);
  t.match(after.stdout, /^timeout: +5000 ms \(tag svc\/timeoutSecondsOverride\)$/m, 'with the tag: the tag');
});

t.test('an invalid configuration: validate\'s lines, exit 1', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'explain-bad-'));
  writeFileSync(join(dir, 'bad.yaml'), 'kind: workload\nname: api\ngvc: nowhere\nspec:\n  containers: 7\n');
  const r = await run(['explain', '-c', dir, `http://${HOST}/`]);
  const v = await run(['validate', '-c', dir]);
  t.equal(r.code, 1);
  t.equal(r.stdout, '');
  t.match(r.stderr, /bad\.yaml:\d+/, 'errors name the file and line');
  t.equal(r.stderr, v.stderr, 'the same lines as validate');
});

t.test('usage errors: exit 2 with one hint line', async (t) => {
  const dir = config(9);
  for (const [args, message] of [
    [[`${HOST}/x`], /is not an absolute URL: write it with its scheme/],
    [[`http://${HOST}/`, '-H', 'no-colon'], /-H "no-colon" is not 'name: value'/],
    [[`http://${HOST}/`, '-H', 'bad name: x'], /is not 'name: value'/],
    [[`http://${HOST}/`, '--from', 'somewhere'], /--from "somewhere" is not an IP address/],
    [[`http://${HOST}/`, '--location', 'mars'], /--location mars is not a location/],
    [[`http://${HOST}/`, 'http://second/'], /explain takes one URL/],
    [[], /explain needs the URL/],
    [[`http://${HOST}/`, '-o', 'yaml'], /--output must be text or json/],
  ] as const) {
    const r = await run(['explain', '-c', dir, ...args]);
    t.equal(r.code, 2, `${args.join(' ')}: exit 2`);
    const lines = r.stderr.split('\n');
    t.match(lines[0], message);
    t.equal(lines[1], 'run "svcproxy explain --help" for usage');
  }
});
