/**
 * Reads the user documentation (README.md and docs/*.md) the way test/docs/commands.test.ts checks it:
 * every `svcproxy` command line in a fenced block (written as `svcproxy …`, `npx svcproxy …` or
 * `node bin/svcproxy.js …`, with `\` continuations, leading `VAR=value` assignments, a trailing
 * `&`, `# comments`, and in a pipeline), whether its block is marked
 * `<!-- not-run: reason -->`, every `--flag` written in the prose (outside fenced blocks), and the
 * files a page shows (a fenced block whose first line is `# NAME.yaml`). Pure text work: no file is
 * run here.
 */
import { readFileSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface DocCommand {
  /** `docs/mesh.md:84`: where the block's line starts. */
  readonly where: string;
  /** The info string of its fenced block (`sh`, `text`, ``). */
  readonly lang: string;
  /** Why it is not run, from `<!-- not-run: reason -->` just before its block. */
  readonly notRun?: string;
  /** `VAR=value` assignments written before the command. */
  readonly env: Record<string, string>;
  /** The words after the program: command, flags, values. */
  readonly args: string[];
  /** The line as written (continuations joined). */
  readonly text: string;
}

export function docFiles(): string[] {
  const docs = readdirSync(path.join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).sort().map((f) => `docs/${f}`);
  return ['README.md', ...docs];
}

/** Shell words, with '…' and "…" quoting; enough for documentation, not a shell. */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word: string | undefined;
  let quote: string | undefined;
  for (const ch of line) {
    if (quote) {
      if (ch === quote) quote = undefined;
      else word += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      word ??= '';
    } else if (/\s/.test(ch)) {
      if (word !== undefined) words.push(word);
      word = undefined;
    } else if (ch === '#' && word === undefined) {
      break; // a comment
    } else {
      word = (word ?? '') + ch;
    }
  }
  if (word !== undefined) words.push(word);
  return words;
}

const PROGRAMS: readonly (readonly string[])[] = [['svcproxy'], ['npx', 'svcproxy'], ['node', 'bin/svcproxy.js']];

/** The commands of a pipeline: the line split at each ` | ` outside quotes (a `# comment` ends it). */
export function pipeSegments(line: string): string[] {
  let quote: string | undefined;
  const segments: string[] = [];
  let start = 0;
  let end = line.length;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i]!;
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
    } else if (ch === '#' && (i === 0 || /\s/.test(line[i - 1]!))) {
      end = i;
      break;
    } else if (ch === '|' && /\s/.test(line[i - 1] ?? '') && /\s/.test(line[i + 1] ?? '')) {
      // A pipe as written between commands (` | `): a `|` inside a word is a synopsis's alternatives.
      segments.push(line.slice(start, i));
      start = i + 1;
    }
  }
  segments.push(line.slice(start, end));
  return segments;
}

/** The svcproxy command of one (joined) line (of any command of a pipeline), or undefined when the line runs something else. */
export function commandOf(line: string): { env: Record<string, string>; args: string[] } | undefined {
  for (const segment of pipeSegments(line.replace(/^\$\s+/, ''))) {
    const command = segmentCommand(segment);
    if (command) return command;
  }
  return undefined;
}

function segmentCommand(segment: string): { env: Record<string, string>; args: string[] } | undefined {
  let words = shellWords(segment);
  const env: Record<string, string> = {};
  while (words.length > 0 && /^[A-Z_][A-Z0-9_]*=/.test(words[0]!)) {
    const [name, ...value] = words[0]!.split('=');
    env[name!] = value.join('=');
    words = words.slice(1);
  }
  if (words.at(-1) === '&') words = words.slice(0, -1);
  for (const program of PROGRAMS) {
    if (program.every((p, i) => words[i] === p)) return { env, args: words.slice(program.length) };
  }
  return undefined;
}

/** Every svcproxy command line in the fenced blocks of `file` (relative to the repository). */
export function commandsIn(file: string): DocCommand[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const found: DocCommand[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^\s*```(\S*)\s*$/.exec(lines[i]!);
    if (!fence) continue;
    const lang = fence[1]!;
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const notRun = before >= 0 ? /^<!--\s*not-run:\s*(.*?)\s*-->$/.exec(lines[before]!.trim())?.[1] : undefined;
    let j = i + 1;
    while (j < lines.length && !/^\s*```\s*$/.test(lines[j]!)) {
      const start = j;
      let text = lines[j]!.trim();
      while (text.endsWith('\\') && j + 1 < lines.length) text = `${text.slice(0, -1).trim()} ${lines[++j]!.trim()}`;
      const command = commandOf(text);
      if (command) found.push({ where: `${file}:${start + 1}`, lang, ...(notRun !== undefined ? { notRun } : {}), ...command, text });
      j++;
    }
    i = j;
  }
  return found;
}

/** Every `--flag` written outside fenced blocks (prose and inline code), with where it is. */
export function proseFlags(file: string): { flag: string; where: string }[] {
  const lines = readFileSync(path.join(ROOT, file), 'utf8').split('\n');
  const found: { flag: string; where: string }[] = [];
  let fenced = false;
  lines.forEach((line, n) => {
    if (/^\s*```/.test(line)) fenced = !fenced;
    else if (!fenced) for (const m of line.matchAll(/(?<![\w-])--([a-z][a-z0-9-]*)/g)) found.push({ flag: m[1]!, where: `${file}:${n + 1}` });
  });
  return found;
}

/** A synopsis line's words as a parser sees them: `[--gvc G]` is `--gvc G`, `PATH...` is `PATH`. */
export function synopsisArgs(args: readonly string[]): string[] {
  return args.map((a) => a.replace(/[[\]]/g, '').replace(/\.\.\.$/, '')).filter((a) => a !== '' && a !== '...');
}

/** The files a page shows: fenced blocks whose first line is a comment naming them (`# staging.yaml`). */
export function filesIn(file: string): { name: string; content: string }[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  return [...text.matchAll(/```(?:yaml|json)\n# ([\w.-]+\.(?:ya?ml|json))\n([\s\S]*?)```/g)].map((m) => ({ name: m[1]!, content: m[2]! }));
}
