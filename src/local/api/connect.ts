/**
 * `GET /org/O/gvc/G/workload/W/-connect?location=&replica=&container=` (`up`'s own path, not the
 * platform's; DESIGN §14): what `svcproxy connect` needs to run a shell or a command as one of the
 * workload's replicas: that process's environment (`SVC_*`, `HTTP_PROXY`... and its `SVC_TOKEN`, so
 * the route is the operator key's only: auth.ts `connect`) and working directory, from the processes
 * the supervisor runs. Each of `location`, `replica` and `container` left out is chosen as the
 * platform's CLI chooses (`cpln workload connect`): the first location of the GVC (here: the first
 * where a replica runs), the first replica (a ready one first), the only container, else the first
 * with ports, else the first; the answer's `defaulted` names the ones chosen, for the client to say.
 * A workload with no process running there (none started yet, scaled to zero, or one `up` runs
 * nothing for) is 404 with what is running instead. Throws `ApiError` only.
 */
import type { RawRecord } from '../../config/records.js';
import type { Answer, ApiContext, ReplicaProcess } from './context.js';
import { ApiError } from './errors.js';
import { selfLink } from './views.js';

export type { ReplicaProcess } from './context.js';

/** Which of the three the request named, as `?location=` etc. (an empty value is not naming one). */
function asked(ctx: ApiContext, name: 'location' | 'replica' | 'container'): string | undefined {
  const value = ctx.query.get(name);
  return value === null || value === '' ? undefined : value;
}

function byName(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function connectAnswer(ctx: ApiContext, record: RawRecord, gvc: string): Answer {
  const name = String(record.name);
  const key = `${gvc}/${name}`;
  const workloadLink = selfLink(ctx.org, 'workload', name, gvc);
  const running = ctx.deps.replicaProcesses(key);
  const defaulted: string[] = [];
  const none = (what: string, details: Record<string, unknown>): ApiError => new ApiError('not_found', `workload ${name} ${what}`, { workload: workloadLink, ...details });

  let location = asked(ctx, 'location');
  if (location === undefined) {
    const order = ctx.snapshot.gvcs.get(gvc)?.locations ?? [];
    location = order.find((l) => running.some((p) => p.location === l)) ?? running.map((p) => p.location).sort(byName)[0];
    if (location === undefined) throw none('has no replica running (not started yet, scaled to zero, or nothing up runs: a container without a command)', { locations: order });
    defaulted.push('location');
  }
  const here = running.filter((p) => p.location === location);
  if (here.length === 0) {
    throw none(`has no replica running in location ${location}`, { location, running: [...new Set(running.map((p) => p.location))].sort(byName) });
  }

  let replica = asked(ctx, 'replica');
  if (replica === undefined) {
    const names = [...new Set(here.map((p) => p.replica))].sort(byName);
    replica = names.find((r) => here.filter((p) => p.replica === r).every((p) => p.ready)) ?? names[0]!;
    defaulted.push('replica');
  }
  const processes = here.filter((p) => p.replica === replica);
  if (processes.length === 0) {
    throw none(`has no replica ${replica} in location ${location}`, { replica, replicas: [...new Set(here.map((p) => p.replica))].sort(byName) });
  }

  let container = asked(ctx, 'container');
  if (container === undefined) {
    const model = ctx.snapshot.workloads.get(key);
    const ran = (c: string): boolean => processes.some((p) => p.container === c);
    const declared = (model?.containers ?? []).filter((c) => ran(c.name));
    container = declared.length === 1 ? declared[0]!.name : (declared.find((c) => c.ports.length > 0) ?? declared[0])?.name ?? processes[0]!.container;
    defaulted.push('container');
  }
  const chosen = processes.find((p) => p.container === container);
  if (chosen === undefined) {
    throw none(`has no container ${container} running in replica ${replica}`, { container, containers: processes.map((p) => p.container) });
  }
  return {
    status: 200,
    body: {
      kind: 'connect',
      workload: name,
      gvc,
      location,
      replica,
      container,
      defaulted,
      cwd: chosen.cwd,
      env: chosen.env,
      links: [
        { rel: 'self', href: `${workloadLink}/-connect` },
        { rel: 'workload', href: workloadLink },
        { rel: 'deployment', href: `${workloadLink}/deployment/${encodeURIComponent(location)}` },
      ],
    },
  };
}
