import t from 'tap';
import type { DomainPortModel } from '../../src/config/model.js';
import { matchDomainRoute } from '../../src/routing/domain-routes.js';
import { buildSnapshot } from '../helpers/snapshot.js';

const snapshot = buildSnapshot({
  gvcs: [{ name: 'g' }],
  workloads: [{ name: 'web' }, { name: 'api' }, { name: 'api-v1' }, { name: 'legacy' }, { name: 'img' }],
  domains: [
    {
      host: 'prefix.example.com',
      // Written in a scrambled order; the model (and the fixture) store longest prefix first.
      routes: [
        { prefix: '/', workload: 'web' },
        { prefix: '/api', workload: 'api' },
        { prefix: '/api/v1/', workload: 'api-v1', replacePrefix: '/' },
        { prefix: '/old/', workload: 'legacy', replacePrefix: '/new/' },
        { prefix: '/strip', workload: 'legacy', replacePrefix: '' },
        { prefix: '/img', workload: 'img', replacePrefix: '/' },
      ],
    },
    {
      host: 'regex.example.com',
      routes: [
        { regex: '/v[0-9]+/.*', workload: 'api' },
        { regex: '/a|/ab', workload: 'legacy', replacePrefix: '/fixed' },
        { prefix: '/api', workload: 'api-v1' },
        { prefix: '/', workload: 'web' },
        { regex: /^\/never$/, workload: 'img' },
      ],
    },
    { host: 'noroot.example.com', routes: [{ prefix: '/only', workload: 'web' }] },
  ],
});

const portOf = (host: string): DomainPortModel => snapshot.domains.get(host)!.ports[0]!;

t.test('prefix routes are stored longest first', async (t) => {
  t.same(
    portOf('prefix.example.com').routes.map((r) => r.prefix),
    ['/api/v1/', '/strip', '/old/', '/api', '/img', '/'],
  );
});

const table: [host: string, path: string, workload: string | undefined, upstreamPath?: string][] = [
  ['prefix.example.com', '/', 'web', '/'],
  ['prefix.example.com', '/index.html', 'web', '/index.html'],
  ['prefix.example.com', '/api', 'api', '/api'],
  ['prefix.example.com', '/api/users', 'api', '/api/users'],
  // Envoy's prefix is a plain string prefix: /api also matches /apix.
  ['prefix.example.com', '/apix', 'api', '/apix'],
  ['prefix.example.com', '/api/v1', 'api', '/api/v1'],
  ['prefix.example.com', '/api/v1/', 'api-v1', '/'],
  ['prefix.example.com', '/api/v1/users', 'api-v1', '/users'],
  ['prefix.example.com', '/old/page', 'legacy', '/new/page'],
  ['prefix.example.com', '/old/', 'legacy', '/new/'],
  ['prefix.example.com', '/strip/x', 'legacy', '/x'],
  ['prefix.example.com', '/strip', 'legacy', '/'],
  // `/img` → `/` never yields a doubled slash at the seam.
  ['prefix.example.com', '/img/a.png', 'img', '/a.png'],
  ['prefix.example.com', '/img', 'img', '/'],
  ['prefix.example.com', '/imgs/a.png', 'img', '/s/a.png'],
  ['prefix.example.com', '/API', 'web', '/API'],
  // regex routes are tried in written order and must match the whole path
  ['regex.example.com', '/v2/users', 'api', '/v2/users'],
  ['regex.example.com', '/v2', 'web', '/v2'],
  ['regex.example.com', '/xv2/users', 'web', '/xv2/users'],
  ['regex.example.com', '/ab', 'legacy', '/fixed'],
  ['regex.example.com', '/a', 'legacy', '/fixed'],
  ['regex.example.com', '/abc', 'web', '/abc'],
  ['regex.example.com', '/api/x', 'api-v1', '/api/x'],
  ['regex.example.com', '/never', 'web', '/never'],
  ['noroot.example.com', '/only/x', 'web', '/only/x'],
  ['noroot.example.com', '/other', undefined],
  ['noroot.example.com', '/', undefined],
];

t.test('matchDomainRoute', async (t) => {
  for (const [host, path, workload, upstreamPath] of table) {
    const m = matchDomainRoute(portOf(host), path);
    const got = m ? [m.route.workload, m.upstreamPath] : undefined;
    const want = workload === undefined ? undefined : [`g/${workload}`, upstreamPath];
    t.same(got, want, `${host}${path}`);
  }
});

t.test('a regex with g or y flags matches the same every time', async (t) => {
  const port: DomainPortModel = {
    number: 443,
    routes: [{ regex: /\/x.*/gy, workload: 'g/web', setHeaders: [] }],
  };
  for (let i = 0; i < 3; i++) t.equal(matchDomainRoute(port, '/x/y')?.upstreamPath, '/x/y');
  t.equal(matchDomainRoute(port, '/a/x'), undefined);
});

t.test('no routes, no match', async (t) => {
  t.equal(matchDomainRoute({ number: 443, routes: [] }, '/'), undefined);
});
