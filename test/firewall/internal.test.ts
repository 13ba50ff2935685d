/**
 * The internal firewall as a table: each `inboundAllowType` against callers from the same workload,
 * the same GVC, another GVC, a listed workload, and a caller with no workload identity.
 */
import t from 'tap';
import { buildSnapshot, workloadOf } from '../helpers/snapshot.js';
import { internalFirewall } from '../../src/firewall/internal.js';

const snapshot = buildSnapshot({
  gvcs: [{ name: 'shop', locations: ['aws-us-east-2'] }, { name: 'ops', locations: ['aws-us-east-2'] }],
  workloads: [
    { name: 'none', gvc: 'shop' },
    { name: 'gvc', gvc: 'shop', firewallConfig: { internal: { inboundAllowType: 'same-gvc' } } },
    { name: 'org', gvc: 'shop', firewallConfig: { internal: { inboundAllowType: 'same-org' } } },
    {
      name: 'list',
      gvc: 'shop',
      firewallConfig: { internal: { inboundAllowType: 'workload-list', inboundAllowWorkload: ['//gvc/ops/workload/cron', '//workload/web'] } },
    },
    { name: 'web', gvc: 'shop' },
    { name: 'cron', gvc: 'ops' },
  ],
} as never);

const callers = {
  self: (w: string) => ({ workload: `shop/${w}`, gvc: 'shop' }),
  web: { workload: 'shop/web', gvc: 'shop' },
  cron: { workload: 'ops/cron', gvc: 'ops' },
  anonymous: {},
};

const cases: [target: string, caller: keyof typeof callers, allowed: boolean][] = [
  ['none', 'self', true],
  ['none', 'web', false],
  ['none', 'cron', false],
  ['none', 'anonymous', false],
  ['gvc', 'web', true],
  ['gvc', 'cron', false],
  ['gvc', 'anonymous', false],
  ['org', 'web', true],
  ['org', 'cron', true],
  ['org', 'anonymous', true],
  ['list', 'web', true],
  ['list', 'cron', true],
  ['list', 'self', true],
  ['list', 'anonymous', false],
];

for (const [target, callerName, allowed] of cases) {
  const workload = workloadOf(snapshot, `shop/${target}`);
  const c = callers[callerName];
  const caller = typeof c === 'function' ? c(target) : c;
  t.equal(internalFirewall(workload)(caller), allowed, `${target} ← ${callerName}: ${allowed ? 'allowed' : 'blocked'}`);
}
