/**
 * The cells of the text tables, as the platform CLI's format/models.js makes them: a description cut
 * to 40 symbols with `...` (lodash's truncate, which counts an emoji, a flag or a letter with its
 * combining marks as one symbol), a map as sorted `key=JSON` lines each cut to 80, a timestamp as ISO
 * 8601, the local time or an age (`3 hours ago`, `Now`), a link's last segments. Pure; a missing or
 * odd member gives an empty cell, never an exception.
 */

// lodash's symbol expressions (its reHasUnicode and reUnicode), so a cut falls where lodash's does.
const COMBO = '[\\u0300-\\u036f\\ufe20-\\ufe2f\\u20d0-\\u20ff]';
const FITZ = '\\ud83c[\\udffb-\\udfff]';
const MODIFIER = `(?:${COMBO}|${FITZ})`;
const NON_ASTRAL = '[^\\ud800-\\udfff]';
const REGIONAL = '(?:\\ud83c[\\udde6-\\uddff]){2}';
const SURR_PAIR = '[\\ud800-\\udbff][\\udc00-\\udfff]';
const OPT_VAR = '[\\ufe0e\\ufe0f]?';
const OPT_JOIN = `(?:\\u200d(?:${[NON_ASTRAL, REGIONAL, SURR_PAIR].join('|')})${OPT_VAR}${MODIFIER}?)*`;
const SYMBOL = `(?:${[`${NON_ASTRAL}${COMBO}?`, COMBO, REGIONAL, SURR_PAIR, '[\\ud800-\\udfff]'].join('|')})`;
const UNICODE_SYMBOL = new RegExp(`${FITZ}(?=${FITZ})|${SYMBOL}${OPT_VAR}${MODIFIER}?${OPT_JOIN}`, 'g');
const HAS_UNICODE = /[\u200d\ud800-\udfff\u0300-\u036f\ufe20-\ufe2f\u20d0-\u20ff\ufe0e\ufe0f]/;

/** `text` cut to `length` symbols, `...` included, as lodash's `_.truncate(text, {length, omission: '...'})`. */
export function truncate(text: string, length: number): string {
  const symbols = HAS_UNICODE.test(text) ? (text.match(UNICODE_SYMBOL) ?? []) : undefined;
  const size = symbols ? symbols.length : text.length;
  if (length >= size) return text;
  const end = length - 3;
  if (end < 1) return '...';
  return `${symbols ? symbols.slice(0, end).join('') : text.slice(0, end)}...`;
}

/** The string lodash makes of a value before cutting it. */
function toText(value: unknown): string {
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return value.map((v) => (v === null || v === undefined ? '' : toText(v))).join(',');
  if (typeof value === 'number' && Object.is(value, -0)) return '-0';
  return String(value);
}

export type Item = Record<string, unknown>;

export function member(obj: unknown, key: string): unknown {
  return obj !== null && typeof obj === 'object' ? (obj as Item)[key] : undefined;
}

/** `a.b.c` of an object (undefined when a step is missing). */
export function at(obj: unknown, path: string): unknown {
  return path.split('.').reduce<unknown>((o, k) => member(o, k), obj);
}

/** A member cut to `max` symbols; empty when it is missing, empty, 0 or false. */
export function cut(obj: unknown, prop: string, max: number): string {
  const value = member(obj, prop);
  return value ? truncate(toText(value), max) : '';
}

/** A map as `key=JSON` lines, keys sorted, each line cut to 80. */
export function keyValues(obj: unknown, prop: string): string {
  const map = member(obj, prop);
  if (!map || typeof map !== 'object') return '';
  return Object.keys(map).sort().map((k) => truncate(`${k}=${JSON.stringify((map as Item)[k])}`, 80)).join('\n');
}

/** The href of the link with this `rel`. */
export function linkOf(obj: unknown, rel: string): string | undefined {
  const links = member(obj, 'links');
  if (!Array.isArray(links)) return undefined;
  for (const l of links) if (member(l, 'rel') == rel) return member(l, 'href') as string | undefined; // eslint-disable-line eqeqeq
  return undefined;
}

/** The GVC a record belongs to: the fifth segment of its `gvc` link (`/org/O/gvc/G`). */
export function gvcOf(obj: unknown): string | undefined {
  const link = linkOf(obj, 'gvc');
  return typeof link === 'string' ? link.split('/')[4] : undefined;
}

const UNITS: readonly (readonly [string, number])[] = [
  ['year', 31_557_600_000],
  ['month', 2_629_800_000],
  ['week', 604_800_000],
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
];

/** A duration in its largest whole unit from years down to minutes: `1 hour`, `3 weeks`, `0 minutes`. */
export function humanDuration(ms: number): string {
  // Floored to whole minutes first, then measured without its sign (a time ahead reads as an age too).
  const minutes = Math.abs(Math.floor(ms / 60_000) * 60_000);
  for (const [name, size] of UNITS) {
    if (minutes >= size) {
      const n = Math.floor(minutes / size);
      return `${n} ${name}${n === 1 ? '' : 's'}`;
    }
  }
  return '0 minutes';
}

export interface CellContext {
  readonly ts: 'iso' | 'local' | 'age';
  readonly now: Date;
}

/** A timestamp member as `--ts` asks; an unreadable one as it is. */
export function timestamp(obj: unknown, prop: string, ctx: CellContext): unknown {
  const value = member(obj, prop);
  if (!value) return '';
  const date = new Date(value as string);
  if (Number.isNaN(date.getTime())) return value;
  if (ctx.ts === 'age') {
    const age = humanDuration(ctx.now.getTime() - date.getTime());
    return age === '0 minutes' ? 'Now' : `${age} ago`;
  }
  return ctx.ts === 'local' ? date.toLocaleString() : date.toISOString();
}
