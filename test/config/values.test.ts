import t from 'tap';
import { parseDuration, parseLink } from '../../src/config/index.js';
import { isAddressOrCidr, isHostName, parseHostPort } from '../../src/config/values.js';
import { jsonErrorOffset } from '../../src/config/json-error.js';

t.test('parseDuration: Go syntax and bare seconds, in milliseconds', async (t) => {
  const cases: [string | number, number | undefined][] = [
    ['200ms', 200], ['1s', 1000], ['1.5s', 1500], ['1m', 60_000], ['1h2m', 3_720_000], ['1m30.5s', 90_500],
    ['500us', 0.5], ['250µs', 0.25], ['1000000ns', 1], ['2', 2000], ['0.25', 250], [3, 3000], ['0', 0], ['-1s', -1000],
    ['.5s', 500], ['', undefined], ['1 s', undefined], ['1sec', undefined], ['s', undefined], ['1d', undefined], ['ms', undefined], ['1.5.s', undefined],
  ];
  for (const [input, ms] of cases) t.equal(parseDuration(input), ms, JSON.stringify(input));
});

t.test('parseLink: the accepted forms', async (t) => {
  const cases: [string, ReturnType<typeof parseLink>][] = [
    ['/org/acme/gvc/demo/workload/api', { org: 'acme', gvc: 'demo', kind: 'workload', name: 'api' }],
    ['//gvc/demo/workload/api', { gvc: 'demo', kind: 'workload', name: 'api' }],
    ['//workload/api', { kind: 'workload', name: 'api' }],
    ['//location/aws-us-west-2', { kind: 'location', name: 'aws-us-west-2' }],
    ['/org/acme/location/aws-us-west-2', { org: 'acme', kind: 'location', name: 'aws-us-west-2' }],
    ['/org/acme/gvc/demo', { org: 'acme', kind: 'gvc', name: 'demo' }],
    ['//gvc/demo', { kind: 'gvc', name: 'demo' }],
    ['/org/acme', { kind: 'org', name: 'acme' }],
    ['/org/acme/workload/api', undefined],
    ['//location/a/b', undefined],
    ['//location/', undefined],
    ['workload/api', undefined],
    ['/gvc/demo', undefined],
    ['//gvc/demo/location/x', undefined],
    ['', undefined],
  ];
  for (const [input, link] of cases) t.same(parseLink(input), link, input);
});

t.test('addresses and host names', async (t) => {
  for (const ok of ['10.0.0.0/8', '0.0.0.0/0', '1.2.3.4', '::/0', '2001:db8::/32', '::1', 'fe80::1/128']) t.ok(isAddressOrCidr(ok), ok);
  for (const bad of ['10.0.0.0/33', '::/129', '10.0.0/8', '1.2.3.4/', '1.2.3.4/x', 'host', '01.2.3.4']) t.notOk(isAddressOrCidr(bad), bad);
  for (const ok of ['example.com', 'Example.COM.', 'a', 'x-1.y']) t.ok(isHostName(ok), ok);
  for (const bad of ['-a.com', 'a_b.com', 'a..b', '', '.']) t.notOk(isHostName(bad), bad);
  t.same(parseHostPort('127.0.0.1:80'), { host: '127.0.0.1', port: 80 });
  t.same(parseHostPort('[::1]:9000'), { host: '::1', port: 9000 });
  t.same(parseHostPort('app.local:65535'), { host: 'app.local', port: 65535 });
  for (const bad of ['::1:80', 'host', 'host:0', 'host:65536', '[host]:80', 'http://h:1']) t.equal(parseHostPort(bad), undefined, bad);
});

t.test('jsonErrorOffset points at the first bad character', async (t) => {
  const cases: [string, number][] = [['{"a": 1}', -1], ['[1, 2,]', 6], ['{"a": 1,}', 8], ['{"a" 1}', 5], ['[1] x', 4], ['{"a": tru}', 6], ['[', 1], ['"a\nb"', 0]];
  for (const [text, offset] of cases) t.equal(jsonErrorOffset(text), offset, JSON.stringify(text));
});
