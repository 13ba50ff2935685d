/**
 * What every client command runs with: its session (session.ts), the API client (http.ts), the
 * process's streams and clock (injected, so tests run commands in process), and the helpers every
 * command shares: a request path from what the user typed (`//gvc/G` for the org in force, `//workload/W`
 * for its GVC too), a request body from `--file` (JSON or YAML, `-` for stdin), and printing an answer
 * in the session's format (with `-o tf|crd` asked of the platform's exporters: exporters.ts).
 */
import { readFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import type { ClientArgs } from './args.js';
import { UsageError } from './args.js';
import { format } from './format/index.js';
import { colorNote } from './format/color.js';
import { jsYaml } from './format/yaml.js';
import type { ApiClient } from './http.js';
import type { Session } from './session.js';
import { exported } from './exporters.js';
import { ClientError } from './errors.js';

/** How a command `connect` ran ended: its exit code, or why it could not start. */
export type RunResult = { readonly code: number } | { readonly error: NodeJS.ErrnoException };

export interface ClientIo {
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  readonly stdout: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly stderr: { write(text: string): unknown; readonly isTTY?: boolean };
  /** All of standard input, as text. */
  readStdin(): Promise<string>;
  now(): Date;
  sleep(ms: number): Promise<void>;
  random(): number;
  /** Runs a command with these streams (`connect`); resolves when it has exited. */
  run(command: string, args: readonly string[], opts: { readonly env: Readonly<Record<string, string>>; readonly cwd: string }): Promise<RunResult>;
}

export interface ClientContext {
  readonly args: ClientArgs;
  readonly session: Session;
  readonly client: ApiClient;
  readonly io: ClientIo;
}

export { ClientError } from './errors.js';

/** Kinds addressed under a GVC (`/org/O/gvc/G/KIND/NAME`), as the platform's links are. */
const GVC_SCOPED = new Set(['workload', 'identity', 'volumeset']);

/**
 * The request path of what the user typed: `/...` as it is; `` (empty) is `/`; `//KIND/...` is under
 * the org in force (`//gvc/shop` is `/org/ORG/gvc/shop`), and under its GVC too for GVC-scoped kinds
 * (`//workload/api` is `/org/ORG/gvc/GVC/workload/api`): the platform's relative link forms.
 */
export function requestPath(typed: string, session: Pick<Session, 'org' | 'gvc' | 'prefix'>): string {
  if (typed === '') return '/';
  if (typed.startsWith('//')) {
    const rest = typed.slice(2);
    const kind = rest.split(/[/?]/)[0] ?? '';
    const org = session.org;
    if (!org) throw new UsageError(`${typed}: a // path needs an org: --org ORG, ${session.prefix}ORG or a profile's`);
    if (kind === 'org' || rest === '') return `/org/${org}${rest.slice('org'.length)}`;
    if (GVC_SCOPED.has(kind)) {
      if (!session.gvc) throw new UsageError(`${typed}: a ${kind} is in a GVC: --gvc GVC, ${session.prefix}GVC or a profile's (or //gvc/GVC/${rest})`);
      return `/org/${org}/gvc/${session.gvc}/${rest}`;
    }
    return `/org/${org}/${rest}`;
  }
  if (!typed.startsWith('/')) throw new UsageError(`PATH must start with / (/org/ORG/gvc/GVC), or // for the org in force (//gvc/GVC), not ${JSON.stringify(typed)}`);
  return typed;
}

/** `~/x` as the user's home, as the platform CLI reads a --file path. */
function expandHome(file: string, env: NodeJS.ProcessEnv): string {
  return file === '~' || file.startsWith('~/') ? `${env.HOME || homedir()}${file.slice(1)}` : file;
}

/** The body of `--file` (JSON or YAML; `-` reads standard input): one document. */
export async function readBody(file: string, io: ClientIo): Promise<unknown> {
  let text: string;
  const name = file === '-' ? '<stdin>' : file;
  try {
    text = file === '-' ? await io.readStdin() : await readFile(expandHome(file, io.env), 'utf8');
  } catch (e) {
    throw new ClientError(`${name}: ${(e as Error).message}`);
  }
  let body: unknown;
  try {
    body = jsYaml().load(text, { json: true, filename: name });
  } catch (e) {
    throw new ClientError((e as Error).message);
  }
  if (body === undefined || body === null) throw new ClientError(`${name}: holds no document (JSON or YAML)`);
  return body;
}

/** Prints an answer in the session's format (`kind`: the table to print it as), then a note on stderr when one is pending. */
export async function printAnswer(ctx: ClientContext, body: unknown, notice?: string, kind?: string): Promise<void> {
  const { session, io } = ctx;
  let text: string;
  if (session.output === 'tf' || session.output === 'crd') {
    text = await exported(ctx, body, session.output);
  } else {
    // -o names of an answer without names throws NamesError: the entry prints it as the platform CLI does.
    text = format(body, { output: session.output, color: session.color, ts: session.ts, vendor: session.vendor, now: () => io.now().getTime(), ...(kind !== undefined ? { kind } : {}) });
  }
  io.stdout.write(`${text}\n`);
  if (notice !== undefined) io.stderr.write(`${session.color && io.stderr.isTTY ? colorNote(notice) : notice}\n`);
}
