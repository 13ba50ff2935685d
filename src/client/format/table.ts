/**
 * Text tables as the platform's CLI draws them (the `table` package with its settings: no left
 * padding, one space right, a rule under the top, the header and the last row, `ramac` ASCII
 * borders, or `norc` box lines on a colour terminal): each column as wide as its widest line in
 * terminal columns (string-width, so wide and combining characters line up), cells of several lines
 * make rows of several lines, left-aligned. A column marked `hideEmpty` whose cells are all empty is
 * left out. Control characters are shown escaped (`\u001b`) instead of reaching the terminal (the
 * platform CLI refuses most of them and passes escapes through). A line is never broken: the table
 * package breaks one only when it measures the line's graphemes wider than string-width measures the
 * line, which well-formed text never is (a zero-width joiner between characters that do not join is).
 * Pure; never throws.
 */
import { createRequire } from 'node:module';

type Border = {
  readonly top: readonly [string, string, string, string];
  readonly join: readonly [string, string, string, string];
  readonly bottom: readonly [string, string, string, string];
  readonly body: readonly [string, string, string];
};

/** [left, body, join, right] of each rule, [left, join, right] of a row. */
const BORDERS: Record<'ramac' | 'norc', Border> = {
  ramac: { top: ['+', '-', '+', '+'], join: ['|', '-', '|', '|'], bottom: ['+', '-', '+', '+'], body: ['|', '|', '|'] },
  norc: { top: ['┌', '─', '┬', '┐'], join: ['├', '─', '┼', '┤'], bottom: ['└', '─', '┴', '┘'], body: ['│', '│', '│'] },
};

export interface TableOptions {
  readonly border: 'ramac' | 'norc';
  /** Per column: leave it out when every cell under the header is empty. */
  readonly hideEmpty?: readonly boolean[];
}

let stringWidthFn: ((s: string) => number) | undefined;

/** Terminal columns of one line (string-width, loaded the first time a line is not plain ASCII). */
export function lineWidth(line: string): number {
  if (/^[\u0020-\u007e]*$/.test(line)) return line.length;
  stringWidthFn ??= createRequire(import.meta.url)('string-width') as (s: string) => number;
  return stringWidthFn(line);
}

const CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/g;

/** A cell's text: CRLF as one line break, control characters escaped. */
export function cellText(value: unknown): string {
  const text = value === undefined || value === null ? '' : String(value);
  return text.replace(/\r\n/g, '\n').replace(CONTROL, (c) => (c === '\t' ? '\\t' : c === '\r' ? '\\r' : `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`));
}

/** `rows[0]` is the header; every row has the header's number of cells. */
export function renderTable(rows: readonly (readonly unknown[])[], options: TableOptions): string {
  const texts = rows.map((row) => row.map(cellText));
  const header = texts[0] ?? [];
  const keep = header.map((_, c) => !(options.hideEmpty?.[c] && texts.slice(1).every((row) => row[c] === '')));
  const table = texts.map((row) => row.filter((_, c) => keep[c]));
  const lines = table.map((row) => row.map((cell) => cell.split('\n')));
  const widths = (table[0] ?? []).map((_, c) => Math.max(0, ...lines.map((row) => Math.max(...row[c]!.map(lineWidth)))));
  const b = BORDERS[options.border];
  const rule = ([left, body, join, right]: readonly [string, string, string, string]): string =>
    `${left}${widths.map((w) => body.repeat(w + 1)).join(join)}${right}\n`;
  let out = rule(b.top);
  lines.forEach((row, r) => {
    const height = Math.max(1, ...row.map((cell) => cell.length));
    for (let l = 0; l < height; l++) {
      const cells = row.map((cell, c) => {
        const line = cell[l] ?? '';
        return `${line}${' '.repeat(widths[c]! - lineWidth(line))} `;
      });
      out += `${b.body[0]}${cells.join(b.body[1])}${b.body[2]}\n`;
    }
    if (r === lines.length - 1) out += rule(b.bottom);
    else if (r === 0) out += rule(b.join);
  });
  return out;
}
