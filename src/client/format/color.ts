/**
 * ANSI colours for a terminal: JSON coloured as the platform CLI's json-colorizer colours it (keys
 * magenta, strings yellow, numbers green, booleans cyan, null white, punctuation grey) and YAML in
 * the same theme (keys magenta, plain and quoted scalars by their type, block scalars yellow). Only
 * escapes are added: the text without them is the uncoloured output, byte for byte. Pure.
 */

const ESC = '\u001b[';
const paint = (code: number) => (s: string): string => (s === '' ? s : `${ESC}${code}m${s}${ESC}39m`);
const gray = paint(90);
const magenta = paint(35);
const yellow = paint(33);
const green = paint(32);
const cyan = paint(36);
const white = paint(37);
const red = paint(31);

/** Tokens of JSON text as JSON.stringify writes it (strings, numbers, literals, punctuation, space). */
const JSON_TOKEN = /("(?:[^"\\]|\\.)*")(\s*:)?|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(true|false)|(null)|([{}[\],])|(\s+)/g;

export function colorJson(text: string): string {
  return text.replace(JSON_TOKEN, (all, str: string | undefined, colon: string | undefined, num, bool, nul, punct, space) => {
    if (str !== undefined) return colon !== undefined ? magenta(str) + gray(colon) : yellow(str);
    if (num !== undefined) return green(all);
    if (bool !== undefined) return cyan(all);
    if (nul !== undefined) return white(all);
    if (punct !== undefined || space !== undefined) return gray(all);
    return all;
  });
}

/** A YAML scalar coloured by what it reads as. */
function scalar(text: string): string {
  const t = text.trim();
  if (t === '') return text;
  const lead = text.slice(0, text.indexOf(t));
  const trail = text.slice(lead.length + t.length);
  let painted: string;
  if (/^(?:null|~)$/.test(t)) painted = white(t);
  else if (/^(?:true|false)$/.test(t)) painted = cyan(t);
  else if (/^[-+]?(?:\d[\d_]*(?:\.\d*)?(?:[eE][-+]?\d+)?|\.inf|\.nan)$/i.test(t)) painted = green(t);
  else if (/^[|>][-+]?\d*$/.test(t)) painted = gray(t);
  else if (t === '{}' || t === '[]') painted = gray(t);
  else painted = yellow(t);
  return lead + painted + trail;
}

/**
 * YAML as js-yaml dumps it: `key: value`, `- item`, block scalars (`|-`, `>`) whose lines are more
 * indented than their key, and flow-free values; other text is left as it is.
 */
export function colorYaml(text: string): string {
  const lines = text.split('\n');
  let blockIndent = -1;
  return lines.map((line) => {
    const indent = line.length - line.trimStart().length;
    if (blockIndent >= 0) {
      if (line.trim() === '' || indent > blockIndent) return yellow(line);
      blockIndent = -1;
    }
    const m = /^(\s*)((?:- )*)(?:("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s'"#][^:#]*?)(:)(?= |$))?(.*)$/.exec(line);
    if (!m) return line;
    const [, space, dashes, key, colon, rest] = m as unknown as [string, string, string, string | undefined, string | undefined, string];
    if (/^\s*[|>][-+]?\d*\s*$/.test(rest)) blockIndent = space.length;
    const head = space + (dashes ? gray(dashes) : '') + (key !== undefined ? magenta(key) + gray(colon!) : '');
    return head + scalar(rest);
  }).join('\n');
}

/** A note for stderr (the "more records" line): yellow, as the platform CLI prints it. */
export function colorNote(text: string): string {
  return yellow(text);
}

/** An error for stderr. */
export function colorError(text: string): string {
  return red(text);
}
