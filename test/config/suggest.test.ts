/**
 * "Did you mean" (src/config/suggest.ts): the distance against a plain recursive definition of the
 * optimal-string-alignment distance on generated words; every known vendor tag, kind and closed
 * member list with one edit suggests the name it came from; words far from every name suggest none.
 */
import t, { type Test } from 'tap';
import { defaultSettings } from '../../src/config/index.js';
import { PLATFORM_KINDS, READ_KINDS } from '../../src/config/records.js';
import { toSourced } from '../../src/config/snapshot.js';
import { closest, editDistance } from '../../src/config/suggest.js';
import { TAG_RULES } from '../../src/config/tags.js';
import { validate } from '../../src/config/validate.js';
import { baseRecords, find, setPath } from '../fixtures/config/base.js';
import { prng, testSeed } from '../helpers/seed.js';

/** The definition, written as plainly as it reads (memoized recursion). */
function reference(a: string, b: string): number {
  const memo = new Map<string, number>();
  const d = (i: number, j: number): number => {
    if (i === 0) return j;
    if (j === 0) return i;
    const key = `${i},${j}`;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let best = Math.min(d(i - 1, j) + 1, d(i, j - 1) + 1, d(i - 1, j - 1) + (a[i - 1] === b[j - 1] ? 0 : 1));
    if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d(i - 2, j - 2) + 1);
    memo.set(key, best);
    return best;
  };
  return d(a.length, b.length);
}

const seed = testSeed('SUGGEST_SEED', 28);
t.comment(`seed ${seed} (SUGGEST_SEED=${seed} replays it)`);
const random = prng(seed);
const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
const LETTERS = 'abcdeAB_-';

t.test('the distance is the optimal-string-alignment distance', async (t) => {
  for (let i = 0; i < 3000; i++) {
    const word = (): string => Array.from({ length: Math.floor(random() * 8) }, () => pick([...LETTERS])).join('');
    const a = word();
    const b = random() < 0.5 ? word() : oneEdit(a);
    const want = reference(a, b);
    if (editDistance(a, b) !== want) t.fail(`distance(${a}, ${b})`, { seed, want, got: editDistance(a, b) });
    const limit = Math.floor(random() * 4);
    const bounded = editDistance(a, b, limit);
    if (want <= limit ? bounded !== want : bounded !== limit + 1) t.fail(`distance(${a}, ${b}) within ${limit}`, { seed, want, got: bounded });
  }
  t.pass('3000 pairs');
});

/** `word` with one edit: a letter inserted, deleted, replaced, or two neighbours swapped. */
function oneEdit(word: string): string {
  const at = Math.floor(random() * (word.length + 1));
  const letter = pick([...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789']);
  switch (word.length < 2 ? Math.floor(random() * 2) : Math.floor(random() * 4)) {
    case 0: return word.slice(0, at) + letter + word.slice(at);
    case 1: return word.length === 0 ? letter : word.slice(0, Math.min(at, word.length - 1)) + word.slice(Math.min(at, word.length - 1) + 1);
    case 2: { const i = Math.min(at, word.length - 1); return word.slice(0, i) + letter + word.slice(i + 1); }
    default: { const i = Math.min(at, word.length - 2); return word.slice(0, i) + word[i + 1] + word[i] + word.slice(i + 2); }
  }
}

/**
 * Every name of `names` (at least `min` letters long), with every kind of single edit, suggests itself
 * (among the names as close: `aVent` is one edit from `agent` and from `event`, and both are offered).
 */
function suggestsItself(t: Test, what: string, names: readonly string[], min: number): void {
  let tried = 0;
  for (const name of names) {
    if (name.length < min) continue;
    for (let i = 0; i < 60; i++) {
      const typo = oneEdit(name);
      if (names.includes(typo)) continue; // an edit that lands on another name is no typo
      tried++;
      const found = closest(typo, names);
      if (!found.includes(name)) t.fail(`${what}: ${typo} (from ${name})`, { seed, found });
    }
  }
  t.ok(tried > names.length * 30, `${what}: ${tried} typos`);
}

t.test('a known name with one edit suggests that name', async (t) => {
  suggestsItself(t, 'vendor tags', Object.keys(TAG_RULES), 0);
  suggestsItself(t, 'kinds', [...READ_KINDS, ...PLATFORM_KINDS.filter((k) => !(READ_KINDS as readonly string[]).includes(k))], 4);
  suggestsItself(t, 'members', ['locationLink', 'routingTier', 'latencyOffsetMs', 'latencyToleranceMs'], 0);
});

t.test('far from every name: no suggestion', async (t) => {
  const tags = Object.keys(TAG_RULES);
  for (const word of ['fancy', 'newThing', 'somethingNew', 'team', 'x', 'owner']) t.same(closest(word, tags), [], word);
  t.same(closest('frobnicator', [...PLATFORM_KINDS]), []);
  // Short words are close to everything: no guess under three letters.
  t.same(closest('ab', ['ac', 'abc']), []);
});

t.test('Envoy and snake-case spellings find the tag', async (t) => {
  const tags = Object.keys(TAG_RULES);
  t.same(closest('ext_authz_address', tags), ['externalAuthAddress']);
  t.same(closest('rate_limit_port', tags), ['rateLimitPort']);
  t.same(closest('TIMEOUTSECONDSOVERRIDE', tags), ['timeoutSecondsOverride']);
  t.same(closest('timout', tags), ['timeoutSecondsOverride'], 'the start of a longer name');
});

t.test('every known tag with one edit warns "did you mean" that tag, with the vendor prefix', async (t) => {
  for (const vendor of ['svc', 'cpln']) {
    for (const tag of Object.keys(TAG_RULES)) {
      const typo = oneEdit(tag);
      if (typo in TAG_RULES) continue;
      const records = baseRecords();
      setPath(find(records, 'workload/spare'), 'tags', { [`${vendor}/${typo}`]: 'x' });
      const { warnings } = validate(toSourced(records), { ...defaultSettings, vendor });
      const want = `workload/spare: tags.${vendor}/${typo}: unknown ${vendor}/ tag (did you mean ${vendor}/${tag}? ignored)`;
      if (!warnings.includes(want)) t.fail(want, { seed, warnings });
    }
  }
  t.pass('every tag');
});
