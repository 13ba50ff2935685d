/**
 * Who a platform API request acts as (src/local/api/auth.ts) and the token it checks
 * (src/local/env.ts): the Authorization forms, the caller × token matrix, the permissions, and
 * tokens mutated at random (seeded; `API_TOKEN_SEED` replays) never matching.
 */
import t from 'tap';
import { authenticate, mayDo, tokenOf, type Action, type Principal } from '../../src/local/api/auth.js';
import { ApiError } from '../../src/local/api/errors.js';
import { isLocalToken, localToken } from '../../src/local/env.js';
import { prng, testSeed } from '../helpers/seed.js';

const SECRET = Buffer.alloc(32, 7);
const WORKLOADS = ['g1/a', 'g1/b', 'g2/a'];
const tokenA = localToken(SECRET, 'g1/a');

function codeOf(fn: () => unknown): string | undefined {
  try {
    fn();
    return undefined;
  } catch (e) {
    if (!(e instanceof ApiError)) throw e;
    return `${e.status} ${e.code}`;
  }
}

t.test('the Authorization forms', async (t) => {
  const cases: [string | undefined, string | undefined | 'refused'][] = [
    [undefined, undefined],
    ['', undefined],
    ['   ', undefined],
    ['Bearer abc', 'abc'],
    ['bearer abc', 'abc'],
    ['BEARER   abc  ', 'abc'],
    ['abc', 'abc'],
    ['local.x-y_z', 'local.x-y_z'],
    ['Bearer', 'Bearer'], // one word: taken as a raw token (and then matches no workload)
    ['Bearer ', 'Bearer'], // trimmed first, as Node's parser does
    ['Basic abc', 'refused'],
    ['Token abc', 'refused'],
  ];
  for (const [given, want] of cases) {
    const got = codeOf(() => tokenOf(given)) === undefined ? tokenOf(given) : 'refused';
    t.equal(got, want, JSON.stringify(given));
  }
});

t.test('the caller × token matrix', async (t) => {
  const as = (authorization: string | undefined, caller: string | undefined): Principal | string =>
    codeOf(() => authenticate(authorization, caller === undefined ? undefined : { workload: caller }, SECRET, WORKLOADS)) ??
    authenticate(authorization, caller === undefined ? undefined : { workload: caller }, SECRET, WORKLOADS);
  t.same(as(`Bearer ${tokenA}`, 'g1/a'), { kind: 'workload', workload: 'g1/a' }, 'own workload');
  t.same(as(tokenA, 'g1/a'), { kind: 'workload', workload: 'g1/a' }, 'raw token');
  t.equal(as(`Bearer ${tokenA}`, 'g1/b'), '403 token_outside_workload', 'another workload of the GVC');
  t.equal(as(`Bearer ${tokenA}`, 'g2/a'), '403 token_outside_workload', 'the same name in another GVC');
  t.equal(as(`Bearer ${tokenA}`, undefined), '403 token_outside_workload', 'outside every workload');
  t.same(as(undefined, 'g1/a'), { kind: 'anonymous' });
  t.same(as(undefined, undefined), { kind: 'anonymous' });
  t.equal(as('Bearer local.nope', 'g1/a'), '403 invalid_token');
  t.equal(as(`Bearer ${localToken(Buffer.alloc(32, 8), 'g1/a')}`, 'g1/a'), '403 invalid_token', 'a token of another run');
  t.equal(as(`Bearer ${localToken(SECRET, 'g9/gone')}`, undefined), '403 invalid_token', 'a workload no longer configured');
  t.equal(as(`Basic ${tokenA}`, 'g1/a'), '403 invalid_token');
});

t.test('the permissions', async (t) => {
  const records = new Map<string, Record<string, unknown>>([
    ['g1/a', { kind: 'workload', name: 'a', spec: { identityLink: '//gvc/g1/identity/a' } }],
    ['g1/b', { kind: 'workload', name: 'b', spec: {} }],
  ]);
  const may = (p: Principal, action: Action): string => codeOf(() => mayDo(p, action, (k) => records.get(k))) ?? 'ok';
  const anonymous: Principal = { kind: 'anonymous' };
  const withId: Principal = { kind: 'workload', workload: 'g1/a' };
  const without: Principal = { kind: 'workload', workload: 'g1/b' };
  t.same(
    [may(anonymous, 'read-org'), may(anonymous, 'read'), may(anonymous, 'write')],
    ['ok', '403 permission_denied', '403 permission_denied'],
  );
  t.same([may(without, 'read-org'), may(without, 'read'), may(without, 'write')], ['ok', '403 permission_denied', '403 permission_denied']);
  t.same([may(withId, 'read-org'), may(withId, 'read'), may(withId, 'write')], ['ok', 'ok', 'ok']);
  // A quota's max and an increase request's decision are the operator's (the platform's staff decide them).
  t.same([may(anonymous, 'operate'), may(without, 'operate'), may(withId, 'operate'), may({ kind: 'operator' }, 'operate')],
    ['403 permission_denied', '403 permission_denied', '403 permission_denied', 'ok']);
  // A replica's environment holds its SVC_TOKEN: the operator key's only, even for a workload with an identity.
  t.same([may(anonymous, 'connect'), may(without, 'connect'), may(withId, 'connect'), may({ kind: 'operator' }, 'connect')],
    ['403 permission_denied', '403 permission_denied', '403 permission_denied', 'ok']);
});

const SEED = testSeed('API_TOKEN_SEED', 20261127);

t.test(`mutated tokens never match (seed ${SEED})`, async (t) => {
  const random = prng(SEED);
  const pick = (s: string): number => Math.floor(random() * s.length);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.';
  let checked = 0;
  for (let i = 0; i < 2000; i++) {
    const workload = WORKLOADS[Math.floor(random() * WORKLOADS.length)]!;
    const good = localToken(SECRET, workload);
    let bad: string;
    const at = pick(good);
    switch (Math.floor(random() * 4)) {
      case 0: {
        const c = alphabet[Math.floor(random() * alphabet.length)]!;
        bad = good.slice(0, at) + (c === good[at] ? (c === 'A' ? 'B' : 'A') : c) + good.slice(at + 1);
        break;
      }
      case 1: bad = good.slice(0, at); break;
      case 2: bad = good + alphabet[Math.floor(random() * alphabet.length)]; break;
      default: bad = good.slice(0, at) + good.slice(at + 1);
    }
    if (isLocalToken(SECRET, workload, bad)) t.fail(`seed ${SEED}: ${JSON.stringify(bad)} matched ${workload}`);
    t.equal(codeOf(() => authenticate(`Bearer ${bad}`, { workload }, SECRET, WORKLOADS)), '403 invalid_token');
    checked++;
    // And the good token of one workload matches no other.
    for (const other of WORKLOADS) if (other !== workload && isLocalToken(SECRET, other, good)) t.fail(`seed ${SEED}: ${workload}'s token matched ${other}`);
  }
  t.equal(checked, 2000);
  t.ok(isLocalToken(SECRET, 'g1/a', tokenA));
});
