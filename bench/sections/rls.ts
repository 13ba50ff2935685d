/** The rate-limit service alone, checks per second (`rls`): in-memory counters and Redis (bench/README.md). */
import { Fleet, script } from '../lib/fleet.js';
import { nodeClient } from '../lib/load.js';
import { httpRequest, runCommand } from '../lib/proc.js';
import { fmtInt } from '../lib/report.js';
import { RLS_DOMAIN, RLS_KEY } from '../lib/svc.js';
import { opts } from '../options.js';
import type { SectionSpec, Target } from './table.js';

export function rlsSection(redisVersion: string | undefined): SectionSpec {
  const noRedis = redisVersion ? {} : { skip: 'redis-server not installed (scripts/test-deps.sh installs it)' };
  const sideRedis = { label: 'redis-server', services: ['redis'] };
  return {
    id: 'rls',
    duration: opts.shortDuration,
    title: 'Rate-limit service, checks per second',
    description: `\`svcproxy ratelimit\` (Envoy RLS v3) alone: a Node @grpc/grpc-js client (bench/clients/rls-load.ts) keeping ${opts.rlsConcurrency} ShouldRateLimit calls in flight over ${opts.rlsChannels} channels (connections), each call one descriptor \`{${RLS_KEY}: uN}\` of ${fmtInt(opts.rlsKeys)} distinct values in turn, against one rule of 10^9 per second (every call counted, none over the limit; a call counts only when answered OK with the rule's current_limit). CPU and RSS are the service process(es); the client shares the 2 cores and is often the limit.`,
    unit: 'calls/s',
    refs: [{ key: 'memory', label: 'memory' }],
    rows: [
      {
        key: 'memory',
        name: 'svcproxy ratelimit, in-memory counters',
        proxy: ['rls-mem'],
        target: (f) => ({ port: f.ports['rls-mem'] }),
        check: (f, t) => expectRls(f, t, ['rls-mem-admin'], 'memory'),
      },
      {
        key: 'redis',
        name: 'svcproxy ratelimit --redis (local redis-server, no persistence)',
        proxy: ['rls-redis'],
        deps: ['redis'],
        sideCpu: sideRedis,
        target: (f) => ({ port: f.ports['rls-redis'] }),
        check: (f, t) => expectRls(f, t, ['rls-redis-admin'], 'redis'),
        ...noRedis,
      },
      {
        key: 'redis-2',
        name: '2 × svcproxy ratelimit --redis, one redis-server (sum of both)',
        proxy: ['rls-redis', 'rls-redis-b'],
        deps: ['redis'],
        sideCpu: sideRedis,
        target: (f) => ({ port: f.ports['rls-redis'], ports: [f.ports['rls-redis'], f.ports['rls-redis-b']] }),
        check: (f, t) => expectRls(f, t, ['rls-redis-admin', 'rls-redis-b-admin'], 'redis'),
        summary: async (f) => {
          const r = await runCommand('redis-cli', ['-p', String(f.ports.redis), 'info', 'commandstats']);
          const calls = [...r.stdout.matchAll(/^cmdstat_(evalsha|eval):calls=(\d+)/gm)].reduce((sum, m) => sum + Number(m[2]), 0);
          return r.code === 0 ? `redis-server ran ${fmtInt(calls)} check scripts (EVALSHA) in the whole section (both Redis rows and their checks).` : undefined;
        },
        ...noRedis,
      },
    ],
    drive: (t, seconds) => nodeClient(script('clients/rls-load.js'), [(t.ports ?? [t.port]).join(','), RLS_DOMAIN, RLS_KEY, opts.rlsConcurrency, seconds, opts.rlsChannels, opts.rlsKeys], seconds),
    notes: [
      ...(redisVersion ? [`Redis: ${redisVersion}, started by the bench on a free port with \`--save '' --appendonly no\`; the service runs one Lua script (INCRBY + EXPIRE) per check.`] : []),
      'The two-instance row sends half of the channels to each instance; CPU and RSS are the sum of both.',
    ],
  };
}

/** The rate-limit service instances use the store asked for, and a check is counted under the rule. */
async function expectRls(f: Fleet, t: Target, admins: ('rls-mem-admin' | 'rls-redis-admin' | 'rls-redis-b-admin')[], store: string): Promise<string | undefined> {
  for (const admin of admins) {
    const config = JSON.parse((await httpRequest(f.ports[admin], { path: '/config' })).body) as { store?: string };
    if (config.store !== store) return `the service on ${admin.replace(/-admin$/, '')} uses the ${String(config.store)} store, not ${store}`;
  }
  const r = await runCommand(process.execPath, [script('clients/rls-load.js'), (t.ports ?? [t.port]).join(','), RLS_DOMAIN, RLS_KEY, 'check'], { timeoutMs: 20_000 });
  let answers: { overall_code?: string; statuses?: { code?: string; current_limit?: { requests_per_unit?: number } | null }[] }[];
  try {
    answers = JSON.parse(r.stdout.trim().split('\n').pop() ?? '') as typeof answers;
  } catch {
    return `the check call failed: ${(r.stderr || r.stdout).trim().split('\n').slice(-2).join(' ').slice(0, 300)}`;
  }
  for (const a of answers) {
    if (a.overall_code !== 'OK' || a.statuses?.[0]?.current_limit?.requests_per_unit !== 1_000_000_000) return `unexpected answer ${JSON.stringify(a).slice(0, 200)}`;
  }
  return undefined;
}
