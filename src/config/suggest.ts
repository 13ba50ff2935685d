/**
 * "Did you mean": the known names closest to a misspelled one (a vendor tag, a kind, a member of a
 * closed object). Distance is Damerau–Levenshtein (optimal string alignment: insert, delete,
 * substitute, swap two neighbours) on a normal form that ignores case, `_` and `-` (so
 * `svc/external_auth_port` and `svc/ExternalAuthPort` find `svc/externalAuthPort`) and reads Envoy's
 * `ext_authz` as `externalAuth`. A name is suggested when it is within a distance that grows with the
 * word's length (none under 3 letters: every short word is close to every other), or when it starts
 * with the word give or take one edit (`timout` → `timeoutSecondsOverride`). Runs only on names
 * already found unknown, never for valid input.
 */

/** Optimal-string-alignment distance; stops early and answers `limit + 1` once past `limit`. */
export function editDistance(a: string, b: string, limit = Infinity): number {
  if (Math.abs(a.length - b.length) > limit) return limit + 1;
  let prev2: number[] = [];
  let prev: number[] = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    let best = i;
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let d = Math.min(prev[j]! + 1, row[j - 1]! + 1, prev[j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d = Math.min(d, prev2[j - 2]! + 1);
      row.push(d);
      if (d < best) best = d;
    }
    if (best > limit) return limit + 1;
    prev2 = prev;
    prev = row;
  }
  return Math.min(prev[b.length]!, limit + 1);
}

/** The form names are compared in. */
export function normalName(name: string): string {
  return name.toLowerCase().replace(/[-_]/g, '').replace(/^extauthz/, 'externalauth');
}

/** How far a word of this length may be from a name still suggested for it. */
export function allowedDistance(length: number): number {
  if (length < 3) return 0;
  if (length < 6) return 1;
  if (length < 12) return 2;
  return 3;
}

/**
 * The candidates closest to `word` (ties all given, in `candidates` order, at most three), or none
 * when nothing is close enough. `word` itself, if among the candidates, is not suggested.
 */
export function closest(word: string, candidates: readonly string[]): string[] {
  const w = normalName(word);
  const limit = allowedDistance(w.length);
  let best = Infinity;
  let found: string[] = [];
  for (const candidate of candidates) {
    if (candidate === word) continue;
    const c = normalName(candidate);
    let d = editDistance(w, c, limit);
    // A word that is the start of a longer name, one edit allowed: `timout` for `timeoutSecondsOverride`.
    if (d > limit && w.length >= 5 && c.length > w.length) {
      const head = Math.min(editDistance(w, c.slice(0, w.length), 1), editDistance(w, c.slice(0, w.length + 1), 1));
      if (head <= 1) d = limit + head / 2 + 0.25; // behind every whole-name match of the same word
    }
    if (d >= limit + 1) continue;
    if (d < best) {
      best = d;
      found = [candidate];
    } else if (d === best) {
      found.push(candidate);
    }
  }
  return found.slice(0, 3);
}

/** ` (did you mean "a"?)`-style text for a message, or `''`; `quote` writes each name. */
export function didYouMean(word: string, candidates: readonly string[], quote: (name: string) => string = JSON.stringify): string {
  const found = closest(word, candidates);
  if (found.length === 0) return '';
  return `did you mean ${found.map(quote).join(' or ')}?`;
}
