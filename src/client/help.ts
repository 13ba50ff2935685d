/**
 * What `svcproxy rest --help` (and `svcproxy rest VERB --help`, `svcproxy help rest`) prints, in the
 * layout of the data-plane commands' help (src/help.ts): a title, the usage, what it does and how it
 * exits, its verbs, each option it takes with its default, the variables it reads, examples. The
 * options' texts are one table (`OPTION_HELP`), also the source of docs/commands.md's list. Pure.
 */
import type { ClientOption } from './args.js';
import { CLIENT_OPTIONS, SHARED_OPTIONS } from './args.js';
import { REST_TAKES, REST_VERBS, type RestVerb } from './rest.js';
import { CLIENT_COMMANDS } from './words.js';


interface OptionHelp {
  readonly value?: string;
  readonly about: string;
  readonly default?: string;
}

export const OPTION_HELP: { readonly [O in ClientOption]: OptionHelp } = {
  file: { value: 'FILE|-', about: 'the request body, JSON or YAML (- reads standard input)' },
  header: { value: "'NAME: VALUE'", about: 'a request header, curl\'s format (repeatable; replaces a default one of the same name)' },
  profile: { value: 'NAME', about: 'the profile (a file VENDOR_HOME/profiles/NAME.json)', default: 'VENDOR_PROFILE, else profiles/default, else the only profile' },
  org: { value: 'ORG', about: 'the org of // paths (//gvc/G is /org/ORG/gvc/G), of quota and connect', default: 'VENDOR_ORG, the profile\'s, else the endpoint\'s only org (GET /org)' },
  gvc: { value: 'GVC', about: 'the GVC of // paths to its workloads, identities, volume sets, of connect', default: 'VENDOR_GVC, or the profile\'s (connect: else the org\'s only GVC, said on stderr)' },
  output: { value: 'FORMAT', about: 'text | json | yaml | json-slim | yaml-slim | names | tf | crd (tf, crd: rendered by the platform\'s servers)', default: 'the profile\'s, else text' },
  color: { about: 'colour the output (--no-color: never); only on a terminal, never with NO_COLOR set', default: 'true' },
  ts: { value: 'iso|local|age', about: 'timestamps in text tables', default: 'iso' },
  max: { value: 'N', about: 'get: follow a list\'s rel=next pages up to N items (below 1: all); a note on stderr when more exist', default: 'one answer as it came' },
  token: { value: 'TOKEN', about: 'the credential (a service-account key or a token; Bearer is added)', default: 'VENDOR_TOKEN, the profile\'s' },
  endpoint: { value: 'URL', about: 'the platform API', default: 'VENDOR_ENDPOINT, the profile\'s, else a local up: http://127.0.0.1:15080' },
  insecure: { about: 'do not check the endpoint\'s TLS certificate' },
  vendor: { value: 'NAME', about: 'whose profiles and variables: svc (SVC_HOME, SVC_*) or cpln (the platform CLI\'s own: CPLN_HOME, CPLN_*)', default: 'SVCPROXY_VENDOR, else svc' },
  verbose: { about: 'say on stderr where the profile, endpoint, token and org came from, and each retry' },
  debug: { about: 'every HTTP exchange on stderr (the token shown as abc...xyz)' },
  help: { about: 'this help' },
  shell: { value: 'SHELL', about: 'connect: the shell to run (without -- CMD)', default: 'bash' },
  location: { value: 'LOCATION', about: 'connect: the location of the replica', default: 'the GVC\'s first location with a replica running, said on stderr' },
  replica: { value: 'REPLICA', about: 'connect: the replica', default: 'its first (a ready one first), said on stderr' },
  replace: { about: 'quota edit: send the edited quota whole (PUT) instead of what changed (PATCH)' },
  match: { value: 'all|any|none', about: 'quota query: which terms an item must match', default: 'all' },
  property: { value: 'EXPR', about: 'quota query: a property term: name=x, name~x (contains), name!=x, name>3, name>=3, name<3, name (exists), name! (does not), ~x (any property contains); repeatable' },
  prop: { value: 'EXPR', about: 'quota query: the same as --property' },
  tag: { value: 'EXPR', about: 'quota query: a tag term, as --property; repeatable' },
  rel: { value: 'EXPR', about: 'quota query: a relation term, as --property (rel=gvc-name); repeatable' },
  'requested-max': { value: 'N', about: 'quota request create: the max asked for' },
  status: { value: 'STATUS', about: 'quota request list: only those pending, approved or denied' },
  container: { value: 'NAME', about: 'connect: the container', default: 'the only one, else the first with ports, else the first; said on stderr' },
};

const VERB_HELP: { readonly [V in RestVerb]: { readonly synopsis: string; readonly about: string } } = {
  get: { synopsis: 'PATH [--max N]', about: 'GET the resource or list at PATH (an empty PATH: /)' },
  post: { synopsis: 'PATH [-f FILE|-]', about: 'POST the body of --file (none: no body)' },
  put: { synopsis: 'PATH [-f FILE|-]', about: 'PUT the body of --file (none: no body)' },
  patch: { synopsis: 'PATH -f FILE|-', about: 'PATCH with the body of --file (a merge: members given replace, null removes)' },
  create: { synopsis: 'PATH -f FILE|-', about: 'POST the body of --file, then GET the Location the answer names and print it' },
  delete: { synopsis: 'PATH', about: 'DELETE the resource at PATH (prints an empty line, as the platform CLI)' },
  edit: { synopsis: 'PATH', about: 'the resource as YAML in $VISUAL or $EDITOR; what changed is sent as one PATCH (none: nothing)' },
};

const WIDTH = 30;

export function optionLines(takes: readonly ClientOption[]): string[] {
  return takes.map((name) => {
    const spec = CLIENT_OPTIONS[name] as { short?: string };
    const help = OPTION_HELP[name];
    const label = `  --${name}${spec.short ? `, -${spec.short}` : ''}${help.value ? ` ${help.value}` : ''}`;
    const text = `${help.about}${help.default !== undefined ? ` [default: ${help.default}]` : ''}`;
    return label.length < WIDTH ? `${label.padEnd(WIDTH)}${text}` : `${label}\n${''.padEnd(WIDTH)}${text}`;
  });
}

export const ENVIRONMENT = [
  'Environment (VENDOR_ is SVC_, or CPLN_ with --vendor cpln; a flag wins over its variable):',
  '  VENDOR_PROFILE, VENDOR_ENDPOINT, VENDOR_TOKEN, VENDOR_ORG, VENDOR_GVC   over the profile\'s',
  '  VENDOR_HOME      where profiles/ is [default: $XDG_CONFIG_HOME/VENDOR, else ~/.config/VENDOR]',
  '  SVCPROXY_VENDOR  the vendor (--vendor)',
  '  SVCPROXY_API     the local up\'s API, as up --api reads it [default: 127.0.0.1:15080]',
  '  NO_COLOR         no colour',
  '  VISUAL, EDITOR   the editor of edit [default: vi]',
  'With no profile, endpoint or token: the local up, with the key in .svcproxy/api-token of the current',
  'folder (sent to the local up only).',
];

const EXAMPLES = [
  'svcproxy rest get /org/acme/gvc/shop',
  'svcproxy rest get //gvc -o names --org acme --max 0',
  'svcproxy rest create /org/acme/gvc -f gvc.yaml',
  "echo '{\"description\": \"the shop\"}' | svcproxy rest patch //gvc/shop -f -",
  'EDITOR=nano svcproxy rest edit //workload/api --gvc shop',
  'svcproxy rest get /org/acme --vendor cpln --profile prod -o yaml',
];

/** `svcproxy rest --help`, or one verb's (`svcproxy rest get --help`). */
export function restHelp(verb?: RestVerb): string {
  const verbs = verb ? [verb] : REST_VERBS;
  const takes = [...new Set(verbs.flatMap((v) => REST_TAKES[v]))];
  const lines = [
    verb ? `svcproxy rest ${verb} — ${VERB_HELP[verb].about}` : `svcproxy rest — ${CLIENT_COMMANDS.rest}`,
    '',
    'Usage:',
    ...verbs.map((v) => `  svcproxy rest ${v} ${VERB_HELP[v].synopsis} [-H 'NAME: VALUE']... [flags]`),
    '',
    '  Sends the request to the platform API of the endpoint in force (a profile, --endpoint, or a local',
    '  svcproxy up) and prints the answer in --output\'s format, the same bytes as the platform CLI (cpln)',
    '  prints. PATH is /org/ORG/..., or //KIND/... under --org (and --gvc for workloads, identities and',
    '  volume sets). Exit 0; 1 when the API refuses (its error body on stderr) or cannot be reached; 2 for',
    '  a usage error.',
    '',
    ...(verb ? [] : ['Commands:', ...REST_VERBS.map((v) => `  ${v.padEnd(8)}${VERB_HELP[v].about}`), '']),
    'Flags:',
    ...optionLines([...takes, ...SHARED_OPTIONS]),
    '',
    ...ENVIRONMENT,
    '',
    'Examples:',
    ...EXAMPLES.filter((e) => !verb || e.startsWith(`svcproxy rest ${verb} `) || e.includes(` rest ${verb} `)).map((e) => `  ${e}`),
  ];
  return `${lines.join('\n').replace(/\n\nExamples:\n?$/, '\n')}\n`;
}
