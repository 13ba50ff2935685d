/**
 * What the client prints for an answer, in each `--output` format, byte for byte what the platform's
 * CLI prints for the same answer (its format/format.js): `json` and `yaml` with members in its order
 * (order.ts), `*-slim` without the members the platform sets, `names` one name a line, `text` a table
 * per kind (table.ts, models.ts) or, for a kind without one, the JSON as received. A string answer is
 * printed as it is, nothing (`null`) as an empty line. The caller writes the result and one newline,
 * as the platform CLI's console.log does. `-o names` of an object without `name` throws NamesError.
 * `tf` and `crd` are rendered by the platform's servers (exporters.ts), not here.
 */
import { keyOrder, sortedCopy } from './order.js';
import { colorJson, colorYaml } from './color.js';
import { renderTable } from './table.js';
import { hintedModelOf, modelOf } from './models.js';
import { jsYaml } from './yaml.js';

export const OUTPUTS = ['text', 'json', 'yaml', 'json-slim', 'yaml-slim', 'tf', 'crd', 'names'] as const;
export type Output = (typeof OUTPUTS)[number];
export const TIMESTAMPS = ['iso', 'local', 'age'] as const;
export type Timestamps = (typeof TIMESTAMPS)[number];

export interface FormatOptions {
  readonly output: Output;
  /** ANSI colours (a terminal that wants them): JSON and YAML coloured, tables drawn with box lines. */
  readonly color: boolean;
  readonly ts: Timestamps;
  /** The vendor's prefix of tags (`cpln`, `svc`): `<vendor>/deployTimestamp` is left out of slim output. */
  readonly vendor: string;
  /** The clock of `--ts age` (ms since the epoch). */
  readonly now?: () => number;
  /** The table to print the value as (the platform CLI's `_hints.kind`: `flattenedPermissions`). */
  readonly kind?: string;
}

/** `-o names` of something that has no `name`. */
export class NamesError extends Error {
  constructor() {
    super('ERROR: Unable to format to "names", one or more objects are missing the "name" property.');
  }
}

/** The members the platform sets, which a `*-slim` output leaves out (so the output can be applied again). */
const SET_BY_PLATFORM = ['id', 'version', 'created', 'lastModified', 'links', 'status', 'alias', 'origin', 'repository', 'tag', 'manifest', 'digest'];

/** The answer without the members the platform sets (a list: of each item; shallow, as the platform CLI's). */
export function slim(value: unknown, vendor: string): unknown {
  if (Array.isArray(value)) return value.map((v) => slim(v, vendor));
  if (value === null || typeof value !== 'object') return value;
  const obj = { ...(value as Record<string, unknown>) };
  if (obj.kind === 'list') {
    delete obj.links;
    if (Array.isArray(obj.items)) obj.items = obj.items.map((v) => slim(v, vendor));
    return obj;
  }
  for (const key of SET_BY_PLATFORM) delete obj[key];
  if (obj.tags !== null && typeof obj.tags === 'object' && !Array.isArray(obj.tags)) {
    const tags = { ...(obj.tags as Record<string, unknown>) };
    delete tags['cpln/deployTimestamp'];
    delete tags[`${vendor}/deployTimestamp`];
    obj.tags = tags;
  }
  return obj;
}

export function toJson(value: unknown, color: boolean): string {
  const text = JSON.stringify(sortedCopy(value), undefined, '  ') ?? '';
  return color ? colorJson(text) : text;
}

export function toYaml(value: unknown, color: boolean): string {
  const text = jsYaml().dump(value, { indent: 2, noRefs: true, skipInvalid: true, sortKeys: keyOrder });
  return color ? colorYaml(text) : text;
}

/** The objects an answer holds: a list's items, an array's elements, else the answer itself. */
export function objectsOf(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  const v = value as { kind?: unknown; items?: unknown } | null;
  if (v !== null && typeof v === 'object' && v.kind === 'list' && Array.isArray(v.items)) return v.items;
  return [value];
}

export function toNames(value: unknown): string {
  const names = objectsOf(value).map((o) => {
    if (o === null || typeof o !== 'object' || !Object.prototype.hasOwnProperty.call(o, 'name')) throw new NamesError();
    return (o as { name: unknown }).name;
  });
  return names.join('\n').trim();
}

/** The table of an answer, or its JSON (as received, two spaces) when its kind has no table. */
export function toText(value: unknown, options: FormatOptions): string {
  const v = value as { kind?: unknown; itemKind?: unknown; items?: unknown; query?: { kind?: unknown } } | null;
  let kind: unknown = v?.kind;
  let rows: unknown = value;
  if (kind === 'list') {
    kind = v!.itemKind;
    rows = v!.items;
  } else if (kind === 'queryresult') {
    kind = v!.query?.kind;
    rows = v!.items;
  }
  if (options.kind !== undefined) kind = options.kind;
  const model = typeof kind === 'string' ? (options.kind !== undefined ? hintedModelOf(kind) : modelOf(kind)) : undefined;
  if (model) {
    const items = Array.isArray(rows) ? rows : [rows];
    const now = new Date((options.now ?? Date.now)());
    return renderTable([model.columns.map((c) => c.name), ...items.map((item) => model.row(item, { ts: options.ts, now }))], {
      border: options.color ? 'norc' : 'ramac',
      hideEmpty: model.columns.map((c) => c.hideWhenEmpty === true),
    });
  }
  const json = `${JSON.stringify(value, undefined, 2)}\n`;
  return options.color ? colorJson(json) : json;
}

/** The text printed for an answer in `options.output` (`tf` and `crd` excepted: exporters.ts). */
export function format(value: unknown, options: FormatOptions): string {
  if (typeof value === 'string') return value;
  if (value === null || value === undefined) return '';
  switch (options.output) {
    case 'yaml-slim':
      return toYaml(slim(value, options.vendor), options.color);
    case 'yaml':
      return toYaml(value, options.color);
    case 'json-slim':
      return toJson(slim(value, options.vendor), options.color);
    case 'json':
      return toJson(value, options.color);
    case 'names':
      return toNames(value);
    default:
      return toText(value, options);
  }
}
