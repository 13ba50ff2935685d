/**
 * The bench's flags (`npm run bench -- --help`), read once from the command line: the sections to
 * run and every count and duration they take, and the log every section writes its progress to.
 */
import { parseArgs } from 'node:util';

// The 10,000-workload section runs last: its readiness probes leave tens of thousands of sockets in
// TIME_WAIT for a minute, which would disturb whatever ran next.
const SECTIONS = ['http', 'targets', 'https', 'mesh', 'body', 'h2', 'grpc', 'rls', 'ws', 'idle', 'memory', 'soak', 'profile', 'scale'] as const;
export type SectionId = (typeof SECTIONS)[number];

const HELP = `npm run bench -- [options]

  --rounds N            rounds per table (median reported; at least 3)        default 5
  --duration S          measured seconds per row and round (HTTP, 10k throughput, profiles) default 5
  --short-duration S    … for the other tables (1 MiB, h2, gRPC, WebSocket)     default 3
  --warmup S            warm-up seconds before each measured run                default 1
  --connections N       wrk connections (1 thread)                              default 50
  --body-connections N  wrk connections for the 1 MiB POST rows                 default 10
  --h2-clients N / --h2-streams M   h2load connections / streams per connection default 10 / 10
  --grpc-concurrency N  unary calls in flight (one channel)                     default 50
  --rls-concurrency N   rate-limit service: ShouldRateLimit calls in flight      default 50
  --rls-channels N      … spread over N channels (connections)                  default 2
  --rls-keys N          … over N distinct descriptor values                      default 1000
  --ws-connections N    WebSocket connections doing ping-pong                   default 50
  --target-blocks N     blocks of four back-to-back runs per paired target     default 4
  --workloads N         workloads in the large configuration                    default 10000
  --idle-connections N  idle keep-alive connections                             default 1000
  --memory-processes N  memory: fresh sidecars (and bare Node processes) measured default 5
  --memory-rate R       … requests per second each sidecar then takes          default 1000
  --memory-seconds S    … for S seconds                                         default 20
  --soak-seconds S      fixed-rate soak length (the issue's 10 minutes: 600)    default 60
  --soak-rate R         requests per second during the soak                     default 2000
  --only LIST           comma-separated sections: ${SECTIONS.join(',')}
  --out FILE            results file (default bench/results/<date>.md; <date>-partial.md with --only)
  --quiet-cores C       before each run, wait until other processes use < C cores  default 0.3
  --quiet-max S         … but no longer than S seconds                          default 10
  --no-install          never apt-get install missing tools
  --keep                keep the temporary folder (configs, logs)
`;

export const { values: flags } = parseArgs({
  options: {
    rounds: { type: 'string', default: '5' },
    duration: { type: 'string', default: '5' },
    'short-duration': { type: 'string', default: '3' },
    warmup: { type: 'string', default: '1' },
    connections: { type: 'string', default: '50' },
    'body-connections': { type: 'string', default: '10' },
    'h2-clients': { type: 'string', default: '10' },
    'h2-streams': { type: 'string', default: '10' },
    'grpc-concurrency': { type: 'string', default: '50' },
    'rls-concurrency': { type: 'string', default: '50' },
    'rls-channels': { type: 'string', default: '2' },
    'rls-keys': { type: 'string', default: '1000' },
    'ws-connections': { type: 'string', default: '50' },
    'target-blocks': { type: 'string', default: '4' },
    workloads: { type: 'string', default: '10000' },
    'idle-connections': { type: 'string', default: '1000' },
    'memory-processes': { type: 'string', default: '5' },
    'memory-rate': { type: 'string', default: '1000' },
    'memory-seconds': { type: 'string', default: '20' },
    'soak-seconds': { type: 'string', default: '60' },
    'soak-rate': { type: 'string', default: '2000' },
    'quiet-cores': { type: 'string', default: '0.3' },
    'quiet-max': { type: 'string', default: '10' },
    only: { type: 'string' },
    out: { type: 'string' },
    'no-install': { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
  strict: true,
});
if (flags.help) {
  process.stdout.write(HELP);
  process.exit(0);
}
const num = (name: keyof typeof flags): number => {
  const v = Number(flags[name]);
  if (!Number.isFinite(v) || v <= 0) {
    process.stderr.write(`--${name} must be a positive number\n`);
    process.exit(2);
  }
  return v;
};
export const opts = {
  rounds: Math.max(1, Math.floor(num('rounds'))),
  duration: num('duration'),
  shortDuration: num('short-duration'),
  warmup: num('warmup'),
  connections: num('connections'),
  bodyConnections: num('body-connections'),
  h2Clients: num('h2-clients'),
  h2Streams: num('h2-streams'),
  grpcConcurrency: num('grpc-concurrency'),
  rlsConcurrency: Math.floor(num('rls-concurrency')),
  rlsChannels: Math.floor(num('rls-channels')),
  rlsKeys: Math.floor(num('rls-keys')),
  wsConnections: num('ws-connections'),
  targetBlocks: Math.floor(num('target-blocks')),
  workloads: Math.floor(num('workloads')),
  idleConnections: Math.floor(num('idle-connections')),
  memoryProcesses: Math.floor(num('memory-processes')),
  memoryRate: num('memory-rate'),
  memorySeconds: num('memory-seconds'),
  soakSeconds: num('soak-seconds'),
  soakRate: num('soak-rate'),
  quietCores: num('quiet-cores'),
  quietMaxMs: num('quiet-max') * 1000,
};
export const only = flags.only ? new Set(flags.only.split(',').map((s) => s.trim())) : undefined;
for (const s of only ?? []) {
  if (!(SECTIONS as readonly string[]).includes(s)) {
    process.stderr.write(`--only: unknown section ${s} (sections: ${SECTIONS.join(', ')})\n`);
    process.exit(2);
  }
}
export const wanted = (s: SectionId): boolean => !only || only.has(s);

export const BODY_BYTES = 1024 * 1024;

export function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

export const errText = (err: unknown): string => (err instanceof Error ? err.message : String(err)).split('\n')[0]!.slice(0, 300);
