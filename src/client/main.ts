/**
 * The command-line client's entry (DESIGN §14): `svcproxy rest ...` (and `svcproxy help rest`),
 * started by bin/svcproxy.js before the data plane is loaded. Parses the command line (args.ts), finds
 * the command and its verb (commands.ts), opens the session (session.ts), runs it and reports: exit 0; 1 when the API refuses (its error
 * body on stderr, as the platform CLI prints it, then a hint line when there is one), cannot be
 * reached, or something else fails (`svcproxy: MESSAGE`); 2 for a usage error (`svcproxy: MESSAGE` and
 * a hint to the command's help; the platform CLI exits 127 with its help). The streams, the clock and
 * the environment come in through `io`, so tests run commands in process.
 */
import { parseClientArgs, UsageError, type ClientArgs } from './args.js';
import { ClientError, type ClientContext, type ClientIo } from './context.js';
import { failureHint, failureText } from './errors.js';
import { NamesError } from './format/index.js';
import { ApiClient, HttpFailure, Unreachable } from './http.js';
import { COMMAND_SPECS } from './commands.js';
import { clientCommandOf, isClientCommand } from './words.js';
import { openSession, SessionError, type Session } from './session.js';
import { closest } from '../config/suggest.js';
import { spawn } from 'node:child_process';
import { constants as osConstants } from 'node:os';
import type { RunResult } from './context.js';

export type { ClientIo } from './context.js';

/** The process's own streams, clock and environment. */
export function processIo(): ClientIo {
  // A reader that stops early (`| head`) closes the pipe: the rest is not wanted, and that is no failure.
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
  return {
    env: process.env,
    cwd: process.cwd(),
    stdout: process.stdout,
    stderr: process.stderr,
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString('utf8');
    },
    now: () => new Date(),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    random: Math.random,
    run: runInherited,
  };
}

/**
 * Runs a command on this process's own streams (`connect`). While it runs, Ctrl-C and Ctrl-\ are
 * the command's (the terminal sends them to both: this process stays to report its exit code), and
 * a SIGTERM or SIGHUP sent to this process is passed on to it.
 */
function runInherited(command: string, args: readonly string[], opts: { env: Readonly<Record<string, string>>; cwd: string }): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(command, [...args], { env: opts.env, cwd: opts.cwd, stdio: 'inherit' });
    const ignore = (): void => undefined;
    const forward = (signal: NodeJS.Signals) => (): void => void child.kill(signal);
    const handlers: [NodeJS.Signals, () => void][] = [['SIGINT', ignore], ['SIGQUIT', ignore], ['SIGTERM', forward('SIGTERM')], ['SIGHUP', forward('SIGHUP')]];
    for (const [signal, handler] of handlers) process.on(signal, handler);
    let settled = false;
    const done = (result: RunResult): void => {
      if (settled) return;
      settled = true;
      for (const [signal, handler] of handlers) process.off(signal, handler);
      resolve(result);
    };
    child.once('error', (error) => done({ error }));
    child.once('exit', (code, signal) => done({ code: code ?? 128 + (signal ? (osConstants.signals[signal] ?? 0) : 0) }));
  });
}

function usage(io: ClientIo, message: string, command: string): number {
  io.stderr.write(`svcproxy: ${message}\nrun "svcproxy ${command} --help" for usage\n`);
  return 2;
}

/** `-v`: where each setting came from (the token itself never). */
function describe(session: Session): string {
  const s = session.sources;
  const lines = [
    session.profile ? `profile ${session.profile.name} (${session.profile.source === 'variable' ? `${session.prefix}PROFILE` : session.profile.source})` : 'no profile',
    `endpoint ${session.endpoint} (${s.endpoint === 'default' && session.local ? 'the local up' : s.endpoint})`,
    session.token ? `token from the ${s.token}` : 'no token: requests go without a credential',
    ...(session.org ? [`org ${session.org} (${s.org})`] : []),
    ...(session.gvc ? [`gvc ${session.gvc} (${s.gvc})`] : []),
  ];
  return lines.map((l) => `svcproxy: ${l}\n`).join('');
}

/** Runs one client command line (the words after the program's name); resolves with the exit code. */
export async function main(argv: readonly string[], io: ClientIo = processIo()): Promise<number> {
  let args: ClientArgs;
  try {
    args = parseClientArgs(argv);
  } catch (e) {
    if (e instanceof UsageError) return usage(io, e.message, clientCommandOf(argv) ?? 'rest');
    throw e;
  }
  const words = args.words[0] === 'help' ? args.words.slice(1) : args.words;
  const help = args.help || args.words[0] === 'help';
  const [command, ...after] = words;
  if (!isClientCommand(command)) return usage(io, `unknown command ${JSON.stringify(command ?? '')}`, 'rest');
  const spec = COMMAND_SPECS[command];
  // A command with verbs takes its verb first (`rest get PATH`); one without takes its words whole (`connect W`).
  const verb = spec.verbs ? after[0] : '';
  const rest = spec.verbs ? after.slice(1) : after;
  const verbs = spec.verbs ?? [];
  if (verb === undefined || (!spec.verbs && help)) {
    // No verb (or help of a command without verbs): the command's help, on stdout when asked for,
    // else on stderr as a usage error.
    (help ? io.stdout : io.stderr).write(spec.help());
    return help ? 0 : 2;
  }
  if (spec.verbs && !verbs.includes(verb)) {
    const guess = closest(verb, verbs)[0];
    return usage(io, `unknown ${command} command ${JSON.stringify(verb)}${guess ? ` (did you mean ${guess}?)` : ` (one of ${verbs.join(', ')})`}`, command);
  }
  if (help) {
    io.stdout.write(spec.help(verb));
    return 0;
  }
  const named = spec.verbs ? `${command} ${verb}` : command;
  let run: (ctx: ClientContext) => Promise<number>;
  try {
    run = spec.prepare(verb, rest, args);
  } catch (e) {
    if (e instanceof UsageError) return usage(io, e.message, named);
    throw e;
  }
  let session: Session;
  try {
    session = openSession(args, { env: io.env, cwd: io.cwd, stdoutIsTTY: io.stdout.isTTY === true, now: io.now().getTime() });
  } catch (e) {
    if (e instanceof SessionError) {
      io.stderr.write(`svcproxy: ${e.message}\n`);
      return 1;
    }
    throw e;
  }
  if (args.verbose) io.stderr.write(describe(session));
  const writeErr = (text: string): void => void io.stderr.write(text);
  const client = new ApiClient(session, { writeErr, now: io.now, sleep: io.sleep, random: io.random }, { debug: args.debug, verbose: args.verbose });
  const ctx: ClientContext = { args, session, client, io };
  try {
    return await run(ctx);
  } catch (e) {
    if (e instanceof HttpFailure || e instanceof Unreachable) {
      io.stderr.write(failureText(e, args.output, session.vendor));
      const hint = failureHint(e, { local: session.local, endpoint: session.endpoint, hasToken: session.token !== undefined, cwd: io.cwd });
      for (const line of [e.note, hint]) if (line) io.stderr.write(`${line}\n`);
      return 1;
    }
    if (e instanceof UsageError) return usage(io, e.message, named);
    if (e instanceof NamesError) {
      io.stderr.write(`${e.message}\n`);
      return 1;
    }
    if (e instanceof ClientError) {
      io.stderr.write(`svcproxy: ${e.message}\n`);
      return 1;
    }
    throw e;
  } finally {
    client.close();
  }
}
