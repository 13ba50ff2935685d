/**
 * The pure parts of `--workers` (src/cluster), as tables: parsing the flag, wording a worker's
 * bind error as a single process does, merging the workers' replica tables; and the follower
 * configuration store a worker holds (src/config/store.ts `follow` / `adopt`).
 */
import t from 'tap';
import { pino } from 'pino';
import { MAX_WORKERS, mergeReplicas, parseWorkers, singleProcessMessage } from '../../src/cluster/index.js';
import { ConfigError, ConfigStore } from '../../src/config/index.js';
import { defaultSettings } from '../../src/config/index.js';
import { records } from '../helpers/harness.js';

t.test('parseWorkers', async (t) => {
  const cores = (): number => 6;
  const cases: [string | undefined, number | 'error'][] = [
    [undefined, 1],
    ['1', 1],
    ['2', 2],
    [' 4 ', 4],
    ['auto', 6],
    ['AUTO', 6],
    [String(MAX_WORKERS), MAX_WORKERS],
    ['0', 'error'],
    [String(MAX_WORKERS + 1), 'error'],
    ['1.5', 'error'],
    ['-2', 'error'],
    ['two', 'error'],
    ['', 'error'],
  ];
  for (const [text, want] of cases) {
    const got = parseWorkers(text, cores);
    if (want === 'error') t.match(got, { error: /--workers must be a whole number from 1 to 256, or auto/ }, `${JSON.stringify(text)} is refused`);
    else t.equal(got, want, `${JSON.stringify(text)} → ${want}`);
  }
  t.equal(parseWorkers('auto', () => 1), 1, 'auto on one core: one process');
  t.equal(parseWorkers('auto', () => 1000), MAX_WORKERS, 'auto is capped');
});

t.test('singleProcessMessage: a bind error from the cluster reads as a single process listen error', async (t) => {
  const bind = (code: string, errno: number, address: string, port?: number): Error =>
    Object.assign(new Error(`bind ${code} ${address}${port ? `:${port}` : ''}`), { code, errno, syscall: 'bind', address, ...(port !== undefined ? { port } : {}) });
  const cases: [Error, string][] = [
    [bind('EADDRINUSE', -98, '127.0.0.1', 8080), 'listen EADDRINUSE: address already in use 127.0.0.1:8080'],
    [bind('EACCES', -13, '0.0.0.0', 80), 'listen EACCES: permission denied 0.0.0.0:80'],
    [bind('EADDRNOTAVAIL', -99, '10.9.9.9', 0), 'listen EADDRNOTAVAIL: address not available 10.9.9.9'],
    [Object.assign(new Error('ENOENT: no such file or directory, open \'cert.pem\''), { code: 'ENOENT', errno: -2, syscall: 'open', path: 'cert.pem' }), 'ENOENT: no such file or directory, open \'cert.pem\''],
    [new Error('--listen-tls 127.0.0.1:8443 needs --tls-cert and --tls-key'), '--listen-tls 127.0.0.1:8443 needs --tls-cert and --tls-key'],
  ];
  for (const [err, want] of cases) t.equal(singleProcessMessage(err), want, want);
});

t.test('mergeReplicas: ready only where every worker sees it ready, outstanding summed', async (t) => {
  const r = (name: string, ready: boolean, outstanding: number, location = 'aws-us-east-2') => ({ workload: 'shop/api', location, name, ready, outstanding });
  t.same(mergeReplicas([]), []);
  t.same(mergeReplicas([[r('api-0', true, 1)]]), [r('api-0', true, 1)], 'one worker: its view');
  t.same(
    mergeReplicas([
      [r('api-0', true, 1), r('api-1', true, 0)],
      [r('api-0', false, 2), r('api-1', true, 3), r('api-0', true, 0, 'gcp-us-east1')],
    ]),
    [r('api-0', false, 3), r('api-1', true, 3), r('api-0', true, 0, 'gcp-us-east1')],
    'two workers',
  );
});

t.test('a follower store compiles what the primary sent, at its generation, and logs nothing', async (t) => {
  const lines: string[] = [];
  const logger = pino({ level: 'info' }, { write: (s: string) => void lines.push(s) });
  const first = records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] } });
  const store = ConfigStore.follow({ records: first, generation: 7, settings: defaultSettings, logger });
  t.equal(store.current.generation, 7);
  t.ok(store.current.workloads.has('shop/api'));
  const changes: number[] = [];
  store.on('change', (s) => changes.push(s.generation));
  const second = records({ replicas: { 'aws-us-east-2': ['127.0.0.1:9'] }, workload: 'web' });
  t.equal(store.adopt(second, 8), true, 'a newer generation is adopted');
  t.ok(store.current.workloads.has('shop/web'));
  t.equal(store.adopt(first, 8), false, 'the same generation again is ignored');
  t.equal(store.adopt(first, 5), false, 'an older one too');
  t.same(changes, [8]);
  t.same(lines, [], 'nothing logged: the primary reported the load');
  const invalid = [...first, { kind: 'workload', name: 'x'.repeat(65), gvc: 'shop', spec: { type: 'standard', containers: [] } }];
  t.throws(() => ConfigStore.follow({ records: invalid, generation: 1, settings: defaultSettings, logger }), ConfigError, 'records that do not compile throw');
  t.equal(store.adopt(invalid, 9), false, 'and are not adopted');
  t.equal(store.current.generation, 8);
});
