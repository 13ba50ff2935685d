/**
 * The client's command line (DESIGN §14): the shared options of the spec's `<cli>` (profile, org,
 * gvc, output, color, ts, max, token, endpoint, insecure, verbose, debug, help, and `--vendor`, which
 * names whose profiles and variables are read), each command's own (`rest`: `--header`, `--file`),
 * and which verbs take which. Parsed with node:util's parseArgs, strict: an unknown option, a missing
 * or bad value, a second path or an option the verb does not take is a `UsageError` (exit 2 at the
 * entry, with a hint to the command's help). `--no-color` and `--color=false` turn colour off.
 * Options may come before or after the command's words, as with the platform CLI.
 */
import { parseArgs } from 'node:util';
import { closest } from '../config/suggest.js';
import { OUTPUTS, TIMESTAMPS, type Output, type Timestamps } from './format/index.js';

export const CLIENT_OPTIONS = {
  profile: { type: 'string' },
  org: { type: 'string' },
  gvc: { type: 'string' },
  output: { type: 'string', short: 'o' },
  color: { type: 'boolean' },
  ts: { type: 'string' },
  max: { type: 'string' },
  token: { type: 'string' },
  endpoint: { type: 'string' },
  insecure: { type: 'boolean', short: 'k' },
  vendor: { type: 'string' },
  verbose: { type: 'boolean', short: 'v' },
  debug: { type: 'boolean', short: 'd' },
  help: { type: 'boolean', short: 'h' },
  header: { type: 'string', short: 'H', multiple: true },
  file: { type: 'string', short: 'f' },
  shell: { type: 'string', short: 's' },
  location: { type: 'string' },
  replica: { type: 'string' },
  container: { type: 'string' },
  replace: { type: 'boolean', short: 'r' },
  match: { type: 'string' },
  property: { type: 'string', multiple: true },
  prop: { type: 'string', multiple: true },
  tag: { type: 'string', multiple: true },
  rel: { type: 'string', multiple: true },
  'requested-max': { type: 'string' },
  status: { type: 'string' },
} as const;

export type ClientOption = keyof typeof CLIENT_OPTIONS;

/** The options every client command takes (the spec's shared options, and `--vendor`). */
export const SHARED_OPTIONS: readonly ClientOption[] = ['profile', 'org', 'gvc', 'output', 'color', 'ts', 'max', 'token', 'endpoint', 'insecure', 'vendor', 'verbose', 'debug', 'help'];

/** A command line the client cannot run: exit 2. */
export class UsageError extends Error {}

/** What the command line says, checked and typed. */
export interface ClientArgs {
  /** The words: `rest`, the verb, the path. */
  readonly words: readonly string[];
  readonly profile?: string;
  readonly org?: string;
  readonly gvc?: string;
  readonly output?: Output;
  readonly color?: boolean;
  readonly ts?: Timestamps;
  readonly max?: number;
  readonly token?: string;
  readonly endpoint?: string;
  readonly insecure?: boolean;
  readonly vendor?: string;
  readonly verbose: boolean;
  readonly debug: boolean;
  readonly help: boolean;
  readonly header: readonly string[];
  readonly file?: string;
  readonly shell?: string;
  readonly location?: string;
  readonly replica?: string;
  readonly container?: string;
  /** `quota edit --replace`: PUT the edited resource whole. */
  readonly replace?: boolean;
  /** `quota query`: `--match`, and the `--prop` (`--property`), `--tag`, `--rel` expressions as given. */
  readonly match?: 'all' | 'any' | 'none';
  readonly property: readonly string[];
  readonly tag: readonly string[];
  readonly rel: readonly string[];
  /** `quota request create --requested-max N`. */
  readonly requestedMax?: number;
  /** `quota request list --status S`. */
  readonly status?: 'pending' | 'approved' | 'denied';
  /** The words after `--` (`connect W -- CMD ARGS`); undefined without `--`. */
  readonly after?: readonly string[];
  /** The options given on the command line, by name. */
  readonly given: ReadonlySet<ClientOption>;
}

/** `--no-color` and `--color=VALUE`, which parseArgs does not read on Node 20, as `--color` and its value. */
function colorWords(argv: readonly string[]): { argv: string[]; color?: boolean } {
  let color: boolean | undefined;
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') {
      rest.push(...argv.slice(i));
      break;
    }
    const m = /^--(no-)?color(?:=(.*))?$/.exec(a);
    if (!m) {
      rest.push(a);
      continue;
    }
    if (m[2] !== undefined) {
      if (m[1] || !/^(true|false)$/.test(m[2])) throw new UsageError(`${a}: --color takes no value (--color or --no-color)`);
      color = m[2] === 'true';
    } else {
      color = !m[1];
    }
  }
  return { argv: rest, ...(color !== undefined ? { color } : {}) };
}

function parseError(err: Error & { code?: string }): UsageError {
  const unknown = /Unknown option '(-{1,2}[^']*)'/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && unknown) {
    const guess = unknown.startsWith('--') ? closest(unknown.slice(2), Object.keys(CLIENT_OPTIONS))[0] : undefined;
    return new UsageError(`unknown flag ${unknown}${guess ? ` (did you mean --${guess}?)` : ''}`);
  }
  const missing = /Option '(?:-\w, )?(--[^ ]+) [^']*' argument missing/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && missing) return new UsageError(`${missing} needs a value`);
  return new UsageError(err.message);
}

function oneOf<T extends string>(name: string, value: string | undefined, choices: readonly T[]): T | undefined {
  if (value === undefined) return undefined;
  if (!(choices as readonly string[]).includes(value)) throw new UsageError(`--${name} must be one of ${choices.join(', ')}, not ${JSON.stringify(value)}`);
  return value as T;
}

/** The client's command line, the program's name left out (`rest get /org/acme -o json`). */
export function parseClientArgs(argv: readonly string[]): ClientArgs {
  const { argv: words, color } = colorWords(argv);
  let parsed: ReturnType<typeof parseArgs<{ args: string[]; options: typeof CLIENT_OPTIONS; allowPositionals: true; strict: true; tokens: true }>>;
  try {
    parsed = parseArgs({ args: words, options: CLIENT_OPTIONS, allowPositionals: true, strict: true, tokens: true });
  } catch (err) {
    throw parseError(err as Error);
  }
  const v = parsed.values;
  const given = new Set<ClientOption>(parsed.tokens.filter((t) => t.kind === 'option').map((t) => (t as { name: string }).name as ClientOption));
  if (color !== undefined) given.add('color');
  let max: number | undefined;
  if (v.max !== undefined) {
    if (!/^-?\d+$/.test(v.max.trim())) throw new UsageError(`--max must be a whole number (below 1: all), not ${JSON.stringify(v.max)}`);
    max = Number(v.max);
  }
  for (const name of ['profile', 'org', 'gvc', 'token', 'endpoint', 'vendor', 'shell', 'location', 'replica', 'container'] as const) {
    if (v[name] === '') throw new UsageError(`--${name} needs a value`);
  }
  const output = oneOf('output', v.output, OUTPUTS);
  const match = oneOf('match', v.match, ['all', 'any', 'none'] as const);
  const status = oneOf('status', v.status, ['pending', 'approved', 'denied'] as const);
  let requestedMax: number | undefined;
  if (v['requested-max'] !== undefined) {
    if (!/^\d+$/.test(v['requested-max'].trim())) throw new UsageError(`--requested-max must be a whole number, not ${JSON.stringify(v['requested-max'])}`);
    requestedMax = Number(v['requested-max']);
  }
  // --prop and --property are one option (the platform CLI's alias), in the order given.
  const property = parsed.tokens.flatMap((tk) => (tk.kind === 'option' && (tk.name === 'prop' || tk.name === 'property') && tk.value !== undefined ? [tk.value] : []));
  if (given.delete('prop')) given.add('property');
  const ts = oneOf('ts', v.ts, TIMESTAMPS);
  // Positionals after `--` are the command `connect` runs, not the client's words.
  const terminator = parsed.tokens.find((tk) => tk.kind === 'option-terminator')?.index;
  const positional = (after: boolean): string[] => parsed.tokens
    .filter((tk): tk is Extract<typeof tk, { kind: 'positional' }> => tk.kind === 'positional' && (terminator !== undefined && tk.index > terminator) === after)
    .map((tk) => tk.value);
  return {
    words: positional(false),
    ...(terminator !== undefined ? { after: positional(true) } : {}),
    ...(v.profile !== undefined ? { profile: v.profile } : {}),
    ...(v.org !== undefined ? { org: v.org } : {}),
    ...(v.gvc !== undefined ? { gvc: v.gvc } : {}),
    ...(output !== undefined ? { output } : {}),
    ...(color !== undefined ? { color } : v.color !== undefined ? { color: v.color } : {}),
    ...(ts !== undefined ? { ts } : {}),
    ...(max !== undefined ? { max } : {}),
    ...(v.token !== undefined ? { token: v.token } : {}),
    ...(v.endpoint !== undefined ? { endpoint: v.endpoint } : {}),
    ...(v.insecure !== undefined ? { insecure: v.insecure } : {}),
    ...(v.vendor !== undefined ? { vendor: v.vendor } : {}),
    verbose: v.verbose ?? false,
    debug: v.debug ?? false,
    help: v.help ?? false,
    header: v.header ?? [],
    ...(v.file !== undefined ? { file: v.file } : {}),
    ...(v.shell !== undefined ? { shell: v.shell } : {}),
    ...(v.location !== undefined ? { location: v.location } : {}),
    ...(v.replica !== undefined ? { replica: v.replica } : {}),
    ...(v.container !== undefined ? { container: v.container } : {}),
    ...(v.replace !== undefined ? { replace: v.replace } : {}),
    ...(match !== undefined ? { match } : {}),
    property,
    tag: v.tag ?? [],
    rel: v.rel ?? [],
    ...(requestedMax !== undefined ? { requestedMax } : {}),
    ...(status !== undefined ? { status } : {}),
    given,
  };
}

/** Refuses the options given that a command does not take. */
export function checkTakes(args: ClientArgs, command: string, takes: readonly ClientOption[]): void {
  for (const name of args.given) {
    if (!takes.includes(name)) throw new UsageError(`${command} does not take --${name}`);
  }
}

/** `-H 'name: value'` as curl reads it: the name before the first colon, the value trimmed after it. */
export function parseHeader(text: string): [string, string] {
  const colon = text.indexOf(':');
  if (colon <= 0) throw new UsageError(`--header ${JSON.stringify(text)}: not 'NAME: VALUE'`);
  const name = text.slice(0, colon).trim();
  if (!/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/.test(name)) throw new UsageError(`--header ${JSON.stringify(text)}: ${JSON.stringify(name)} is not a header name`);
  const value = text.slice(colon + 1).trim();
  if (/[\r\n\0]/.test(value)) throw new UsageError(`--header ${JSON.stringify(name)}: the value holds a line break`);
  return [name, value];
}
