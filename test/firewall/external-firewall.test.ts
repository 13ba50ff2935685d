/** The external firewall compiled from `firewallConfig.external`, as a table. */
import t from 'tap';
import { compileExternalFirewall, externalFirewall } from '../../src/firewall/external.js';

const check = (external: Record<string, unknown> | undefined) => compileExternalFirewall({ firewallConfig: external === undefined ? undefined : { external } });

t.test('no filter when everything is admitted', async (t) => {
  t.equal(check({ inboundAllowCIDR: ['0.0.0.0/0', '::/0'] }).check, undefined);
  t.ok(check({ inboundAllowCIDR: ['0.0.0.0/0'] }).check, 'IPv6 is not admitted: a filter');
  t.ok(check({ inboundAllowCIDR: ['0.0.0.0/0', '::/0'], inboundBlockedCIDR: ['10.0.0.0/8'] }).check);
  t.ok(check(undefined).check, 'no config: deny everything');
});

t.test('decisions', async (t) => {
  const filter = (name: string, rule: Record<string, unknown>) => ({ http: { inboundHeaderFilter: [{ key: name, ...rule }] } });
  const cases: [external: Record<string, unknown> | undefined, address: string, headers: string[], expect: string | undefined][] = [
    [undefined, '203.0.113.1', [], 'not_allowed'],
    [{}, '203.0.113.1', [], 'not_allowed'],
    [{ inboundAllowCIDR: [] }, '203.0.113.1', [], 'not_allowed'],
    [{ inboundAllowCIDR: ['203.0.113.0/24'] }, '203.0.113.1', [], undefined],
    [{ inboundAllowCIDR: ['203.0.113.0/24'] }, '::ffff:203.0.113.1', [], undefined],
    [{ inboundAllowCIDR: ['203.0.113.0/24'] }, '198.51.100.1', [], 'not_allowed'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], inboundBlockedCIDR: ['203.0.113.7'] }, '203.0.113.7', [], 'blocked_cidr'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], inboundBlockedCIDR: ['203.0.113.7'] }, '203.0.113.8', [], undefined],
    [{ inboundAllowCIDR: ['0.0.0.0/0', '::/0'], inboundBlockedCIDR: ['2001:db8::/32'] }, '2001:db8::5', [], 'blocked_cidr'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'] }, 'garbage', [], 'not_allowed'],
    [{ inboundAllowCIDR: ['0.0.0.0/0', '::/0'], inboundBlockedCIDR: ['10.0.0.0/8'] }, 'garbage', [], undefined],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { allowedValues: ['a+'] }) }, '1.1.1.1', ['x-key', 'aaa'], undefined],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { allowedValues: ['a+'] }) }, '1.1.1.1', ['X-KEY', 'aab'], 'header_filter'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { allowedValues: ['a+'] }) }, '1.1.1.1', [], 'header_filter'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { allowedValues: ['a+'] }) }, '1.1.1.1', ['x-key', 'a', 'x-key', 'b'], 'header_filter'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { blockedValues: ['b.*'] }) }, '1.1.1.1', ['x-key', 'a', 'x-key', 'bad'], 'header_filter'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { blockedValues: ['b.*'] }) }, '1.1.1.1', ['x-key', 'ab'], undefined],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { blockedValues: ['b.*'] }) }, '1.1.1.1', [], undefined],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { allowedValues: ['.*'], blockedValues: ['evil'] }) }, '1.1.1.1', ['x-key', 'evil'], 'header_filter'],
    [{ inboundAllowCIDR: ['0.0.0.0/0'], ...filter('X-Key', { allowedValues: [] }) }, '1.1.1.1', ['x-key', 'x'], 'header_filter'],
    [{ inboundAllowCIDR: ['10.0.0.0/8'], ...filter('X-Key', { blockedValues: ['x'] }) }, '1.1.1.1', [], 'not_allowed'],
  ];
  for (const [external, address, headers, expect] of cases) {
    const compiled = check(external);
    t.equal(compiled.check?.(address, headers), expect, `${JSON.stringify(external)} ${address} ${JSON.stringify(headers)}`);
  }
});

t.test('settings that cannot compile fail closed', async (t) => {
  const badBlock = check({ inboundAllowCIDR: ['0.0.0.0/0', '::/0'], inboundBlockedCIDR: ['not-a-cidr'] });
  t.equal(badBlock.check?.('1.1.1.1', []), 'invalid_config');
  t.equal(badBlock.problems.length, 1);
  const badRegex = check({ inboundAllowCIDR: ['0.0.0.0/0', '::/0'], http: { inboundHeaderFilter: [{ key: 'x', blockedValues: ['('] }] } });
  t.equal(badRegex.check?.('1.1.1.1', []), 'invalid_config');
  const badAllow = check({ inboundAllowCIDR: ['nope', '10.0.0.0/8'] });
  t.equal(badAllow.check?.('10.0.0.1', []), undefined, 'a bad allow entry only admits less');
  t.equal(badAllow.problems.length, 1);
});

t.test('compiled once per workload model', async (t) => {
  const model = { firewallConfig: { external: { inboundAllowCIDR: ['10.0.0.0/8'] } } } as never;
  t.equal(externalFirewall(model), externalFirewall(model));
});

t.test('workloads with the same firewall share one compiled firewall; a different one gets its own', async (t) => {
  const model = (allow: string[]) => ({ firewallConfig: { external: { inboundAllowCIDR: allow } } }) as never;
  const a = externalFirewall(model(['10.0.0.0/8', '::/0']));
  t.equal(externalFirewall(model(['10.0.0.0/8', '::/0'])), a, 'same configuration: the same compiled firewall');
  const b = externalFirewall(model(['10.0.0.0/16']));
  t.not(b, a);
  t.equal(b.check?.('10.1.0.1', []), 'not_allowed', 'and it checks its own ranges');
  t.equal(a.check?.('10.1.0.1', []), undefined);
});

t.test('validation rejects header filters that could not compile, at load', async (t) => {
  const { validate } = await import('../../src/config/validate.js');
  const { toSourced } = await import('../../src/config/snapshot.js');
  const { defaultSettings } = await import('../../src/config/index.js');
  const { baseRecords, find } = await import('../fixtures/config/base.js');
  const run = (filter: unknown) => {
    const records = baseRecords();
    const spare = find(records, 'workload/spare') as { spec: { firewallConfig: { external: Record<string, unknown> } } };
    spare.spec.firewallConfig.external.http = { inboundHeaderFilter: filter };
    return validate(toSourced(records), defaultSettings);
  };
  t.same(run([{ key: 'user-agent', allowedValues: ['.*Mozilla.*'], blockedValues: ['bot'] }]).errors, []);
  const errors = run([{ key: 'x', blockedValues: ['('] }, { allowedValues: ['a'] }, { key: 'y', other: 1 }]).errors.join('\n');
  t.match(errors, /inboundHeaderFilter\[0\]\.blockedValues\[0\]: does not compile/);
  t.match(errors, /inboundHeaderFilter\[1\]\.key: is required/);
  t.match(errors, /inboundHeaderFilter\[2\]\.other: unknown member/);
});
