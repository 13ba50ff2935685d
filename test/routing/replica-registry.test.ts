/**
 * src/routing/replicas.ts: the registry's view made again only for the workloads a change names
 * (`replace` works them out, `replaceWorkloads` is told), against the view worked out here from the
 * sources' lists, on generated changes of two sources: the same replicas in each workload's
 * locations, in index order (a replica whose index moved in place included), the same locations,
 * the same replicas in all; `change` only when the view changed; a list a reader was given stays
 * as it was.
 */
import t from 'tap';
import { ReplicaRegistry, type Replica } from '../../src/routing/replicas.js';
import { prng, testSeed } from '../helpers/seed.js';

const WORKLOADS = ['g/a', 'g/b', 'g/c', 'h/a', 'h/d'];
const LOCATIONS = ['loc1', 'loc2'];

function view(registry: ReplicaRegistry): unknown {
  const out: Record<string, unknown> = {};
  for (const w of WORKLOADS) {
    out[w] = {
      locations: [...registry.locations(w)].sort(),
      lists: LOCATIONS.map((l) => registry.list(w, l).map((r) => `${r.name}#${r.index}`)),
    };
  }
  return { out, all: registry.all().map((r) => r.name).sort() };
}

/** The view worked out here from the sources' lists (in the order the sources came): the reference. */
function expected(lists: ReadonlyMap<string, ReadonlyMap<string, readonly Replica[]>>, order: readonly string[]): unknown {
  const out: Record<string, unknown> = {};
  const all: string[] = [];
  for (const w of WORKLOADS) {
    const mine = order.flatMap((source) => lists.get(source)!.get(w) ?? []);
    for (const r of mine) all.push(r.name);
    out[w] = {
      locations: LOCATIONS.filter((l) => mine.some((r) => r.location === l)),
      lists: LOCATIONS.map((l) => mine.filter((r) => r.location === l).sort((a, b) => a.index - b.index).map((r) => `${r.name}#${r.index}`)),
    };
  }
  return { out, all: all.sort() };
}

t.test('generated changes: the view made again for the workloads changed equals one made from scratch', async (t) => {
  const seed = testSeed('REPLICA_REGISTRY_SEED', 7331);
  t.comment(`seed ${seed} (REPLICA_REGISTRY_SEED=${seed} replays it)`);
  const draw = prng(seed);
  const random = (n: number): number => Math.floor(draw() * n);
  let made = 0;
  const replica = (workload: string): Replica => ({
    workload, location: LOCATIONS[random(2)]!, name: `${workload}-${made++}`, index: random(4), ports: new Map(), ready: true, outstanding: 0, ejectedUntil: 0,
  });
  const lists = new Map<string, Map<string, Replica[]>>([['up', new Map()], ['deployment', new Map()]]);
  const registry = new ReplicaRegistry();
  let order: string[] = [];
  let changes = 0;
  registry.on('change', () => changes++);
  let told = 0;
  for (let step = 0; step < 300; step++) {
    const source = random(2) === 0 ? 'up' : 'deployment';
    const own = lists.get(source)!;
    const workload = WORKLOADS[random(WORKLOADS.length)]!;
    const list = [...(own.get(workload) ?? [])];
    const op = random(5);
    if (op === 0 || list.length === 0) list.push(replica(workload));
    else if (op === 1) list.splice(random(list.length), 1);
    else if (op === 2) list[random(list.length)]!.index = random(4); // an index moved, the same objects
    else if (op === 3) list.reverse();
    const before = view(registry);
    const held = registry.list(workload, LOCATIONS[0]!);
    const heldCopy = [...held];
    const changesBefore = changes;
    if (list.length === 0) own.delete(workload);
    else own.set(workload, list);
    // An index moved in place is told by workload (deployment-replicas.ts does so); `replace` of the
    // same objects in the same order is no change, as it always was.
    if (op !== 2 && random(2) === 0) {
      registry.replace(source, [...own.values()].flat());
    } else {
      told++;
      registry.replaceWorkloads(source, new Map([[workload, list]]));
    }
    if (own.size === 0) order = order.filter((s) => s !== source);
    else if (!order.includes(source)) order.push(source);
    t.same(view(registry), expected(lists, order), `step ${step}: ${source} ${workload} op ${op}: the view worked out from the lists`);
    t.same(held, heldCopy, `step ${step}: the list a reader was given is as it was`);
    const changed = JSON.stringify(view(registry)) !== JSON.stringify(before);
    if (changed && changes === changesBefore) t.fail(`step ${step}: the view changed without a change event`);
    if (!changed && changes !== changesBefore) t.fail(`step ${step}: a change event without a change`);
  }
  t.ok(told > 50, `changes told by workload (${told})`);
});
