/**
 * The client's pure parts, as tables: the descriptor list of `svc/rateLimitDescriptors` and the
 * entries it builds, the draft-03 x-ratelimit-* headers from descriptor statuses, the headers a
 * service may add, and a workload's compiled policy (tags and defaults).
 */
import t from 'tap';
import { buildEntries, parseDescriptors, type DescriptorInput } from '../../src/ratelimit/descriptors.js';
import { headerPairs, xRateLimitHeaders } from '../../src/ratelimit/headers.js';
import { rateLimitConfig } from '../../src/ratelimit/filter.js';
import type { DescriptorStatus } from '../../src/ratelimit/proto.js';
import type { WorkloadModel } from '../../src/config/model.js';

const input: DescriptorInput = {
  host: 'api.example.com:8443',
  path: '/v1/items',
  method: 'POST',
  clientAddress: '203.0.113.9',
  headers: { authorization: 'Bearer abc', 'x-tenant': 'acme', 'x-empty': '', cookie: ['a=1', 'b=2'] as unknown as string },
};

t.test('descriptor lists → entries, keyed by the name as written', async (t) => {
  const cases: [string, [string, string][] | undefined][] = [
    ['authority', [['authority', 'api.example.com:8443']]],
    ['host', [['host', 'api.example.com:8443']]],
    ['authorization', [['authorization', 'Bearer abc']]],
    ['path', [['path', '/v1/items']]],
    ['method', [['method', 'POST']]],
    ['remote_address', [['remote_address', '203.0.113.9']]],
    ['header:X-Tenant', [['x-tenant', 'acme']]],
    ['remote_address, path ,method', [['remote_address', '203.0.113.9'], ['path', '/v1/items'], ['method', 'POST']]],
    ['header:x-tenant,authority', [['x-tenant', 'acme'], ['authority', 'api.example.com:8443']]],
    ['header:x-missing', undefined],
    ['authority,header:x-missing', undefined],
    ['header:x-empty', undefined],
  ];
  for (const [list, want] of cases) {
    const parsed = parseDescriptors(list);
    if ('error' in parsed) {
      t.fail(`${list}: ${parsed.error}`);
      continue;
    }
    const got = buildEntries(parsed.sources, input);
    t.same(got?.map((e) => [e.key, e.value]), want, list);
  }
  t.same(buildEntries((parseDescriptors('authorization') as { sources: never[] }).sources, { ...input, headers: {} }), undefined, 'no authorization header: not checked');
  t.same(buildEntries((parseDescriptors('authority') as { sources: never[] }).sources, { ...input, host: '' }), undefined, 'no Host: not checked');
  t.same(parseDescriptors('header:'), { error: 'unknown descriptor "header:"' });
  t.same(parseDescriptors('source_cluster'), { error: 'unknown descriptor "source_cluster"' });
  t.same(parseDescriptors(' , '), { error: 'no descriptor entries' });
});

t.test('x-ratelimit-* (draft 03) from the status with the least remaining', async (t) => {
  const status = (n: number, unit: string, remaining: number, reset: string | number, name?: string): DescriptorStatus => ({
    code: 'OK',
    current_limit: { requests_per_unit: n, unit: unit as 'SECOND', ...(name ? { name } : {}) },
    limit_remaining: remaining,
    duration_until_reset: { seconds: reset, nanos: 0 },
  });
  const cases: [string, DescriptorStatus[], Record<string, string> | undefined][] = [
    ['one limit', [status(10, 'MINUTE', 7, '42')], { 'x-ratelimit-limit': '10, 10;w=60', 'x-ratelimit-remaining': '7', 'x-ratelimit-reset': '42' }],
    ['least remaining wins; every limit in the policy', [status(100, 'HOUR', 50, 3000), status(5, 'SECOND', 1, 1, 'per-ip')],
      { 'x-ratelimit-limit': '5, 100;w=3600, 5;w=1;name="per-ip"', 'x-ratelimit-remaining': '1', 'x-ratelimit-reset': '1' }],
    ['statuses without a limit are skipped', [{ code: 'OK' }, status(3, 'DAY', 0, '86400')], { 'x-ratelimit-limit': '3, 3;w=86400', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '86400' }],
    ['no limit at all: no headers', [{ code: 'OK' }], undefined],
    ['no reset given: 0', [{ code: 'OVER_LIMIT', current_limit: { requests_per_unit: 1, unit: 'SECOND' }, limit_remaining: 0 }], { 'x-ratelimit-limit': '1, 1;w=1', 'x-ratelimit-remaining': '0', 'x-ratelimit-reset': '0' }],
  ];
  for (const [name, statuses, want] of cases) t.same(xRateLimitHeaders(statuses), want, name);
});

t.test('headers a service adds: lower-cased, unsafe ones dropped', async (t) => {
  t.same(headerPairs([
    { key: 'X-Quota', value: 'gold' },
    { key: 'x-raw', value: '', raw_value: Buffer.from('bytes') },
    { key: 'Connection', value: 'close' },
    { key: ':status', value: '200' },
    { key: 'x-bad', value: 'a\r\nb' },
    { key: '', value: 'x' },
  ]), [['x-quota', 'gold'], ['x-raw', 'bytes']]);
});

function workload(tags: Record<string, string>, sidecarEnvoy?: Record<string, unknown>): WorkloadModel {
  return { key: 'shop/api', name: 'api', gvc: 'shop', tags, ...(sidecarEnvoy ? { sidecarEnvoy } : {}) } as unknown as WorkloadModel;
}

t.test('a workload policy from tags, with the defaults', async (t) => {
  t.equal(rateLimitConfig(workload({}), undefined, 'svc'), undefined, 'no address: no filter');
  t.equal(rateLimitConfig(workload({ 'svc/rateLimitPort': '8081' }), undefined, 'svc'), undefined);
  const d = rateLimitConfig(workload({ 'svc/rateLimitAddress': 'rls.example.com' }), undefined, 'svc')!;
  t.same(
    { target: d.target, domain: d.domain, descriptors: d.descriptors, failureAllow: d.failureAllow, timeoutMs: d.timeoutMs, excluded: d.excluded },
    { target: { host: 'rls.example.com', port: 443, tls: true }, domain: 'svc', descriptors: [{ kind: 'authority', key: 'authority' }], failureAllow: false, timeoutMs: 1000, excluded: undefined },
  );
  const c = rateLimitConfig(workload({
    'cpln/rateLimitAddress': '10.0.0.5', 'cpln/rateLimitPort': '8081', 'cpln/rateLimitScheme': 'http', 'cpln/rateLimitDomain': 'edge',
    'cpln/rateLimitDescriptors': 'remote_address,header:X-Key', 'cpln/rateLimitFailureAllow': 'true',
  }), undefined, 'cpln')!;
  t.same(
    { target: c.target, domain: c.domain, descriptors: c.descriptors, failureAllow: c.failureAllow },
    { target: { host: '10.0.0.5', port: 8081, tls: false }, domain: 'edge', descriptors: [{ kind: 'remote_address', key: 'remote_address' }, { kind: 'header', key: 'x-key', header: 'x-key' }], failureAllow: true },
  );
  t.equal(rateLimitConfig(workload({ 'cpln/rateLimitAddress': 'x' }), undefined, 'cpln')!.domain, 'cpln', 'the default domain is the vendor name');
  t.equal(rateLimitConfig(workload({ 'svc/rateLimitAddress': 'x' }), undefined, 'cpln'), undefined, 'other vendors\' tags do nothing');
  const ex = rateLimitConfig(
    workload({ 'svc/rateLimitAddress': 'x' }, { excludedRateLimit: [{ match: { prefix: '/health' } }] }),
    { sidecarEnvoy: { excludedRateLimit: [{ port: 8443 }] } } as never,
    'svc',
  )!;
  const at = (path: string, listenerPort = 80): boolean => ex.excluded!({ path, query: '', header: () => undefined, listenerPort, targetPort: 8080 });
  t.same([at('/health/live'), at('/api'), at('/api', 8443)], [true, false, true], "the GVC's and the workload's exclusions both apply");
});
