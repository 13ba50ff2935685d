/**
 * `svcproxy connect WORKLOAD [--shell SHELL | -- CMD ARGS...]` (DESIGN §14, as `cpln workload connect`
 * and `exec` on the platform): asks `up`'s API for one replica's environment and working directory
 * (`GET /org/O/gvc/G/workload/W/-connect`, the operator key's only: the environment holds the
 * replica's `SVC_TOKEN`) and runs a shell (default `bash`) or the command there, on this machine,
 * with the client's own standard streams: `curl` inside calls other workloads through the mesh as
 * that workload (its `HTTP_PROXY`). `--gvc`, `--location`, `--replica`, `--container` choose; each
 * left out is chosen (by the API, as the platform CLI chooses) and said on stderr in the platform
 * CLI's words. Exits with the command's code (128+N when a signal N ended it; 127 when it cannot be
 * started). The shell gets no terminal tricks: it reads the client's stdin as it is, terminal or not.
 */
import { checkTakes, SHARED_OPTIONS, UsageError, type ClientArgs, type ClientOption } from './args.js';
import { ClientError, type ClientContext } from './context.js';
import { ENVIRONMENT, optionLines } from './help.js';
import { defaultingTo, gvcOf, orgOf } from './scope.js';
import { CLIENT_COMMANDS } from './words.js';

export const CONNECT_TAKES: readonly ClientOption[] = ['shell', 'location', 'replica', 'container'];

/** What the API answers (src/local/api/connect.ts). */
interface ConnectAnswer {
  readonly location: string;
  readonly replica: string;
  readonly container: string;
  readonly defaulted: readonly string[];
  readonly cwd: string;
  readonly env: Readonly<Record<string, string>>;
}

/** Variables of the user's terminal kept when the replica's environment has none of them. */
const TERMINAL = ['TERM', 'COLORTERM', 'COLUMNS', 'LINES'];

export interface ConnectCommand {
  readonly workload: string;
  readonly command: readonly string[];
}

/** The words after `connect`, checked. */
export function connectCommand(words: readonly string[], args: ClientArgs): ConnectCommand {
  checkTakes(args, 'connect', [...SHARED_OPTIONS, ...CONNECT_TAKES]);
  if (words.length === 0) throw new UsageError('connect needs a WORKLOAD');
  if (words.length > 1) throw new UsageError(`connect takes one WORKLOAD, not ${words.map((w) => JSON.stringify(w)).join(' ')} (a command goes after --)`);
  if (!/^[a-z0-9][a-z0-9-]*$/.test(words[0]!)) throw new UsageError(`${JSON.stringify(words[0])} is not a workload name`);
  const after = args.after ?? [];
  if (args.after !== undefined && after.length === 0) throw new UsageError('connect: -- needs a command (-- CMD ARGS...)');
  if (after.length > 0 && args.shell !== undefined) throw new UsageError('connect: --shell or -- CMD, not both');
  return { workload: words[0]!, command: after.length > 0 ? after : [args.shell ?? 'bash'] };
}

export async function runConnect(ctx: ClientContext, { workload, command }: ConnectCommand): Promise<number> {
  const { args, io } = ctx;
  const org = await orgOf(ctx);
  const gvc = await gvcOf(ctx, org);
  const query = new URLSearchParams();
  for (const name of ['location', 'replica', 'container'] as const) if (args[name] !== undefined) query.set(name, args[name]);
  const path = `/org/${encodeURIComponent(org)}/gvc/${encodeURIComponent(gvc)}/workload/${encodeURIComponent(workload)}/-connect${query.size > 0 ? `?${query}` : ''}`;
  // -d shows the exchange, not the environment: it holds the replica's token.
  const answer = (await ctx.client.request('GET', path, { hideAnswer: 'the replica\'s environment, not shown: it holds its SVC_TOKEN' })).body as ConnectAnswer;
  if (answer === null || typeof answer !== 'object' || typeof answer.env !== 'object' || typeof answer.cwd !== 'string') {
    throw new ClientError(`${ctx.session.endpoint} answered ${path} with no environment: is it a svcproxy up?`);
  }
  for (const type of ['location', 'replica', 'container'] as const) if (answer.defaulted?.includes(type)) io.stderr.write(defaultingTo(type, answer[type]));
  const env: Record<string, string> = { ...answer.env };
  for (const name of TERMINAL) if (env[name] === undefined && io.env[name] !== undefined) env[name] = io.env[name]!;
  if (args.verbose) io.stderr.write(`svcproxy: running ${command.join(' ')} in ${answer.cwd} as replica ${answer.replica} of ${gvc}/${workload} (${answer.location}, container ${answer.container})\n`);
  const result = await io.run(command[0]!, command.slice(1), { env, cwd: answer.cwd });
  if ('error' in result) {
    const why = result.error.code === 'ENOENT' ? 'not found (or the folder is gone)' : result.error.message;
    io.stderr.write(`svcproxy: cannot run ${command[0]} in ${answer.cwd}: ${why}\n`);
    return 127;
  }
  return result.code;
}

/** `svcproxy connect --help`. */
export function connectHelp(): string {
  const lines = [
    `svcproxy connect — ${CLIENT_COMMANDS.connect}`,
    '',
    'Usage:',
    '  svcproxy connect WORKLOAD [--shell SHELL] [flags]',
    '  svcproxy connect WORKLOAD [flags] -- CMD [ARGS...]',
    '',
    '  Asks the local svcproxy up (its API, with the operator key of .svcproxy/api-token) for one',
    '  replica\'s environment (SVC_*, HTTP_PROXY, its SVC_TOKEN) and working directory, and runs a shell',
    '  or CMD there with this terminal: calls from it reach other workloads through the mesh as that',
    '  workload. The location, replica and container not given are chosen, and said on stderr. Exit: the',
    '  command\'s code (128+N after signal N, 127 when it cannot start); 1 when the API refuses (its error',
    '  body on stderr); 2 for a usage error.',
    '',
    'Flags:',
    ...optionLines([...CONNECT_TAKES, ...SHARED_OPTIONS.filter((o) => !['output', 'color', 'ts', 'max'].includes(o))]),
    '',
    ...ENVIRONMENT.filter((l) => !/NO_COLOR|VISUAL/.test(l)),
    '',
    'Examples:',
    '  svcproxy connect api --gvc shop',
    '  svcproxy connect api --gvc shop -- curl -s http://web.shop.internal.localhost:8080/',
    '  svcproxy connect api --gvc shop --location aws-us-east-2 --replica api-0 --shell sh',
  ];
  return `${lines.join('\n')}\n`;
}
