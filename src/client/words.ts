/**
 * Which command lines belong to the command-line client (DESIGN §14): bin/svcproxy.js asks this
 * before it loads anything else, so `svcproxy rest ...` starts the client's small entry
 * (src/client/main.ts) and never the data plane (its V8 settings, allocator and every role), and the
 * data plane's `--help` lists the client's commands from here. Imports nothing; pure.
 */

/** The client's commands, with the line `svcproxy --help` gives each. */
export const CLIENT_COMMANDS = {
  rest: 'raw requests to the platform API (get, post, put, patch, create, delete, edit), printed as the platform CLI prints them',
  quota: 'the org\'s quotas: get, edit, patch, permissions, query, and increase requests',
  connect: 'a shell or a command with the environment of one of a workload\'s replicas under svcproxy up',
} as const;
export type ClientCommand = keyof typeof CLIENT_COMMANDS;

/** The client's options that take a value (their value is not a command word), and its switches. */
const VALUED = new Set(['--profile', '--org', '--gvc', '--output', '-o', '--ts', '--max', '--token', '--endpoint', '--vendor', '--header', '-H', '--file', '-f', '--shell', '-s', '--location', '--replica', '--container', '--match', '--property', '--prop', '--tag', '--rel', '--requested-max', '--status']);
const SWITCHES = new Set(['--color', '--no-color', '--insecure', '-k', '--verbose', '-v', '--debug', '-d', '--help', '-h', '--replace', '-r']);

export function isClientCommand(word: string | undefined): word is ClientCommand {
  return word !== undefined && Object.prototype.hasOwnProperty.call(CLIENT_COMMANDS, word);
}

/**
 * The client command a command line runs (`rest`, also for `help rest`), or undefined when it is a
 * data-plane command line. The first word that is not an option (or an option's value) decides; an
 * option before it that is not the client's (`-c DIR`) makes it the data plane's.
 */
export function clientCommandOf(argv: readonly string[]): ClientCommand | undefined {
  const words: string[] = [];
  for (let i = 0; i < argv.length && words.length < 2; i++) {
    const a = argv[i]!;
    if (a === '--') break;
    if (a.startsWith('-') && a !== '-') {
      const name = a.split('=')[0]!;
      if (words.length === 0 && !VALUED.has(name) && !SWITCHES.has(name)) return undefined;
      if (VALUED.has(a)) i++;
      continue;
    }
    words.push(a);
  }
  if (isClientCommand(words[0])) return words[0];
  if (words[0] === 'help' && isClientCommand(words[1])) return words[1];
  return undefined;
}
