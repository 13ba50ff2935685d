import t from 'tap';
import { rolloutLimits, rolloutStep } from '../../src/local/rollout.js';

t.test('rolloutLimits: numbers, percentages (surge up, unavailable down), defaults, never stuck', async (t) => {
  const cases: [string, Parameters<typeof rolloutLimits>[0], number, { surge: number; unavailable: number }][] = [
    ['defaults of 4 (25%/25%)', undefined, 4, { surge: 1, unavailable: 1 }],
    ['defaults of 2: surge rounds up, unavailable down', undefined, 2, { surge: 1, unavailable: 0 }],
    ['numbers', { maxSurgeReplicas: 2, maxUnavailableReplicas: 1 }, 4, { surge: 2, unavailable: 1 }],
    ['100% surge (the platform\'s recommendation)', { maxSurgeReplicas: '100%', maxUnavailableReplicas: 0 }, 3, { surge: 3, unavailable: 0 }],
    ['50% of 4 (the spec\'s example)', { maxSurgeReplicas: '50%', maxUnavailableReplicas: 0 }, 4, { surge: 2, unavailable: 0 }],
    ['both 0: one surges', { maxSurgeReplicas: 0, maxUnavailableReplicas: 0 }, 2, { surge: 1, unavailable: 0 }],
    ['unavailable never above the count', { maxSurgeReplicas: 0, maxUnavailableReplicas: 9 }, 2, { surge: 0, unavailable: 2 }],
    ['unreadable (a hand-built model; compiled ones never are): the default', { maxSurgeReplicas: 'lots' as `${number}%`, maxUnavailableReplicas: -1 }, 4, { surge: 1, unavailable: 0 }],
  ];
  for (const [name, rollout, desired, want] of cases) t.same(rolloutLimits(rollout, desired), want, name);
});

t.test('rolloutStep: surge first, then in place while enough stay available, else wait', async (t) => {
  const l = { surge: 1, unavailable: 0 };
  t.same(rolloutStep(l, 2, 2, 2, true), { surge: true, replaceInPlace: false }, 'room to surge');
  t.same(rolloutStep(l, 2, 3, 2, true), { surge: false, replaceInPlace: false }, 'surging already, none may go: wait');
  t.same(rolloutStep({ surge: 0, unavailable: 1 }, 2, 2, 2, true), { surge: false, replaceInPlace: true }, 'one may be unavailable');
  t.same(rolloutStep({ surge: 0, unavailable: 1 }, 2, 2, 1, true), { surge: false, replaceInPlace: false }, 'one already is');
  t.same(rolloutStep({ surge: 0, unavailable: 0 }, 2, 2, 1, false), { surge: false, replaceInPlace: true }, 'an old replica that is not ready costs nothing to replace');
});
