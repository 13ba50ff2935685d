/**
 * What `svcproxy --help` and `svcproxy COMMAND --help` print. The global help is an overview (one
 * line per command); a command's help is its synopsis, the flags it takes with their defaults (from
 * src/flags.ts's FLAG_HELP, the same table that refuses the flags it does not take), the
 * environment variables it reads, and examples. A command's help is one entry of COMMAND_HELP; the
 * type makes a command without one a compile error. Also the one-line hints of usage errors and the
 * "did you mean" of a mistyped command or flag.
 */
import { COMMANDS, FLAG_HELP, OPTIONS, flagsOf, type Command, type FlagName } from './flags.js';
import { CLIENT_COMMANDS } from './client/words.js';

export interface CommandHelp {
  /** One line for the global overview. */
  readonly summary: string;
  /** The usage line after `svcproxy COMMAND`. */
  readonly synopsis: string;
  /** A few lines on what it does and how it exits. */
  readonly about: readonly string[];
  /** Flags the command cannot run without, each with the words that say what it names. */
  readonly requires?: { readonly [F in FlagName]?: string };
  /** Environment variables it reads besides SVCPROXY_<FLAG>, in order of precedence where that matters. */
  readonly env?: readonly string[];
  readonly examples: readonly string[];
}

const ORG_ENV = '  org       the org record\'s name, else --org, SVCPROXY_ORG, SVC_ORG, else "local"';
const ORG_ABOUT = 'The org is ORG in the mesh identities spiffe://ORG/...; an --org (or SVC_ORG) other than the org record\'s is a usage error.';

const IDENTITY_ENV = [
  'The sidecar\'s identity, each from the first that is set (SVC_ is the --vendor prefix: --vendor cpln reads CPLN_GVC, ...):',
  '  gvc       --gvc, SVCPROXY_GVC, SVC_GVC',
  '  workload  --workload, SVCPROXY_WORKLOAD, SVC_WORKLOAD',
  '  location  --location, SVCPROXY_LOCATION, SVC_LOCATION',
  '  replica   --replica, SVCPROXY_REPLICA, SVC_REPLICA, HOSTNAME, else WORKLOAD-0',
  ORG_ENV,
  ORG_ABOUT,
];

const CLUSTER_ENV = 'NODE_CLUSTER_SCHED_POLICY=none (with --workers > 1): each worker accepts its own connections instead of round-robin';

export const COMMAND_HELP: { readonly [C in Command]: CommandHelp } = {
  up: {
    summary: 'the whole data plane on this machine: ingress, mesh, admin and the workloads\' processes',
    synopsis: '[--config PATH]... [--listen HOST:PORT]... [--mesh HOST:PORT] [--admin HOST:PORT]',
    about: [
      'Starts the ingress listener, a mesh listener for internal host names, the admin listener, and minScale',
      'replicas of each container with a command, in every location of its GVC; prints every endpoint.',
      'Without --config it runs the built-in demo. SIGINT/SIGTERM drains and exits 0; SIGHUP reloads.',
    ],
    env: ['The workloads\' processes inherit this environment (less PORT and SVC_*) and get the platform\'s:', '  PORT, SVC_GVC, SVC_WORKLOAD, SVC_LOCATION, SVC_REPLICA, SVC_ORG, ... (SVC_ is the --vendor prefix)'],
    examples: ['svcproxy up', 'svcproxy up --config records/ --listen 127.0.0.1:8080'],
  },
  ingress: {
    summary: 'the router of one location: every external host name, to the replicas of deployment records',
    synopsis: '--config PATH... --location NAME [--org ORG] [--listen HOST:PORT]... [--listen-tls HOST:PORT --tls-cert FILE --tls-key FILE] [--admin HOST:PORT]',
    about: [
      'Routes every external host name of the configuration to the replicas listed in deployment records.',
      'SIGINT/SIGTERM drains and exits 0; SIGHUP reloads the configuration (so does a change of its files).',
    ],
    requires: { config: 'a file or folder of records' },
    env: ['Each from the first that is set (SVC_ is the --vendor prefix):', '  location  --location, SVCPROXY_LOCATION, SVC_LOCATION', ORG_ENV, ORG_ABOUT, CLUSTER_ENV],
    examples: [
      'svcproxy ingress --config /etc/svcproxy --location aws-us-east-2 --listen 0.0.0.0:80',
      'svcproxy ingress -c /etc/svcproxy --location aws-us-east-2 --listen-tls 0.0.0.0:443 --tls-cert cert.pem --tls-key key.pem',
    ],
  },
  sidecar: {
    summary: 'in front of one replica: the workload\'s filters, then its app (--app)',
    synopsis: '--config PATH... --app HOST:PORT [--org ORG --gvc G --workload W --location L --replica R] [--listen HOST:PORT]...',
    about: [
      'Applies its workload\'s filters, then forwards to --app in the port\'s protocol. With --mesh it is also',
      'the app\'s outbound proxy; with --mesh-cert/--mesh-key/--mesh-ca it serves the workload\'s internal',
      'names on --mesh-inbound (mTLS). SIGINT/SIGTERM drains and exits 0; SIGHUP reloads.',
    ],
    requires: { config: 'a file or folder of records', app: 'the address of the app it fronts' },
    env: [...IDENTITY_ENV, CLUSTER_ENV],
    examples: [
      'svcproxy sidecar --config /etc/svcproxy --app 127.0.0.1:8080 --gvc shop --workload api --location aws-us-east-2',
      'SVC_ORG=acme SVC_GVC=shop SVC_WORKLOAD=api SVC_LOCATION=aws-us-east-2 svcproxy sidecar -c /etc/svcproxy --app 127.0.0.1:8080 --listen 0.0.0.0:15006',
    ],
  },
  ratelimit: {
    summary: 'the rate-limit service (Envoy RLS v3), counters in memory or shared through Redis',
    synopsis: '--config RULES.yaml... [--redis URL] [--listen HOST:PORT] [--admin HOST:PORT] [--tls-cert FILE --tls-key FILE]',
    about: [
      'Serves ShouldRateLimit over gRPC with the Envoy reference server\'s rules format. SIGHUP (or a change',
      'of the rules files) reloads; invalid rules exit 1 with every error; SIGINT/SIGTERM exits 0.',
    ],
    requires: { config: 'a rules file or a folder of them' },
    examples: [
      'svcproxy ratelimit --config rules.yaml',
      'svcproxy ratelimit --config rules/ --redis redis://127.0.0.1:6379 --listen 0.0.0.0:8081 --admin 127.0.0.1:9902',
    ],
  },
  validate: {
    summary: 'load and check the configuration: exit 0, or 1 with every error',
    synopsis: '--config PATH...',
    about: ['Loads the records and checks them as the proxies would; exit 0, or 1 with every error on stderr.'],
    requires: { config: 'a file or folder of records' },
    examples: ['svcproxy validate --config records/'],
  },
  endpoints: {
    summary: 'every host name the data plane answers, per workload',
    synopsis: '--config PATH... [-o text|json|yaml]',
    about: ['Lists every host name of the configuration: canonical, alias, location, replica, internal, domain.'],
    requires: { config: 'a file or folder of records' },
    examples: ['svcproxy endpoints --config records/', 'svcproxy endpoints -c records/ -o json --app-domain app.example.com'],
  },
  explain: {
    summary: 'how the data plane would treat one request, sent nowhere: route, location, filters, retries',
    synopsis: "--config PATH... URL [-H 'NAME: VALUE']... [-X METHOD] [--from IP] [--location NAME] [-o text|json]",
    about: [
      'Resolves the URL\'s host as the router does and prints the workload, port and upstream path, the rule that',
      'matched, the firewall verdict, each candidate location (tier, latency, offset) and the one chosen, the',
      'replicas listed there (readiness and latencies are not probed), the filters that would run (auth exclusions,',
      'rate-limit descriptors), the timeout, the retry plan and the debug answers. Nothing is sent. Exit 0 when',
      'it would be forwarded, 1 when the proxy would refuse it (404, 403, 503: the verdict says why) or the',
      'configuration is invalid.',
    ],
    requires: { config: 'a file or folder of records' },
    examples: [
      'svcproxy explain --config records/ http://api-shop.app.localhost/v1/items',
      "svcproxy explain -c records/ https://shop.example.com/api/x -X POST -H 'authorization: Bearer t0k' --from 203.0.113.9 --location aws-us-east-2 -o json",
    ],
  },
  logs: {
    summary: 'what up wrote for one workload, every location and replica, in time order',
    synopsis: '--workload W [--gvc G] [--location L] [--replica R] [--container C] [--since T] [--until T] [-o text|json]',
    about: ['Reads the files up writes under --log-dir. Exit 0 (even when nothing matches), 1 when there are no logs for the workload.'],
    requires: { workload: 'the workload whose logs to show' },
    examples: ['svcproxy logs --workload api --since 10m', 'svcproxy logs --workload api --location aws-us-east-2 -o json'],
  },
};

const WIDTH = 30;

function flagLabel(name: FlagName, command: Command): string {
  const spec = OPTIONS[name] as { short?: string };
  const value = FLAG_HELP[name].per?.[command]?.value ?? FLAG_HELP[name].value;
  return `--${name}${spec.short ? `, -${spec.short}` : ''}${value ? ` ${value}` : ''}`;
}

/** One line per flag: name and value, what it does, its default for this command. */
function flagLines(command: Command): string[] {
  const help = COMMAND_HELP[command];
  return flagsOf(command).map((name) => {
    const flag = FLAG_HELP[name];
    const per = flag.per?.[command];
    const about = per?.about ?? flag.about;
    const fallback = per?.default ?? flag.default;
    const required = help.requires?.[name] !== undefined ? ' [required]' : '';
    const label = `  ${flagLabel(name, command)}`;
    const text = `${about}${required}${fallback !== undefined ? ` [default: ${fallback}]` : ''}`;
    return label.length < WIDTH ? `${label.padEnd(WIDTH)}${text}` : `${label}\n${''.padEnd(WIDTH)}${text}`;
  });
}

export function commandHelp(command: Command): string {
  const help = COMMAND_HELP[command];
  const lines = [
    `svcproxy ${command} — ${help.summary}`,
    '',
    'Usage:',
    `  svcproxy ${command} ${help.synopsis}`,
    '',
    ...help.about.map((l) => `  ${l}`),
    '',
    'Flags:',
    ...flagLines(command),
    '',
    'Environment:',
    '  SVCPROXY_<FLAG>             each flag above, e.g. SVCPROXY_LOG_LEVEL=debug (lists comma-separated);',
    '                              the command line wins; variables of flags this command does not take are ignored',
    ...(help.env ?? []).map((l) => `  ${l}`),
    '',
    `Example${help.examples.length > 1 ? 's' : ''}:`,
    ...help.examples.map((e) => `  ${e}`),
  ];
  return `${lines.join('\n')}\n`;
}

export function globalHelp(): string {
  const width = Math.max(...COMMANDS.map((c) => c.length)) + 2;
  return [
    'svcproxy — the platform\'s data plane: ingress router, workload sidecar, rate-limit service',
    '',
    'Usage: svcproxy COMMAND [flags]',
    '',
    'Commands:',
    ...COMMANDS.map((c) => `  ${c.padEnd(width)}${COMMAND_HELP[c].summary}`),
    '',
    'Client of the platform API (a local up, or any endpoint of the platform\'s API; the platform CLI\'s options):',
    ...Object.entries(CLIENT_COMMANDS).map(([c, summary]) => `  ${c.padEnd(width)}${summary}`),
    '',
    'Run "svcproxy COMMAND --help" (or "svcproxy help COMMAND") for its flags, defaults, environment and examples.',
    'Every flag is also an environment variable SVCPROXY_<FLAG>. Exit codes: 0 success, 1 invalid',
    'configuration or a runtime failure, 2 usage error.',
    '',
  ].join('\n');
}

/** The line under a usage error's message: where the usage is. */
export function usageHint(command: string | undefined): string {
  return command !== undefined && (COMMANDS as readonly string[]).includes(command)
    ? `run "svcproxy ${command} --help" for usage`
    : 'run "svcproxy --help" for the commands';
}

/** The candidate closest to `word` by edit distance, when it is close enough to be a typo. */
export function didYouMean(word: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  for (const c of candidates) {
    const d = editDistance(word, c);
    if (d < bestDistance) [best, bestDistance] = [c, d];
  }
  return best !== undefined && bestDistance <= Math.max(1, Math.floor(word.length / 3)) ? best : undefined;
}

function editDistance(a: string, b: string): number {
  let row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    const next = [i];
    for (let j = 1; j <= b.length; j++) next[j] = Math.min(row[j]! + 1, next[j - 1]! + 1, row[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    row = next;
  }
  return row[b.length]!;
}
